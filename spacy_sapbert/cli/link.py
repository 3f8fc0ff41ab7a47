"""CLI commands: link, create-pipeline. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from ..base.defaults import DEFAULT_MODEL, MAX_LENGTH
from ..base.outputs import check_output
from ..base.util import atomic_write
from ..commands.pipeline import create_pipeline, link_records, read_texts, write_jsonl
from ..encoding.int8_recipes import NAME_RECIPE
from ..encoding.onnx_encoder import RUNTIMES
from ..errors import ConfigError, Errors
from ..index.meta import MAX_K
from ..mentions.abbreviation_table import AbbreviationTable
from ._app import app
from ._index_options import (EF_CONSTRUCTION, EF_SEARCH, EXACT, HNSW_VECTORS_OPTION, KIND_HELP, LANGUAGES, LISTS,
                             RESCORE, SPARSE, SPARSE_NGRAMS, THREADS, index_settings)
from ._index_options import M as M_OPTION
from ._options import check_choice, check_device, check_pooling


def _overrides(k: Optional[int], threshold: Optional[float], max_entities: Optional[int]) -> Dict[str, Any]:
    """Linker options given on the command line, checked here: spaCy's config cannot hold nan or inf."""
    if threshold is not None and not (math.isfinite(threshold) and -1.0 <= threshold <= 1.0):
        raise ConfigError(Errors.E507.format(option="--threshold", what="a number between -1 and 1", value=threshold))
    for option, value in (("--k", k), ("--max-entities", max_entities)):
        if value is not None and not 1 <= value <= MAX_K:  # --k 10**20: an OverflowError deep down otherwise
            raise ConfigError(Errors.E507.format(option=option, what=f"between 1 and {MAX_K:,}", value=value))
    values = {"k": k, "threshold": threshold, "max_entities_per_mention": max_entities}
    return {key: value for key, value in values.items() if value is not None}


