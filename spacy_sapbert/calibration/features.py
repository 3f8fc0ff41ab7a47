"""The calibration's features: one named vector per mention, computed from what the linker has.

:class:`Evidence` is what the linker knows about one mention before it decides: the normalised text,
its ranked candidate concepts with their raw scores (all ``k`` of them, before ``threshold`` and
``max_entities_per_mention``), whether the text is a KB name, and ``extras``, named numbers later
scoring stages add (a sparse score, a re-ranker score). :func:`feature_matrix` turns evidence into
the features a calibration was fitted on, by name; fitting (``spacy-sapbert calibrate``), the linker
and the evaluation all call it, so the three compute the same numbers.

A feature is a function of one :class:`Evidence`; :data:`FEATURES` maps names to them. A feature
read from ``extras`` (``extra:NAME``) needs that extra on every mention, else E792.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Dict, Mapping, Sequence, Tuple

import numpy

from ..errors import ConfigError, Errors

Candidates = Sequence[Tuple[str, float]]

CLOSE = 0.02  # a candidate within this of the top score counts as a close call
NO_SCORE = -1.0  # the score a missing candidate stands for (the lowest cosine)
EXTRA_PREFIX = "extra:"


@dataclass(frozen=True)
class Evidence:
    """What the linker has for one mention: ``candidates`` best first, raw (uncut) scores."""

    text: str
    candidates: Candidates
    is_name: bool = False
    extras: Mapping[str, float] = field(default_factory=dict)


def _score(ev: Evidence, i: int) -> float:
    return float(ev.candidates[i][1]) if len(ev.candidates) > i else NO_SCORE


def _top(ev: Evidence) -> float:
    return _score(ev, 0)


def _margin(ev: Evidence) -> float:
    return _score(ev, 0) - _score(ev, 1)


def _close(ev: Evidence) -> float:
    top = _score(ev, 0)
    return float(sum(1 for _, s in ev.candidates[1:] if s >= top - CLOSE))


def _chars(ev: Evidence) -> float:
    return math.log1p(len(ev.text))


def _words(ev: Evidence) -> float:
    return float(len(ev.text.split()))


def _digit(ev: Evidence) -> float:
    return float(any(ch.isdigit() for ch in ev.text))


FEATURES: Mapping[str, Callable[[Evidence], float]] = MappingProxyType({
    "top_score": _top,  # the best concept's score
    "margin": _margin,  # its lead over the second concept
    "close_concepts": _close,  # other concepts within CLOSE of it (ties of ambiguous names)
    "is_kb_name": lambda ev: float(ev.is_name),  # the mention is written as a KB name
    "log_chars": _chars,  # log(1 + characters of the mention)
    "words": _words,
    "has_digit": _digit,
})
# Chosen by document-grouped cross-validation inside the fit sets (calibration.selection; benchmarks/calibration.py):
# log_chars sharpened the fit but made the held-out confidences overconfident (NCBI dev out-of-fold ECE 0.065 -> 0.031
# without it and has_digit). Files fitted on other features keep loading: they name theirs.
DEFAULT_FEATURES: Tuple[str, ...] = ("top_score", "margin", "close_concepts", "is_kb_name", "words")


def known_features(extras: Sequence[str] = ()) -> Tuple[str, ...]:
    """The feature names computable here, ``extras`` given as ``extra:NAME``."""
    return tuple(FEATURES) + tuple(EXTRA_PREFIX + name for name in extras)


def check_features(names: Sequence[str], *, extras: Sequence[str] = (), path: object = "<memory>") -> None:
    """E792 unless every feature in ``names`` can be computed (``extras``: the extras the linker sets)."""
    known = known_features(extras)
    missing = [name for name in names if name not in known]
    if missing or not names:
        raise ConfigError(Errors.E792.format(path=path, missing=", ".join(missing) or "(none named)",
                                             known=", ".join(known)))


def feature_vector(ev: Evidence, names: Sequence[str]) -> numpy.ndarray:
    """The features ``names`` of one mention, float64."""
    out = numpy.empty(len(names), dtype=numpy.float64)
    for i, name in enumerate(names):
        if name.startswith(EXTRA_PREFIX):
            key = name[len(EXTRA_PREFIX):]
            if key not in ev.extras:
                raise ConfigError(Errors.E792.format(path="<evidence>", missing=name,
                                                     known=", ".join(known_features(tuple(ev.extras)))))
            out[i] = float(ev.extras[key])
        elif name in FEATURES:
            out[i] = FEATURES[name](ev)
        else:
            raise ConfigError(Errors.E792.format(path="<evidence>", missing=name, known=", ".join(known_features())))
    return out


def feature_matrix(evidence: Sequence[Evidence], names: Sequence[str]) -> numpy.ndarray:
    """``[len(evidence), len(names)]`` float64: :func:`feature_vector` of every mention."""
    out = numpy.zeros((len(evidence), len(names)), dtype=numpy.float64)
    for row, ev in enumerate(evidence):
        out[row] = feature_vector(ev, names)
    return out


def describe(ev: Evidence, names: Sequence[str]) -> Dict[str, float]:
    """``{feature: value}`` of one mention (for reports and debugging)."""
    return dict(zip(names, feature_vector(ev, names).tolist()))


__all__ = ["Evidence", "FEATURES", "DEFAULT_FEATURES", "CLOSE", "known_features", "check_features", "feature_vector",
           "feature_matrix", "describe"]
