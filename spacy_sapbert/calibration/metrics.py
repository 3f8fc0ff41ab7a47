"""How good a confidence is: reliability bins, expected calibration error, and no-link precision / recall.

- :func:`reliability`: equal-width bins over [0, 1] (10 by default); per bin the mentions it holds,
  their mean confidence and the share whose top concept was right. A confidence of exactly 1 falls in
  the last bin.
- :func:`expected_calibration_error`: ``sum(count_b / n * |accuracy_b - confidence_b|)`` over the bins;
  :func:`ece_interval` its bootstrap interval (resampling documents), :func:`ece_noise_floor` what a perfectly
  calibrated confidence would show on the same mentions by chance (ECE is biased upwards on small sets).
- :func:`no_link_scores`: the positive class is "do not link" (the gold concept is not in the KB):
  precision = share of the mentions left unlinked that should be, recall = share of those that should
  not be linked that were left unlinked, F1 their harmonic mean.
- :func:`best_threshold`: the threshold on a score that maximises no-link F1 (fit it on one part of a
  dev set, report it on another).
"""
from __future__ import annotations

from pathlib import Path
from statistics import NormalDist
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ..errors import ConfigError, Errors
from ..base.util import atomic_write


MAX_BINS = 1_000  # equal-width bins of [0, 1]; more say nothing on a dev set (10**20: OverflowError, 10**8: memory)


def check_bins(bins: int) -> int:
    """E796 unless ``bins`` is a whole number from 1 to :data:`MAX_BINS`."""
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise ConfigError(Errors.E796.format(what="the number of calibration bins",
                                             expected=f"an integer from 1 to {MAX_BINS:,}", value=bins))
    return bins


def reliability(confidence: Sequence[float], correct: Sequence[bool], bins: int = 10) -> List[Dict[str, Any]]:
    """One dict per bin: ``lower``, ``upper``, ``count``, ``confidence`` and ``accuracy`` (None when empty)."""
    bins = check_bins(bins)
    conf = numpy.asarray(confidence, dtype=numpy.float64)
    right = numpy.asarray(correct, dtype=bool)
    if conf.shape != right.shape:
        raise ConfigError(Errors.E796.format(what="confidences and outcomes", expected="of the same length",
                                             value=f"{conf.shape} and {right.shape}"))
    if conf.size and (not numpy.isfinite(conf).all() or conf.min() < 0 or conf.max() > 1):
        raise ConfigError(Errors.E796.format(what="every confidence", expected="a number in [0, 1]",
                                             value=f"min {conf.min()}, max {conf.max()}"))
    which = numpy.minimum((conf * bins).astype(numpy.int64), bins - 1)
    out = []
    for b in range(bins):
        mask = which == b
        n = int(mask.sum())
        out.append({"lower": b / bins, "upper": (b + 1) / bins, "count": n,
                    "confidence": float(conf[mask].mean()) if n else None,
                    "accuracy": float(right[mask].mean()) if n else None})
    return out


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[bool], bins: int = 10) -> float:
    """ECE over equal-width bins (see the module docstring); 0.0 for no mentions."""
    table = reliability(confidence, correct, bins)
    total = sum(b["count"] for b in table)
    if not total:
        return 0.0
    return float(sum(b["count"] / total * abs(b["accuracy"] - b["confidence"]) for b in table if b["count"]))


def calibration_report(confidence: Sequence[float], correct: Sequence[bool], bins: int = 10) -> Dict[str, Any]:
    """``{"n", "accuracy", "mean_confidence", "ece", "bins"}`` for reports and results files."""
    conf = numpy.asarray(confidence, dtype=numpy.float64)
    right = numpy.asarray(correct, dtype=bool)
    return {"n": int(conf.size), "accuracy": float(right.mean()) if conf.size else None,
            "mean_confidence": float(conf.mean()) if conf.size else None,
            "ece": expected_calibration_error(conf, right, bins), "bins": reliability(conf, right, bins)}


