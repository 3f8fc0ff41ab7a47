"""Shard bookkeeping of a link-corpus output folder.

Layout: ``OUT/corpus_run.json`` (what the run is: pipeline, version, KB checksum, inputs with their
sha256, options), ``OUT/rows/part-NNNNN.parquet`` (one file per input shard, written atomically: a file
that exists is complete), ``OUT/manifest.json`` (rows and sha256 per shard, written when all shards
are done) and the marker every spacy-sapbert output carries. A rerun skips the shards whose file
exists; a folder of another run is refused (E705) unless ``overwrite``.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, List, Sequence

from ..errors import ConfigError, Errors
from ..outputs import FileLock, check_parent, check_replaceable, output_lock, write_marker
from ..util import PathLike, atomic_write, ensure_path, file_sha256
from .readers import Shard
from .rows import SUFFIX, count_rows

RUN_FILE = "corpus_run.json"
MANIFEST_FILE = "manifest.json"
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
    output.parent.mkdir(parents=True, exist_ok=True)
    lock = output_lock(output).acquire()
    try:
        if output.exists() or output.is_symlink():
            _reuse_or_clear(output, run, overwrite)
        (output / ROWS_DIR).mkdir(parents=True, exist_ok=True)
        for stale in (output / ROWS_DIR).glob(".part-*.tmp"):  # left by a writer killed mid-file
            stale.unlink()
        if not (output / RUN_FILE).exists():
            write_marker(output)
            with atomic_write(output / RUN_FILE) as fh:
                json.dump(run, fh, indent=2, sort_keys=True)
    except BaseException:
        lock.release()
        raise
    return lock


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


def pending_shards(output: Path, shards: Sequence[Shard], fmt: str) -> List[Shard]:
    """The shards without a finished output file."""
    return [shard for shard in shards if not shard_file(output, shard, fmt).is_file()]


def write_manifest(output: Path, shards: Sequence[Shard], fmt: str) -> Dict[str, Any]:
    """``manifest.json``: per shard its input, output file, rows and sha256; the totals."""
    entries = []
    for shard in shards:
        path = shard_file(output, shard, fmt)
        entries.append({"input": shard.path, "output": path.relative_to(output).as_posix(),
                        "rows": count_rows(path, fmt), "sha256": file_sha256(path)})
    manifest = {"shards": entries, "rows": sum(e["rows"] for e in entries), "n_shards": len(entries)}
    with atomic_write(output / MANIFEST_FILE) as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
    return manifest


__all__ = ["RUN_FILE", "MANIFEST_FILE", "ROWS_DIR", "shard_file", "open_output", "pending_shards",
           "write_manifest"]
