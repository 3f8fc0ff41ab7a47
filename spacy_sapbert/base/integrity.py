"""Checksums of the data files of a saved folder (KB, encoder, index), recorded when written, checked at load.

:func:`file_records` gives, per file, its ``size``, the ``sha256`` of all its bytes and a
``sample_sha256``: the sha256 of the size plus :data:`SAMPLE_BLOCKS` blocks of
:data:`SAMPLE_BLOCK` bytes at fixed, evenly spread offsets (the whole file when it is no larger
than the blocks together). :func:`check_files` compares a folder with such records: by default the
sizes and the sampled hashes (reads at most 1 MiB per file: cheap enough for every load; it finds
truncation, replacement and most damage of small files, and damage that falls in a sampled block of
a large one), or with ``full=True`` the whole sha256 (``spacy-sapbert verify``). A record's name must be a
relative path inside the folder (no absolute path, no ``..``, no link leading out): a folder's records are
data too, and ``verify`` never reads a file outside the folder it was given.

:func:`check_unit_rows` checks that stored vectors are unit length (all rows, or an evenly spread sample of
a memory-mapped array), vectorised in blocks: the check behind every index kind and the prototype store.
"""
from __future__ import annotations

import hashlib
import tokenize
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Dict, Iterable, Mapping, Optional

import numpy

from ..errors import Errors, IntegrityError
from .util import file_sha256

SAMPLE_BLOCKS = 16
SAMPLE_BLOCK = 64 * 1024
# what numpy.load raises on a damaged .npy: its header is parsed with ast.literal_eval (SyntaxError, TokenError,
# TypeError, RecursionError), a bad shape or dtype is a ValueError, a short file an EOFError or OSError
NPY_READ_ERRORS = (ValueError, OSError, EOFError, SyntaxError, TypeError, RecursionError, tokenize.TokenError)
NORM_TOLERANCE = 1e-2  # float16 rounding moves a unit vector's norm by ~1e-3
_ROWS_PER_BLOCK = 4096  # float32 blocks of a few MB: cache-friendly


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
        why = file_problem(folder, name, records[name], full=full)
        if why is not None:
            _fail(folder, str(name), what, why)


def file_problem(folder: Path, name: Any, record: Any, *, full: bool = False) -> Optional[str]:
    """What is wrong with file ``name`` of ``folder`` against its ``record`` (None: nothing): outside the
    folder, missing, another size, another hash (``full``: the whole sha256, else the sampled one)."""
    folder = Path(folder)
    if not inside(folder, name):
        return "the record names a path outside the folder (absolute, '..' or a link leading out); it is not read"
    if not isinstance(record, Mapping):
        return "its record is not a mapping"
    path = folder / name
    if not path.is_file():
        return "the file is missing"
    size = path.stat().st_size
    if size != int(record.get("size", -1)):
        return f"size {size} bytes, {record.get('size')} recorded (truncated or replaced)"
    key = "sha256" if full else "sample_sha256"
    expected = record.get(key)
    got = file_sha256(path) if full else _sample_sha256(path, size)
    if got != expected:
        return f"{key} {got[:16]}... differs from the recorded {str(expected)[:16]}... (the bytes changed)"
    return None


def inside(folder: Path, name: Any) -> bool:
    """Whether ``name`` (from a record) is a relative path that stays inside ``folder``, links resolved."""
    if not isinstance(name, str) or not name or "\\" in name or "\x00" in name:
        return False
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts:
        return False
    root = Path(folder).resolve()
    return (root / name).resolve().is_relative_to(root)


def unit_norm_problem(X: Any, *, sample: Optional[int] = None, zero_rows: Optional[Any] = None,
                      rows_per_block: int = _ROWS_PER_BLOCK,
                      to_float32: Optional[Callable[[numpy.ndarray], numpy.ndarray]] = None) -> Optional[str]:
    """None when the rows of ``X`` (2-D, any float dtype, may be memory-mapped) are unit length within
    :data:`NORM_TOLERANCE`, else what is wrong (for the caller's coded error). ``sample``: check that many
    evenly spread rows (first and last included) instead of all; ``zero_rows`` (bool per row): rows that
    must be all zero instead (a prototype store's definition rows in ``names.npy``); ``rows_per_block``: rows
    checked at a time (their float32 copy and products are the temporaries); ``to_float32``: makes that copy of a
    block of rows (default ``numpy.asarray``; the float16 hnsw graph passes faiss's decoder, 2x faster)."""
    n = int(X.shape[0])
    if n == 0:
        return None
    rows = None
    if sample is not None and n > sample:
        rows = numpy.unique(numpy.linspace(0, n - 1, sample).round().astype(numpy.int64))
    total = n if rows is None else len(rows)
    for start in range(0, total, rows_per_block):
        stop = start + rows_per_block
        at = numpy.arange(start, min(total, stop)) if rows is None else rows[start:stop]
        raw = X[at[0]:at[-1] + 1] if rows is None else X[at]
        block = numpy.asarray(raw, dtype=numpy.float32) if to_float32 is None else to_float32(raw)
        with numpy.errstate(all="ignore"):  # x1e30 overflows to inf: a bad norm, not a warning
            norms = numpy.sqrt(numpy.einsum("ij,ij->i", block, block))
        expected = numpy.ones(len(at), dtype=numpy.float32)
        if zero_rows is not None:
            expected[numpy.asarray(zero_rows)[at]] = 0.0
        bad = ~(numpy.abs(norms - expected) <= NORM_TOLERANCE)  # NaN is bad too
        if bad.any():
            i = int(numpy.flatnonzero(bad)[0])
            return (f"row {int(at[i])} has norm {norms[i]:.6g}, expected {expected[i]:g} "
                    f"({int(bad.sum())} of the {len(at)} rows checked there are off)")
    return None


def _fail(folder: Path, name: str, what: str, why: str) -> None:
    raise IntegrityError(Errors.E551.format(path=folder / name, what=what, why=why, folder=folder))


__all__ = ["file_records", "check_files", "file_problem", "inside", "unit_norm_problem", "SAMPLE_BLOCKS",
           "SAMPLE_BLOCK", "NORM_TOLERANCE", "NPY_READ_ERRORS"]
