"""``verify``: check every recorded file of a KB, encoder, index, prototype store or pipeline folder in full (sha256).

:func:`verify_folder` finds what kind of folder it was given and returns one :class:`FileCheck` per
file: ``ok``, ``damaged`` (missing, other size, other hash: the message says which) or
``unrecorded`` (a folder written before checksums were kept; nothing to compare with). An index
folder records the size of its data file (``file_size`` in ``index_meta.json``); files it records
under ``"files"`` are hashed like the others. Beyond the hashes (which a forger recomputes), ``verify`` checks
what a load checks, in full where a load samples: every field of ``index_meta.json`` (E557), and the length of
every stored vector of an index (``vectors.npy``, ``vectors.f16.npy``, ``names.hnsw``; the float16 graph's levels and
neighbour ids too) and of a prototype
store (``vectors.npy``, ``names.npy``). In a pipeline, each linker's ``reranker/`` (its metadata, then its
records), ``calibration.json`` and ``abbreviations.json`` (read as a load reads them: each carries the sha256 of its
content) are checked too. A linker saved with ``resources = "outside"`` (a ``resources.json`` pointer instead of
``kb/`` and ``index/``) has the resources folder it points to checked as well, found the way a load finds it
(``resources``, else the linker's ``resources_path`` setting, else ``$SPACY_SAPBERT_RESOURCES``); a pointer whose
folder is not found or does not match is reported as damaged, since the pipeline would not load. A record naming a
path outside the folder is reported, never read.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ..base.integrity import NPY_READ_ERRORS, check_files, unit_norm_problem
from ..base.util import PathLike, ensure_path
from ..calibration.model import FILE_NAME as CALIBRATION_FILE, Calibration
from ..context.store import unit_problem
from ..encoding.files import SETTINGS_FILE, read_json_file, read_settings
from ..encoding.onnx_encoder import INT8_FILE, check_int8
from ..errors import DataFormatError, Errors, IntegrityError, MissingInputError, SapbertError, Warnings
from ..index.concept_index import backend_class
from ..index.hnsw16 import NEIGHBORS_FILE, Hnsw16Backend
from ..index.hnsw_file import check_hnsw_file
from ..index.meta import check_meta
from ..linker.resources import POINTER_FILE, find, read_pointer
from ..mentions.abbreviation_table import FILE_NAME as ABBREVIATIONS_FILE, AbbreviationTable
from ..rerank.model import META_FILE as RERANKER_META, read_meta as read_reranker_meta, recorded_files

KB_META = "kb.json"
INDEX_META = "index_meta.json"
PROTOTYPES_META = "prototypes_meta.json"
_FIXES = {"kb": "Rebuild the knowledge base (`spacy-sapbert build-kb`) or copy the folder {folder} again.",
          "index": "Restore index_meta.json from the original folder, or rebuild the index (`spacy-sapbert build-index`).",
          "prototypes": "Rebuild the prototype store (`spacy-sapbert build-prototypes`) or copy the folder {folder} again."}
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
    return _check_records(folder, read_json_file(folder / KB_META, what="a knowledge base", fix=_FIXES["kb"]).get("files"),
                          "knowledge base")


def verify_encoder(folder: Path) -> List[FileCheck]:
    checks = _check_records(folder, read_settings(folder).get("files"), "encoder")
    if (folder / ONNX_EXPORT).is_file():
        checks += _check_records(folder, read_json_file(folder / ONNX_EXPORT, what="the ONNX export").get("files"),
                                 "ONNX export")
    return checks


def _lengths(checks: List[FileCheck], problem_of: Dict[str, Any]) -> List[FileCheck]:
    """``checks`` with each file of ``problem_of`` whose hash check passed checked in full for unit-length
    vectors (``problem_of[name]()``: None or what is wrong); a file that fails becomes damaged."""
    out = []
    for check in checks:
        find = problem_of.get(check.path.name)
        problem = find() if find is not None and check.status == "ok" else None
        out.append(check if problem is None else FileCheck(check.path, "damaged", problem))
    return out


def _not_unit(problem: Any) -> Any:
    return None if problem is None else f"stored vectors are not unit length: {problem}"


def _index_lengths(folder: Path, meta: Dict[str, Any]) -> Dict[str, Any]:
    import numpy

    def npy(name: str) -> Any:
        def problem() -> Any:
            try:
                X = numpy.load(folder / name, mmap_mode="r", allow_pickle=False)
            except NPY_READ_ERRORS as err:
                return f"not a readable array ({err or type(err).__name__})"
            if X.shape != (meta["n_names"], meta["dim"]) or X.dtype.kind != "f":
                return f"shape {X.shape} {X.dtype}, expected ({meta['n_names']}, {meta['dim']}) floats"
            return _not_unit(unit_norm_problem(X))
        return problem

    def hnsw() -> Any:
        try:
            check_hnsw_file(folder / "names.hnsw", n=int(meta["n_names"]), dim=int(meta["dim"]))
        except SapbertError as err:
            return str(err)
        return None

    def graph16() -> Any:  # the float16 graph's levels, entry point and neighbour ids, checked as a load checks them
        try:
            Hnsw16Backend.load(folder, meta)
        except SapbertError as err:
            return str(err)
        return None

    return {"vectors.npy": npy("vectors.npy"), "vectors.f16.npy": npy("vectors.f16.npy"), "names.hnsw": hnsw,
            NEIGHBORS_FILE: graph16}


def verify_index(folder: Path) -> List[FileCheck]:
    meta = read_json_file(folder / INDEX_META, what="an index", fix=_FIXES["index"])
    try:
        meta = check_meta(meta, folder / INDEX_META)  # the field an edit broke, as a load reports it
    except SapbertError as err:
        return [FileCheck(folder / INDEX_META, "damaged", str(err))]
    if isinstance(meta.get("files"), dict) and meta["files"]:  # every data file recorded (size and hashes)
        unread = [name for name in backend_class(meta).files if name not in meta["files"]]
        if unread:  # e.g. a float16 graph's meta edited to say hnswlib's: its files are fine, its load is not
            said = f"kind {meta['kind']!r}" + (f", vectors {meta['vectors']!r}" if "vectors" in meta else "")
            return [FileCheck(folder / INDEX_META, "damaged",
                              f"{said} is read from {', '.join(unread)}, which the index does not record: the meta "
                              f"does not describe the files it records ({', '.join(sorted(meta['files']))})")]
        return _lengths(_check_records(folder, meta["files"], "index"), _index_lengths(folder, meta))
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


def verify_prototypes(folder: Path) -> List[FileCheck]:
    """A prototype store: its array files' records in full, the length of every stored vector, its encoder."""
    import numpy

    meta = read_json_file(folder / PROTOTYPES_META, what="a prototype store", fix=_FIXES["prototypes"])
    checks = _check_records(folder, meta.get("files"), "prototype store")

    def lengths() -> Any:
        def load(name: str) -> Any:
            return numpy.load(folder / name, mmap_mode="r", allow_pickle=False)
        names = load("names.npy") if meta.get("name_encoder") else None
        return _not_unit(unit_problem(load("vectors.npy"), load("kinds.npy"), names, sample=None))

    def safe_lengths() -> Any:
        try:
            return lengths()
        except (*NPY_READ_ERRORS, IndexError) as err:  # a pickle-bearing, truncated or malformed array
            return f"an array cannot be read as a plain array: {err or type(err).__name__}"

    if all(check.status == "ok" for check in checks):
        checks = _lengths(checks, {"vectors.npy": safe_lengths})
    elif all(check.status == "unrecorded" for check in checks):  # no hashes to compare, the lengths still count
        problem = safe_lengths()
        checks.append(FileCheck(folder / "vectors.npy", "damaged" if problem else "ok",
                                problem or "every stored vector is unit length (no hash recorded)"))
    if (folder / "encoder").is_dir():
        checks += verify_encoder(folder / "encoder")
    return checks


