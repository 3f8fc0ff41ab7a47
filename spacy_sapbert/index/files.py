"""Size and hashes of an index folder's data files: recorded in ``index_meta.json`` when written,
checked at load (sizes and a sampled hash: milliseconds at any size) and by ``verify`` (full sha256)."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping

from ..errors import Errors, MissingInputError
from ..util import file_sha256

_SAMPLES = 16
_BLOCK = 1 << 16


def sample_sha256(path: Path, size: int) -> str:
    """sha256 of the size and of 16 blocks of 64 KiB at fixed, evenly spread offsets."""
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        for i in range(_SAMPLES):
            fh.seek(max(0, (size - _BLOCK) * i // max(1, _SAMPLES - 1)))
            h.update(fh.read(_BLOCK))
    return h.hexdigest()


def file_records(folder: Path, names: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for name in names:
        path = folder / name
        size = path.stat().st_size
        out[name] = {"size": size, "sha256": file_sha256(path), "sample_sha256": sample_sha256(path, size)}
    return out


def check_files(folder: Path, records: Mapping[str, Mapping[str, Any]], *, full: bool = False, what: str) -> None:
    for name, rec in records.items():
        path = folder / name
        if not path.is_file():
            raise MissingInputError(Errors.E107.format(path=path, reason="no such file"))
        size = path.stat().st_size
        if size != int(rec["size"]):
            raise MissingInputError(Errors.E126.format(what=what, path=path, reason=f"size {size} != {rec['size']} bytes recorded"))
        if "sample_sha256" in rec and sample_sha256(path, size) != rec["sample_sha256"]:
            raise MissingInputError(Errors.E126.format(what=what, path=path, reason="sampled sha256 differs from the record"))
        if full and "sha256" in rec and file_sha256(path) != rec["sha256"]:
            raise MissingInputError(Errors.E126.format(what=what, path=path, reason="sha256 differs from the record"))


def link_or_copy(src: Path, dst: Path) -> None:
    """Put a finished, never-modified data file at ``dst``: a hard link where the file system allows
    (no extra disk, instant), else a copy; through a temporary name, so ``dst`` appears whole."""
    tmp = dst.with_name(f".{dst.name}.tmp")
    if tmp.exists():
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)
