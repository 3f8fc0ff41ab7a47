"""Build one KB folder from several sources: read each, merge, write atomically."""
from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigError, Errors, Warnings
from ..base.util import PathLike, ensure_path, get_logger
from .concept import Concept
from .readers import TRANSLATION_FORMATS, get_reader
from .store import KnowledgeBase

logger = get_logger("kb.build")


def build_kb(
    sources: Sequence[Tuple[PathLike, str]],
    output: Optional[PathLike] = None,
    *,
    options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    overwrite: bool = False,
    show_progress: bool = False,
) -> KnowledgeBase:
    """Read ``sources`` (``(path, format)`` pairs), merge them and, with ``output``, write the KB.

    ``options`` maps a format name to keyword arguments of its reader (e.g. ``{"umls":
    {"languages": ["ENG"]}}``). The output folder is checked first (``overwrite``) and written in
    one rename, so a failure leaves nothing behind. Per-source counts are in ``kb.sources``.
    Translation sources (format ``babelon``) add names to the concepts of the other sources, read
    first: their ids go through ``resolve_id`` and the ids the others lack are skipped (W735)."""
    if not sources:
        raise ConfigError(Errors.E012.format(option="SOURCE", value=[], why="give at least one source"))
    readers = [get_reader(fmt) for _, fmt in sources]  # unknown formats fail before any work
    out = ensure_path(output) if output is not None else None
    if out is not None and out.exists() and not overwrite:
        raise ConfigError(Errors.E003.format(path=out))
    options = dict(options or {})
    kbs = []
    ordered = sorted(zip(sources, readers), key=lambda item: item[0][1].lower() in TRANSLATION_FORMATS)
    for (path, fmt), reader in ordered:
        opts: Dict[str, Any] = dict(options.get(fmt.lower(), {}))
        path = Path(path)
        logger.info("Reading %s (%s)", path, fmt)
        concepts = reader(path, show_progress=show_progress, **opts)
        if fmt.lower() in TRANSLATION_FORMATS and kbs:
            base = kbs[0] if len(kbs) == 1 else KnowledgeBase.merge(kbs)
            kbs = [base]
            concepts = _known(concepts, base, path)
        kbs.append(KnowledgeBase.from_concepts(concepts, source=f"{fmt.lower()}:{path.name}"))
    kb = kbs[0] if len(kbs) == 1 else KnowledgeBase.merge(kbs)
    if out is not None:
        kb.to_disk(out, overwrite=overwrite)
    return kb


def _known(concepts: Iterable[Concept], base: KnowledgeBase, path: Path) -> Iterator[Concept]:
    """``concepts`` with their ids resolved against ``base``; the others counted and skipped (W735)."""
    missing: List[str] = []
    n_names = 0
    for concept in concepts:
        cid = base.resolve_id(concept.concept_id)
        if cid is None:
            missing.append(concept.concept_id)
            n_names += len(concept.names())
            continue
        yield concept if cid == concept.concept_id else replace(concept, concept_id=cid)
    if missing:
        warnings.warn(Warnings.W735.format(path=path, n=n_names, ids=len(missing), examples=", ".join(missing[:5])))


__all__ = ["build_kb"]
