"""``index_meta.json`` checked field by field: its type and range, before anything uses it.

The meta is data read from disk like the index files: an edited ``ef_search`` of -1 made a TypeError inside hnswlib, an ``n_names`` of ``"1214x"`` a ValueError. Every
field a load or ``verify`` reads is checked here (E557 naming the file, the field, the value and what was
expected); unknown fields are left alone (a newer version may add some). The file records' names are
checked too: a relative path inside the folder (``integrity.inside``). An index of a removed kind
(``compact``, the usearch index, removed 2026-11-27) is refused with E832, which gives the command that
rebuilds it.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from ..base.integrity import inside
from ..errors import Errors, IncompatibleError, MissingInputError

MAX_EF_SEARCH = 1_000_000  # search depth (hnsw ef, ivf cells scanned): beyond it, memory, not recall
MAX_K = 100_000  # candidates one query may ask for (k): numpy.full((n, 10**20)) overflows, it does not search
MAX_NAMES = 1 << 40
MAX_DIM = 1 << 16
MAX_RESCORE = 1_000_000
MAX_M = 4096  # hnsw graph degree
KINDS = ("exact", "hnsw", "ivf")
HNSW_VECTORS = ("float16", "float32")  # an hnsw graph's vectors: float16 faiss's (hnsw16.py), float32 hnswlib's
REMOVED_KINDS = ("compact",)  # refused with E832 (how to rebuild) rather than E557


def _int(minimum: int, maximum: int) -> Tuple[Callable[[Any], bool], str]:
    def ok(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= maximum
    return ok, f"a whole number from {minimum} to {maximum:,}"


def _str(value: Any) -> bool:
    return isinstance(value, str)


def _seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _languages(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


# field: (check, what is expected); every field may be absent (but _REQUIRED), those of _NULLABLE null
_FIELDS: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "kind": (lambda v: v in KINDS, f"one of {', '.join(KINDS)}"),
    "n_names": _int(1, MAX_NAMES),
    "dim": _int(1, MAX_DIM),
    "file": (_str, "a file name"),
    "file_size": _int(0, 1 << 62),
    "format_version": _int(1, 1_000),
    "n_concepts": _int(0, MAX_NAMES),
    "ef_search": _int(1, MAX_EF_SEARCH),
    "max_length": _int(1, 1 << 20),
    "seed": _int(-(1 << 63), (1 << 64) - 1),
    "M": _int(2, MAX_M),
    "ef_construction": _int(1, MAX_EF_SEARCH),
    "vectors": (lambda v: v in HNSW_VECTORS, " or ".join(HNSW_VECTORS)),
    "entry_point": _int(0, MAX_NAMES),
    "rescore": _int(1, MAX_RESCORE),
    "lists": _int(1, MAX_NAMES),
    "sub_quantizers": _int(1, MAX_DIM),
    "space": (lambda v: v == "ip", "'ip'"),
    "encoder_fingerprint": (_str, "a string"),
    "encoder_name": (_str, "a string"),
    "pooling": (_str, "a string"),
    "kb_checksum": (_str, "a string"),
    "kb_path": (_str, "a string"),
    "spacy_sapbert_version": (_str, "a string"),
    "languages": (_languages, "null or a list of language codes"),
    "encode_seconds": (_seconds, "seconds"),
    "build_seconds": (_seconds, "seconds"),
    "graph_seconds": (_seconds, "seconds"),
}
_REQUIRED = ("kind", "n_names", "dim", "file", "file_size")
_NULLABLE = ("ef_search",)
_RECORD = {"size": _int(0, 1 << 62), "sha256": (lambda v: isinstance(v, str) and len(v) == 64, "a sha256 (64 hex digits)"),
           "sample_sha256": (lambda v: isinstance(v, str) and len(v) == 64, "a sha256 (64 hex digits)")}


def _bad(path: Path, field: str, value: Any, expected: str) -> MissingInputError:
    shown = value if not isinstance(value, str) or len(value) <= 80 else value[:80] + "..."
    return MissingInputError(Errors.E557.format(path=path, field=field, value=shown, expected=expected))


def removed_kind(meta: Dict[str, Any], path: Path) -> IncompatibleError:
    """E832 for the index folder of ``path`` (its ``index_meta.json``): its kind was removed; the commands that
    rebuild it, with the KB folder and model the meta records (placeholders where it records none)."""
    kb = meta.get("kb_path") if isinstance(meta.get("kb_path"), str) else "KB_FOLDER"
    model = meta.get("model") if isinstance(meta.get("model"), str) else "MODEL"
    return IncompatibleError(Errors.E832.format(path=path.parent, kind=meta["kind"], kb=kb, model=model))


def check_meta(meta: Any, path: Path) -> Dict[str, Any]:
    """``meta`` (the parsed ``index_meta.json`` at ``path``) when every known field has its type and range
    (E557 otherwise); a ``files`` record map, when present, has plain names inside the folder and sizes and
    hashes of the right form. Returned without the fields of :data:`_NULLABLE` that are null: a loader reads them
    as absent (its default), so no loader sees a null."""
    if not isinstance(meta, dict):
        raise _bad(path, "(the whole file)", type(meta).__name__, "a JSON object")
    if meta.get("kind") in REMOVED_KINDS:
        raise removed_kind(meta, path)
    for field in _REQUIRED:
        if field not in meta:
            raise _bad(path, field, None, "present (a required field)")
    for field, (ok, expected) in _FIELDS.items():
        if field not in meta or (meta[field] is None and field in _NULLABLE):
            continue
        if not ok(meta[field]):
            raise _bad(path, field, meta[field], expected)
    if not inside(path.parent, meta["file"]):
        raise _bad(path, "file", meta["file"], "a file name inside the index folder")
    files: Optional[Any] = meta.get("files")
    if files is not None:
        if not isinstance(files, dict) or not files:
            raise _bad(path, "files", files, "a map of file name to its size and hashes")
        for name, record in files.items():
            if not inside(path.parent, name):
                raise _bad(path, "files", name, "file names inside the index folder")
            if not isinstance(record, dict):
                raise _bad(path, f"files.{name}", record, "a map with size, sha256 and sample_sha256")
            for key, (ok, expected) in _RECORD.items():
                if key in record and not ok(record[key]):
                    raise _bad(path, f"files.{name}.{key}", record[key], expected)
            if "size" not in record:
                raise _bad(path, f"files.{name}.size", None, "present")
    return {key: value for key, value in meta.items() if not (value is None and key in _NULLABLE)}


__all__ = ["check_meta", "removed_kind", "MAX_EF_SEARCH", "MAX_K", "MAX_M", "KINDS", "HNSW_VECTORS", "REMOVED_KINDS"]
