"""The linker's decision for one mention: which candidates ``kb_ents`` keeps, and its calibrated confidence.

``threshold_on = "score"`` (the default, as before): ``kb_ents`` keeps the candidates whose raw score is at
least ``threshold``, at most ``max_entities_per_mention``. ``threshold_on = "confidence"``: the mention is
linked when the calibration's probability that its top concept is right is at least
``confidence_threshold``; then ``kb_ents`` keeps its best ``max_entities_per_mention`` candidates with their
raw scores (``threshold`` is not applied), else ``kb_ents`` is ``[]`` and ``kb_id_`` is ``""`` — the same
shape a mention below the score threshold has always had, so code reading ``kb_ents[0]`` never links a
mention the linker declined. With a calibration loaded (either way), ``Span._.<confidence_attr>`` holds the
probability (``None`` for spans never linked, ``0.0`` for a mention without candidates).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from spacy.tokens import Span

from ..calibration.features import Evidence
from ..errors import ConfigError, Errors

THRESHOLD_ON = ("score", "confidence")
Decision = Tuple[List[Tuple[str, float]], Optional[float]]


def validate_confidence_cfg(cfg: Dict[str, Any]) -> None:
    """E793 for a bad ``threshold_on``, ``confidence_threshold`` (NaN, outside [0, 1]) or ``confidence_attr``."""
    if cfg["threshold_on"] not in THRESHOLD_ON:
        raise ConfigError(Errors.E793.format(what="threshold_on", expected="'score' or 'confidence'",
                                             value=cfg["threshold_on"]))
    value = cfg["confidence_threshold"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ConfigError(Errors.E793.format(what="confidence_threshold", expected="a number between 0 and 1",
                                             value=value))
    attr = cfg["confidence_attr"]
    if not isinstance(attr, str) or not attr.isidentifier() or attr == cfg["extension_name"]:
        raise ConfigError(Errors.E793.format(
            what="confidence_attr", expected=f"a Python identifier other than extension_name "
                                             f"('{cfg['extension_name']}'), such as kb_confidence", value=attr))


def register_confidence(name: str) -> None:
    """``Span._.<name>`` (default None), unless an extension of that name exists."""
    if not Span.has_extension(name):
        Span.set_extension(name, default=None)


def decide(cfg: Dict[str, Any], calibration: Any, evidence: Sequence[Evidence]) -> List[Decision]:
    """``(kb_ents, confidence)`` per mention (see the module docstring); confidence None without a calibration."""
    cap = cfg["max_entities_per_mention"]
    confidences: Sequence[Optional[float]] = [None] * len(evidence)
    if calibration is not None and evidence:
        confidences = [round(float(c), 6) for c in calibration.confidence(evidence)]
    out: List[Decision] = []
    for ev, conf in zip(evidence, confidences):
        if cfg["threshold_on"] == "confidence":
            keep = conf is not None and conf >= cfg["confidence_threshold"]
            cands = [(cid, round(s, 6)) for cid, s in ev.candidates[:cap]] if keep else []
        else:
            cands = [(cid, round(s, 6)) for cid, s in ev.candidates if s >= cfg["threshold"]][:cap]
        out.append((cands, conf))
    return out


__all__ = ["THRESHOLD_ON", "validate_confidence_cfg", "register_confidence", "decide"]
