"""A fitted calibration: the probability that the linker's top concept is right, from named features.

A logistic regression (scikit-learn, lbfgs: deterministic) on standardised features (see
:mod:`.features`). It is saved as JSON, never pickled: the coefficients, the feature names, the KB
checksum and encoder fingerprint it was fitted for, the linker settings that shape the scores, and a
sha256 of all of it. Loading checks the format and the sha256 (E791: damaged or truncated), and,
when the linker's KB checksum and encoder fingerprint are given, that they are the fitted ones
(E790, naming both). Predicting needs only numpy.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy

from ..errors import ConfigError, DataFormatError, EmptyResultError, Errors, IncompatibleError
from ..base.signed_json import sign, signed_payload
from ..base.util import PathLike, atomic_write, ensure_path
from .features import Evidence, check_features, feature_matrix

FORMAT = "spacy_sapbert.calibration"
VERSION = 1
FILE_NAME = "calibration.json"
MAX_BYTES = 1 << 20  # a calibration is a few hundred bytes; anything this large is not one


@dataclass(frozen=True)
class Calibration:
    """``P(top concept right | features)``; see the module docstring."""

    feature_names: Tuple[str, ...]
    mean: Tuple[float, ...]
    scale: Tuple[float, ...]
    coef: Tuple[float, ...]
    intercept: float
    kb_checksum: str
    encoder_fingerprint: str
    settings: Mapping[str, Any] = field(default_factory=dict)  # the linker settings the scores came from
    info: Mapping[str, Any] = field(default_factory=dict)  # counts, held-out ECE: for people, not checked

    def predict(self, features: numpy.ndarray) -> numpy.ndarray:
        """Probabilities for a ``[n, len(feature_names)]`` matrix."""
        x = (numpy.asarray(features, dtype=numpy.float64) - numpy.asarray(self.mean)) / numpy.asarray(self.scale)
        z = x @ numpy.asarray(self.coef) + self.intercept
        return 1.0 / (1.0 + numpy.exp(-numpy.clip(z, -50.0, 50.0)))

    def confidence(self, evidence: Sequence[Evidence]) -> numpy.ndarray:
        """One probability per mention; 0 for a mention without candidates (nothing to be right about)."""
        out = numpy.zeros(len(evidence), dtype=numpy.float64)
        rows = [i for i, ev in enumerate(evidence) if ev.candidates]
        if rows:
            out[rows] = self.predict(feature_matrix([evidence[i] for i in rows], self.feature_names))
        return out

    def check(self, *, kb_checksum: str, encoder_fingerprint: str, extras: Sequence[str] = (),
              path: Any = "<memory>") -> None:
        """E790 unless fitted for this KB and encoder; E792 unless every feature can be computed."""
        for what, fitted, found in (("the KB (checksum)", self.kb_checksum, kb_checksum),
                                    ("the encoder (fingerprint)", self.encoder_fingerprint, encoder_fingerprint)):
            if fitted != found:
                raise IncompatibleError(Errors.E790.format(path=path, what=what, fitted=fitted, found=found))
        check_features(self.feature_names, extras=extras, path=path)

    def settings_diff(self, settings: Mapping[str, Any]) -> Dict[str, Tuple[Any, Any]]:
        """``{key: (fitted, now)}`` for the recorded linker settings that differ."""
        return {k: (v, settings.get(k)) for k, v in self.settings.items() if k in settings and settings[k] != v}

    # ---- serialisation ---------------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        payload = {"feature_names": list(self.feature_names), "mean": list(self.mean), "scale": list(self.scale),
                   "coef": list(self.coef), "intercept": self.intercept, "kb_checksum": self.kb_checksum,
                   "encoder_fingerprint": self.encoder_fingerprint, "settings": dict(self.settings),
                   "info": dict(self.info)}
        return sign(payload, file_format=FORMAT, version=VERSION, key="calibration")

    def to_disk(self, path: PathLike) -> None:
        """Write the JSON file ``path`` atomically."""
        with atomic_write(ensure_path(path)) as fh:
            json.dump(self.to_dict(), fh, indent=1, sort_keys=True)
            fh.write("\n")

    @classmethod
    def from_disk(cls, path: PathLike, *, kb_checksum: Optional[str] = None,
                  encoder_fingerprint: Optional[str] = None, extras: Sequence[str] = ()) -> "Calibration":
        """Read and check a file from :meth:`to_disk` (E791); with ``kb_checksum`` and
        ``encoder_fingerprint``, also that it belongs to them (E790) and its features exist (E792)."""
        path = ensure_path(path)
        try:
            size = path.stat().st_size
            if size > MAX_BYTES:
                raise DataFormatError(Errors.E791.format(path=path, why=f"{size} bytes, more than a calibration has"))
            data = json.loads(path.read_text(encoding="utf8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataFormatError(Errors.E791.format(path=path, why=f"{type(err).__name__}: {err}")) from None
        cal = cls.from_dict(data, path=path)
        if kb_checksum is not None and encoder_fingerprint is not None:
            cal.check(kb_checksum=kb_checksum, encoder_fingerprint=encoder_fingerprint, extras=extras, path=path)
        return cal

    @classmethod
    def from_dict(cls, data: Any, *, path: Any = "<memory>") -> "Calibration":
        def bad(why: str) -> DataFormatError:
            return DataFormatError(Errors.E791.format(path=path, why=why))

        payload = signed_payload(data, file_format=FORMAT, version=VERSION, key="calibration", bad=bad)
        try:
            names = tuple(str(n) for n in payload["feature_names"])
            arrays = [tuple(float(v) for v in payload[key]) for key in ("mean", "scale", "coef")]
            intercept = float(payload["intercept"])
            kb, enc = str(payload["kb_checksum"]), str(payload["encoder_fingerprint"])
            settings, info = dict(payload["settings"]), dict(payload["info"])
        except (KeyError, TypeError, ValueError) as err:
            raise bad(f"a field is missing or has the wrong type ({type(err).__name__}: {err})") from None
        numbers = [v for arr in arrays for v in arr] + [intercept]
        if any(len(arr) != len(names) for arr in arrays) or not names:
            raise bad(f"{len(names)} feature names but {[len(a) for a in arrays]} mean/scale/coef values")
        if not all(math.isfinite(v) for v in numbers) or any(v <= 0 for v in arrays[1]):
            raise bad("a coefficient is not a finite number (or a scale is not positive)")
        return cls(names, arrays[0], arrays[1], arrays[2], intercept, kb, enc, settings, info)


def fit(features: numpy.ndarray, correct: Sequence[bool], feature_names: Sequence[str], *, kb_checksum: str,
        encoder_fingerprint: str, settings: Optional[Mapping[str, Any]] = None,
        info: Optional[Mapping[str, Any]] = None, C: float = 1.0) -> Calibration:
    """Fit :class:`Calibration` on ``features`` (``[n, len(feature_names)]``) and whether each
    mention's top concept was right. Needs both outcomes (E795). Deterministic."""
    from sklearn.linear_model import LogisticRegression

    x = numpy.asarray(features, dtype=numpy.float64)
    y = numpy.asarray(correct, dtype=bool)
    check_features(feature_names, extras=[n.split(":", 1)[1] for n in feature_names if n.startswith("extra:")])
    if x.ndim != 2 or x.shape != (len(y), len(feature_names)):
        raise ConfigError(Errors.E795.format(why=f"features of shape {list(x.shape)} for {len(y)} outcomes and "
                                                 f"{len(feature_names)} feature names"))
    if not numpy.isfinite(x).all():
        raise ConfigError(Errors.E795.format(why="a feature is not a finite number"))
    n_right = int(y.sum())
    if n_right == 0 or n_right == len(y):
        raise EmptyResultError(Errors.E795.format(why=f"{len(y)} mentions, {n_right} with the right top concept"))
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale <= 1e-12] = 1.0  # a constant feature: left as it is (its coefficient goes to ~0)
    model = LogisticRegression(C=C, solver="lbfgs", max_iter=1000)
    model.fit((x - mean) / scale, y)
    return Calibration(tuple(feature_names), tuple(mean.tolist()), tuple(scale.tolist()),
                       tuple(float(c) for c in model.coef_[0]), float(model.intercept_[0]), kb_checksum,
                       encoder_fingerprint, dict(settings or {}), dict(info or {}))


__all__ = ["Calibration", "fit", "FILE_NAME", "FORMAT", "VERSION"]
