"""The entity rows link-corpus writes: one row per entity, the same columns in Parquet and JSONL.

Columns: ``doc_id``, ``start``/``end`` (characters), ``text``, ``label``, ``kb_id`` (best concept or
``""``), ``kb_ents_ids``/``kb_ents_scores`` (the candidates, best first), ``pipeline``,
``pipeline_version``, ``kb_checksum``. One writer serves both back-ends, so their files are equal byte
for byte when the rows are.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List

import numpy

from ..errors import ConfigError, Errors
from ..commands.pipeline import doc_entities
from ..base.util import PathLike, atomic_write

COLUMNS = ("doc_id", "start", "end", "text", "label", "kb_id", "kb_ents_ids", "kb_ents_scores",
           "pipeline", "pipeline_version", "kb_checksum")
OUTPUT_FORMATS = ("parquet", "jsonl")
SUFFIX = {"parquet": ".parquet", "jsonl": ".jsonl"}


def import_pyarrow() -> Any:
    """pyarrow, or E708 naming the extra that brings it."""
    try:
        import pyarrow  # lazy: pyarrow
    except ImportError as err:
        raise ConfigError(Errors.E708.format(reason=err)) from None
    return pyarrow


def empty_columns() -> Dict[str, List[Any]]:
    return {name: [] for name in COLUMNS}


def add_doc_rows(columns: Dict[str, List[Any]], doc: Any, doc_id: str, extension: str, run: Dict[str, str]) -> int:
    """Append the entities of ``doc`` to ``columns``; ``run`` gives pipeline, pipeline_version and
    kb_checksum. Returns the number of rows added."""
    ents = doc_entities(doc, extension)
    for ent in ents:
        columns["doc_id"].append(doc_id)
        for key in ("start", "end", "text", "label", "kb_id"):
            columns[key].append(ent[key])
        columns["kb_ents_ids"].append([str(c) for c, _ in ent["kb_ents"]])
        columns["kb_ents_scores"].append([float(numpy.float32(s)) for _, s in ent["kb_ents"]])
        for key in ("pipeline", "pipeline_version", "kb_checksum"):
            columns[key].append(run[key])
    return len(ents)


def arrow_table(columns: Dict[str, List[Any]]) -> Any:
    """The rows as a pyarrow Table with the fixed schema (float32 scores)."""
    pa = import_pyarrow()
    schema = pa.schema([("doc_id", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("text", pa.string()),
                        ("label", pa.string()), ("kb_id", pa.string()), ("kb_ents_ids", pa.list_(pa.string())),
                        ("kb_ents_scores", pa.list_(pa.float32())), ("pipeline", pa.string()),
                        ("pipeline_version", pa.string()), ("kb_checksum", pa.string())])
    return pa.table({name: columns[name] for name in COLUMNS}, schema=schema)


def to_ipc(columns: Dict[str, List[Any]]) -> bytes:
    """The rows as Arrow IPC stream bytes (what a Ray actor sends back to the driver)."""
    pa = import_pyarrow()
    table = arrow_table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> Dict[str, List[Any]]:
    pa = import_pyarrow()
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all().to_pydict()


def write_rows(path: PathLike, columns: Dict[str, List[Any]], fmt: str) -> None:
    """Write the rows to ``path`` atomically (``parquet`` or ``jsonl``)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq  # lazy: pyarrow

        table = arrow_table(columns)
        with atomic_write(path, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
        return
    with atomic_write(path) as fh:
        for values in zip(*(columns[name] for name in COLUMNS)):
            record = dict(zip(COLUMNS, values))
            record["kb_ents_scores"] = [round(float(s), 6) for s in record["kb_ents_scores"]]
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def count_rows(path: PathLike, fmt: str) -> int:
    """Rows in a written shard file (Parquet: from its footer)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq  # lazy: pyarrow

        return int(pq.read_metadata(str(path)).num_rows)
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


__all__ = ["COLUMNS", "OUTPUT_FORMATS", "add_doc_rows", "arrow_table", "write_rows", "count_rows", "to_ipc",
           "from_ipc", "import_pyarrow", "empty_columns"]
