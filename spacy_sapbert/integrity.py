"""Checksums of the data files of a saved folder (KB, encoder, index), recorded when written, checked at load.

:func:`file_records` gives, per file, its ``size``, the ``sha256`` of all its bytes and a
``sample_sha256``: the sha256 of the size plus :data:`SAMPLE_BLOCKS` blocks of
:data:`SAMPLE_BLOCK` bytes at fixed, evenly spread offsets (the whole file when it is no larger
than the blocks together). :func:`check_files` compares a folder with such records: by default the
sizes and the sampled hashes (reads at most 1 MiB per file: cheap enough for every load; it finds
truncation, replacement and most damage of small files, and damage that falls in a sampled block of
a large one), or with ``full=True`` the whole sha256 (``spacy-sapbert verify``).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping

from .errors import Errors, IntegrityError
from .util import file_sha256

SAMPLE_BLOCKS = 16
SAMPLE_BLOCK = 64 * 1024


def _sample_offsets(size: int) -> Iterable[int]:
    if size <= SAMPLE_BLOCKS * SAMPLE_BLOCK:
        return [0]
    last = size - SAMPLE_BLOCK
    return [last * i // (SAMPLE_BLOCKS - 1) for i in range(SAMPLE_BLOCKS)]


def _sample_sha256(path: Path, size: int) -> str:
    digest = hashlib.sha256(str(size).encode("ascii") + b"|")
    whole = size <= SAMPLE_BLOCKS * SAMPLE_BLOCK
    with path.open("rb") as fh:
        for offset in _sample_offsets(size):
            fh.seek(offset)
            digest.update(fh.read(size if whole else SAMPLE_BLOCK))
    return digest.hexdigest()


def file_records(folder: Path, names: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """``{name: {"size", "sha256", "sample_sha256"}}`` of the files ``names`` (relative to ``folder``)."""
    folder = Path(folder)
    records: Dict[str, Dict[str, Any]] = {}
    for name in sorted(set(names)):
        path = folder / name
        size = path.stat().st_size
        records[name] = {"size": size, "sha256": file_sha256(path), "sample_sha256": _sample_sha256(path, size)}
    return records


def check_files(folder: Path, records: Mapping[str, Mapping[str, Any]], *, full: bool = False, what: str) -> None:
    """Raise :class:`IntegrityError` (E551) naming the first file of ``records`` that is missing or whose
    size or hash differs; ``full`` compares the whole sha256, else the size and the sampled hash.
    ``what`` names the folder's kind in the message (e.g. "knowledge base")."""
    folder = Path(folder)
    for name in sorted(records):
        record = records[name]
        path = folder / name
        if not path.is_file():
            _fail(folder, name, what, "the file is missing")
        size = path.stat().st_size
        if size != int(record.get("size", -1)):
            _fail(folder, name, what, f"size {size} bytes, {record.get('size')} recorded (truncated or replaced)")
        key = "sha256" if full else "sample_sha256"
        expected = record.get(key)
        got = file_sha256(path) if full else _sample_sha256(path, size)
        if got != expected:
            _fail(folder, name, what, f"{key} {got[:16]}... differs from the recorded {str(expected)[:16]}... "
                                      "(the bytes changed)")


def _fail(folder: Path, name: str, what: str, why: str) -> None:
    raise IntegrityError(Errors.E551.format(path=folder / name, what=what, why=why, folder=folder))


__all__ = ["file_records", "check_files", "SAMPLE_BLOCKS", "SAMPLE_BLOCK"]