def verify_reranker(folder: Path) -> List[FileCheck]:
    """A re-ranker folder (``sapbert_reranker.json``): its fields, then every recorded file in full (the int8
    graph's too)."""
    try:
        meta = read_reranker_meta(folder)
    except SapbertError as err:
        return [FileCheck(folder / RERANKER_META, "damaged", str(err))]
    return _check_records(folder, recorded_files(meta), "re-ranker")


def _signed_files(linker: Path) -> List[FileCheck]:
    """The linker's calibration and abbreviation table (one JSON file each, a sha256 of their content inside):
    read as a load reads them, in full."""
    out: List[FileCheck] = []
    for name, read in ((CALIBRATION_FILE, Calibration.from_disk), (ABBREVIATIONS_FILE, AbbreviationTable.from_disk)):
        if not (linker / name).exists():
            continue
        try:
            read(linker / name)
        except SapbertError as err:
            out.append(FileCheck(linker / name, "damaged", str(err)))
        else:
            out.append(FileCheck(linker / name, "ok", f"{(linker / name).stat().st_size} bytes, sha256 of its content ok"))
    return out


def _linker_folders(pipeline: Path) -> List[Path]:
    from spacy.util import load_config

    config = load_config(pipeline / "config.cfg")
    components: Dict[str, Any] = dict(config.get("components", {}))
    return [pipeline / name for name, cfg in sorted(components.items())
            if isinstance(cfg, dict) and cfg.get("factory") == "sapbert_linker"]


