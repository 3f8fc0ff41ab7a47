"""Re-ranking name candidates with context: the score of each candidate concept is

    score = (1 - context_weight - definition_weight) * name similarity
            + context_weight * best example-prototype similarity
            + definition_weight * definition similarity

all cosine similarities in [-1, 1]. With ``example_names`` (and a store built with a name encoder) the
example mentions count as names of their concept: a candidate's name similarity is first raised to
the best cosine between the mention's name vector and the names of its example mentions
(:func:`with_example_names`; the candidates are re-sorted), so a concept can win on a mention it was
annotated with in the prototype documents even where the KB lacks that name.

A candidate without example prototypes (or without a definition) takes ``fallback`` in place of the
missing similarity: ``"name"`` (default) uses its name similarity, so such a concept is judged on its
name alone and can still win; a number uses that constant. Only the candidates the name index proposed
are re-ranked; ties go to the smaller concept id. :func:`tune_weights` picks the weights that maximise
strict acc@1 on a dev set.

The shortcut (``margin``, the linker's ``context_margin``): encoding a mention's context costs several
times its name, so with a margin the context is encoded only where it can matter: two or more
candidates within ``margin`` of the best name score, one of them with prototypes
(:func:`needs_context`). Elsewhere the name ranking is kept as it is (name scores). ``None``
re-ranks every mention. A margin of ``2 * (context_weight + definition_weight) / name weight`` or more
never changes the first concept (similarities lie in [-1, 1]); smaller margins trade a little accuracy
for speed (benchmarks/context_train.py measures both).

One sense per document (``one_sense_per_document``, the linker's option of that name): the mentions of one
document written alike (same normalised text and NER label) are taken to mean the same concept, so only the
first of them that needs context is encoded and its context decides for all of them
(:func:`first_of_each`); an abbreviation such as "DM" repeated through an abstract is encoded once. It
changes speed, and accuracy where a document does use one form for two concepts (docs/context.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Hashable, List, Optional, Sequence, Tuple, Union

import numpy

from ..errors import ConfigError, Errors

Candidates = List[Tuple[str, float]]


@dataclass(frozen=True)
class ContextWeights:
    """The mix of name, example-prototype and definition similarities (see the module doc)."""

    context: float = 0.5
    definition: float = 0.0
    fallback: Union[str, float] = "name"
    margin: Optional[float] = None
    example_names: bool = False
    one_sense_per_document: bool = False

    def __post_init__(self) -> None:
        ok = all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0
                 for w in (self.context, self.definition))
        if not ok or self.context + self.definition > 1.0 + 1e-9:
            raise ConfigError(Errors.E608.format(context=self.context, definition=self.definition))
        fb = self.fallback
        if not (fb == "name" or (isinstance(fb, (int, float)) and not isinstance(fb, bool) and -1 <= fb <= 1)):
            raise ConfigError(Errors.E609.format(value=fb))
        m = self.margin
        if m is not None and (not isinstance(m, (int, float)) or isinstance(m, bool) or not m >= 0):
            raise ConfigError(Errors.E619.format(value=m))
        for flag in ("example_names", "one_sense_per_document"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(Errors.E002.format(what=flag, value=getattr(self, flag), choices="true, false"))

    @property
    def name(self) -> float:
        return 1.0 - self.context - self.definition

    def to_dict(self) -> Dict[str, Any]:
        return {"context_weight": self.context, "definition_weight": self.definition,
                "context_fallback": self.fallback, "context_margin": self.margin, "example_names": self.example_names,
                "one_sense_per_document": self.one_sense_per_document}


def with_example_names(candidates: Candidates, name_vector: numpy.ndarray, store: Any) -> Candidates:
    """``candidates`` (concept, name score) with each score raised to the best similarity of
    ``name_vector`` to the concept's example-mention names, best first, ties by concept id."""
    return with_example_names_many([candidates], numpy.asarray(name_vector)[None, :], store)[0]


def with_example_names_many(candidate_lists: Sequence[Candidates], name_vectors: numpy.ndarray,
                            store: Any) -> List[Candidates]:
    """:func:`with_example_names` of many mentions (row ``i`` of ``name_vectors`` with list ``i``) at once."""
    if not getattr(store, "has_names", False):
        return [list(c) for c in candidate_lists]
    bests = store.example_name_similarities_many(name_vectors, [[cid for cid, _ in c] for c in candidate_lists])
    return [sorted(((cid, round(max(s, best.get(cid, s)), 6)) for cid, s in cands), key=lambda x: (-x[1], x[0]))
            for cands, best in zip(candidate_lists, bests)]


