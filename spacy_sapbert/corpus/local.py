"""The pipeline as link-corpus runs it, and the local back-end: each shard linked by ``nlp.pipe(batch_size)``
in one process (this one, or one of ``--n-process`` forked workers: :mod:`.workers`), its rows written as
soon as it is complete.

Every back-end links a shard the same way (all its documents, in order, in batches of ``batch_size``, in a
pipeline whose encoder cache is off; a re-ranker's cache of logits stays on, as it gives what scoring again
would), so a shard's rows do not depend on the back-end, the worker count or what a process linked before.
Scores still depend on ``batch_size`` in their last float bits (a mention's vector depends on how many others
share its encoder batch) and, with the PyTorch runtime, on the thread count: docs/scale-out.md says what is
equal across which settings.
"""
from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import ConfigError, Errors
from ..base.extras import is_installed
from ..commands.pipeline import linker_extension
from ..base.util import get_logger
from .readers import Shard, read_shard
from .rows import add_doc_rows, empty_columns
from .shards import write_shard
from .workers import link_in_workers

logger = get_logger("corpus")


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Torch on ``threads`` threads meanwhile (in this process; forked workers run one), restored after. Without
    torch (the runtime install: the encoder runs in ONNX Runtime) there is nothing to set."""
    if not is_installed("torch"):
        yield
        return
    import torch  # lazy: torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def load_pipeline(pipeline: str) -> Tuple[Any, str]:
    """``(nlp, extension)``: a saved or installed pipeline with a ``sapbert_linker`` (E704 without),
    its encoders' caches off (see the module docs). The linker runs on the device its config names
    (``auto``: a GPU when one is visible)."""
    import spacy

    nlp = spacy.load(pipeline)
    extension = linker_extension(nlp)
    if extension is None:
        raise ConfigError(Errors.E704.format(path=pipeline, names=", ".join(nlp.pipe_names) or "none"))
    for _, proc in nlp.pipeline:
        encoder = getattr(proc, "encoder", None) if proc.__class__.__name__ == "SapbertLinker" else None
        if encoder is not None:
            encoder.cache_size = 0
            encoder.clear_cache()
    return nlp, extension


def run_info(nlp: Any) -> Dict[str, str]:
    """What every row records about the run: pipeline name (``lang_name``), version, KB checksum."""
    linker = [proc for _, proc in nlp.pipeline if proc.__class__.__name__ == "SapbertLinker"][-1]
    meta = nlp.meta
    return {"pipeline": f"{meta.get('lang', nlp.lang)}_{meta.get('name', 'pipeline')}",
            "pipeline_version": str(meta.get("version", "0.0.0")), "kb_checksum": str(linker.kb.checksum)}


def link_shard_docs(nlp: Any, extension: str, pairs: Sequence[Tuple[str, str]], *, batch_size: int,
                    run: Dict[str, str], progress: Optional[Callable[[int], None]] = None) -> Dict[str, List[Any]]:
    """Link the documents of one shard in one process (what every back-end does); the rows as columns."""
    columns = empty_columns()
    for (doc_id, _), doc in zip(pairs, nlp.pipe((text for _, text in pairs), batch_size=batch_size)):
        add_doc_rows(columns, doc, doc_id, extension, run)
        if progress is not None:
            progress(1)
    return columns


def link_local(nlp: Any, extension: str, shards: Sequence[Shard], *, output: Path, output_format: str,
               run: Dict[str, str], id_field: str, text_field: str, n_process: int, batch_size: int,
               progress: Callable[[int], None]) -> int:
    """Link ``shards`` in this process (``n_process`` 1) or in ``n_process`` forked workers, and write each
    one's rows; returns the documents linked."""
    docs = 0

    def write(shard: Shard, columns: Dict[str, List[Any]], n_docs: int) -> None:
        nonlocal docs
        write_shard(output, shard, columns, output_format)
        docs += n_docs

    workers = min(n_process, len(shards))
    if workers > 1:
        def write_and_count(shard: Shard, columns: Dict[str, List[Any]], n_docs: int) -> None:
            write(shard, columns, n_docs)
            progress(n_docs)

        link = functools.partial(link_shard_docs, nlp, extension, batch_size=batch_size, run=run)
        link_in_workers(shards, n_process=workers, link=link, on_shard=write_and_count, id_field=id_field,
                        text_field=text_field)
        return docs
    for shard in shards:
        pairs = list(read_shard(shard, id_field=id_field, text_field=text_field))
        write(shard, link_shard_docs(nlp, extension, pairs, batch_size=batch_size, run=run, progress=progress),
              len(pairs))
    return docs


__all__ = ["torch_threads", "load_pipeline", "run_info", "link_shard_docs", "link_local"]
