"""The evaluation's calibration section (``[evaluate] calibration = true``): for each pipeline system whose
``sapbert_linker`` has a calibration (``spacy-sapbert calibrate``), how well its confidence is calibrated
and how well it knows when not to link.

The run's documents with their gold spans go through the linker's :meth:`evidence` (its own text
handling, all candidates with raw scores), so a mention's top concept is known even when the linker
would decline it; the confidence and the decision come from the same functions the linker runs
(:mod:`spacy_sapbert.calibration.features`, :func:`spacy_sapbert.linker.confidence.decide`). Gold ids are
resolved in the *pipeline's* KB: a mention whose gold concepts it lacks (a concept removed on purpose,
an id of another vocabulary) should not be linked, and so should a mention without gold id (BC5CDR's
``-1``: the annotators found no concept for it), which the rest of the evaluation leaves out. Reported
per system: ``n`` (mentions with a gold id and candidates), the share of right top concepts, ECE over
``calibration_bins`` equal-width bins with their counts, and no-link precision / recall / F1 of the
linker's own decision and of the two thresholds side by side (``threshold`` on the raw score,
``confidence_threshold`` on the confidence): over every mention that should not be linked
(``no_link``), and per kind (``no_link_by_kind``: the ``-1`` mentions, the mentions whose gold
concept the KB lacks; each against the mentions whose concept is in the KB), plus a reliability plot
(``reliability.png``). A pipeline without a calibration is named under ``"without calibration"`` and gets
the no-link scores of its decision and fixed threshold under ``"no-link without calibration"``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy

from ..base.util import ensure_path, get_logger
from ..calibration.metrics import calibration_report, no_link_scores, plot_reliability
from ..linker.confidence import decide
from ..mentions.datasets import Document
from .calibration_fit import dev_mentions, find_linker

logger = get_logger("evaluation.calibration")


def _pipelines(settings: Dict[str, Any]) -> List[tuple]:
    sy = settings["systems"]
    out = []
    for key, label in (("model", sy["model_name"]), ("base_encoder", sy["base_encoder_name"])):
        p = ensure_path(sy[key]) if sy.get(key) else None
        if p is not None and (p / "meta.json").exists() and (p / "config.cfg").exists():
            out.append((f"{label} (pipeline)", p))
    if sy.get("pipeline"):
        out.append((sy["pipeline_name"], ensure_path(sy["pipeline"])))
    return out


# the kinds of mentions that should not be linked, scored apart (each against the mentions that should be)
NO_GOLD_ID = "no gold id (-1)"
NOT_IN_KB = "gold concept not in the KB"


WITHOUT = "without calibration"  # the names of the pipelines without one
NO_LINK_ONLY = "no-link without calibration"  # their no-link scores: the fixed threshold only


def _rules(cfg: Dict[str, Any], decided: numpy.ndarray, top: numpy.ndarray,
           conf: Optional[numpy.ndarray]) -> Dict[str, numpy.ndarray]:
    """``{rule: linked}``: the linker's own decision, the fixed score threshold and (with a calibration) the
    confidence threshold."""
    rules = {f"linker's decision (threshold_on = {cfg['threshold_on']})": decided,
             f"score >= threshold ({cfg['threshold']})": top >= cfg["threshold"]}
    if conf is not None:
        rule = f"confidence >= confidence_threshold ({cfg['confidence_threshold']})"
        rules[rule] = conf >= cfg["confidence_threshold"]
    return rules


def system_section(nlp: Any, linker: Any, docs: Sequence[Document], bins: int) -> Dict[str, Any]:
    """The section of one linker (see the module docstring). ``docs`` may hold mentions without gold id
    (``-1``): they count in the no-link scores (should not be linked), not in the ECE. A linker without a
    calibration gets the no-link scores of its decision and its fixed threshold only."""
    dev = dev_mentions(nlp, linker, docs)
    no_id = numpy.array([not m.ids for d in docs for m in d.mentions], dtype=bool)
    in_kb = dev.in_kb
    usable = numpy.array([bool(ev.candidates) for ev in dev.evidence], dtype=bool) & ~no_id
    conf = linker.calibration.confidence(dev.evidence) if linker.calibration is not None else None
    top = numpy.array([ev.candidates[0][1] if ev.candidates else -1.0 for ev in dev.evidence])
    decided = numpy.array([bool(cands) for cands, _ in decide(linker.cfg, linker.calibration, dev.evidence)])
    rules = _rules(linker.cfg, decided, top, conf)
    no_link = {rule: no_link_scores(in_kb, linked) for rule, linked in rules.items()}
    by_kind: Dict[str, Dict[str, Any]] = {}
    for kind, mask in ((NO_GOLD_ID, no_id), (NOT_IN_KB, ~in_kb & ~no_id)):
        if mask.any():  # this kind against the mentions whose concept is in the KB, the other kind left out
            rows = mask | in_kb
            by_kind[kind] = {rule: no_link_scores(in_kb[rows], linked[rows]) for rule, linked in rules.items()}
    section = {"no_link": no_link, "no_link_by_kind": by_kind, "gold_not_in_kb": int((~in_kb & ~no_id).sum()),
               "no_gold_id": int(no_id.sum())}
    if conf is None:
        return section
    return {"calibration": calibration_report(conf[usable], dev.correct[usable], bins), **section,
            "fitted": dict(linker.calibration.info)}


def calibration_results(settings: Dict[str, Any], docs: Sequence[Document], bins: int = 10) -> Dict[str, Any]:
    """``{system: section}`` for the run's pipeline systems whose linker has a calibration (others are
    named under ``"without calibration"``, their no-link scores of the fixed threshold under
    ``"no-link without calibration"``)."""
    import spacy

    out: Dict[str, Any] = {}
    for name, path in _pipelines(settings):
        nlp = spacy.load(path)
        _, linker = find_linker(nlp, path)
        if linker.calibration is None:
            out.setdefault(WITHOUT, []).append(name)
            out.setdefault(NO_LINK_ONLY, {})[name] = system_section(nlp, linker, docs, bins)
            continue
        out[name] = system_section(nlp, linker, docs, bins)
        logger.info("%s: ECE %.4f on %d mentions", name, out[name]["calibration"]["ece"], out[name]["calibration"]["n"])
    return out


def _pct(value: Optional[float]) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _no_link_table(sec: Dict[str, Any]) -> List[str]:
    groups = {"every mention that should not be linked": sec["no_link"], **sec.get("no_link_by_kind", {})}
    out = ["| should not be linked | no link when | no-link P | no-link R | no-link F1 | should not link "
           "| left unlinked |", "|---|---|---:|---:|---:|---:|---:|"]
    out += [f"| {group} | {rule} | {_pct(s['precision'])} | {_pct(s['recall'])} | {_pct(s['f1'])} | "
            f"{s['should_not_link']} | {s['left_unlinked']} |"
            for group, rules in groups.items() for rule, s in rules.items()]
    return out + [""]


def render_calibration(result: Dict[str, Any]) -> List[str]:
    """Markdown lines of the section (empty when the run has none)."""
    found = result.get("calibration") or {}
    sections = {k: v for k, v in found.items() if k not in (WITHOUT, NO_LINK_ONLY)}
    out: List[str] = []
    for name, sec in sections.items():
        cal = sec["calibration"]
        out += [f"## Calibration — {name}", "",
                f"_{cal['n']} mentions with candidates, top concept right: {_pct(cal['accuracy'])} %, mean "
                f"confidence {_pct(cal['mean_confidence'])} %; expected calibration error **{cal['ece']:.4f}** "
                f"({len(cal['bins'])} equal-width bins; mentions with a gold id); gold not in the pipeline's KB: "
                f"{sec['gold_not_in_kb']}, no gold id (-1): {sec.get('no_gold_id', 0)}_", "",
                "| confidence bin | mentions | mean confidence | right |", "|---|---:|---:|---:|"]
        out += [f"| {b['lower']:.1f}–{b['upper']:.1f} | {b['count']} | {_pct(b['confidence'])} | {_pct(b['accuracy'])} |"
                for b in cal["bins"]]
        out += [""] + _no_link_table(sec)
    for name, sec in (found.get(NO_LINK_ONLY) or {}).items():
        out += [f"## No-link — {name} (no calibration: the fixed threshold only)", "",
                f"_gold not in the pipeline's KB: {sec['gold_not_in_kb']}, no gold id (-1): {sec['no_gold_id']}_", ""]
        out += _no_link_table(sec)
    without = found.get(WITHOUT)
    if without:
        out += [f"_No calibration in: {', '.join(without)} (fit one with `spacy-sapbert calibrate`)._", ""]
    return out


def plot_calibration(result: Dict[str, Any], path: Any) -> bool:
    """The reliability plot of every calibrated system; False (nothing written) when there is none."""
    curves = {name: sec["calibration"]["bins"] for name, sec in (result.get("calibration") or {}).items()
              if name not in (WITHOUT, NO_LINK_ONLY)}
    if not curves:
        return False
    plot_reliability(curves, ensure_path(path), title=result["setting"]["name"] + " — reliability")
    return True


__all__ = ["calibration_results", "system_section", "render_calibration", "plot_calibration", "NO_GOLD_ID",
           "NOT_IN_KB", "WITHOUT", "NO_LINK_ONLY"]
