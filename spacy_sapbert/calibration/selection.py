"""Choosing a calibration's features by cross-validation inside the fit set, never on the data it is measured on.

:func:`cross_validated` gives every mention a probability from a calibration fitted without its
document (``folds`` folds of whole documents, seeded: mentions of one document are not independent:
a mention the linker gets wrong repeats through a document). :func:`compare_feature_sets` scores
candidate feature sets (:data:`FEATURE_SETS`) by the expected calibration error of those out-of-fold
probabilities, averaged over ``seeds`` fold assignments, with the log loss beside it; the set with the
lowest mean ECE is the one to adopt (``benchmarks/calibration.py`` runs it on NCBI dev and half of
BC5CDR dev; :data:`~.features.DEFAULT_FEATURES` is its choice).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

import numpy

from ..errors import ConfigError, Errors
from .features import Evidence, feature_matrix
from .metrics import expected_calibration_error
from .model import fit

# the candidate sets compared (the defaults of earlier versions first)
FEATURE_SETS: Mapping[str, Sequence[str]] = {
    "all seven (the earlier default)": ("top_score", "margin", "close_concepts", "is_kb_name", "log_chars", "words",
                                        "has_digit"),
    "scores, ties, name, words": ("top_score", "margin", "close_concepts", "is_kb_name", "words"),
    "scores, ties, name": ("top_score", "margin", "close_concepts", "is_kb_name"),
    "scores, ties, name, log_chars": ("top_score", "margin", "close_concepts", "is_kb_name", "log_chars"),
    "scores, ties, name, words, has_digit": ("top_score", "margin", "close_concepts", "is_kb_name", "words",
                                             "has_digit"),
    "scores only": ("top_score", "margin"),
}


def _check(folds: int, groups: numpy.ndarray) -> None:
    n_groups = len(numpy.unique(groups))
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2 or folds > n_groups:
        raise ConfigError(Errors.E796.format(what="the number of cross-validation folds",
                                             expected=f"an integer from 2 to the number of documents ({n_groups})",
                                             value=folds))


def cross_validated(features: numpy.ndarray, correct: Sequence[bool], groups: Sequence[int],
                    feature_names: Sequence[str], *, folds: int = 5, seed: int = 0, C: float = 1.0) -> numpy.ndarray:
    """Out-of-fold probabilities: each mention's from a calibration fitted on the other folds' documents."""
    x = numpy.asarray(features, dtype=numpy.float64)
    y = numpy.asarray(correct, dtype=bool)
    g = numpy.asarray(groups)
    if not (len(x) == len(y) == len(g)):
        raise ConfigError(Errors.E796.format(what="features, outcomes and documents", expected="of the same length",
                                             value=f"{len(x)}, {len(y)} and {len(g)}"))
    _check(folds, g)
    order = numpy.random.default_rng(seed).permutation(numpy.unique(g))
    out = numpy.zeros(len(y), dtype=numpy.float64)
    for f in range(folds):
        test = numpy.isin(g, order[f::folds])
        cal = fit(x[~test], y[~test], feature_names, kb_checksum="", encoder_fingerprint="", C=C)
        out[test] = cal.predict(x[test])
    return out


def compare_feature_sets(evidence: Sequence[Evidence], correct: Sequence[bool], groups: Sequence[int],
                         sets: Mapping[str, Sequence[str]] = FEATURE_SETS, *, folds: int = 5,
                         seeds: Sequence[int] = (0, 1, 2, 3, 4), bins: int = 10) -> List[Dict[str, Any]]:
    """One row per set, best (lowest mean out-of-fold ECE) first: ``name``, ``features``, ``ece`` (mean over
    ``seeds``), ``ece_sd``, ``log_loss`` (mean)."""
    y = numpy.asarray(correct, dtype=bool)
    rows = []
    for name, names in sets.items():
        x = feature_matrix(evidence, names)
        eces, losses = [], []
        for seed in seeds:
            p = numpy.clip(cross_validated(x, y, groups, names, folds=folds, seed=seed), 1e-6, 1 - 1e-6)
            eces.append(expected_calibration_error(p, y, bins))
            losses.append(float(-numpy.mean(y * numpy.log(p) + (~y) * numpy.log(1 - p))))
        rows.append({"name": name, "features": list(names), "ece": float(numpy.mean(eces)),
                     "ece_sd": float(numpy.std(eces)), "log_loss": float(numpy.mean(losses))})
    return sorted(rows, key=lambda r: (r["ece"], r["name"]))


__all__ = ["FEATURE_SETS", "cross_validated", "compare_feature_sets"]