def needs_context(candidates: Candidates, store: Any, margin: Optional[float]) -> bool:
    """Whether ``candidates`` (best first) are re-ranked under ``margin`` (see the module doc)."""
    if margin is None:
        return bool(candidates)
    if len(candidates) < 2:
        return False
    best = candidates[0][1]
    close = [cid for cid, score in candidates if best - score <= margin]
    return len(close) >= 2 and any(cid in store for cid in close)


def first_of_each(keys: Sequence[Hashable]) -> List[int]:
    """For each position, the first position with an equal key (keys: document and mention, see
    ``one_sense_per_document`` in the module doc)."""
    first: Dict[Hashable, int] = {}
    return [first.setdefault(key, i) for i, key in enumerate(keys)]


def combine(name_score: float, example: Optional[float], definition: Optional[float], weights: ContextWeights) -> float:
    """One candidate's re-ranked score (``None``: no such prototype, the fallback applies)."""
    fallback = name_score if weights.fallback == "name" else float(weights.fallback)
    ex = fallback if example is None else example
    de = fallback if definition is None else definition
    return weights.name * name_score + weights.context * ex + weights.definition * de


def rerank(candidates: Candidates, query: numpy.ndarray, store: Any, weights: ContextWeights) -> Candidates:
    """``candidates`` (concept, name score) re-scored with the context vector ``query``, best
    first, ties by concept id; scores rounded to 6 decimals as the linker writes them."""
    if not candidates:
        return []
    examples, definitions = store.similarities(query, [cid for cid, _ in candidates])
    scored = [(cid, round(combine(s, examples.get(cid), definitions.get(cid), weights), 6)) for cid, s in candidates]
    return sorted(scored, key=lambda x: (-x[1], x[0]))


def _grid(step: float, with_definitions: bool) -> List[Tuple[float, float]]:
    n = int(round(1 / step))
    values = [round(i * step, 6) for i in range(n + 1)]
    defs = values if with_definitions else [0.0]
    return [(c, d) for c in values for d in defs if c + d <= 1.0 + 1e-9]


def tune_weights(candidates: Sequence[Candidates], queries: numpy.ndarray, store: Any,
                 golds: Sequence[FrozenSet[str]], *, step: float = 0.1,
                 fallbacks: Sequence[Union[str, float]] = ("name", 0.0),
                 name_vectors: Optional[numpy.ndarray] = None) -> Tuple[ContextWeights, List[Dict[str, Any]]]:
    """The weights with the best strict acc@1 of the re-ranked ``candidates`` against ``golds``
    (ties: without example names first, then the smaller context weight, then definition weight, then
    fallback order); and the table of every grid point tried. With ``name_vectors`` (the mentions'
    vectors by the name encoder) and a store holding example names, the grid is tried with and
    without ``example_names``. Prototype similarities are computed once."""
    if len(candidates) != len(golds) or len(candidates) != len(queries) or not len(candidates) or (
            name_vectors is not None and len(name_vectors) != len(candidates)):
        raise ConfigError(Errors.E614.format(what=f"{len(candidates)} candidate lists, {len(queries)} context "
                                             f"vectors, {len(golds)} gold sets and "
                                             f"{'no' if name_vectors is None else len(name_vectors)} name vectors "
                                             "(need equal, non-zero counts)"))
    variants = {False: list(candidates)}
    if name_vectors is not None and getattr(store, "has_names", False):
        variants[True] = with_example_names_many(candidates, name_vectors, store)
    sims = [store.similarities(q, [cid for cid, _ in cands]) for q, cands in zip(queries, candidates)]
    with_defs = any(d for _e, d in sims)
    table: List[Dict[str, Any]] = []
    best: Tuple[float, ContextWeights] = (-1.0, ContextWeights(context=0.0, fallback=fallbacks[0]))
    for examples, ranked in variants.items():
        for fallback in fallbacks:
            for c, d in _grid(step, with_defs):
                w = ContextWeights(context=c, definition=d, fallback=fallback, example_names=examples)
                right = 0
                for cands, (ex, de), gold in zip(ranked, sims, golds):
                    if not cands:
                        continue
                    top = min((-round(combine(s, ex.get(cid), de.get(cid), w), 6), cid) for cid, s in cands)[1]
                    right += top in gold
                acc = right / len(candidates)
                table.append({**w.to_dict(), "acc@1": acc})
                if acc > best[0] + 1e-12:
                    best = (acc, w)
    return best[1], table


__all__ = ["ContextWeights", "combine", "rerank", "needs_context", "tune_weights", "with_example_names",
           "with_example_names_many", "first_of_each", "Candidates"]
