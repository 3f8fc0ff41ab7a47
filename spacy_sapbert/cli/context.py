"""CLI commands: build-prototypes, tune-context. Thin: parse arguments, call library functions."""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

import typer

from ..base.defaults import MAX_LENGTH
from ..base.util import atomic_write
from ..context import ContextEncoder, build_prototypes, read_documents
from ..context.build import DEFINITION_MODES, DOC_FORMATS
from ..context.tune import tune_on_documents
from ..encoding.torch_encoder import Encoder
from ..errors import ConfigError, Errors
from ..kb import KnowledgeBase
from ._app import app
from ._options import check_choice, check_device, check_pooling


@app.command("build-prototypes")
def build_prototypes_command(
    documents: List[Path] = typer.Argument(..., help="Annotated documents: PubTator files, spaCy DocBins (.spacy, "
                                                     "ents with kb_id_) or JSONL mentions with context/start/end/ids."),
    kb_dir: Path = typer.Option(..., "--kb", help="KB folder the ids refer to (the linker's KB)."),
    model: str = typer.Option(..., "--model", "-m", help="Context encoder: a model folder (usually the name encoder's)."),
    output: Path = typer.Option(..., "--output", "-o", help="Prototype store folder to write (atomically)."),
    doc_format: str = typer.Option("auto", "--format", help="auto, pubtator, jsonl or docbin."),
    types: List[str] = typer.Option([], "--type", help="Keep only mentions of this type (repeatable)."),
    pooling: str = typer.Option("mean", "--pooling", help="mean or cls."),
    max_length: int = typer.Option(64, "--max-length", help="Word pieces per mention in context."),
    definitions: str = typer.Option("none", "--definitions",
                                    help="Definition prototypes: none, missing (concepts without examples) or all."),
    batch_size: int = typer.Option(64, "--batch-size", help="Mentions per encoder batch."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    name_model: str = typer.Option("", "--name-model",
                                   help="The linker's name encoder, to store the example mentions' names (the "
                                        "linker's example_names); default: the --model folder; 'none': no names."),
    name_pooling: str = typer.Option("auto", "--name-pooling", help="Name encoder pooling (as the linker's)."),
    name_max_length: int = typer.Option(MAX_LENGTH, "--name-max-length", help="Name encoder max_length (as the linker's)."),
    quantize: bool = typer.Option(False, "--quantize",
                                  help="Keep the context encoder as an int8 ONNX Runtime model (~2x faster on a "
                                       "CPU; the prototypes are encoded with it, and so are the linker's mentions)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Encode annotated mentions in their context into a prototype store for the linker."""
    check_pooling("--pooling", pooling)
    if name_model.lower() != "none":
        check_pooling("--name-pooling", name_pooling)
    check_choice("--format", doc_format, DOC_FORMATS)
    check_choice("--definitions", definitions, DEFINITION_MODES)
    check_device("--device", device)
    if output.exists() and not overwrite:
        raise ConfigError(Errors.E003.format(path=output))
    start = time.perf_counter()
    kb = KnowledgeBase.from_disk(kb_dir)
    docs = [d for path in documents for d in read_documents(path, format=doc_format, types=types or None)]
    encoder = ContextEncoder.load(model, pooling=pooling, max_length=max_length, device=device)
    names = None if name_model.lower() == "none" else Encoder.load(
        name_model or model, pooling=name_pooling, max_length=name_max_length, device=device)
    with tempfile.TemporaryDirectory(prefix="sapbert-context-") as work:
        if quantize:
            encoder = encoder.quantize(Path(work) / "encoder")
        store = build_prototypes(docs, kb, encoder, definitions=definitions, batch_size=batch_size,
                                 what=", ".join(str(p) for p in documents), name_encoder=names)
        store.to_disk(output, overwrite=overwrite)
    meta = store.meta
    typer.echo(f"{meta['n_prototypes']:,} prototypes ({meta['n_examples']:,} mentions, {meta['n_definitions']:,} "
               f"definitions) of {meta['n_concepts']:,} concepts"
               + (f", example names by {name_model or model}" if names is not None else ", no example names")
               + (", int8 context encoder" if quantize else "")
               + f" in {time.perf_counter() - start:.1f} s -> {output}")


@app.command("tune-context")
def tune_context_command(
    dev: Path = typer.Argument(..., help="Dev set with gold ids and text (PubTator, JSONL with context, DocBin)."),
    kb_dir: Path = typer.Option(..., "--kb", help="KB folder (the one the prototypes were built for)."),
    model: str = typer.Option(..., "--model", "-m", help="Name encoder: a model folder."),
    prototypes: Path = typer.Option(..., "--prototypes", "-p", help="Prototype store (from build-prototypes)."),
    index_dir: Optional[Path] = typer.Option(None, "--index", help="Name index folder (from build-index); "
                                                                 "default: built here with exact search."),
    pooling: str = typer.Option("auto", "--pooling", help="Name encoder pooling (as the linker's): cls, mean or auto (the model folder's, else cls)."),
    max_length: int = typer.Option(MAX_LENGTH, "--max-length", help="Name encoder max_length (as the linker's)."),
    types: List[str] = typer.Option([], "--type", help="Keep only mentions of this type (repeatable)."),
    k: int = typer.Option(30, "--k", help="Name candidates re-ranked per mention (the linker's context_k)."),
    step: float = typer.Option(0.05, "--step", help="Grid step of the weights."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the grid and the best weights as JSON."),
    margin: str = typer.Option("0.0", "--margin", help="The linker's context_margin the weights are tuned at "
                                                       "(its default 0.0: ties re-ranked); 'none': every mention."),
    one_sense: bool = typer.Option(True, "--one-sense/--every-mention",
                                   help="The linker's one_sense_per_document (its default): a document's mentions "
                                        "written alike take the first one's context."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Name vectors cache shared with `evaluate` "
                                                                       "(its cache_dir): KB names encoded once."),
) -> None:
    """Pick context_weight / definition_weight / context_fallback / example_names by strict acc@1 on a dev set,
    at the linker's context_margin and one_sense_per_document."""
    check_pooling("--pooling", pooling)
    check_device("--device", device)
    try:
        margin_value = None if margin.strip().lower() in ("none", "null") else float(margin)
    except ValueError:
        raise ConfigError(Errors.E619.format(value=margin)) from None
    docs = read_documents(dev, types=types or None)
    best, table, n = tune_on_documents(docs, kb_dir, model, prototypes, pooling=pooling, max_length=max_length,
                                       k=k, step=step, device=device, index_dir=index_dir, margin=margin_value,
                                       one_sense_per_document=one_sense, encode_names=_cached_encoding(cache_dir))
    name_only = next(r["acc@1"] for r in table
                     if r["context_weight"] == 0 and r["definition_weight"] == 0 and not r["example_names"])
    best_acc = max(r["acc@1"] for r in table)
    typer.echo(f"{n} dev mentions: name-only strict acc@1 {100 * name_only:.1f}, best {100 * best_acc:.1f} with "
               + ", ".join(f"{key} = {value}" for key, value in best.to_dict().items()))
    if output is not None:
        with atomic_write(output) as fh:
            json.dump({"best": best.to_dict(), "best_acc@1": best_acc, "mentions": n, "grid": table}, fh, indent=2)


def _cached_encoding(cache_dir: Optional[Path]) -> Optional[Callable[[Any, Sequence[str]], Any]]:
    """Name encoding through the evaluation's vector cache in ``cache_dir`` (None: encode every time)."""
    if cache_dir is None:
        return None
    from ..evaluation.cache import VectorCache, encoder_key  # lazy: spacy

    def encode_names(encoder: Any, names: Sequence[str]) -> Any:
        return VectorCache(cache_dir, encoder_key(encoder), dim=encoder.dim).get(
            encoder, names, batch_size=256, show_progress=True)

    return encode_names

