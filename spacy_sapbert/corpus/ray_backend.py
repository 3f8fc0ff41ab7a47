"""The Ray Data back-end of link-corpus.

``ray.data.from_items`` (one item per pending shard) → ``map_batches(LinkShards, compute=
ActorPoolStrategy(size=N), num_gpus=..., batch_size=1)``: each actor loads the pipeline once in
``__init__`` and, per call, reads one shard (inputs must be readable on every node: a shared file
system), links it with ``nlp.pipe`` and returns its rows as Arrow IPC bytes. The driver writes each
shard's file atomically as results stream back (one writer for both back-ends, so outputs are equal
byte for byte, and the output folder need only exist on the driver). Ray's own ``write_parquet``
appends files named by task, which cannot tell a finished shard from a half-written one on a rerun.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

import numpy

from ..base.ray_session import ray_session, reraise_job_error
from .local import link_shard_docs, load_pipeline
from .readers import Shard, read_shard
from .rows import from_ipc, to_ipc
from .shards import write_shard


class LinkShards:
    """The Ray Data callable class: the pipeline is loaded once per actor; one call links one batch of
    shards (``{"index", "fmt", "path"}`` columns) → ``{"index", "n_docs", "rows"}`` (rows: IPC bytes)."""

    def __init__(self, pipeline: str, id_field: str, text_field: str, batch_size: int, threads: int,
                 run: Dict[str, str]) -> None:
        import torch  # lazy: torch

        torch.set_num_threads(int(threads))  # this actor's own process
        self.nlp, self.extension = load_pipeline(pipeline)
        self.id_field, self.text_field = id_field, text_field
        self.batch_size = batch_size
        self.run = run

    def __call__(self, batch: Dict[str, numpy.ndarray]) -> Dict[str, numpy.ndarray]:
        indexes, n_docs, rows = [], [], []
        for index, fmt, path in zip(batch["index"], batch["fmt"], batch["path"]):
            shard = Shard(int(index), str(fmt), str(path))
            pairs = list(read_shard(shard, id_field=self.id_field, text_field=self.text_field))
            columns = link_shard_docs(self.nlp, self.extension, pairs, batch_size=self.batch_size, run=self.run)
            indexes.append(shard.index)
            n_docs.append(len(pairs))
            rows.append(to_ipc(columns))
        out_rows = numpy.empty(len(rows), dtype=object)
        out_rows[:] = rows
        return {"index": numpy.asarray(indexes, dtype=numpy.int64), "n_docs": numpy.asarray(n_docs, dtype=numpy.int64),
                "rows": out_rows}


def link_ray(pipeline: str, shards: Sequence[Shard], *, output: Path, output_format: str, run: Dict[str, str],
             id_field: str, text_field: str, batch_size: int, actors: int, gpus_per_actor: float, threads: int,
             address: Optional[str], progress: Callable[[int], None], show_progress: bool = False) -> int:
    """Link ``shards`` on a pool of ``actors`` Ray actors and write each one's rows; returns the documents
    linked."""
    by_index = {shard.index: shard for shard in shards}
    docs = 0
    with ray_session("link-corpus --backend ray", address=address, num_cpus=None, show_progress=show_progress) as ray:
        ds = ray.data.from_items([shard.to_item() for shard in shards], override_num_blocks=max(1, len(shards)))
        ds = ds.map_batches(
            LinkShards,
            fn_constructor_kwargs={"pipeline": pipeline, "id_field": id_field, "text_field": text_field,
                                   "batch_size": batch_size, "threads": threads, "run": run},
            compute=ray.data.ActorPoolStrategy(size=actors),
            batch_size=1,
            batch_format="numpy",
            num_cpus=threads,
            num_gpus=gpus_per_actor or None,
        )
        try:
            for batch in ds.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=0):
                for index, n_docs, rows in zip(batch["index"], batch["n_docs"], batch["rows"]):
                    shard = by_index[int(index)]
                    write_shard(output, shard, from_ipc(rows), output_format)
                    docs += int(n_docs)
                    progress(int(n_docs))
        except Exception as err:  # Ray wraps what an actor raised (RayTaskError, UserCodeException ...)
            reraise_job_error(err, "linking the corpus shards")
    return docs


__all__ = ["LinkShards", "link_ray"]