def _setting(pipeline: Path, name: str, key: str) -> Any:
    from spacy.util import load_config

    return dict(load_config(pipeline / "config.cfg").get("components", {})).get(name, {}).get(key)


def _outside(pipeline: Path, linker: Path, resources: Optional[Path]) -> List[FileCheck]:
    """The KB and index of a linker saved with ``resources = "outside"``, found as a load finds them."""
    try:
        pointer = read_pointer(linker)
        if pointer is None:
            return []
        configured = str(resources) if resources is not None else _setting(pipeline, linker.name, "resources_path")
        folder, _ = find(pointer, configured, pipeline_path=pipeline, component=linker.name)
    except SapbertError as err:
        return [FileCheck(linker / POINTER_FILE, "damaged", str(err))]
    return verify_kb(folder / "kb") + verify_index(folder / "index")


def _int8_check(encoder: Path) -> List[FileCheck]:
    """A linker of precision int8 runs ``model.int8.onnx``: it must be there and recorded (its bytes are
    checked in full with the export's other records)."""
    try:
        check_int8(encoder)
    except SapbertError as err:
        return [FileCheck(encoder / INT8_FILE, "damaged", str(err))]
    return []


def verify_folder(path: PathLike, *, resources: Optional[PathLike] = None) -> List[FileCheck]:
    """Check a KB, encoder, index, prototype store or spaCy pipeline folder (every sapbert_linker in it) in full.
    ``resources``: the resources folder of a pipeline's linkers saved with ``resources = "outside"`` (default: where
    a load looks, their ``resources_path`` setting, then ``$SPACY_SAPBERT_RESOURCES``)."""
    path = ensure_path(path)
    outside = ensure_path(resources) if resources is not None else None
    if not path.is_dir():
        raise MissingInputError(Errors.E001.format(what="Folder", path=path,
                                                   hint="give a KB, encoder, index or pipeline folder."))
    if (path / "config.cfg").is_file():
        checks: List[FileCheck] = []
        linkers = _linker_folders(path)
        for linker in linkers:
            for part, check in (("encoder", verify_encoder), ("kb", verify_kb), ("index", verify_index),
                                ("prototypes", verify_prototypes), ("reranker", verify_reranker)):
                if (linker / part).is_dir():
                    checks += check(linker / part)
            if _setting(path, linker.name, "precision") == "int8" and (linker / "encoder").is_dir():
                checks += _int8_check(linker / "encoder")
            checks += _outside(path, linker, outside)
            checks += _signed_files(linker)
        if outside is not None and not any((linker / POINTER_FILE).is_file() for linker in linkers):
            warnings.warn(Warnings.W555.format(resources=outside, path=path,
                                               why="every linker of the pipeline keeps its KB and index inside it"))
        return checks
    if outside is not None:
        warnings.warn(Warnings.W555.format(resources=outside, path=path, why="it is not a pipeline folder"))
    if (path / KB_META).is_file():
        return verify_kb(path)
    if (path / SETTINGS_FILE).is_file():
        return verify_encoder(path)
    if (path / INDEX_META).is_file():
        return verify_index(path)
    if (path / PROTOTYPES_META).is_file():
        return verify_prototypes(path)
    raise DataFormatError(Errors.E555.format(path=path))


def summary(checks: List[FileCheck]) -> Dict[str, int]:
    counts = {"ok": 0, "damaged": 0, "unrecorded": 0}
    for check in checks:
        counts[check.status] += 1
    return counts


__all__ = ["FileCheck", "verify_folder", "verify_kb", "verify_encoder", "verify_index", "verify_prototypes",
           "verify_reranker", "summary"]
