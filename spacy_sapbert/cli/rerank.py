"""CLI command: train-reranker. Thin: parse arguments, call :func:`~spacy_sapbert.rerank.train_reranker`."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..base.defaults import MAX_LENGTH
from ..base.outputs import check_parent
from ..encoding.torch_encoder import Encoder
from ..index import ConceptIndex
from ..kb import KnowledgeBase
from ..mentions.datasets import read_dataset
from ..rerank import RerankerSettings, train_reranker
from ._app import app


@app.command("train-reranker")
def train_reranker_command(
    documents: List[Path] = typer.Argument(..., help="Annotated training documents (PubTator, or any format "
                                                     "`evaluate` reads). Never the test set."),
    kb_dir: Path = typer.Option(..., "--kb", help="KB folder the ids refer to (the linker's KB)."),
    index_dir: Path = typer.Option(..., "--index", help="The linker's index folder (`build-index`): its top "
                                                        "candidates are the hard negatives."),
    model: str = typer.Option(..., "--model", "-m", help="The linker's name encoder (the folder the index was "
                                                         "built with)."),
    output: Path = typer.Option(..., "--output", "-o", help="Run folder: examples, checkpoints, model/ (the "
                                                            "re-ranker the linker loads)."),
    pooling: str = typer.Option("auto", "--pooling", help="The name encoder's pooling: cls, mean or auto."),
    max_length: int = typer.Option(MAX_LENGTH, "--max-length", help="The name encoder's max_length."),
    base: Optional[str] = typer.Option(None, "--base", help="BERT-like folder the re-ranker starts from "
                                                            "(default: the name encoder, --model)."),
    k: int = typer.Option(16, "--k", help="Candidates per training group (the gold one + k-1 hard negatives); "
                                          "use the linker's reranker_k."),
    pseudo_mentions: int = typer.Option(0, "--pseudo-mentions", help="KB synonyms used as extra training "
                                                                     "mentions (0: none)."),
    mention_like: int = typer.Option(0, "--mention-like", help="Mention-like variants (word order, number, a "
                                                              "dropped generic head, punctuation, a typo) of each "
                                                              "mention and pseudo-mention, as extra training "
                                                              "mentions: at most this many each (0: none)."),
    epochs: int = typer.Option(1, "--epochs", help="Passes over the groups."),
    batch_mentions: int = typer.Option(8, "--batch-mentions", help="Groups per step (k pairs each)."),
    lr: float = typer.Option(3e-5, "--lr", help="Peak learning rate (AdamW, linear warm-up and decay)."),
    pair_length: int = typer.Option(48, "--pair-length", help="Word pieces per (mention, name) pair."),
    layers: int = typer.Option(0, "--layers", help="Keep only the base's first N transformer layers (0: all): a "
                                                   "re-ranker that links faster, in about N / all of the time."),
    teacher: Optional[Path] = typer.Option(None, "--teacher", help="A trained re-ranker (its model/ folder, for the "
                                                                   "same KB and name encoder) to distil from: "
                                                                   "typically a deeper one, with --layers here."),
    distill: Optional[float] = typer.Option(None, "--distill", help="With --teacher: the teacher's share of the loss "
                                                                    "(KL to its softmax over each group; the rest is "
                                                                    "the gold name's cross-entropy). Default 0.5."),
    seed: int = typer.Option(0, "--seed", help="Seed of the groups' order, the pseudo-mentions and dropout."),
    max_steps: int = typer.Option(0, "--max-steps", help="Stop after this many steps (0: the epochs decide)."),
    checkpoint_every: int = typer.Option(200, "--checkpoint-every", help="Steps between checkpoints (--resume)."),
    types: List[str] = typer.Option([], "--type", help="Keep only mentions of this type (repeatable)."),
    resume: bool = typer.Option(False, "--resume", help="Continue OUTPUT from its last checkpoint."),
    onnx: bool = typer.Option(True, "--onnx/--no-onnx", help="Also write the int8 ONNX graph the linker runs."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
) -> None:
    """Train a cross-encoder that re-orders the linker's best candidates (mention and name read together)."""
    settings = RerankerSettings(k=k, pseudo_mentions=pseudo_mentions, mention_like=mention_like, epochs=epochs,
                                batch_mentions=batch_mentions, lr=lr, max_length=pair_length, layers=layers, seed=seed,
                                max_steps=max_steps, checkpoint_every=checkpoint_every,
                                distill=(0.5 if teacher is not None else 0.0) if distill is None else distill).check()
    check_parent(output / "model")
    kb = KnowledgeBase.from_disk(kb_dir)
    index = ConceptIndex.from_disk(index_dir, kb)
    encoder = Encoder.load(model, pooling=pooling, max_length=max_length, device=device)
    docs = [d for path in documents for d in read_dataset(path, types=types or None)]
    summary = train_reranker(docs, kb, index, encoder, output, base=base or model, settings=settings, resume=resume,
                             device=device, onnx=onnx, teacher=teacher)
    recall = summary["candidate_recall"]
    steps = summary["steps"]
    variants = f", {summary['variant_groups']:,} of mention-like variants" if summary["variant_groups"] else ""
    distilled = f", distilled from {teacher} (weight {settings.distill:g})" if teacher is not None else ""
    typer.echo(f"Trained {steps} step{'' if steps == 1 else 's'} on {summary['groups']:,} groups ({summary['pseudo_groups']:,} of "
               f"KB synonyms{variants}){distilled} in {summary['seconds'] / 60:.1f} min; final loss "
               f"{summary['final_loss']:.4f}; gold in "
               f"the top {k}: {'–' if recall is None else f'{100 * recall:.1f} %'} of the annotated mentions")
    typer.echo(f"Re-ranker: {summary['model']}")
