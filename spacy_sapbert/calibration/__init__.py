"""Calibrated confidence: the probability that the linker's top concept is right, and no-link below a threshold.

- :mod:`.features`: the named features of one mention (:class:`Evidence` -> vector), shared by fitting,
  the linker and the evaluation;
- :mod:`.model`: :class:`Calibration` (fit, predict, JSON file with checks);
- :mod:`.metrics`: reliability bins, expected calibration error (with a bootstrap interval over documents and
  its noise floor), no-link precision / recall / F1;
- :mod:`.selection`: feature sets compared by document-grouped cross-validation inside the fit set;
- :mod:`.dev`: fit one from a dev set and a pipeline (what ``spacy-sapbert calibrate`` runs; not
  imported here: it reads datasets and loads pipelines).

See docs/linker.md ("Knowing when not to link").
"""
from .features import DEFAULT_FEATURES, FEATURES, Evidence, feature_matrix
from .metrics import calibration_report, expected_calibration_error, no_link_scores, reliability
from .model import FILE_NAME, Calibration, fit

__all__ = ["Evidence", "FEATURES", "DEFAULT_FEATURES", "feature_matrix", "Calibration", "fit", "FILE_NAME",
           "reliability", "expected_calibration_error", "calibration_report", "no_link_scores"]
