"""CLI commands: build-index. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from ..base.defaults import DEFAULT_MODEL, MAX_LENGTH
from ._app import app


@app.command("build-index")
def build_index_command(
    kb_dir: Path = typer.Argument(..., help="KB folder (written by `spacy-sapbert build-kb`)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m",
                              help="Encoder: a Hugging Face model folder or hub id."),
    output: Path = typer.Option(..., "--output", "-o", help="Index folder to write (atomically)."),
    pooling: str = typer.Option("auto", "--pooling", help="cls (SapBERT), mean, or auto: what the model folder declares (sapbert_encoder.json, sentence-transformers 1_Pooling), else cls."),
    max_length: int = typer.Option(MAX_LENGTH, "--max-length", help="Word pieces per name; longer names are truncated."),
    batch_size: int = typer.Option(256, "--batch-size", help="Names per encoder batch."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    precision: str = typer.Option("auto", "--precision", help="auto (fp32 on CPU, half on GPU), fp32, fp16, bf16 "
                                  "(torch), or int8 (ONNX Runtime on the CPU: faster, vectors a few hundredths of "
                                  "cosine from fp32; opt-in)."),
    runtime: str = typer.Option("auto", "--runtime", help="What encodes the names: torch, onnx (the model exported "
                                "to ONNX in the work folder, run by ONNX Runtime on the CPU: the same vectors "
                                "within 1e-6) or auto (onnx on a CPU in fp32 from 20,000 names, else torch; torch with --ray, where "
                                "onnx needs the work folder on storage every node reads)."),
    exact: Optional[bool] = typer.Option(None, "--exact/--hnsw",
                                         help="Exact matrix search or hnswlib (older form of --kind)."),
    kind: str = typer.Option("auto", "--kind",
                             help="auto (exact up to 20,000 names, hnsw below 500,000, ivf from there: compact "
                                  "where faiss is not installed), exact, hnsw, ivf (faiss fast-scan codes in RAM + "
                                  "float16 re-scoring, memory-mapped: for UMLS; the [faiss] extra) or compact "
                                  "(usearch int8 graph + float16 re-scoring, all memory-mapped: the least RAM, "
                                  "39-55x slower to build)."),
    rescore: Optional[int] = typer.Option(None, "--rescore",
                                          help="compact, ivf: candidates re-scored exactly per query (default 64; ivf 512)."),
    lists: Optional[int] = typer.Option(None, "--lists",
                                        help="ivf: cells (default: the power of two nearest 4 x sqrt(names))."),
    connectivity: Optional[int] = typer.Option(None, "--connectivity", help="compact: graph degree (default 48)."),
    candidate_dims: Optional[int] = typer.Option(None, "--candidate-dims",
                                                 help="compact: PCA dimensions of the candidate graph (default: half "
                                                      "the encoder's from 256 up; 0: all). Re-scoring uses all."),
    M: Optional[int] = typer.Option(None, "--M", help="hnsw graph degree (default 32)."),
    ef_construction: Optional[int] = typer.Option(None, "--ef-construction", help="hnsw build depth (default 200)."),
    ef_search: Optional[int] = typer.Option(None, "--ef-search", help="Search depth (default: hnsw 200; compact 512, 768 from 500,000 names, 1536 from 2,000,000; ivf: cells scanned, half of them, a quarter from 2,000,000 names)."),
    work_dir: Optional[Path] = typer.Option(None, "--work-dir",
                                            help="Folder for encoded chunks; a rerun resumes from them (default: beside the output)."),
    languages: Optional[str] = typer.Option(None, "--languages",
                                            help="Search only the names in these languages by default, comma-separated ISO 639-1 codes "
                                                 "(e.g. es,en); every name is still indexed, and the linker's `languages` setting overrides it."),
    threads: int = typer.Option(1, "--threads", help="Graph build threads; 1 gives the same graph every run."),
    ray: bool = typer.Option(False, "--ray", help="Encode the names on Ray actors (the [ray] extra), then build here."),
    actors: int = typer.Option(2, "--actors", min=1, help="--ray: encoder actors."),
    gpus_per_actor: float = typer.Option(0.0, "--gpus-per-actor", min=0.0, help="--ray: GPUs per actor (0: CPU)."),
    address: Optional[str] = typer.Option(None, "--address", help="--ray: the Ray cluster to join (auto, HOST:PORT or "
                                                                    "ray://HOST:10001); default: a local Ray."),
    sparse: bool = typer.Option(False, "--sparse", help="Also fit the char n-gram tf-idf of the names (saved in the "
                                                         "same folder) for the linker's hybrid scores (sparse_weight)."),
    sparse_ngrams: str = typer.Option("2,3", "--sparse-ngrams", help="--sparse: the n-gram range LO,HI (char_wb)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Encode every KB name and build the nearest-name index the linker searches."""
    from ..encoding.bulk import BULK_PRECISIONS, BULK_RUNTIMES, check_bulk_options
    from ..index.concept_index import KINDS
    from ..commands.pipeline import build_index_dir
    from ..base.outputs import check_output, check_parent
    from ._options import check_choice, check_device, check_pooling

    check_pooling("--pooling", pooling)
    check_choice("--kind", kind, KINDS)
    check_choice("--precision", precision, BULK_PRECISIONS)
    check_choice("--runtime", runtime, BULK_RUNTIMES)
    check_device("--device", device)
    check_bulk_options(runtime, precision, device)
    check_output(output, overwrite=overwrite, inputs=[("the KB folder", kb_dir), ("the model", model)])
    if work_dir is not None:
        check_parent(work_dir / "chunk")
    start = time.perf_counter()
    index = build_index_dir(kb_dir, model, output, pooling=pooling, max_length=max_length, device=device,
                            precision=precision, batch_size=batch_size, exact=exact, M=M,
                            ef_construction=ef_construction, ef_search=ef_search, work_dir=work_dir,
                            num_threads=threads, overwrite=overwrite, kind=kind, rescore=rescore,
                            connectivity=connectivity, candidate_dims=candidate_dims, lists=lists, ray=ray,
                            actors=actors,
                            gpus_per_actor=gpus_per_actor, address=address,
                            languages=[x.strip() for x in languages.split(",") if x.strip()] if languages else None,
                            sparse=sparse, sparse_ngrams=_ngrams(sparse_ngrams), runtime=runtime)
    meta = index.meta
    if index.sparse is not None:
        typer.echo(f"Sparse part: {index.sparse.n_features:,} char n-grams {index.sparse.meta['ngram_range']}, "
                   f"{index.sparse.nbytes / 2**20:,.1f} MiB")
    typer.echo(f"Indexed {meta['n_names']:,} names of {meta['n_concepts']:,} concepts ({meta['kind']}, "
               f"dim {meta['dim']}) in {time.perf_counter() - start:.1f} s -> {output}")


def _ngrams(value: str) -> tuple:
    """``"2,3"`` → ``(2, 3)``; anything else is E780 (check_settings)."""
    from ..errors import ConfigError, Errors
    from ..index.sparse import MAX_NGRAM, check_settings

    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ConfigError(Errors.E780.format(what="--sparse-ngrams", value=value,
                                             allowed=f"LO,HI with 1 <= LO <= HI <= {MAX_NGRAM}, e.g. 2,3"))
    return check_settings("char_wb", (int(parts[0]), int(parts[1])))[1]