def ece_interval(confidence: Sequence[float], correct: Sequence[bool], groups: Optional[Sequence[int]] = None, *,
                 bins: int = 10, resamples: int = 1000, level: float = 0.95, seed: int = 0) -> Tuple[float, float]:
    """A bootstrap interval of the ECE at ``level``: ``groups`` (a document per mention) resamples whole documents,
    as mentions of one document are not independent; None resamples mentions. The normal interval (the ECE
    +- z * the standard deviation of the resampled ECEs, clipped at 0): ECE is biased upwards on a resampled set
    as on any finite one, so percentiles of the resampled ECEs sit above the estimate (even wholly above it)."""
    conf = numpy.asarray(confidence, dtype=numpy.float64)
    right = numpy.asarray(correct, dtype=bool)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1 or not 0 < level < 1:
        raise ConfigError(Errors.E796.format(what="the bootstrap's resamples and level",
                                             expected="an integer >= 1 and a share in (0, 1)",
                                             value=(resamples, level)))
    groups = numpy.arange(conf.size) if groups is None else numpy.asarray(groups)
    if groups.shape != conf.shape or not conf.size:
        raise ConfigError(Errors.E796.format(what="the mentions and their documents", expected="as many, at least one",
                                             value=f"{conf.size} and {groups.size}"))
    docs, inverse = numpy.unique(groups, return_inverse=True)
    members = [numpy.flatnonzero(inverse == d) for d in range(len(docs))]
    rng = numpy.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        pick = numpy.concatenate([members[d] for d in rng.integers(0, len(docs), len(docs))])
        values.append(expected_calibration_error(conf[pick], right[pick], bins))
    centre = expected_calibration_error(conf, right, bins)
    half = NormalDist().inv_cdf(0.5 + level / 2) * float(numpy.std(values))
    return max(0.0, centre - half), centre + half


def ece_noise_floor(confidence: Sequence[float], *, bins: int = 10, draws: int = 1000, level: float = 0.95,
                    seed: int = 0) -> Tuple[float, float]:
    """The ECE a *perfectly* calibrated confidence would show on these mentions by chance: outcomes drawn
    with the confidences as probabilities, ``draws`` times; (mean, ``level`` percentile)."""
    conf = numpy.asarray(confidence, dtype=numpy.float64)
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1 or not 0 < level < 1 or not conf.size:
        raise ConfigError(Errors.E796.format(what="the draws, level and confidences",
                                             expected="an integer >= 1, a share in (0, 1) and at least one mention",
                                             value=(draws, level, conf.size)))
    rng = numpy.random.default_rng(seed)
    values = [expected_calibration_error(conf, rng.random(conf.size) < conf, bins) for _ in range(draws)]
    return float(numpy.mean(values)), float(numpy.percentile(values, 100 * level))


def no_link_scores(should_link: Sequence[bool], linked: Sequence[bool]) -> Dict[str, Any]:
    """Precision, recall and F1 of leaving a mention unlinked (positive = should not be linked)."""
    want = ~numpy.asarray(should_link, dtype=bool)
    left = ~numpy.asarray(linked, dtype=bool)
    tp, fp, fn = int((want & left).sum()), int((~want & left).sum()), int((want & ~left).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn,
            "should_not_link": int(want.sum()), "left_unlinked": int(left.sum()), "n": int(want.size)}


def best_threshold(values: Sequence[float], should_link: Sequence[bool]) -> float:
    """The threshold ``t`` (link when ``value >= t``) with the best no-link F1 on these mentions; ties go
    to the lowest threshold. Candidates: every distinct value, and one above the largest."""
    vals = numpy.asarray(values, dtype=numpy.float64)
    if not vals.size:
        raise ConfigError(Errors.E796.format(what="the mentions to choose a threshold on", expected="at least one",
                                             value=0))
    candidates = numpy.unique(vals).tolist() + [float(vals.max()) + 1e-9]
    best, best_f1 = candidates[0], -1.0
    for t in candidates:
        f1 = no_link_scores(should_link, vals >= t)["f1"]
        if f1 > best_f1 + 1e-12:
            best, best_f1 = t, f1
    return float(best)


def plot_reliability(curves: Dict[str, List[Dict[str, Any]]], path: Path, title: str = "") -> None:
    """A reliability diagram (accuracy against mean confidence per bin, the diagonal for reference), one
    line per entry of ``curves`` (``{label: reliability(...)}``); PNG, written atomically."""
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    fig, ax = plt.subplots(figsize=(5, 4.5))
    ax.plot([0, 1], [0, 1], ":", color="grey", label="perfectly calibrated")
    for i, (label, table) in enumerate(curves.items()):
        pts = [(b["confidence"], b["accuracy"], b["count"]) for b in table if b["count"]]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color=f"C{i % 10}", ms=3, label=label)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (mean per bin)")
    ax.set_ylabel("share of right top concepts")
    ax.set_title(title, fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    with atomic_write(path, "wb", encoding=None) as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


__all__ = ["check_bins", "MAX_BINS", "reliability", "expected_calibration_error", "calibration_report", "ece_interval",
           "ece_noise_floor", "no_link_scores", "best_threshold", "plot_reliability"]
