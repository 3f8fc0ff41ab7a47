"""CLI commands: convert-ner, train-ner. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import typer

from ..base.outputs import check_output, check_parent
from ..errors import ConfigError, Errors
from ..ner.convert import MISALIGNED_CHOICES, convert_pubtator
from ..ner.train import ner_scores, train_ner
from ._app import app
from ._options import check_choice


def _parse_labels(values: Optional[List[str]]) -> Optional[Dict[str, str]]:
    if not values:
        return None
    mapping: Dict[str, str] = {}
    for value in values:
        src, sep, dst = value.partition("=")
        if not sep or not src.strip() or not dst.strip():
            raise ConfigError(Errors.E443.format(value=value))
        mapping[src.strip()] = dst.strip()
    return mapping


def _parse_overrides(values: Optional[List[str]]) -> Dict[str, object]:
    """``section.key=value`` pairs; values are parsed like spaCy's CLI overrides (JSON, else str)."""
    import srsly

    out: Dict[str, object] = {}
    for value in values or []:
        key, sep, raw = value.partition("=")
        if not sep or "." not in key:
            raise ConfigError(Errors.E002.format(what="config override", value=value, choices="section.key=value, e.g. training.max_steps=200"))
        try:
            out[key.strip()] = srsly.json_loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


@app.command("convert-ner")
def convert_ner_cli(
    inputs: List[Path] = typer.Argument(..., help="PubTator files (NCBI disease, BC5CDR, ...) to convert into one DocBin."),
    output: Path = typer.Option(..., "--output", "-o", help="The .spacy file to write (atomically)."),
    lang: str = typer.Option("en", "--lang", help="spaCy language whose tokenizer splits the text (must match the NER config's nlp.lang)."),
    label: Optional[List[str]] = typer.Option(None, "--label", "-l", help="Mention type to NER label, TYPE=LABEL (repeatable). Default: NCBI's disease types and BC5CDR's Disease → Disease, Chemical → Chemical."),
    misaligned: str = typer.Option("skip", "--misaligned", help="Mentions not on token boundaries: skip, expand or contract (always counted in a warning)."),
) -> None:
    """Convert PubTator training data into a spaCy DocBin with Disease/Chemical entities."""
    check_choice("--misaligned", misaligned, MISALIGNED_CHOICES)
    check_output(output, folder=False, inputs=[("the input", path) for path in inputs])
    stats = convert_pubtator(inputs, output, lang=lang, label_map=_parse_labels(label), misaligned=misaligned)
    labels = ", ".join(f"{k} {v}" for k, v in sorted(stats.labels.items()))
    typer.echo(
        f"Wrote {output}: {stats.docs} docs, {stats.entities} entities ({labels}) from {stats.mentions} mentions; "
        f"{stats.misaligned} misaligned ({stats.misaligned_kept} kept), {stats.overlapping} overlapping dropped."
    )


@app.command("train-ner")
def train_ner_cli(
    config: Path = typer.Argument(..., help="spaCy training config, e.g. configs/ner_tok2vec.cfg (CPU) or configs/ner_trf.cfg (GPU)."),
    output: Path = typer.Option(..., "--output", "-o", help="Output folder of `spacy train` (model-best/ and model-last/ inside)."),
    train: Path = typer.Option(..., "--train", help="Training corpus (.spacy from convert-ner)."),
    dev: Path = typer.Option(..., "--dev", help="Dev corpus (.spacy from convert-ner)."),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="GPU id, -1 for CPU."),
    metrics: Optional[Path] = typer.Option(None, "--metrics", help="Write the dev scores (overall and per label) of model-best as JSON here."),
    override: Optional[List[str]] = typer.Option(None, "--set", help="Config override section.key=value (repeatable), e.g. --set training.max_steps=200."),
) -> None:
    """Train the NER with spaCy's own `spacy train`, then report per-label F1 on the dev set."""
    check_parent(output / "model-best")
    if metrics is not None:
        check_output(metrics, folder=False)
    best = train_ner(config, output, train=train, dev=dev, use_gpu=gpu_id, overrides=_parse_overrides(override))
    scores = ner_scores(best, dev, metrics)
    typer.echo(f"Best model: {best}")
    typer.echo(f"NER on {dev}: P {scores['ents_p']:.3f} R {scores['ents_r']:.3f} F1 {scores['ents_f']:.3f}")
    for label_name, s in scores["ents_per_type"].items():
        typer.echo(f"  {label_name:<10} P {s['p']:.3f} R {s['r']:.3f} F1 {s['f']:.3f}")
