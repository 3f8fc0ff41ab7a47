"""What a training run reports: :class:`TrainResult`, its summary lines and ``OUTPUT/summary.json``.

Speed counts training time only: the optimizer steps (batch preparation, forward, loss, backward,
update), not hard-negative mining and not dev evaluation, which are reported beside it with the
run's wall time. The summary also says which weights ``OUTPUT/model`` holds (the best dev step or
the last step) and their dev figures.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..base.util import atomic_write

SUMMARY_FILE = "summary.json"


@dataclass
class TrainResult:
    """The outcome of a run. ``train_seconds``: optimizer steps only; ``mine_seconds``: hard-negative
    mining; ``dev_seconds``: dev evaluation; ``wall_seconds``: the whole run from the trainer's start (model
    loading included; writing the pair set comes before it), this and earlier sessions of a resumed run. ``model_from``: ``"best"`` (the best dev step, ``model_step``) or ``"last"``."""

    output: Path
    model_path: Path
    steps: int
    pairs_seen: int
    train_seconds: float
    final_loss: Optional[float]
    history: List[Dict[str, Any]] = field(default_factory=list)
    best_dev: Optional[float] = None
    steps_per_epoch: int = 0
    wall_seconds: float = 0.0
    mine_seconds: float = 0.0
    dev_seconds: float = 0.0
    model_from: str = "last"
    model_step: int = 0
    model_dev: Optional[Dict[str, Any]] = None

    @property
    def pairs_per_second(self) -> float:
        """Training pairs per second of training time (mining and dev evaluation excluded)."""
        return self.pairs_seen / self.train_seconds if self.train_seconds > 0 else 0.0

    def to_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        data.pop("history")
        data["output"], data["model_path"] = str(self.output), str(self.model_path)
        data["pairs_per_second"] = round(self.pairs_per_second, 2)
        return data


def _pct(value: Optional[float]) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def dev_line(figures: Dict[str, Any]) -> str:
    """``strict acc@1 61.2 (seen 80.1, n = 500; unseen 40.3, n = 287)``."""
    return (f"strict acc@1 {_pct(figures.get('dev_acc@1'))} (seen {_pct(figures.get('dev_seen_acc@1'))}, "
            f"n = {figures.get('dev_n_seen', 0)}; unseen {_pct(figures.get('dev_unseen_acc@1'))}, "
            f"n = {figures.get('dev_n_unseen', 0)})")


def summary_lines(result: TrainResult) -> List[str]:
    """The lines ``pretrain`` / ``finetune`` print at the end of a run."""
    wall = max(result.wall_seconds, 1e-9)
    other = max(0.0, result.wall_seconds - result.train_seconds - result.mine_seconds - result.dev_seconds)
    loss = "–" if result.final_loss is None else f"{result.final_loss:.4f}"
    lines = [
        f"Trained {result.steps} steps ({result.steps_per_epoch} per epoch), {result.pairs_seen} pairs; "
        f"final loss {loss}",
        f"Speed: {result.pairs_per_second:.1f} training pairs/s (training time only: optimizer steps, "
        f"without mining and dev evaluation)",
        f"Wall time {result.wall_seconds / 60:.1f} min: training {result.train_seconds / 60:.1f} "
        f"({100 * result.train_seconds / wall:.0f}%), mining {result.mine_seconds / 60:.1f} "
        f"({100 * result.mine_seconds / wall:.0f}%), dev {result.dev_seconds / 60:.1f} "
        f"({100 * result.dev_seconds / wall:.0f}%), other {other / 60:.1f} (setup, checkpoints)",
    ]
    held = "the best dev step" if result.model_from == "best" else "the last step"
    dev = f"; dev {dev_line(result.model_dev)}" if result.model_dev else ""
    lines.append(f"Model: {result.model_path} holds {held} ({result.model_step}){dev}")
    return lines


def write_summary(result: TrainResult, output: Path) -> None:
    """``OUTPUT/summary.json``: :meth:`TrainResult.to_dict`, written atomically."""
    with atomic_write(Path(output) / SUMMARY_FILE) as fh:
        json.dump(result.to_dict(), fh, indent=2, sort_keys=True)


__all__ = ["TrainResult", "SUMMARY_FILE", "summary_lines", "dev_line", "write_summary"]
