"""KB and index kept outside a pipeline (and its ``spacy package`` wheel): a pointer and its lookup.

A UMLS-sized KB + index is gigabytes; a wheel that holds it cannot be installed anywhere sensible.
With ``resources = "outside"`` the linker writes only ``resources.json`` beside its encoder: the name
of a *resources folder* (``kb/`` + ``index/``), the KB checksum and the index files' sha256. At load
the folder is looked up, in order:

1. the linker's ``resources_path`` setting (e.g. ``spacy.load(name, config={"components":
   {"sapbert_linker": {"resources_path": "/data/umls_res"}}})``);
2. the environment variable ``SPACY_SAPBERT_RESOURCES``: one or more folders (``os.pathsep``
   separated), each either the resources folder itself or a folder holding ``<name>/``.

The folder found must match the pointer (KB checksum, index file hashes), else a coded error says
which folder was tried and how to fix it. Nothing in the pointer is used as a path.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..base.util import atomic_dir, atomic_write, ensure_path
from ..errors import ConfigError, Errors, MissingInputError
from ..index import ConceptIndex
from ..kb import KnowledgeBase

POINTER_FILE = "resources.json"
ENV_VAR = "SPACY_SAPBERT_RESOURCES"
POINTER_FORMAT = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def pointer_for(name: str, kb: Any, index_meta: Dict[str, Any]) -> Dict[str, Any]:
    """What a pipeline records about its outside resources."""
    if not _NAME.match(name):
        raise ConfigError(Errors.E129.format(name=name))
    return {"format": POINTER_FORMAT, "name": name, "kb_checksum": kb.checksum, "n_names": int(index_meta["n_names"]),
            "index_kind": index_meta["kind"],
            "index_files": {f: rec.get("sha256", "") for f, rec in sorted(index_meta.get("files", {}).items())}}


def export_resources(kb: Any, index: Any, folder: Any, *, overwrite: bool = False) -> Path:
    """Write ``folder/kb`` and ``folder/index`` (atomically, as one folder); returns ``folder``."""
    folder = ensure_path(folder)
    if not _NAME.match(folder.name):
        raise ConfigError(Errors.E129.format(name=folder.name))
    with atomic_dir(folder, overwrite=overwrite) as tmp:
        kb.to_disk(tmp / "kb")
        index.to_disk(tmp / "index")
    return folder


def write_pointer(path: Path, pointer: Dict[str, Any]) -> None:
    with atomic_write(path / POINTER_FILE) as fh:
        json.dump(pointer, fh, indent=2, sort_keys=True)


def read_pointer(path: Path) -> Optional[Dict[str, Any]]:
    """The pointer of a saved linker folder, or None when its KB and index are inside."""
    file = path / POINTER_FILE
    if not file.exists():
        return None
    try:
        pointer = json.loads(file.read_text(encoding="utf8"))
        ok = (pointer["format"] == POINTER_FORMAT and _NAME.match(pointer["name"])
              and isinstance(pointer["kb_checksum"], str) and isinstance(pointer["index_files"], dict))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise MissingInputError(Errors.E107.format(path=file, reason=f"unreadable resources pointer: {err}")) from err
    if not ok:
        raise MissingInputError(Errors.E107.format(path=file, reason="not a resources pointer of this version"))
    return pointer


def candidates(pointer: Dict[str, Any], configured: Optional[str]) -> List[Path]:
    """Folders to try, in order (see the module docstring)."""
    found: List[Path] = []
    if configured:
        found.append(ensure_path(configured))
    for root in filter(None, os.environ.get(ENV_VAR, "").split(os.pathsep)):
        found += [ensure_path(root), ensure_path(root) / pointer["name"]]
    return found


def locate(pointer: Dict[str, Any], configured: Optional[str], *, pipeline_path: Any, component: str) -> Path:
    """The resources folder for ``pointer``: the first candidate holding ``kb/`` and ``index/`` whose
    KB checksum matches; a coded error saying what was tried otherwise."""
    return find(pointer, configured, pipeline_path=pipeline_path, component=component)[0]


def find(pointer: Dict[str, Any], configured: Optional[str], *, pipeline_path: Any, component: str) -> Tuple[Path, Any]:
    """:func:`locate`, returning also the folder's KB as :func:`check` opened it (the caller needs it
    next: opening it once is enough)."""
    tried = candidates(pointer, configured)
    mismatch: Optional[Exception] = None
    for folder in tried:
        if (folder / "kb").is_dir() and (folder / "index").is_dir():
            try:
                return folder, check(folder, pointer)
            except MissingInputError as err:
                mismatch = err
    if mismatch is not None:
        raise mismatch
    reason = ("tried " + ", ".join(f"'{p}'" for p in tried)) if tried else f"resources_path is not set and ${ENV_VAR} is empty"
    raise MissingInputError(Errors.E127.format(path=pipeline_path, name=pointer["name"], reason=reason,
                                               component=component))


def check(folder: Path, pointer: Dict[str, Any]) -> Any:
    """Raise unless ``folder`` holds the KB and index ``pointer`` names (cheap: metadata only); returns
    the folder's :class:`~spacy_sapbert.kb.KnowledgeBase`, opened for the check."""
    kb = KnowledgeBase.from_disk(folder / "kb")  # memory-mapped: milliseconds
    kb_checksum = kb.checksum
    index_meta = ConceptIndex.read_meta(folder / "index")
    files = {f: rec.get("sha256", "") for f, rec in sorted(index_meta["files"].items())}
    for field, found, expected in (("KB checksum", kb_checksum, pointer["kb_checksum"]),
                                   ("index files", files, pointer["index_files"])):
        if found != expected:
            raise MissingInputError(Errors.E128.format(path=folder, field=field, found=found, expected=expected))
    return kb


__all__ = ["POINTER_FILE", "ENV_VAR", "pointer_for", "export_resources", "write_pointer", "read_pointer", "locate",
           "find", "check", "candidates"]
