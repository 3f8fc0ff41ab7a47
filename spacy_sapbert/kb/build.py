"""Build one KB folder from several sources: read each, merge, write atomically."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigError, Errors
from ..util import PathLike, ensure_path, get_logger
from .readers import get_reader
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
    one rename, so a failure leaves nothing behind. Per-source counts are in ``kb.sources``."""
    if not sources:
        raise ConfigError(Errors.E012.format(option="SOURCE", value=[], why="give at least one source"))
    readers = [get_reader(fmt) for _, fmt in sources]  # unknown formats fail before any work
    out = ensure_path(output) if output is not None else None
    if out is not None and out.exists() and not overwrite:
        raise ConfigError(Errors.E003.format(path=out))
    options = dict(options or {})
    kbs = []
    for (path, fmt), reader in zip(sources, readers):
        opts: Dict[str, Any] = dict(options.get(fmt.lower(), {}))
        path = Path(path)
        logger.info("Reading %s (%s)", path, fmt)
        kb = KnowledgeBase.from_concepts(reader(path, show_progress=show_progress, **opts),
                                         source=f"{fmt.lower()}:{path.name}")
        kbs.append(kb)
    kb = kbs[0] if len(kbs) == 1 else KnowledgeBase.merge(kbs)
    if out is not None:
        kb.to_disk(out, overwrite=overwrite)
    return kb


__all__ = ["build_kb"]
