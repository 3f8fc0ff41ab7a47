"""Schedules in steps or epochs: ``eval_every``, ``checkpoint_every`` and ``hard_negative_every``.

A setting is a number of optimizer steps (``200``) or a string with a unit: ``"200 steps"``,
``"1 epoch"``, ``"0.5 epochs"``. Epochs become steps once the run knows its steps per epoch
(``ceil(pairs / batch_size)``), rounded, at least 1. :func:`parse_every` checks a value when the
config is read (E760), :func:`steps_every` converts it, :class:`Schedule` holds a run's three.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Tuple, Union

from ..errors import ConfigError, Errors

Every = Union[int, float, str]
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(steps?|epochs?)?\s*$")


def parse_every(value: Every, what: str, source: str = "<config>") -> Tuple[float, str]:
    """``(amount, "steps" | "epochs")`` of a schedule setting; a bare number counts steps (a whole
    number); E760 for anything else (negative, fractional steps, unknown unit, bool)."""
    if isinstance(value, bool):
        raise ConfigError(Errors.E760.format(path=source, what=what, value=value))
    if isinstance(value, (int, float)):
        amount, unit = float(value), "steps"
    else:
        match = _PATTERN.match(str(value))
        if match is None:
            raise ConfigError(Errors.E760.format(path=source, what=what, value=value))
        amount = float(match.group(1))
        unit = "epochs" if (match.group(2) or "steps").startswith("epoch") else "steps"
    if amount < 0 or (unit == "steps" and amount != int(amount)):
        raise ConfigError(Errors.E760.format(path=source, what=what, value=value))
    return amount, unit


def steps_every(value: Every, steps_per_epoch: int, what: str = "schedule") -> int:
    """The setting in steps (0 stays 0: "off" / "the default" as the setting defines it)."""
    amount, unit = parse_every(value, what)
    if unit == "steps" or amount == 0:
        return int(amount)
    return max(1, int(round(amount * steps_per_epoch)))


@dataclass(frozen=True)
class Schedule:
    """A run's schedules in steps, from the ``training`` settings and its steps per epoch."""

    steps_per_epoch: int
    total_steps: int
    eval_every: int  # 0: at the end only
    checkpoint_every: int
    hard_negative_every: int  # 0 in the settings: every epoch

    @classmethod
    def from_settings(cls, training: Any, steps_per_epoch: int, total_steps: int) -> "Schedule":
        return cls(
            steps_per_epoch=int(steps_per_epoch),
            total_steps=int(total_steps),
            eval_every=steps_every(training.eval_every, steps_per_epoch, "training.eval_every"),
            checkpoint_every=max(1, steps_every(training.checkpoint_every, steps_per_epoch, "training.checkpoint_every")),
            hard_negative_every=steps_every(training.hard_negative_every, steps_per_epoch, "training.hard_negative_every")
            or int(steps_per_epoch),
        )

    def describe(self) -> Dict[str, Any]:
        return {"steps_per_epoch": self.steps_per_epoch, "total_steps": self.total_steps,
                "eval_every": self.eval_every, "checkpoint_every": self.checkpoint_every,
                "hard_negative_every": self.hard_negative_every}

    def line(self) -> str:
        """One line for the log: steps per epoch and each schedule in steps."""
        epochs = self.total_steps / max(1, self.steps_per_epoch)
        return (f"{self.steps_per_epoch} steps per epoch, {self.total_steps} steps ({epochs:.2f} epochs); "
                f"dev evaluation every {self.eval_every or 'end only'}, checkpoint every {self.checkpoint_every}, "
                f"hard-negative mining every {self.hard_negative_every} steps")


__all__ = ["Every", "parse_every", "steps_every", "Schedule"]
