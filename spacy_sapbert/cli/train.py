"""CLI commands: pretrain, finetune. Thin: parse arguments, call a library function, print a summary.

Settings come from a config file (``configs/pretrain.cfg`` / ``configs/finetune.cfg``, or the same
built-in defaults) and extra arguments in spaCy's override style: ``--training.batch_size 64``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer

from ..base.outputs import check_parent
from ..kb import KnowledgeBase
from ..mentions.datasets import iter_mentions, read_dataset
from ._app import app
from ._options import check_device

_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
_OVERRIDES_HELP = "Extra arguments override config settings in spaCy's style, e.g. --training.batch_size 64 --loss.name infonce."


def _config(ctx: typer.Context, config_path: Optional[Path], task: str, amp: Optional[str], device: Optional[str],
            distributed: bool) -> Any:
    from spacy.cli._util import parse_config_overrides

    from ..training.config import load_config  # lazy: torch

    overrides: Dict[str, Any] = parse_config_overrides(list(ctx.args))
    if amp is not None:
        overrides["training.amp"] = amp
    if device is not None:
        overrides["training.device"] = device
    if distributed:
        overrides["training.distributed"] = True
    return load_config(config_path, overrides, task=task)


def _dev(dev: Optional[Path], dev_kb: Optional[Path], kb: Any, types: Optional[str]) -> Any:
    if dev is None:
        return None
    from ..training.run import dev_set  # lazy: torch

    wanted = [t.strip() for t in types.split(",")] if types else None
    mentions = iter_mentions(read_dataset(dev, types=wanted))
    return dev_set(KnowledgeBase.from_disk(dev_kb) if dev_kb else kb, mentions)


def _summary(result: Any) -> None:
    from ..training.summary import summary_lines  # lazy: torch

    for line in summary_lines(result):
        typer.echo(line)


# The options pretrain and finetune share (typer copies an option's settings for each command).
_OUTPUT = typer.Option(..., "--output", "-o", help="Run folder: pairs, checkpoints, metrics, model/.")
_RESUME = typer.Option(False, "--resume", help="Continue the run in OUTPUT from its last checkpoint.")
_AMP = typer.Option(None, "--amp", help="Mixed precision: none, bf16 (CUDA, or CPU autocast), fp16 (CUDA).")
_DEVICE = typer.Option(None, "--device", help="auto, cpu, cuda, cuda:N.")
_DISTRIBUTED = typer.Option(False, "--distributed", help="DDP (also on when launched by torchrun).")


def _start(ctx: typer.Context, task: str, kb_dir: Path, output: Path, config_path: Optional[Path], amp: Optional[str],
           device: Optional[str], distributed: bool) -> Tuple[Any, Any]:
    """``(config, kb)`` of a training command, after the checks that need no loading (device, output folder)."""
    check_device("--device", device)
    check_parent(output / "model")
    config = _config(ctx, config_path, task, amp, device, distributed)
    return config, KnowledgeBase.from_disk(kb_dir)


@app.command("pretrain", context_settings=_EXTRA, help="Self-alignment pretraining (SapBERT) on a KB's synonyms. " + _OVERRIDES_HELP)
def pretrain_command(
    ctx: typer.Context,
    kb_dir: Path = typer.Argument(..., help="Knowledge base folder (from `spacy-sapbert build-kb`)."),
    base_model: str = typer.Option(..., "--base-model", "-m", help="Hugging Face model folder or hub id to start from."),
    output: Path = _OUTPUT,
    config_path: Optional[Path] = typer.Option(None, "--config", "-c", help="Config file (default: built-in, = configs/pretrain.cfg)."),
    dev: Optional[Path] = typer.Option(None, "--dev", help="Dev mentions (PubTator/TSV/JSONL/BioSyn) for acc@1 during training."),
    dev_kb: Optional[Path] = typer.Option(None, "--dev-kb", help="KB to search for the dev mentions (default: KB_DIR)."),
    types: Optional[str] = typer.Option(None, "--types", help="Only dev mentions of these types (comma-separated)."),
    resume: bool = _RESUME,
    amp: Optional[str] = _AMP,
    device: Optional[str] = _DEVICE,
    distributed: bool = _DISTRIBUTED,
) -> None:
    from ..training.run import pretrain  # lazy: torch

    config, kb = _start(ctx, "pretrain", kb_dir, output, config_path, amp, device, distributed)
    result = pretrain(kb, base_model, output, config=config, dev=_dev(dev, dev_kb, kb, types), resume=resume)
    _summary(result)


@app.command("finetune", context_settings=_EXTRA, help="Fine-tune an encoder on task mentions paired with their gold concepts' names. " + _OVERRIDES_HELP)
def finetune_command(
    ctx: typer.Context,
    kb_dir: Path = typer.Argument(..., help="Knowledge base folder (the task's dictionary)."),
    train_file: Path = typer.Argument(..., help="Training mentions (PubTator/TSV/JSONL/BioSyn). Never the test set."),
    base_model: str = typer.Option(..., "--base-model", "-m", help="Model folder to start from (e.g. a pretrain run's model/)."),
    output: Path = _OUTPUT,
    config_path: Optional[Path] = typer.Option(None, "--config", "-c", help="Config file (default: built-in, = configs/finetune.cfg)."),
    dev: Optional[Path] = typer.Option(None, "--dev", help="Dev mentions for early stopping / keeping the best model."),
    types: Optional[str] = typer.Option(None, "--types", help="Only mentions of these types (comma-separated)."),
    resume: bool = _RESUME,
    amp: Optional[str] = _AMP,
    device: Optional[str] = _DEVICE,
    distributed: bool = _DISTRIBUTED,
) -> None:
    from ..training.run import finetune  # lazy: torch

    config, kb = _start(ctx, "finetune", kb_dir, output, config_path, amp, device, distributed)
    wanted: Optional[List[str]] = [t.strip() for t in types.split(",")] if types else None
    mentions = iter_mentions(read_dataset(train_file, types=wanted))
    result = finetune(kb, mentions, base_model, output, config=config, dev=_dev(dev, None, kb, types), resume=resume)
    _summary(result)
