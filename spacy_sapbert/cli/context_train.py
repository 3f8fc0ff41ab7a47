"""CLI command: train-context. Thin: parse arguments, call :func:`~spacy_sapbert.context.train.train_context`
(and :func:`~spacy_sapbert.context.train.tune_trained` with ``--dev``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from ..base.defaults import MAX_LENGTH
from ..base.outputs import check_parent
from ..context import read_documents
from ..context.train_pairs import SOURCES
from ..kb import KnowledgeBase
from ._app import app
from ._options import check_choice, check_device, check_pooling

_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command("train-context", context_settings=_EXTRA,
             help="Train a context encoder (mention in context <-> concept names) from annotated and/or raw "
                  "documents, starting from the name encoder. Extra arguments override training settings in "
                  "spaCy's style, e.g. --training.max_minutes 20 --loss.name infonce.")
def train_context_command(
    ctx: typer.Context,
    documents: List[Path] = typer.Argument(..., help="Training documents: PubTator, JSONL mentions with context, "
                                                     "or spaCy DocBins. Never the test set."),
    kb_dir: Path = typer.Option(..., "--kb", help="KB folder the ids refer to (the linker's KB)."),
    model: str = typer.Option(..., "--model", "-m", help="Model folder to start from (the name encoder)."),
    output: Path = typer.Option(..., "--output", "-o", help="Run folder: base/, run/ (pairs, checkpoints, model/)."),
    source: str = typer.Option("both", "--source", help="supervised (annotated mentions), self (unambiguous "
                                                        "dictionary names in the text) or both."),
    mask_probability: float = typer.Option(0.0, "--mask-probability", help="Share of mentions whose words are "
                                                                           "masked (0 keeps them)."),
    names_per_mention: int = typer.Option(1, "--names-per-mention", help="Concept names paired with each mention."),
    contexts_per_mention: int = typer.Option(0, "--contexts-per-mention", help="Other mentions of the same concept "
                                             "paired with each mention (context-to-context positives; 0: none)."),
    min_chars: int = typer.Option(3, "--min-chars", help="Shortest dictionary name matched (self-supervision)."),
    max_length: int = typer.Option(64, "--max-length", help="Word pieces per mention in context."),
    pooling: str = typer.Option("mean", "--pooling", help="mean or cls."),
    name_max_length: int = typer.Option(MAX_LENGTH, "--name-max-length", help="Word pieces per concept name."),
    types: List[str] = typer.Option([], "--type", help="Keep only mentions of this type (repeatable)."),
    config_path: Optional[Path] = typer.Option(None, "--config", "-c", help="Training config file (default: "
                                                                           "built-in context defaults)."),
    dev: Optional[Path] = typer.Option(None, "--dev", help="Dev set: build prototypes of DOCUMENTS with the "
                                                            "trained encoder and tune the linker weights on it."),
    name_pooling: str = typer.Option("mean", "--name-pooling", help="The linker's name encoder pooling (--dev)."),
    resume: bool = typer.Option(False, "--resume", help="Continue OUTPUT/run from its last checkpoint."),
    device: Optional[str] = typer.Option(None, "--device", help="auto, cpu, cuda, cuda:N."),
) -> None:
    from spacy.cli._util import parse_config_overrides

    from ..context.train import context_config, train_context, tune_trained  # lazy: torch
    check_pooling("--pooling", pooling)
    check_pooling("--name-pooling", name_pooling)
    check_choice("--source", source, SOURCES)
    check_device("--device", device)
    check_parent(output / "run")
    # the variadic DOCUMENTS also collects the unknown --section.key value overrides: split them off
    words = [str(p) for p in documents] + list(ctx.args)
    cut = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    documents = [Path(w) for w in words[:cut]]
    overrides: Dict[str, Any] = {"model.max_length": max_length, "model.pooling": pooling,
                                 **parse_config_overrides(words[cut:])}
    if device is not None:
        overrides["training.device"] = device
    config = context_config(config_path, overrides)
    kb = KnowledgeBase.from_disk(kb_dir)
    docs = [d for path in documents for d in read_documents(path, types=types or None)]
    what = ", ".join(str(p) for p in documents)
    result = train_context(docs, kb, model, output, config=config, source=source, names_per_mention=names_per_mention,
                           contexts_per_mention=contexts_per_mention, mask_probability=mask_probability,
                           min_chars=min_chars, name_max_length=name_max_length, resume=resume, what=what)
    typer.echo(f"Trained {result.steps} steps ({result.pairs_seen} pairs, {result.train_seconds / 60:.1f} min); "
               f"final loss {result.final_loss if result.final_loss is None else round(result.final_loss, 4)}")
    typer.echo(f"Context encoder: {result.model_path}")
    if dev is not None:
        summary = tune_trained(docs, kb_dir, result.model_path, model, output, read_documents(dev, types=types or None),
                               name_pooling=name_pooling, name_max_length=name_max_length,
                               device=device or "auto")
        typer.echo(f"{summary['dev_mentions']} dev mentions: name-only strict acc@1 "
                   f"{100 * summary['name_only_acc@1']:.1f}, with context {100 * summary['best_acc@1']:.1f} ("
                   + ", ".join(f"{k} = {v}" for k, v in summary["best"].items())
                   + f"); prototypes: {summary['prototypes']}")
