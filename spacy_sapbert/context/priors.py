"""Type priors: which concepts a span of a given NER label may link to.

``type_priors = {"Chemical": ["T109", "T121"], "Disease": ["D*", "C*", "OMIM:*"]}``: an entry
ending in ``*`` is a concept-id prefix, any other entry a semantic type of the KB (UMLS TUI, OBO
namespace, ...). A span whose label has a prior gets candidates only among concepts that have one
of its types (the index searches only those, before the top-k cut) *and*, when prefixes are
given, whose id starts with one of them (a filter on an over-fetched, deeper search, so the k
candidates are still the k best allowed ones). Labels without a prior use the linker's
``semantic_types`` as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy

from ..errors import ConfigError, Errors

Candidates = List[Tuple[str, float]]


@dataclass(frozen=True)
class Prior:
    """The allowed semantic types and id prefixes of one label (empty: no restriction)."""

    types: Tuple[str, ...] = ()
    prefixes: Tuple[str, ...] = ()


class TypePriors:
    """Parsed and checked ``type_priors`` config."""

    def __init__(self, config: Optional[Mapping[str, Sequence[str]]] = None) -> None:
        self.by_label: Dict[str, Prior] = {}
        if config is None:
            return
        if not isinstance(config, Mapping):
            raise ConfigError(Errors.E610.format(what=f"got {type(config).__name__}"))
        for label, entries in config.items():
            if not isinstance(label, str) or isinstance(entries, str) or not isinstance(entries, (list, tuple)):
                raise ConfigError(Errors.E610.format(what=f"label {label!r} maps to {entries!r}, not a list"))
            bad = [e for e in entries if not isinstance(e, str) or not e.strip() or e.strip() == "*"]
            if bad or not entries:
                raise ConfigError(Errors.E610.format(what=f"label {label!r} has invalid entries {bad or entries!r}"))
            types = tuple(sorted({e.strip() for e in entries if not e.strip().endswith("*")}))
            prefixes = tuple(sorted({e.strip()[:-1] for e in entries if e.strip().endswith("*")}))
            self.by_label[label] = Prior(types=types, prefixes=prefixes)

    def __bool__(self) -> bool:
        return bool(self.by_label)

    def for_label(self, label: str) -> Optional[Prior]:
        return self.by_label.get(label)

    def check(self, index: Any) -> None:
        """Raise E611 when a prior names a semantic type the index's KB does not have."""
        known = index.known_types()
        for label, prior in sorted(self.by_label.items()):
            unknown = sorted(set(prior.types) - known)
            if unknown:
                raise ConfigError(Errors.E611.format(label=label, unknown=unknown, known=sorted(known)[:20]))


def search_with_prior(index: Any, vectors: numpy.ndarray, k: int, prior: Optional[Prior], *,
                      semantic_types: Optional[Sequence[str]] = None,
                      require_definition: bool = False) -> List[Candidates]:
    """``index.search`` under a prior: its types replace ``semantic_types``; its id prefixes filter
    a search deepened (x4 each round) until ``k`` allowed concepts are found or the KB is exhausted."""
    types = list(prior.types) if prior is not None and prior.types else (list(semantic_types or []) or None)
    prefixes = prior.prefixes if prior is not None else ()
    if not prefixes:
        return index.search(vectors, k, semantic_types=types, require_definition=require_definition)
    out: List[Candidates] = [[] for _ in range(len(vectors))]
    pending = list(range(len(vectors)))
    depth = 4 * k
    n_concepts = len(index.kb)
    while pending:
        found = index.search(vectors[pending], min(depth, n_concepts), semantic_types=types,
                             require_definition=require_definition)
        still = []
        for q, cands in zip(pending, found):
            kept = [(cid, s) for cid, s in cands if cid.startswith(prefixes)]
            out[q] = kept[:k]
            if len(kept) < k and len(cands) >= depth and depth < n_concepts:
                still.append(q)
        pending, depth = still, depth * 4
    return out


__all__ = ["TypePriors", "Prior", "search_with_prior"]
