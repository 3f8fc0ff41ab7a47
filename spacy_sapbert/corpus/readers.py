"""Input shards of a corpus and the documents in them.

A *shard* is the unit of work and of resuming: one JSONL, Parquet or PubTator file, or one folder
of ``.txt`` files (one document each, id = the file's path in the folder without ``.txt``). A folder
stands for the data files in it (sorted; each a shard of its own format), or is one ``.txt`` shard
when it holds no .jsonl/.ndjson/.parquet/.pubtator file; .txt files beside data files are refused
(E711: PubTator or documents?), and whatever a folder holds that is not read is reported (W701). Every
shard yields ``(doc_id, text)`` pairs in file order; a record without the id or text field, or with
text that is not valid Unicode, is a coded error naming file and line (E702/E703/E713), never skipped.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from ..base.lines import iter_lines, read_text
from ..base.util import PathLike, ensure_path, file_sha256, get_logger
from ..errors import ConfigError, DataFormatError, Errors, MissingInputError, SapbertError, Warnings
from ..mentions.datasets import read_pubtator
from .rows import import_pyarrow

logger = get_logger("corpus")

FORMATS = ("auto", "jsonl", "parquet", "pubtator", "txt")
EXTENSIONS = {"jsonl": (".jsonl", ".ndjson"), "parquet": (".parquet",), "pubtator": (".pubtator", ".txt"),
              "txt": (".txt",)}
# What a folder's files are read as in auto mode (.txt: a folder of documents, unless beside these).
DATA_EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pubtator": "pubtator"}


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
    """The format of a single file given in auto mode (by extension; other files are read as PubTator)."""
    suffix = path.suffix.lower()
    for fmt in ("jsonl", "parquet"):
        if suffix in EXTENSIONS[fmt]:
            return fmt
    return "pubtator"


def _visible(folder: Path) -> List[Path]:
    return [p for p in sorted(folder.iterdir()) if not p.name.startswith(".")]


def _hidden(relative: Path) -> bool:
    """A hidden file, or one inside a hidden folder (``.git/``, ``.ipynb_checkpoints/``): never read."""
    return any(part.startswith(".") for part in relative.parts)


def _listed(names: Sequence[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def _report(folder: Path, left: Sequence[Path], why: str) -> None:
    """W701 for what ``folder`` holds that is not read (nothing is left out silently)."""
    if left:
        names = [p.relative_to(folder).as_posix() + ("/" if p.is_dir() else "") for p in left]
        logger.warning(Warnings.W701.format(path=folder, n=len(names), what="entries" if len(names) > 1 else "entry",
                                            names=_listed(names), why=why))


def _folder_shards(folder: Path, fmt: str) -> List[Tuple[str, Path]]:
    """``(format, path)`` of the shards ``folder`` stands for."""
    if fmt == "txt" or (fmt == "auto" and not any(p.is_file() and p.suffix.lower() in DATA_EXTENSIONS
                                                  for p in _visible(folder))):
        files = [p for p in sorted(folder.rglob("*")) if p.is_file() and not _hidden(p.relative_to(folder))]
        _report(folder, [p for p in files if p.suffix.lower() != ".txt"],
                "a folder of plain-text documents is read for its .txt files only")
        if fmt == "auto" and not any(p.suffix.lower() == ".txt" for p in files):
            return []  # nothing readable: reported above; no documents at all is E706
        return [("txt", folder)]
    entries = _visible(folder)
    if fmt == "auto":
        found = [(DATA_EXTENSIONS[p.suffix.lower()], p) for p in entries
                 if p.is_file() and p.suffix.lower() in DATA_EXTENSIONS]
        txt = [p.name for p in entries if p.is_file() and p.suffix.lower() == ".txt"]
        if txt:
            others = sorted({p.suffix.lower() for _, p in found})
            raise ConfigError(Errors.E711.format(path=folder, txt=_listed(txt), others="/".join(others)))
        why = "a folder's .jsonl, .ndjson, .parquet and .pubtator files are read, not its other files or sub-folders"
    else:
        found = [(fmt, p) for p in entries if p.is_file() and p.suffix.lower() in EXTENSIONS[fmt]]
        why = f"--format {fmt} reads the {', '.join(EXTENSIONS[fmt])} files of a folder, not its other files or folders"
    read = {p for _, p in found}
    _report(folder, [p for p in entries if p not in read], why)
    return found


def find_shards(inputs: Sequence[PathLike], fmt: str = "auto") -> List[Shard]:
    """The shards of ``inputs`` (files and folders), in the order given, folders expanded (sorted). What a
    folder holds that is not read is reported (W701); .txt files beside data files are E711."""
    if fmt not in FORMATS:
        raise ConfigError(Errors.E002.format(what="input format", value=fmt, choices=", ".join(FORMATS)))
    found: List[Tuple[str, Path]] = []
    for given in inputs:
        path = ensure_path(given)
        if not path.exists():
            raise MissingInputError(Errors.E001.format(what="Input", path=path, hint="give files or folders of documents."))
        try:
            if path.is_dir():
                found.extend(_folder_shards(path, fmt))
            else:
                found.append((_guess_format(path) if fmt == "auto" else fmt, path))
        except OSError as err:
            raise read_error(path, err) from None
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


def read_error(path: PathLike, err: OSError) -> SapbertError:
    """E715 for an input the system will not let us read (no permission, an I/O error, gone meanwhile)."""
    return ConfigError(Errors.E715.format(path=getattr(err, "filename", None) or path, reason=err.strerror or err))


def shard_fingerprint(shard: Shard) -> str:
    """sha256 of the shard's bytes (for a .txt folder: of its files' names and sha256s)."""
    path = Path(shard.path)
    try:
        if shard.fmt != "txt":
            return file_sha256(path)
        h = hashlib.sha256()
        for name, file in _txt_files(path):
            h.update(f"{name}\t{file_sha256(file)}\n".encode("utf8"))
        return h.hexdigest()
    except SapbertError:
        raise
    except OSError as err:
        raise read_error(path, err) from None


def _txt_files(folder: Path) -> List[Tuple[str, Path]]:
    if not folder.is_dir():
        raise MissingInputError(Errors.E001.format(what="Folder of .txt documents", path=folder,
                                                   hint="--format txt reads folders of .txt files."))
    return [(p.relative_to(folder).with_suffix("").as_posix(), p) for p in sorted(folder.rglob("*.txt"))
            if p.is_file() and not _hidden(p.relative_to(folder))]


def _field(record: Dict[str, Any], field: str, option: str, what: str, path: str, where: str) -> str:
    if field not in record:
        raise DataFormatError(Errors.E702.format(path=path, where=where, field=field, option=option,
                                                 found=", ".join(map(str, record)) or "no fields", what=what))
    value = record[field]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (what == "text" and not isinstance(value, str)):
        raise DataFormatError(Errors.E703.format(path=path, where=where, field=field, option=option, what=what,
                                                 found=type(value).__name__))
    value = str(value)
    try:
        value.encode("utf8")
    except UnicodeEncodeError as err:  # JSON's "\ud800": a str Python holds but no file or model takes
        raise DataFormatError(Errors.E713.format(path=path, where=where, what=what, field=field,
                                                 char=ascii(value[err.start])[1:-1])) from None
    return value


def read_shard(shard: Shard, *, id_field: str = "id", text_field: str = "text") -> Iterator[Tuple[str, str]]:
    """``(doc_id, text)`` of every document of ``shard``, in file order (streaming for JSONL and Parquet)."""
    for _, doc_id, text in iter_documents(shard, id_field=id_field, text_field=text_field):
        yield doc_id, text


def iter_documents(shard: Shard, *, id_field: str = "id",
                   text_field: str = "text") -> Iterator[Tuple[str, str, str]]:
    """``(where, doc_id, text)``: :func:`read_shard` with each document's place (``file: line 3``, ``file:
    row 5``, ``file: document 2``, a .txt file's path). A file the system will not read is E715."""
    try:
        yield from _documents(shard, id_field, text_field)
    except SapbertError:
        raise
    except OSError as err:
        raise read_error(shard.path, err) from None


