"""``verify``: check every recorded file of a KB, encoder, index or pipeline folder in full (sha256).

:func:`verify_folder` finds what kind of folder it was given and returns one :class:`FileCheck` per
file: ``ok``, ``damaged`` (missing, other size, other hash: the message says which) or
``unrecorded`` (a folder written before checksums were kept; nothing to compare with). An index
folder records the size of its data file (``file_size`` in ``index_meta.json``); files it records
under ``"files"`` are hashed like the others.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping

from .encoding.files import SETTINGS_FILE, read_json_file, read_settings
from .errors import DataFormatError, Errors, IntegrityError, MissingInputError
from .integrity import check_files
from .util import PathLike, ensure_path

KB_META = "kb.json"
INDEX_META = "index_meta.json"
ONNX_EXPORT = "onnx_export.json"


@dataclass(frozen=True)
class FileCheck:
    path: Path
    status: str  # "ok", "damaged" or "unrecorded"
    detail: str = ""


def _check_records(folder: Path, records: Any, what: str) -> List[FileCheck]:
    if records is None:
        return [FileCheck(folder, "unrecorded", f"this {what} folder records no checksums (written by an older "
                                                "version); save it again to add them")]
    if not isinstance(records, Mapping):
        return [FileCheck(folder, "damaged", "its file records are not a mapping")]
    out: List[FileCheck] = []
    for name in sorted(records):
        try:
            check_files(folder, {name: records[name]}, full=True, what=what)
        except IntegrityError as err:
            out.append(FileCheck(folder / name, "damaged", str(err)))
        else:
            out.append(FileCheck(folder / name, "ok", f"{records[name].get('size')} bytes, sha256 ok"))
    return out


def verify_kb(folder: Path) -> List[FileCheck]:
    return _check_records(folder, read_json_file(folder / KB_META, what="a knowledge base").get("files"),
                          "knowledge base")


def verify_encoder(folder: Path) -> List[FileCheck]:
    checks = _check_records(folder, read_settings(folder).get("files"), "encoder")
    if (folder / ONNX_EXPORT).is_file():
        checks += _check_records(folder, read_json_file(folder / ONNX_EXPORT, what="the ONNX export").get("files"),
                                 "ONNX export")
    return checks


def verify_index(folder: Path) -> List[FileCheck]:
    meta = read_json_file(folder / INDEX_META, what="an index")
    if isinstance(meta.get("files"), dict) and meta["files"]:  # every data file recorded (size and hashes)
        return _check_records(folder, meta["files"], "index")
    name, size = meta.get("file"), meta.get("file_size")
    if not isinstance(name, str) or "/" in name or not isinstance(size, int):
        raise DataFormatError(Errors.E552.format(path=folder / INDEX_META, what="an index",
                                                 why="'file' or 'file_size' is missing or invalid",
                                                 fix="Rebuild the index with `spacy-sapbert build-index`."))
    data = folder / name
    if not data.is_file():
        checks = [FileCheck(data, "damaged", "the file is missing")]
    elif data.stat().st_size != size:
        checks = [FileCheck(data, "damaged", f"size {data.stat().st_size} bytes, {size} recorded (truncated or replaced)")]
    else:
        checks = [FileCheck(data, "ok", f"{size} bytes (size only: the index records no hash of it)")]
    return checks


def _linker_folders(pipeline: Path) -> List[Path]:
    from spacy.util import load_config

    config = load_config(pipeline / "config.cfg")
    components: Dict[str, Any] = dict(config.get("components", {}))
    return [pipeline / name for name, cfg in sorted(components.items())
            if isinstance(cfg, dict) and cfg.get("factory") == "sapbert_linker"]


def verify_folder(path: PathLike) -> List[FileCheck]:
    """Check a KB, encoder, index or spaCy pipeline folder (every sapbert_linker in it) in full."""
    path = ensure_path(path)
    if not path.is_dir():
        raise MissingInputError(Errors.E001.format(what="Folder", path=path,
                                                   hint="give a KB, encoder, index or pipeline folder."))
    if (path / "config.cfg").is_file():
        checks: List[FileCheck] = []
        for linker in _linker_folders(path):
            for part, check in (("encoder", verify_encoder), ("kb", verify_kb), ("index", verify_index)):
                if (linker / part).is_dir():
                    checks += check(linker / part)
        return checks
    if (path / KB_META).is_file():
        return verify_kb(path)
    if (path / SETTINGS_FILE).is_file():
        return verify_encoder(path)
    if (path / INDEX_META).is_file():
        return verify_index(path)
    raise DataFormatError(Errors.E555.format(path=path))


def summary(checks: List[FileCheck]) -> Dict[str, int]:
    counts = {"ok": 0, "damaged": 0, "unrecorded": 0}
    for check in checks:
        counts[check.status] += 1
    return counts


__all__ = ["FileCheck", "verify_folder", "verify_kb", "verify_encoder", "verify_index", "summary"]