@app.command("link")
def link_command(
    pipeline_or_index: Path = typer.Argument(..., help="A spaCy pipeline folder with a sapbert_linker, or an index "
                                                        "folder from build-index (then each text is one mention)."),
    inputs: Optional[List[Path]] = typer.Argument(None, help="Text files (UTF-8), one document each; default: stdin, one document a line."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL file to write; default: stdout."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Index folder only: encoder (default: the one it was built with)."),
    kb: Optional[Path] = typer.Option(None, "--kb", help="Index folder only: KB folder (default: the one it was built for)."),
    device: Optional[str] = typer.Option(None, "--device", help="auto, cpu, cuda or cuda:N (default: auto for an index "
                                                                "folder, the pipeline's own setting for a pipeline)."),
    k: Optional[int] = typer.Option(None, "--k", help="Candidates retrieved per mention."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="Minimum score of a kb_ents entry."),
    max_entities: Optional[int] = typer.Option(None, "--max-entities", help="At most this many kb_ents per mention."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Documents per batch."),
    names: bool = typer.Option(True, "--names/--no-names",
                               help="Write each kb_ents entry as [concept_id, score, canonical name] (the name from "
                                    "the linker's KB); --no-names: [concept_id, score], as scispaCy's kb_ents."),
    abbreviations: Optional[Path] = typer.Option(None, "--abbreviations", help="An abbreviation table (from "
                                                 "mine-abbreviations, or a TSV of short form<TAB>long form lines): a "
                                                 "mention that is one of its short forms, undefined in its document, "
                                                 "is linked as the long form; replaces the pipeline's own table."),
) -> None:
    """Link texts and write one JSON line per document: its entities with kb_id and kb_ents (candidates
    best first, each with its canonical name)."""
    from ..commands.pipeline import load_linking_nlp  # lazy: tests patch spacy_sapbert.commands.pipeline.load_linking_nlp
    check_device("--device", device)
    overrides = _overrides(k, threshold, max_entities)
    if output is not None:
        check_output(output, folder=False, inputs=[("the input", path) for path in inputs or []])
    if (pipeline_or_index / "config.cfg").exists():  # a pipeline: its linker brings encoder and KB
        ignored = [option for option, value in (("--model", model), ("--kb", kb)) if value is not None]
        if ignored:
            raise ConfigError(Errors.E508.format(options=", ".join(ignored), path=pipeline_or_index))
        if device is not None:
            overrides["device"] = device
    texts = read_texts(inputs, sys.stdin.buffer) if inputs else None  # files first: a bad one fails fast
    table = AbbreviationTable.from_disk(abbreviations) if abbreviations is not None else None
    nlp, whole_text = load_linking_nlp(pipeline_or_index, model=model, kb_path=kb, device=device or "auto",
                                       overrides=overrides)
    if table is not None:
        for _, pipe in nlp.pipeline:
            if getattr(pipe, "set_abbreviations", None) is not None:
                pipe.set_abbreviations(table)
    if texts is None:  # stdin after loading, so that a wrong pipeline path is reported without waiting for EOF
        texts = read_texts([], sys.stdin.buffer)
    records = link_records(nlp, texts, whole_text=whole_text, batch_size=batch_size, names=names)
    if output is None:
        n = write_jsonl(records, sys.stdout)
    else:
        with atomic_write(output) as fh:
            n = write_jsonl(records, fh)
        typer.echo(f"Linked {n} documents -> {output}", err=True)


@app.command("create-pipeline")
def create_pipeline_command(
    output: Path = typer.Argument(..., help="Pipeline folder to write (atomically)."),
    kb: Path = typer.Option(..., "--kb", help="KB folder (from build-kb)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m",
                              help="Encoder: a Hugging Face model folder or hub id (copied into the pipeline)."),
    base: Optional[Path] = typer.Option(None, "--base", help="A spaCy pipeline (with NER) to add the linker to; default: blank."),
    lang: str = typer.Option("en", "--lang", help="Language of the blank pipeline."),
    index: Optional[Path] = typer.Option(None, "--index", help="Index folder to reuse (built there when absent)."),
    pooling: str = typer.Option("auto", "--pooling", help="cls (SapBERT), mean, or auto: what the model folder declares (sapbert_encoder.json, sentence-transformers 1_Pooling), else cls."),
    max_length: int = typer.Option(MAX_LENGTH, "--max-length", help="Word pieces per mention."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    runtime: str = typer.Option("auto", "--runtime",
                                help="What runs the encoder once the pipeline is loaded: auto (ONNX Runtime on a CPU "
                                     "when installed, else PyTorch), onnx or torch. torch writes no ONNX export."),
    k: Optional[int] = typer.Option(None, "--k", help="Candidates retrieved per mention."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="Minimum score of a kb_ents entry."),
    max_entities: Optional[int] = typer.Option(None, "--max-entities", help="At most this many kb_ents per mention."),
    spans_key: Optional[str] = typer.Option(None, "--spans-key", help="Link doc.spans[KEY] instead of doc.ents."),
    labels: Optional[List[str]] = typer.Option(None, "--label", help="Link only spans with this label (repeatable); default: all."),
    exact: Optional[bool] = EXACT,
    index_kind: str = typer.Option("auto", "--index-kind", help="Index back-end when it is built: " + KIND_HELP),
    rescore: Optional[int] = RESCORE,
    lists: Optional[int] = LISTS,
    M: Optional[int] = M_OPTION,
    ef_construction: Optional[int] = EF_CONSTRUCTION,
    hnsw_vectors: str = HNSW_VECTORS_OPTION,
    ef_search: Optional[int] = EF_SEARCH,
    languages: Optional[str] = LANGUAGES,
    threads: int = THREADS,
    sparse: bool = SPARSE,
    sparse_ngrams: str = SPARSE_NGRAMS,
    resources_dir: Optional[Path] = typer.Option(
        None, "--resources-dir",
        help="Keep the KB and index outside the pipeline: write them to this folder and save only a pointer "
             "(found at load through SPACY_SAPBERT_RESOURCES or resources_path). For UMLS-sized indexes."),
    abbreviations: Optional[Path] = typer.Option(None, "--abbreviations", help="An abbreviation table (from "
                                                 "mine-abbreviations, or a TSV of short form<TAB>long form lines) "
                                                 "saved with the linker: a mention that is one of its short forms, "
                                                 "undefined in its document, is linked as the long form."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Write a ready pipeline folder: a blank or given NER pipeline + an initialised sapbert_linker."""
    check_pooling("--pooling", pooling)
    settings = index_settings(kind_option="--index-kind", kind=index_kind, exact=exact, M=M,
                              ef_construction=ef_construction, ef_search=ef_search, rescore=rescore, lists=lists,
                              threads=threads, languages=languages, sparse=sparse, sparse_ngrams=sparse_ngrams,
                              hnsw_vectors=hnsw_vectors)
    check_choice("--runtime", runtime, RUNTIMES)
    check_device("--device", device)
    check_output(output, overwrite=overwrite,
                 inputs=[("the KB folder", kb), ("the model", model), ("the base pipeline", base), ("the index", index),
                         ("the abbreviation table", abbreviations)])
    config = dict(_overrides(k, threshold, max_entities), pooling=pooling, max_length=max_length, device=device,
                  runtime=runtime, spans_key=spans_key, labels=list(labels or []))
    nlp = create_pipeline(output, kb_path=kb, model=model, base=base, lang=lang, index_path=index, config=config,
                          overwrite=overwrite, resources_dir=resources_dir, index_settings=settings,
                          abbreviations_path=abbreviations)
    linker = nlp.get_pipe("sapbert_linker")
    typer.echo(f"Pipeline {nlp.pipe_names} with {len(linker.kb):,} concepts, {len(linker.index):,} names -> {output}")


@app.command("export-onnx")
def export_onnx_command(
    path: Path = typer.Argument(..., help="An encoder folder (with sapbert_encoder.json) or a pipeline folder."),
    quantize: bool = typer.Option(False, "--quantize",
                                  help="Also write its int8 copy (model.int8.onnx: faster on a CPU, slightly less "
                                       "accurate; docs/linker.md) and, in a pipeline folder, set each linker's "
                                       "precision to int8 so that the pipeline runs it (the index is kept)."),
    recipe: str = typer.Option(NAME_RECIPE, "--recipe",
                               help="How --quantize makes the int8 copy: dynamic-pc-l0 (per-channel weights, the "
                                    "first transformer layer float32: within half a point of float32 on NCBI and "
                                    "BC5CDR) or dynamic (per-tensor, every node: the recipe before 2026-11-28)."),
) -> None:
    """Write (or refresh) the ONNX export that runtime auto/onnx runs, next to the encoder's weights."""
    from ..commands.pipeline import export_onnx_dir  # lazy: tests patch spacy_sapbert.commands.pipeline.export_onnx_dir

    for folder in export_onnx_dir(path, quantize=quantize, recipe=recipe):
        typer.echo(f"ONNX export{' and its int8 copy' if quantize else ''} written to {folder}")
    if quantize and not (path / "sapbert_encoder.json").is_file():
        typer.echo(f"precision = \"int8\" set for the linker(s) in {path / 'config.cfg'}")
