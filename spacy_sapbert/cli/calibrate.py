"""CLI command: calibrate. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._app import app


@app.command("calibrate")
def calibrate_command(
    dev: Path = typer.Argument(..., help="Dev set with gold concept ids (PubTator, BioSyn folder, .tsv, .jsonl, brat, "
                                         "XL-BEL, CodiEsp-X; as for evaluate)."),
    pipeline: Path = typer.Option(..., "--pipeline", "-p", help="spaCy pipeline folder with a sapbert_linker (its KB, "
                                                                "index and encoder are the ones calibrated)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Folder for calibration.json and "
                                          "calibration_report.json; default: into the pipeline's linker folder "
                                          "(calibration.json only), where spacy.load finds it."),
    data_format: str = typer.Option("auto", "--format", help="Dataset format (as for evaluate)."),
    types: List[str] = typer.Option([], "--type", help="Keep only mentions of this type (repeatable)."),
    holdout: float = typer.Option(0.3, "--holdout", help="Share of the dev documents held back to measure the "
                                                          "expected calibration error (0: none)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the held-back split."),
    bins: int = typer.Option(10, "--bins", min=1, help="Equal-width bins of the calibration error."),
    nil_without_id: bool = typer.Option(False, "--nil-without-id", help="Keep mentions without a gold id "
                                        "(BC5CDR's -1) as 'no concept fits' (fitted as wrong) instead of dropping them."),
) -> None:
    """Fit the probability that the linker's top concept is right (a calibrated confidence) on a dev set
    and save it with the pipeline; then set threshold_on = "confidence" to leave unlikely links out."""
    from ..evaluation.calibration_fit import calibrate  # lazy: spacy

    report = calibrate(dev, pipeline, output=output, data_format=data_format, types=types or None,
                       holdout=holdout, seed=seed, bins=bins, nil_without_id=nil_without_id)
    counts = report["counts"]
    typer.echo(f"fitted on {counts['fit']} mentions (of {counts['mentions']}, {counts['gold_not_in_kb']} with gold not in "
               f"the KB, fitted as wrong); top-1 right {report['fit']['accuracy']:.3f}")
    if "holdout" in report:
        held = report["holdout"]
        low, high = held["ece_interval"]
        typer.echo(f"held back: {counts['holdout']} mentions, expected calibration error {held['ece']:.4f} "
                   f"(95 % bootstrap interval over documents {low:.3f}-{high:.3f}; a perfectly calibrated confidence "
                   f"shows {held['ece_noise_floor'][0]:.3f} on them by chance) (top-1 right {held['accuracy']:.3f})")
    typer.echo(f"written: {report['path']}")
    if output is None:
        typer.echo("the pipeline now sets the calibrated confidence (confidence_attr, default span._.kb_confidence); "
                   "threshold_on = \"confidence\" in its config leaves mentions below confidence_threshold unlinked")
