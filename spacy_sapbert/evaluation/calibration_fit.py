"""Fit a calibration from a dev set: what ``spacy-sapbert calibrate DEV --pipeline P`` runs.

The dev set's gold mentions become the spans of spaCy docs (as in end-to-end evaluation); the
pipeline's ``sapbert_linker`` gives its :class:`~.features.Evidence` for each (its own normalisation,
abbreviations, context re-ranking: exactly what it has when it links), nothing else of the pipeline
runs. A mention counts as right when its top concept is one of its gold concepts (strict); a mention
whose gold concepts are not in the KB (BC5CDR's ``-1``) is fitted as wrong, whatever it links to: the
confidence is the probability that the link is right among the mentions the linker will meet, those
no concept fits included (counted in the report). Mentions without any candidate (empty text) are left
out: their confidence is 0. Documents, not mentions, are split: a seeded ``holdout`` share of them is kept back and the
expected calibration error is measured there with the calibration fitted on the rest (the one
saved), with a 95 % bootstrap interval over the held-back documents (``ece_interval``) and the ECE a
perfectly calibrated confidence would show on them by chance (``ece_noise_floor``: mean, 95th percentile). The calibration is written as ``calibration.json`` into the linker's folder of the pipeline
(``P/<component>/``), or into ``output`` when given, atomically.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ..base.outputs import check_folder_path
from ..base.util import PathLike, atomic_write, ensure_path, get_logger
from ..calibration.features import DEFAULT_FEATURES, Evidence, feature_matrix
from ..calibration.metrics import calibration_report, check_bins, ece_interval, ece_noise_floor
from ..calibration.model import FILE_NAME, Calibration, fit
from ..errors import ConfigError, Errors, MissingInputError
from ..mentions.datasets import read_dataset, select_mentions
from ..mentions.metrics import resolve_gold
from .pipeline import gold_docs

logger = get_logger("calibration")

# The linker settings that shape its scores: recorded with a calibration; W785 when they change.
SCORE_SETTINGS = ("k", "resolve_abbreviations", "semantic_types", "languages", "filter_for_definitions",
                  "context_weight", "definition_weight", "context_fallback", "context_margin", "context_k",
                  "example_names", "one_sense_per_document", "type_priors", "sparse_weight", "sparse_k",
                  "candidates", "query_variants", "precision", "reranker_k", "reranker_margin", "reranker_dense_weight",
                  "reranker_skip_names", "reranker_window", "reranker_precision")


@dataclass
class DevMentions:
    """The dev mentions as the linker saw them: evidence, gold ids (resolved in the KB) and document."""

    evidence: List[Evidence]
    gold: List[frozenset]
    doc_index: List[int]

    @property
    def in_kb(self) -> numpy.ndarray:
        return numpy.array([bool(g) for g in self.gold], dtype=bool)

    @property
    def correct(self) -> numpy.ndarray:
        return numpy.array([bool(ev.candidates) and ev.candidates[0][0] in g
                            for ev, g in zip(self.evidence, self.gold)], dtype=bool)


def find_linker(nlp: Any, path: Any = "<memory>") -> Tuple[str, Any]:
    """The (first) ``sapbert_linker`` component of ``nlp``: name and component."""
    for name, pipe in nlp.pipeline:
        if hasattr(pipe, "evidence") and hasattr(pipe, "set_calibration") and getattr(pipe, "index", None) is not None:
            return name, pipe
    raise ConfigError(Errors.E797.format(path=path, names=", ".join(nlp.pipe_names) or "(none)"))


def dev_mentions(nlp: Any, linker: Any, docs: Sequence[Any], *, batch_size: int = 64) -> DevMentions:
    """Evidence of every gold mention of ``docs`` (:class:`~spacy_sapbert.mentions.datasets.Document`);
    a mention that overlaps an earlier one or has no offsets gets no candidates."""
    from spacy.tokens import Span

    spacy_docs, where = gold_docs(nlp, docs)
    labels, key = linker.cfg["labels"], linker.cfg["spans_key"]
    for doc in spacy_docs:  # every gold span is linked, whatever labels / spans_key the linker reads
        spans = [Span(doc, e.start, e.end, label=labels[0] if labels else e.label_) for e in doc.ents]
        if key is None:
            doc.ents = spans
        else:
            doc.spans[key] = spans
    found: List[List[Evidence]] = []
    for start in range(0, len(spacy_docs), batch_size):
        found.extend([ev for _, ev in mentions] for mentions in linker.evidence(spacy_docs[start:start + batch_size]))
    mentions = [m for d in docs for m in d.mentions]
    doc_of = [i for i, d in enumerate(docs) for _ in d.mentions]
    evidence = [found[w[0]][w[1]] if w is not None else Evidence(m.text, []) for m, w in zip(mentions, where)]
    gold = [resolve_gold(linker.kb, m.ids).ids for m in mentions]
    return DevMentions(evidence, gold, doc_of)


def check_split(holdout: float, seed: int) -> None:
    """E796 for a ``holdout`` outside [0, 1) or a ``seed`` that is not a whole number >= 0 (numpy's generator
    refuses a negative seed with a ValueError)."""
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float)) or not 0.0 <= holdout < 1.0:
        raise ConfigError(Errors.E796.format(what="holdout", expected="a share in [0, 1) of the dev documents",
                                             value=holdout))
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(Errors.E796.format(what="seed", expected="a whole number >= 0", value=seed))


def split_documents(n_docs: int, holdout: float, seed: int) -> numpy.ndarray:
    """A boolean mask over documents: True for the held-back ``holdout`` share (seeded)."""
    check_split(holdout, seed)
    order = numpy.random.default_rng(seed).permutation(n_docs)
    held = numpy.zeros(n_docs, dtype=bool)
    held[order[: int(round(holdout * n_docs))]] = True
    return held


def fit_dev(linker: Any, dev: DevMentions, *, holdout: float = 0.3, seed: int = 0, bins: int = 10,
            features: Sequence[str] = DEFAULT_FEATURES, source: str = "") -> Tuple[Calibration, Dict[str, Any]]:
    """Fit on the mentions of the documents not held back; ECE on those held back."""
    held_doc = split_documents(max(dev.doc_index, default=-1) + 1, holdout, seed)
    held = numpy.array([held_doc[i] for i in dev.doc_index], dtype=bool)
    usable = numpy.array([bool(ev.candidates) for ev in dev.evidence], dtype=bool)
    x = feature_matrix(dev.evidence, features)
    y = dev.correct
    fit_rows, test_rows = usable & ~held, usable & held
    settings = {k: linker.cfg[k] for k in SCORE_SETTINGS if k in linker.cfg}
    counts = {"mentions": len(dev.evidence), "gold_not_in_kb": int((~dev.in_kb).sum()),
              "fit": int(fit_rows.sum()), "holdout": int(test_rows.sum())}
    cal = fit(x[fit_rows], y[fit_rows], features, kb_checksum=linker.kb.checksum,
              encoder_fingerprint=linker.encoder.fingerprint, settings=settings)
    report: Dict[str, Any] = {"source": source, "counts": counts, "holdout_share": holdout, "seed": seed,
                              "features": list(features),
                              "fit": calibration_report(cal.predict(x[fit_rows]), y[fit_rows], bins)}
    if test_rows.any():
        held_conf, docs = cal.predict(x[test_rows]), numpy.asarray(dev.doc_index)[test_rows]
        report["holdout"] = {**calibration_report(held_conf, y[test_rows], bins),
                             "ece_interval": list(ece_interval(held_conf, y[test_rows], docs, bins=bins, seed=seed)),
                             "ece_noise_floor": list(ece_noise_floor(held_conf, bins=bins, seed=seed))}
    summary = {**counts, "source": source, "seed": seed,
               "ece_holdout": report["holdout"]["ece"] if "holdout" in report else None,
               "accuracy_fit": report["fit"]["accuracy"]}
    return Calibration(**{**cal.__dict__, "info": summary}), report


def calibrate(dataset: PathLike, pipeline: PathLike, *, output: Optional[PathLike] = None, data_format: str = "auto",
              types: Optional[Sequence[str]] = None, holdout: float = 0.3, seed: int = 0, bins: int = 10,
              batch_size: int = 64, nil_without_id: bool = False) -> Dict[str, Any]:
    """Fit a calibration for the pipeline folder ``pipeline`` on ``dataset``; write it (see the module
    docstring) and return the report (counts, ECE with bins on the fit part and the held-back part,
    ``path`` of the file written). ``nil_without_id``: mentions without a gold id (BC5CDR's ``-1``) are
    kept as "no concept fits" (fitted as wrong) instead of dropped."""
    import spacy

    check_split(holdout, seed)  # the options and the output before the pipeline is loaded and the dev set linked
    check_bins(bins)
    if output is not None:
        check_folder_path(output)  # E502 / E505
    pipe_path = ensure_path(pipeline)
    if not (pipe_path / "config.cfg").exists():
        raise MissingInputError(Errors.E001.format(what="spaCy pipeline folder", path=pipe_path,
                                                   hint="give a folder written by nlp.to_disk or create-pipeline."))
    nlp = spacy.load(pipe_path)
    name, linker = find_linker(nlp, pipe_path)
    docs = read_dataset(dataset, format=data_format, types=types)
    if not nil_without_id:
        docs, _ = select_mentions(docs, exclude_composite=False)
    dev = dev_mentions(nlp, linker, docs, batch_size=batch_size)
    cal, report = fit_dev(linker, dev, holdout=holdout, seed=seed, bins=bins, source=str(dataset))
    target = (ensure_path(output) if output is not None else pipe_path / name) / FILE_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    cal.to_disk(target)
    if output is not None:  # never into the pipeline: its component folder holds only what to_disk writes
        with atomic_write(target.parent / "calibration_report.json") as fh:
            json.dump(report, fh, indent=1)
    logger.info("calibration fitted on %d mentions, ECE on %d held back: %s; written to %s",
                report["counts"]["fit"], report["counts"]["holdout"], cal.info.get("ece_holdout"), target)
    return {**report, "path": str(target)}


__all__ = ["calibrate", "fit_dev", "dev_mentions", "DevMentions", "split_documents", "check_split", "find_linker",
           "SCORE_SETTINGS"]
