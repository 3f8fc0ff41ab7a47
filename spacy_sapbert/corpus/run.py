""":func:`link_corpus`: the function behind ``spacy-sapbert link-corpus``."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from tqdm import tqdm

from ..base.ray_session import check_address, import_ray
from ..base.util import PathLike, ensure_path, get_logger
from ..errors import ConfigError, DataFormatError, Errors
from .checks import check_paths, scan_shards
from .local import link_local, load_pipeline, run_info, torch_threads
from .ray_backend import link_ray
from .readers import find_shards, shard_fingerprint
from .rows import OUTPUT_FORMATS, import_pyarrow
from .shards import open_output, pending_shards, write_manifest

logger = get_logger("corpus")
BACKENDS = ("local", "ray")


@dataclass
class CorpusResult:
    """What a :func:`link_corpus` run did: shards in all / skipped (done by an earlier run) / linked now,
    documents linked now, rows in the whole output, seconds, and documents per second."""

    output: Path
    shards: int
    skipped: int
    linked: int
    docs: int
    rows: int
    seconds: float

    @property
    def docs_per_second(self) -> float:
        return self.docs / self.seconds if self.seconds > 0 else 0.0


def _check_options(backend: str, output_format: str, values: Dict[str, float]) -> None:
    if backend not in BACKENDS:
        raise ConfigError(Errors.E002.format(what="back-end", value=backend, choices=", ".join(BACKENDS)))
    if output_format not in OUTPUT_FORMATS:
        raise ConfigError(Errors.E002.format(what="output format", value=output_format,
                                             choices=", ".join(OUTPUT_FORMATS)))
    for what, value in values.items():
        minimum = 0 if what == "gpus_per_actor" else 1
        if value < minimum:
            raise ConfigError(Errors.E111.format(what=what, minimum=minimum, value=value))


def link_corpus(
    inputs: Sequence[PathLike],
    pipeline: str,
    output: PathLike,
    *,
    input_format: str = "auto",
    id_field: str = "id",
    text_field: str = "text",
    output_format: str = "parquet",
    backend: str = "local",
    n_process: int = 1,
    batch_size: int = 64,
    actors: int = 2,
    gpus_per_actor: float = 0.0,
    threads: int = 1,
    address: Optional[str] = None,
    overwrite: bool = False,
    show_progress: bool = True,
) -> CorpusResult:
    """Link every document of ``inputs`` with ``pipeline`` (a folder or an installed package with NER
    and ``sapbert_linker``) and write one row per entity to ``output/rows/part-NNNNN.<fmt>``, one file
    per input shard. A rerun skips the shards already written and verified (resume); an output folder of
    another run is E705 unless ``overwrite``. Before any work: the output may not be, hold or lie inside
    the pipeline or an input (E503/E710), and every document of every input is read (a bad one is its
    coded error, two documents with one id E712).

    ``backend="local"``: ``n_process`` processes, each shard in ``nlp.pipe(batch_size=batch_size)``. ``backend="ray"``:
    Ray Data with ``actors`` actors (``gpus_per_actor`` GPUs each) on the cluster at ``address``
    (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``; default: a local Ray). ``threads``: torch threads
    per process / actor. Both back-ends write the same rows.
    """
    _check_options(backend, output_format, {"n_process": n_process, "batch_size": batch_size, "actors": actors,
                                            "threads": threads, "gpus_per_actor": gpus_per_actor})
    if output_format == "parquet":
        import_pyarrow()
    if backend == "ray":
        import_ray("link-corpus --backend ray")
        if address:
            check_address(address)
    output = ensure_path(output)
    if Path(pipeline).exists():  # a folder: absolute, so that actors started elsewhere find it
        pipeline = str(Path(pipeline).resolve())
    shards = find_shards(inputs, input_format)
    check_paths(output, pipeline, inputs, shards)
    n_docs = dict(zip((s.index for s in shards), scan_shards(shards, id_field=id_field, text_field=text_field)))
    nlp, extension = load_pipeline(pipeline)
    info = run_info(nlp)
    run: Dict[str, Any] = dict(info, inputs=[{"path": s.path, "format": s.fmt, "sha256": shard_fingerprint(s)}
                                             for s in shards],
                               input_format=input_format, id_field=id_field, text_field=text_field,
                               output_format=output_format, pipeline_path=str(pipeline))
    start = time.perf_counter()
    lock = open_output(output, run, overwrite=overwrite)
    try:
        todo = pending_shards(output, shards, output_format)
        if len(todo) < len(shards):
            logger.info("%d of %d shards are done already; linking the other %d", len(shards) - len(todo),
                        len(shards), len(todo))
        with tqdm(desc="link-corpus", unit="doc", total=sum(n_docs[s.index] for s in todo),
                  disable=not show_progress) as bar:
            options = dict(output=output, output_format=output_format, run=info, id_field=id_field,
                           text_field=text_field, batch_size=batch_size, progress=bar.update)
            if not todo:
                docs = 0
            elif backend == "local":
                with torch_threads(threads):
                    docs = link_local(nlp, extension, todo, n_process=n_process, **options)
            else:
                del nlp  # the actors load their own
                docs = link_ray(str(pipeline), todo, actors=actors, gpus_per_actor=gpus_per_actor, threads=threads,
                                address=address, **options)
        expected = sum(n_docs[s.index] for s in todo)
        if docs != expected:  # a file rewritten or appended to after the check: never a silent short shard
            raise DataFormatError(Errors.E716.format(expected=expected, found=docs))
        manifest = write_manifest(output, shards, output_format)
    finally:
        lock.release()
    return CorpusResult(output=output, shards=len(shards), skipped=len(shards) - len(todo), linked=len(todo),
                        docs=docs, rows=int(manifest["rows"]), seconds=time.perf_counter() - start)


__all__ = ["link_corpus", "CorpusResult", "BACKENDS"]
