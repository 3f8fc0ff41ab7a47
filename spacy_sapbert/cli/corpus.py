"""CLI command: link-corpus. Thin: parse arguments, call :func:`spacy_sapbert.corpus.link_corpus`, print a summary."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..base.outputs import check_parent
from ..corpus import link_corpus
from ._app import app


@app.command("link-corpus")
def link_corpus_command(
    inputs: List[Path] = typer.Argument(..., help="Input shards: JSONL, Parquet or PubTator files, folders of them, "
                                                  "or folders of .txt files (one document each)."),
    pipeline: str = typer.Option(..., "--pipeline", "-p", help="A spaCy pipeline folder or installed package with NER "
                                                               "and a sapbert_linker."),
    output: Path = typer.Option(..., "--output", "-o", help="Output folder: rows/part-NNNNN.<fmt> per input shard, "
                                                            "corpus_run.json, manifest.json. A rerun resumes it."),
    input_format: str = typer.Option("auto", "--format", help="auto (by extension: a folder stands for its .jsonl, "
                                                              ".ndjson, .parquet and .pubtator files, or is a folder "
                                                              "of .txt documents when it has none), jsonl, parquet, "
                                                              "pubtator or txt."),
    id_field: str = typer.Option("id", "--id-field", help="JSONL/Parquet: the field holding the document id."),
    text_field: str = typer.Option("text", "--text-field", help="JSONL/Parquet: the field holding the text."),
    output_format: str = typer.Option("parquet", "--output-format", help="parquet or jsonl (one row per entity)."),
    backend: str = typer.Option("local", "--backend", help="local (nlp.pipe) or ray (Ray Data actors)."),
    n_process: int = typer.Option(1, "--n-process", help="local: worker processes, each linking whole shards."),
    batch_size: int = typer.Option(64, "--batch-size", help="Documents per nlp.pipe batch."),
    actors: int = typer.Option(2, "--actors", help="ray: actors, each with its own copy of the pipeline."),
    gpus_per_actor: float = typer.Option(0.0, "--gpus-per-actor", help="ray: GPUs per actor (0: CPU only)."),
    threads: int = typer.Option(1, "--threads", help="Torch threads of the local process or of each Ray actor (local workers run one)."),
    address: Optional[str] = typer.Option(None, "--address", help="ray: the cluster to join (auto, HOST:PORT or "
                                                                  "ray://HOST:10001); default: a local Ray."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an output folder of another run (never the "
                                                              "pipeline or an input: SB-E503)."),
) -> None:
    """Link a whole corpus: one row per entity (doc id, offsets, label, kb_id, kb_ents), resumable per shard."""
    check_parent(output)
    result = link_corpus(inputs, pipeline, output, input_format=input_format, id_field=id_field,
                         text_field=text_field, output_format=output_format, backend=backend, n_process=n_process,
                         batch_size=batch_size, actors=actors, gpus_per_actor=gpus_per_actor, threads=threads,
                         address=address, overwrite=overwrite)
    typer.echo(f"Linked {result.docs:,} documents of {result.linked} shards ({result.skipped} done before) in "
               f"{result.seconds:.1f} s ({result.docs_per_second:.1f} docs/s); {result.rows:,} entity rows in "
               f"{result.shards} shards -> {output}")
