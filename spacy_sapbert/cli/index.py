"""CLI commands: build-index. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from ..base.defaults import DEFAULT_MODEL, MAX_LENGTH
from ..base.outputs import check_output, check_parent
from ..encoding.bulk import (BF16_CPU_BULK_BATCH_SIZE, BULK_BATCH_SIZE, BULK_PRECISIONS, BULK_RUNTIMES,
                             check_bulk_options)
from ._app import app
from ._index_options import (EF_CONSTRUCTION, EF_SEARCH, EXACT, HNSW_VECTORS_OPTION, KIND_HELP, LANGUAGES, LISTS,
                             RESCORE, SPARSE, SPARSE_NGRAMS, THREADS, index_settings)
from ._index_options import M as M_OPTION
from ._options import check_choice, check_device, check_pooling


@app.command("build-index")
def build_index_command(
    kb_dir: Path = typer.Argument(..., help="KB folder (written by `spacy-sapbert build-kb`)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m",
                              help="Encoder: a Hugging Face model folder or hub id."),
    output: Path = typer.Option(..., "--output", "-o", help="Index folder to write (atomically)."),
    pooling: str = typer.Option("auto", "--pooling", help="cls (SapBERT), mean, or auto: what the model folder declares (sapbert_encoder.json, sentence-transformers 1_Pooling), else cls."),
    max_length: int = typer.Option(MAX_LENGTH, "--max-length", help="Word pieces per name; longer names are truncated."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help=f"Names per encoder batch (default: "
                                             f"{BULK_BATCH_SIZE}; {BF16_CPU_BULK_BATCH_SIZE} for bf16 on a CPU)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    precision: str = typer.Option("auto", "--precision", help="auto (fp32 on CPU, half on GPU), fp32, fp16, bf16 "
                                  "(torch), or int8 (ONNX Runtime on the CPU: faster, vectors a few hundredths of "
                                  "cosine from fp32; opt-in)."),
    runtime: str = typer.Option("auto", "--runtime", help="What encodes the names: torch, onnx (the model exported "
                                "to ONNX in the work folder, run by ONNX Runtime on the CPU: the same vectors "
                                "within 1e-6) or auto (onnx on a CPU in fp32 from 20,000 names, else torch; torch with --ray, where "
                                "onnx needs the work folder on storage every node reads)."),
    compile: bool = typer.Option(False, "--compile", help="Run the PyTorch encoder through torch.compile: ~20 s "
                                 "once (a C++ compiler on a CPU), then faster batches; with --precision bf16 on a CPU "
                                 "with AMX the fastest build (docs/scale.md)."),
    exact: Optional[bool] = EXACT,
    kind: str = typer.Option("auto", "--kind", help=KIND_HELP),
    rescore: Optional[int] = RESCORE,
    lists: Optional[int] = LISTS,
    M: Optional[int] = M_OPTION,
    ef_construction: Optional[int] = EF_CONSTRUCTION,
    hnsw_vectors: str = HNSW_VECTORS_OPTION,
    ef_search: Optional[int] = EF_SEARCH,
    work_dir: Optional[Path] = typer.Option(None, "--work-dir",
                                            help="Folder for encoded chunks; a rerun resumes from them (default: beside the output)."),
    languages: Optional[str] = LANGUAGES,
    threads: int = THREADS,
    ray: bool = typer.Option(False, "--ray", help="Encode the names on Ray actors (the [ray] extra), then build here."),
    actors: int = typer.Option(2, "--actors", min=1, help="--ray: encoder actors."),
    gpus_per_actor: float = typer.Option(0.0, "--gpus-per-actor", min=0.0, help="--ray: GPUs per actor (0: CPU)."),
    address: Optional[str] = typer.Option(None, "--address", help="--ray: the Ray cluster to join (auto, HOST:PORT or "
                                                                    "ray://HOST:10001); default: a local Ray."),
    sparse: bool = SPARSE,
    sparse_ngrams: str = SPARSE_NGRAMS,
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Encode every KB name and build the nearest-name index the linker searches."""
    from ..commands.pipeline import build_index_dir  # lazy: tests patch spacy_sapbert.commands.pipeline.build_index_dir
    check_pooling("--pooling", pooling)
    settings = index_settings(kind_option="--kind", kind=kind, exact=exact, M=M, ef_construction=ef_construction,
                              ef_search=ef_search, rescore=rescore, lists=lists, threads=threads,
                              languages=languages, sparse=sparse, sparse_ngrams=sparse_ngrams,
                              hnsw_vectors=hnsw_vectors)
    check_choice("--precision", precision, BULK_PRECISIONS)
    check_choice("--runtime", runtime, BULK_RUNTIMES)
    check_device("--device", device)
    check_bulk_options(runtime, precision, device, compile=compile)
    check_output(output, overwrite=overwrite, inputs=[("the KB folder", kb_dir), ("the model", model)])
    if work_dir is not None:
        check_parent(work_dir / "chunk")
    start = time.perf_counter()
    index = build_index_dir(kb_dir, model, output, settings, pooling=pooling, max_length=max_length,
                            device=device, precision=precision, batch_size=batch_size, work_dir=work_dir,
                            overwrite=overwrite, ray=ray, actors=actors, gpus_per_actor=gpus_per_actor,
                            address=address, runtime=runtime, compile=compile)
    meta = index.meta
    if index.sparse is not None:
        typer.echo(f"Sparse part: {index.sparse.n_features:,} char n-grams {index.sparse.meta['ngram_range']}, "
                   f"{index.sparse.nbytes / 2**20:,.1f} MiB")
    typer.echo(f"Indexed {meta['n_names']:,} names of {meta['n_concepts']:,} concepts ({meta['kind']}, "
               f"dim {meta['dim']}) in {time.perf_counter() - start:.1f} s -> {output}")