def _documents(shard: Shard, id_field: str, text_field: str) -> Iterator[Tuple[str, str, str]]:
    path = Path(shard.path)
    if shard.fmt == "jsonl":
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
            yield (f"{shard.path}: {where}",
                   _field(record, id_field, "--id-field", "document id", shard.path, where),
                   _field(record, text_field, "--text-field", "text", shard.path, where))
    elif shard.fmt == "parquet":
        yield from _read_parquet(path, id_field, text_field)
    elif shard.fmt == "pubtator":
        for n, doc in enumerate(read_pubtator(path), 1):
            yield f"{shard.path}: document {n}", doc.doc_id, doc.text
    else:
        for doc_id, file in _txt_files(path):
            yield str(file), doc_id, read_text(file)


def _read_parquet(path: Path, id_field: str, text_field: str) -> Iterator[Tuple[str, str]]:
    import_pyarrow()
    import pyarrow.parquet as pq  # lazy: pyarrow

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
    batches = pf.iter_batches(columns=[id_field, text_field], batch_size=4096)
    while True:
        try:
            batch = next(batches, None)
            if batch is None:
                return
            ids, texts = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        except Exception as err:  # a damaged page (ArrowInvalid, OSError), text that is not UTF-8 (UnicodeDecodeError)
            fix = f"The file is damaged or holds text that is not UTF-8 after row {row}: write it again."
            raise DataFormatError(Errors.E552.format(path=path, what="a Parquet shard", why=str(err)[:200],
                                                     fix=fix)) from None
        for doc_id, text in zip(ids, texts):
            row += 1
            record = {id_field: doc_id, text_field: text}
            where = f"row {row}"
            yield (f"{path}: {where}", _field(record, id_field, "--id-field", "document id", str(path), where),
                   _field(record, text_field, "--text-field", "text", str(path), where))


__all__ = ["Shard", "FORMATS", "find_shards", "read_shard", "iter_documents",
           "shard_fingerprint", "read_error"]
