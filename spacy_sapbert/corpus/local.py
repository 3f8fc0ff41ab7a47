"""The pipeline as link-corpus runs it, and the local back-end: ``nlp.pipe(n_process, batch_size)``
over all pending shards in one stream, each shard's rows written as soon as it is complete.

Identical rows whatever the back-end or worker count: a mention's vector depends on the other
mentions encoded in its batch (padding, matrix shapes) and, through the encoder's cache, on what the
process saw before. So the encoder cache is off, and every shard starts a new batch (its documents are
followed by empty ones up to a multiple of ``batch_size``), as it does on a Ray actor.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import ConfigError, Errors
from ..linking import linker_extension
from ..util import get_logger
from .readers import Shard, read_shard
from .rows import add_doc_rows, empty_columns
from .shards import write_shard

logger = get_logger("corpus")


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Torch on ``threads`` threads meanwhile (forked ``nlp.pipe`` workers inherit it), restored after."""
    import torch

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
                    run: Dict[str, str]) -> Dict[str, List[Any]]:
    """Link the documents of one shard in one process (what a Ray actor does); the rows as columns."""
    columns = empty_columns()
    for (doc_id, _), doc in zip(pairs, nlp.pipe((text for _, text in pairs), batch_size=batch_size)):
        add_doc_rows(columns, doc, doc_id, extension, run)
    return columns


def _stream(shards: Sequence[Shard], batch_size: int, id_field: str, text_field: str
            ) -> Iterator[Tuple[str, Tuple[int, Optional[str]]]]:
    """``(text, (shard index, doc id))``; padding documents (id None) make each shard a whole number of
    batches, at least one (so that an empty shard is seen too)."""
    for shard in shards:
        n = 0
        for doc_id, text in read_shard(shard, id_field=id_field, text_field=text_field):
            yield text, (shard.index, doc_id)
            n += 1
        for _ in range((-n) % batch_size if n else batch_size):
            yield "", (shard.index, None)


def link_local(nlp: Any, extension: str, shards: Sequence[Shard], *, output: Path, output_format: str,
               run: Dict[str, str], id_field: str, text_field: str, n_process: int, batch_size: int,
               progress: Callable[[int], None]) -> int:
    """Link ``shards`` with ``nlp.pipe`` and write each one's rows; returns the documents linked."""
    by_index = {shard.index: shard for shard in shards}
    current: Optional[int] = None
    columns = empty_columns()
    docs = 0
    stream = nlp.pipe(_stream(shards, batch_size, id_field, text_field), as_tuples=True, batch_size=batch_size,
                      n_process=n_process)
    for doc, (index, doc_id) in stream:
        if index != current:
            if current is not None:
                write_shard(output, by_index[current], columns, output_format)
            current, columns = index, empty_columns()
        if doc_id is not None:
            add_doc_rows(columns, doc, doc_id, extension, run)
            docs += 1
            progress(1)
    if current is not None:
        write_shard(output, by_index[current], columns, output_format)
    return docs


__all__ = ["torch_threads", "load_pipeline", "run_info", "link_shard_docs", "link_local"]
