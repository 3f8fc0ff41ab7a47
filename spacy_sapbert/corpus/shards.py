"""Shard bookkeeping of a link-corpus output folder.

Layout: ``OUT/corpus_run.json`` (what the run is: pipeline, version, KB checksum, inputs with their
sha256, options), ``OUT/rows/part-NNNNN.parquet`` (one file per input shard, written atomically),
``OUT/progress.jsonl`` (one record per finished shard file, appended once the file is in place: rows,
bytes, sha256), ``OUT/manifest.json`` (the same per shard, written when all shards are done) and the
marker every spacy-sapbert output carries. A rerun skips a shard only when its file matches its record
(size and sha256); a file without one (a kill between the file and its record) is linked again, a file
that no longer matches it too, with W702. A folder of another run is refused (E705) unless
``overwrite``. The system's refusals (no permission, disk full, ``ulimit -f``, ``rows`` a file) are E714.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence

from ..errors import ConfigError, Errors, SapbertError, Warnings
from ..base.outputs import FileLock, check_parent, check_replaceable, output_lock, write_marker
from ..base.util import PathLike, atomic_write, ensure_path, file_sha256, get_logger
from .readers import Shard
from .rows import SUFFIX, count_rows, write_rows

logger = get_logger("corpus")

RUN_FILE = "corpus_run.json"
MANIFEST_FILE = "manifest.json"
PROGRESS_FILE = "progress.jsonl"
ROWS_DIR = "rows"
# What makes two runs the same run (a rerun of it resumes); other fields are informative.
IDENTITY = ("pipeline", "pipeline_version", "kb_checksum", "inputs", "input_format", "id_field", "text_field",
            "output_format")


def shard_file(output: Path, shard: Shard, fmt: str) -> Path:
    """Where the rows of ``shard`` go."""
    return output / ROWS_DIR / f"part-{shard.index:05d}{SUFFIX[fmt]}"


def open_output(output: PathLike, run: Dict[str, Any], *, overwrite: bool = False) -> FileLock:
    """Lock ``output`` for this run (E504 while another process writes it) and make it ready: created
    with the marker and ``corpus_run.json``, or kept when it holds this same run (resume). Another
    run's folder is E705, any other existing folder E003, unless ``overwrite`` (then it is emptied,
    if spacy-sapbert wrote it or it is empty: E501 otherwise). Returns the held lock."""
    output = ensure_path(output)
    check_parent(output)
    with writing(output.parent):
        output.parent.mkdir(parents=True, exist_ok=True)
    lock = output_lock(output).acquire()
    try:
        with writing(output):
            if output.exists() or output.is_symlink():
                _reuse_or_clear(output, run, overwrite)
            rows = output / ROWS_DIR
            if rows.exists() and not rows.is_dir():
                raise OSError(errno.ENOTDIR, "it is a file, not a folder", str(rows))
            rows.mkdir(parents=True, exist_ok=True)
            for stale in rows.glob(".part-*.tmp"):  # left by a writer killed mid-file
                stale.unlink()
            if not (output / RUN_FILE).exists():
                write_marker(output)
                with atomic_write(output / RUN_FILE) as fh:
                    json.dump(run, fh, indent=2, sort_keys=True)
    except BaseException:
        lock.release()
        raise
    return lock


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turns what the system refuses while link-corpus writes ``path`` into E714 with its fix."""
    try:
        yield
    except SapbertError:
        raise
    except OSError as err:
        raise write_error(Path(err.filename) if err.filename else path, err) from None


_FIXES = {
    errno.EFBIG: "a shard's rows are larger than the file size limit (`ulimit -f`): raise it (`ulimit -f unlimited`) "
                 "or split the input into smaller shards",
    errno.ENOSPC: "the disk is full: free space, or choose an --output on another disk",
    errno.EDQUOT: "the disk quota is used up: free space, or choose an --output on another disk",
    errno.EACCES: "no permission to write there: check the folder's permissions, or choose another --output",
    errno.EPERM: "the system does not permit writing there (permissions, an immutable or read-only folder): check "
                 "it, or choose another --output",
    errno.EROFS: "the file system is read-only: choose another --output",
    errno.ENOTDIR: "a file stands where link-corpus keeps a folder: move it away, or choose another --output",
    errno.EEXIST: "a file stands where link-corpus keeps a folder: move it away, or choose another --output",
}


def write_error(path: Path, err: OSError) -> ConfigError:
    """E714: what went wrong writing ``path``, and what to do."""
    fix = _FIXES.get(err.errno or 0, "check the output folder, or choose another --output")
    return ConfigError(Errors.E714.format(path=path, reason=err.strerror or err, fix=fix))


