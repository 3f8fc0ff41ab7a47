"""Input shards of a corpus and the documents in them.

A *shard* is the unit of work and of resuming: one JSONL, Parquet or PubTator file, or one folder
of ``.txt`` files (one document each, id = the file's path in the folder without ``.txt``). A folder
given for jsonl/parquet/pubtator stands for the matching files in it (sorted). Every shard yields
``(doc_id, text)`` pairs in file order; a record without the id or text field is a coded error
naming file and line (E702/E703), never skipped.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from ..errors import ConfigError, DataFormatError, Errors, MissingInputError
from ..util import PathLike, ensure_path, file_sha256

FORMATS = ("auto", "jsonl", "parquet", "pubtator", "txt")
EXTENSIONS = {"jsonl": (".jsonl", ".ndjson"), "parquet": (".parquet",), "pubtator": (".pubtator", ".txt"),
              "txt": (".txt",)}


@dataclass(frozen=True)
class Shard:
    """One input shard: ``index`` (its place among the run's shards), ``fmt`` and ``path`` (a file,
    or a folder of .txt files for ``txt``)."""

    index: int
    fmt: str
    path: str

    @property
    def name(self) -> str:
        return Path(self.path).name

    def to_item(self) -> Dict[str, Any]:
        return {"index": self.index, "fmt": self.fmt, "path": self.path}

    @classmethod
    def from_item(cls, item: Dict[str, Any]) -> "Shard":
        return cls(int(item["index"]), str(item["fmt"]), str(item["path"]))


def _guess_format(path: Path) -> str:
    if path.is_dir():
        for fmt in ("parquet", "jsonl"):
            if any(p.suffix.lower() in EXTENSIONS[fmt] for p in path.iterdir() if p.is_file()):
                return fmt
        return "txt"
    suffix = path.suffix.lower()
    for fmt in ("jsonl", "parquet"):
        if suffix in EXTENSIONS[fmt]:
            return fmt
    return "pubtator"


def find_shards(inputs: Sequence[PathLike], fmt: str = "auto") -> List[Shard]:
    """The shards of ``inputs`` (files and folders), in the order given, folders expanded (sorted)."""
    if fmt not in FORMATS:
        raise ConfigError(Errors.E002.format(what="input format", value=fmt, choices=", ".join(FORMATS)))
    found: List[Tuple[str, Path]] = []
    for given in inputs:
        path = ensure_path(given)
        if not path.exists():
            raise MissingInputError(Errors.E001.format(what="Input", path=path, hint="give files or folders of documents."))
        kind = _guess_format(path) if fmt == "auto" else fmt
        if path.is_dir() and kind != "txt":
            found.extend((kind, p) for p in sorted(path.iterdir())
                         if p.is_file() and p.suffix.lower() in EXTENSIONS[kind] and not p.name.startswith("."))
        else:
            found.append((kind, path))
    seen: Dict[Path, Path] = {}
    shards = []
    for kind, path in found:
        resolved = path.resolve()
        if resolved in seen:
            raise ConfigError(Errors.E707.format(path=resolved, first=seen[resolved], second=path))
        seen[resolved] = path
        shards.append(Shard(len(shards), kind, str(resolved)))
    if not shards:
        raise MissingInputError(Errors.E706.format(inputs=", ".join(map(str, inputs)) or "(no inputs)",
                                                   what="documents" if fmt == "auto" else f"{fmt} files",
                                                   choices=", ".join(FORMATS)))
    return shards


def shard_fingerprint(shard: Shard) -> str:
    """sha256 of the shard's bytes (for a .txt folder: of its files' names and sha256s)."""
    path = Path(shard.path)
    if shard.fmt != "txt":
        return file_sha256(path)
    h = hashlib.sha256()
    for name, file in _txt_files(path):
        h.update(f"{name}\t{file_sha256(file)}\n".encode("utf8"))
    return h.hexdigest()


def _txt_files(folder: Path) -> List[Tuple[str, Path]]:
    if not folder.is_dir():
        raise MissingInputError(Errors.E001.format(what="Folder of .txt documents", path=folder,
                                                   hint="--format txt reads folders of .txt files."))
    return [(p.relative_to(folder).with_suffix("").as_posix(), p) for p in sorted(folder.rglob("*.txt"))
            if p.is_file() and not p.name.startswith(".")]


def _field(record: Dict[str, Any], field: str, option: str, what: str, path: str, where: str) -> str:
    if field not in record:
        raise DataFormatError(Errors.E702.format(path=path, where=where, field=field, option=option,
                                                 found=", ".join(map(str, record)) or "no fields", what=what))
    value = record[field]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (what == "text" and not isinstance(value, str)):
        raise DataFormatError(Errors.E703.format(path=path, where=where, field=field, option=option, what=what,
                                                 found=type(value).__name__))
    return str(value)


def read_shard(shard: Shard, *, id_field: str = "id", text_field: str = "text") -> Iterator[Tuple[str, str]]:
    """``(doc_id, text)`` of every document of ``shard``, in file order (streaming for JSONL and Parquet)."""
    path = Path(shard.path)
    if shard.fmt == "jsonl":
        from ..kb.readers._io import iter_lines

        for n, line in iter_lines(path):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                record = err
            if not isinstance(record, dict):  # not a field problem: --text-field would not help (E552, not E702)
                why = f"line {n} is {'not valid JSON: ' if isinstance(record, ValueError) else 'JSON but not an object: '}"
                raise DataFormatError(Errors.E552.format(
                    path=path, what="a JSONL input (one JSON object a line)", why=why + str(record)[:200],
                    fix="Fix or remove that line: each line must be one JSON object such as {\"id\": ..., \"text\": ...}."))
            where = f"line {n}"
            yield (_field(record, id_field, "--id-field", "document id", shard.path, where),
                   _field(record, text_field, "--text-field", "text", shard.path, where))
    elif shard.fmt == "parquet":
        yield from _read_parquet(path, id_field, text_field)
    elif shard.fmt == "pubtator":
        from ..evaluation.datasets import read_pubtator

        for doc in read_pubtator(path):
            yield doc.doc_id, doc.text
    else:
        for doc_id, file in _txt_files(path):
            raw = file.read_bytes()
            try:
                yield doc_id, raw.decode("utf8")
            except UnicodeDecodeError as err:
                raise DataFormatError(Errors.E004.format(path=file, line=raw[: err.start].count(b"\n") + 1)) from None


def _read_parquet(path: Path, id_field: str, text_field: str) -> Iterator[Tuple[str, str]]:
    from .rows import import_pyarrow

    import_pyarrow()
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as err:  # pyarrow raises its own ArrowInvalid / OSError for a file that is not Parquet
        raise DataFormatError(Errors.E552.format(path=path, what="a Parquet shard", why=str(err)[:200],
                                                 fix="Give a Parquet file, or pass --format.")) from None
    columns = pf.schema_arrow.names
    for field, option, what in ((id_field, "--id-field", "document id"), (text_field, "--text-field", "text")):
        if field not in columns:
            raise DataFormatError(Errors.E702.format(path=path, where="schema", field=field, option=option,
                                                     found=", ".join(columns), what=what))
    row = 0
    for batch in pf.iter_batches(columns=[id_field, text_field], batch_size=4096):
        ids, texts = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        for doc_id, text in zip(ids, texts):
            row += 1
            record = {id_field: doc_id, text_field: text}
            yield (_field(record, id_field, "--id-field", "document id", str(path), f"row {row}"),
                   _field(record, text_field, "--text-field", "text", str(path), f"row {row}"))


def check_shard(shard: Shard, *, id_field: str = "id", text_field: str = "text") -> None:
    """Read the first document of ``shard`` (fails fast on a wrong field name before any work starts)."""
    next(read_shard(shard, id_field=id_field, text_field=text_field), None)


__all__ = ["Shard", "FORMATS", "find_shards", "read_shard", "check_shard", "shard_fingerprint"]
