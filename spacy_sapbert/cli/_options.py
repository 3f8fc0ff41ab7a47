"""Option values every command checks first, before it loads a KB, a model or a pipeline: a typo in
``--pooling``, ``--kind`` or ``--device`` fails at once (SB-E012 naming the option, the value and the
choices), not after seconds of loading."""
from __future__ import annotations

import re
from typing import Optional, Sequence

from ..base.util import resolve_device
from ..encoding.pooling import AUTO, POOLINGS
from ..errors import ConfigError, Errors

_DEVICE = re.compile(r"cuda(:\d+)?")


def check_choice(option: str, value: Optional[str], choices: Sequence[str]) -> None:
    """E012 unless ``value`` (None: not given) is one of ``choices``."""
    if value is not None and value not in choices:
        raise ConfigError(Errors.E012.format(option=option, value=value, why=f"choose one of: {', '.join(choices)}"))


def check_pooling(option: str, value: Optional[str]) -> None:
    """``auto``, ``cls`` or ``mean``."""
    check_choice(option, value, (AUTO,) + POOLINGS)


def check_device(option: str, value: Optional[str]) -> None:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``; a CUDA device where torch sees no GPU fails here too."""
    if value is None:
        return
    name = value.strip().lower()
    if name in ("auto", "cpu"):
        return
    if not _DEVICE.fullmatch(name):
        raise ConfigError(Errors.E012.format(option=option, value=value, why="choose auto, cpu, cuda or cuda:N"))
    resolve_device(name)  # E002 when no CUDA GPU is visible


__all__ = ["check_choice", "check_device", "check_pooling"]