def _reuse_or_clear(output: Path, run: Dict[str, Any], overwrite: bool) -> None:
    run_file = output / RUN_FILE
    if output.is_dir() and not output.is_symlink() and run_file.is_file():
        try:
            found = json.loads(run_file.read_text(encoding="utf8"))
        except (OSError, ValueError):
            found = {}
        diff = [key for key in IDENTITY if not isinstance(found, dict) or found.get(key) != run.get(key)]
        if not diff:
            return  # the same run: resume
        if not overwrite:
            raise ConfigError(Errors.E705.format(path=output, fields=", ".join(diff)))
    elif output.is_dir() and not output.is_symlink() and not any(output.iterdir()):
        return
    elif not overwrite:
        raise ConfigError(Errors.E003.format(path=output))
    check_replaceable(output)
    for entry in output.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def write_shard(output: Path, shard: Shard, columns: Dict[str, List[Any]], fmt: str) -> None:
    """Write the rows of ``shard`` (atomically), then append the file's record to ``progress.jsonl``."""
    path = shard_file(output, shard, fmt)
    with writing(path):
        write_rows(path, columns, fmt)
        record = {"input": shard.path, "output": path.relative_to(output).as_posix(), "rows": len(columns["doc_id"]),
                  "bytes": path.stat().st_size, "sha256": file_sha256(path)}
        with open(output / PROGRESS_FILE, "a", encoding="utf8") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _records(output: Path) -> Dict[str, Dict[str, Any]]:
    """The last record of each shard file: ``manifest.json`` (an earlier run's end), then ``progress.jsonl``.
    Torn or malformed lines (a kill mid-append) are left out: their files are linked again."""
    records: Dict[str, Dict[str, Any]] = {}
    try:
        manifest = json.loads((output / MANIFEST_FILE).read_text(encoding="utf8"))
        entries = manifest.get("shards", []) if isinstance(manifest, dict) else []
    except (OSError, ValueError):
        entries = []
    try:
        with open(output / PROGRESS_FILE, "rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("output"), str) and isinstance(entry.get("sha256"), str) \
                and isinstance(entry.get("rows"), int):
            records[entry["output"]] = entry
    return records


def _mismatch(path: Path, record: Dict[str, Any]) -> str:
    """Why the file at ``path`` is not the one ``record`` describes ('' when it is)."""
    size = path.stat().st_size
    if isinstance(record.get("bytes"), int) and size != record["bytes"]:
        return f"{size} bytes, recorded {record['bytes']}"
    if file_sha256(path) != record["sha256"]:
        return "its sha256 differs from the recorded one"
    return ""


def pending_shards(output: Path, shards: Sequence[Shard], fmt: str) -> List[Shard]:
    """The shards without a verified output file (W702 for a file that no longer matches its record).
    ``progress.jsonl`` is rewritten with the verified records only, so later appends start on a clean line."""
    found = _records(output)
    verified: List[Dict[str, Any]] = []
    todo = []
    with writing(output):
        for shard in shards:
            path = shard_file(output, shard, fmt)
            name = path.relative_to(output).as_posix()
            record = found.get(name)
            if path.is_file() and record is not None:
                why = _mismatch(path, record)
                if not why:
                    verified.append(dict(record, input=shard.path, bytes=path.stat().st_size))
                    continue
                logger.warning(Warnings.W702.format(path=path, why=why))
            elif path.is_file():
                logger.info("%s has no record in %s (a run stopped just after writing it); linking its shard again",
                            path, PROGRESS_FILE)
            todo.append(shard)
        with atomic_write(output / PROGRESS_FILE) as fh:
            fh.writelines(json.dumps(record, sort_keys=True) + "\n" for record in verified)
    return todo


def write_manifest(output: Path, shards: Sequence[Shard], fmt: str) -> Dict[str, Any]:
    """``manifest.json``: per shard its input, output file, rows, bytes and sha256 (from the records: every
    file was verified or just written); the totals."""
    found = _records(output)
    entries = []
    for shard in shards:
        path = shard_file(output, shard, fmt)
        name = path.relative_to(output).as_posix()
        record = found.get(name) or {"rows": count_rows(path, fmt), "sha256": file_sha256(path)}
        record.setdefault("bytes", path.stat().st_size)
        entries.append({"input": shard.path, "output": name, "rows": record["rows"], "bytes": record["bytes"],
                        "sha256": record["sha256"]})
    manifest = {"shards": entries, "rows": sum(e["rows"] for e in entries), "n_shards": len(entries)}
    with writing(output / MANIFEST_FILE), atomic_write(output / MANIFEST_FILE) as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
    return manifest


__all__ = ["RUN_FILE", "MANIFEST_FILE", "PROGRESS_FILE", "ROWS_DIR", "shard_file", "open_output", "write_shard",
           "pending_shards", "write_manifest", "writing", "write_error"]
