"""Knowing when not to link: calibrated confidence against fixed cosine thresholds (docs/linker.md).

The linker: ``sapbert_linker`` with the offline all-MiniLM-L6-v2 (mean pooling), MEDIC 2012 as the KB
(exact index), gold mention spans, defaults otherwise (abbreviations resolved, k = 10). Features and
fit: :mod:`spacy_sapbert.calibration` (what ``spacy-sapbert calibrate`` runs).

1. Calibration error (equal-width bins, 10): BC5CDR-disease dev and NCBI-disease dev each split by document
   in two seeded halves, fitted on one, measured on the other (the issue's protocol: a held-back part of the dev
   set); NCBI-disease also fitted on dev, measured on test (another split: the harder test), and fitted on
   train + dev (7x the mentions; the name-only linker learns nothing from train, so its train mentions
   are as new to it as dev's), measured on test; and fitted on NCBI train + one dev half, measured on the
   other dev half (the held-back part of the dev set, with a fit set 14x its size). A half of NCBI dev is
   ~400 mentions in ~50 documents, so one split's ECE moves with the split: ``--splits`` seeded splits give
   each protocol's spread (table "over seeded splits").
2. No-link: 10 % of the MEDIC concepts (seeded) are removed from the KB; their mentions (and BC5CDR's
   ``-1`` mentions) should not be linked. On the same halves and dev -> test (NCBI) the
   no-link precision / recall / F1 of the fixed 0.5 cosine threshold, of the best cosine threshold
   chosen on the fit part, and of the calibrated confidence with its threshold chosen on the fit part
   (and at 0.5) are compared; "linked right" is the share of all mentions that are linked to a right
   concept (what no-link costs). With the full MEDIC, the same on BC5CDR's held-back half for its ``-1``
   mentions and for its ids MEDIC lacks, each kind against the mentions whose concept is in the KB.
3. The features: the candidate sets of :data:`spacy_sapbert.calibration.selection.FEATURE_SETS` ranked by
   document-grouped 5-fold cross-validation inside each fit set (5 seeds), never on what is measured;
   the defaults are the set with the lowest out-of-fold ECE. The ECE table gives each held-back ECE a
   95 % interval (documents resampled) and the ECE a perfectly calibrated confidence would show on the
   same mentions by chance, and the ECE the earlier default (seven features) has there.

    .venv/bin/python benchmarks/calibration.py [--seed 0] [--cache-dir /work/cache/calibration]

Name vectors are kept in the evaluation's vector cache (``--cache-dir``), so a rerun encodes nothing
but the mentions. CPU only; accuracy, not timing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from common import BC5CDR, MEDIC, NCBI, OUTPUT, minilm_path
from results_io import table, write_results

REMOVED = 0.10
FIXED = 0.5
CHOOSERS = ("BC5CDR-disease dev, half -> other half", "NCBI-disease dev -> test")  # fit sets that choose the features
EARLIER = ("top_score", "margin", "close_concepts", "is_kb_name", "log_chars", "words", "has_digit")  # the old default


def load_docs(path: Path, types: Sequence[str]) -> list:
    """Every mention, those without a gold id (BC5CDR's ``-1``) too: they should not be linked."""
    from spacy_sapbert.mentions.datasets import read_dataset

    return read_dataset(path, types=list(types) or None)


def make_linker(kb, encoder, cache_dir: Path, model: str):
    import spacy

    from spacy_sapbert.evaluation.cache import VectorCache, encoder_key
    from spacy_sapbert.index import ConceptIndex

    cache = VectorCache(cache_dir, encoder_key(encoder), dim=encoder.dim)
    vectors = cache.get(encoder, list(kb.names), batch_size=256, show_progress=False)
    index = ConceptIndex.from_vectors(kb, vectors, encoder, kind="exact", show_progress=False)
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": model, "pooling": "mean", "device": "cpu",
                                                    "threshold": -1.0, "max_length": encoder.max_length})
    linker.set_resources(encoder, index)
    return nlp, linker


def reduced_kb(concepts: Sequence[Any], share: float, seed: int):
    """A KB of ``concepts`` without a seeded ``share`` of them (alternative ids kept with each concept)."""
    import numpy

    from spacy_sapbert.kb import KnowledgeBase

    ids = sorted(c.concept_id for c in concepts)
    rng = numpy.random.default_rng(seed)
    removed = set(rng.choice(ids, size=int(round(share * len(ids))), replace=False).tolist())
    kept = [c for c in concepts if c.concept_id not in removed]
    return KnowledgeBase.from_concepts(kept, source="medic minus 10%"), removed


def no_link_rows(name: str, fit_part, test_part, cal, keep=None) -> List[List[Any]]:
    """Rows: method, threshold, no-link P / R / F1, linked right (share of all test mentions). Thresholds are
    chosen on the whole fit part; ``keep`` (a mask over the test part) scores only those test mentions."""
    import numpy

    from spacy_sapbert.calibration.metrics import best_threshold, no_link_scores

    def top(dev):
        return numpy.array([ev.candidates[0][1] if ev.candidates else -1.0 for ev in dev.evidence])

    def row(label, threshold, values, dev):
        linked = values >= threshold
        s = no_link_scores(dev.in_kb, linked)
        right = float((linked & dev.correct).mean())
        return [name, label, round(float(threshold), 4), round(s["precision"], 4), round(s["recall"], 4),
                round(s["f1"], 4), round(right, 4), s["should_not_link"], s["n"]]

    best_cos = best_threshold(top(fit_part), fit_part.in_kb)
    best_conf = best_threshold(cal.confidence(fit_part.evidence), fit_part.in_kb)
    if keep is not None:
        test_part = subset(test_part, keep)
    cos_test, conf_test = top(test_part), cal.confidence(test_part.evidence)
    return [row("cosine, fixed 0.5", FIXED, cos_test, test_part),
            row("cosine, best on the fit part", best_cos, cos_test, test_part),
            row("calibrated confidence, 0.5", 0.5, conf_test, test_part),
            row("calibrated, threshold chosen on the fit part", best_conf, conf_test, test_part)]


def subset(dev, mask):
    from spacy_sapbert.evaluation.calibration_fit import DevMentions

    keep = [i for i, k in enumerate(mask) if k]
    return DevMentions([dev.evidence[i] for i in keep], [dev.gold[i] for i in keep], [dev.doc_index[i] for i in keep])


def fit_on(linker, dev, features: Sequence[str] = ()):
    from spacy_sapbert.calibration.features import DEFAULT_FEATURES
    from spacy_sapbert.evaluation.calibration_fit import fit_dev

    cal, _ = fit_dev(linker, dev, holdout=0.0, features=tuple(features) or DEFAULT_FEATURES)
    return cal


def concat(first, second):
    """Two sets of dev mentions as one, the second's documents numbered after the first's."""
    from spacy_sapbert.evaluation.calibration_fit import DevMentions

    offset = max(first.doc_index, default=-1) + 1
    return DevMentions(first.evidence + second.evidence, first.gold + second.gold,
                       first.doc_index + [i + offset for i in second.doc_index])


def held_half(dev, seed: int):
    """A mask over the mentions: True for those of the seeded held-back half of the documents."""
    import numpy

    from spacy_sapbert.evaluation.calibration_fit import split_documents

    held_doc = split_documents(max(dev.doc_index) + 1, 0.5, seed)
    return numpy.array([held_doc[i] for i in dev.doc_index])


def halves(dev, seed: int):
    held = held_half(dev, seed)
    return subset(dev, ~held), subset(dev, held)


def selection_rows(name: str, fit_part, chooses: bool) -> List[List[Any]]:
    """The candidate feature sets ranked by document-grouped 5-fold cross-validation inside ``fit_part`` (5 seeds)."""
    from spacy_sapbert.calibration.selection import compare_feature_sets

    usable = subset(fit_part, [bool(ev.candidates) for ev in fit_part.evidence])
    return [[name, r["name"], ", ".join(r["features"]), round(r["ece"], 4), round(r["ece_sd"], 4),
             round(r["log_loss"], 4), "yes" if chooses else "no"]
            for r in compare_feature_sets(usable.evidence, usable.correct, usable.doc_index)]


def chosen(rows: List[List[Any]]) -> str:
    """The feature set with the lowest mean out-of-fold ECE over the fit sets that choose."""
    from collections import defaultdict

    eces: Dict[str, List[float]] = defaultdict(list)
    for row in rows:
        if row[-1] == "yes":
            eces[row[1]].append(row[3])
    return min(eces, key=lambda k: (sum(eces[k]) / len(eces[k]), k))


def ece_row(name: str, fit_part, test_part, cal, bins: int = 10, earlier=None) -> Tuple[List[Any], Dict[str, Any]]:
    """ECE on the usable test mentions with its 95 % document-bootstrap interval and the noise floor (what a
    perfectly calibrated confidence shows on them by chance); ``earlier``: a calibration on other features."""
    from spacy_sapbert.calibration.metrics import calibration_report, ece_interval, ece_noise_floor

    usable = [bool(ev.candidates) for ev in test_part.evidence]
    test = subset(test_part, usable)
    conf = cal.confidence(test.evidence)
    rep = calibration_report(conf, test.correct, bins)
    raw = calibration_report([max(0.0, min(1.0, ev.candidates[0][1])) for ev in test.evidence], test.correct, bins)
    low, high = ece_interval(conf, test.correct, test.doc_index, bins=bins)
    floor, floor_95 = ece_noise_floor(conf, bins=bins)
    before = calibration_report(earlier.confidence(test.evidence), test.correct, bins)["ece"] if earlier else None
    return ([name, len(fit_part.evidence), rep["n"], round(rep["accuracy"], 4), round(rep["mean_confidence"], 4),
             round(rep["ece"], 4), f"{low:.3f}–{high:.3f}", f"{floor:.3f} / {floor_95:.3f}", _round(before),
             round(raw["ece"], 4)], {"calibrated": rep, "cosine_as_probability": raw})


def by_text(dev, cal, top: int = 5) -> List[List[Any]]:
    """The ``top`` mention texts with the largest |sum(right - confidence)|: [text, mentions, sum]."""
    from collections import defaultdict

    gap: Dict[str, float] = defaultdict(float)
    count: Dict[str, int] = defaultdict(int)
    for ev, conf, right in zip(dev.evidence, cal.confidence(dev.evidence), dev.correct):
        if ev.candidates:
            gap[ev.text] += float(right) - float(conf)
            count[ev.text] += 1
    worst = sorted(gap, key=lambda t: (-abs(gap[t]), t))[:top]
    return [[t, count[t], round(gap[t], 2)] for t in worst]


def split_rows(linker, devs, seeds: Sequence[int], bins: int = 10) -> List[List[Any]]:
    """Each halves protocol over seeded splits of the documents: the mean, least and largest held-back ECE, how
    many splits stay at or under 0.05, and the mean noise floor of the held-back halves."""
    import numpy

    from spacy_sapbert.calibration.metrics import calibration_report, ece_noise_floor

    protocols = [("BC5CDR-disease dev, half -> other half", "BC5CDR-disease dev", False),
                 ("NCBI-disease dev, half -> other half", "NCBI-disease dev", False),
                 ("NCBI-disease train + dev half -> other dev half", "NCBI-disease dev", True)]
    rows = []
    for name, dev_name, with_train in protocols:
        eces, floors = [], []
        for seed in seeds:
            fit_part, test_part = halves(devs[dev_name], seed)
            if with_train:
                fit_part = concat(devs["NCBI-disease train"], fit_part)
            test = subset(test_part, [bool(ev.candidates) for ev in test_part.evidence])
            conf = fit_on(linker, fit_part).confidence(test.evidence)
            eces.append(calibration_report(conf, test.correct, bins)["ece"])
            floors.append(ece_noise_floor(conf, bins=bins)[0])
        eces_a = numpy.asarray(eces)
        rows.append([name, len(seeds), round(float(eces_a.mean()), 4), round(float(eces_a.min()), 4),
                     round(float(eces_a.max()), 4), int((eces_a <= 0.05).sum()), round(float(numpy.mean(floors)), 4)])
    return rows


def _round(value: Any) -> Any:
    return None if value is None else round(value, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, default=OUTPUT / "cache" / "calibration")
    parser.add_argument("--splits", type=int, default=10, help="seeded splits of the dev halves (from --seed on)")
    parser.add_argument("--no-write", action="store_true", help="print, do not write benchmarks/results")
    args = parser.parse_args()

    import numpy
    import torch

    from spacy_sapbert.calibration.features import DEFAULT_FEATURES
    from spacy_sapbert.evaluation.calibration_fit import dev_mentions
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.readers.medic import read_medic

    torch.manual_seed(0)
    model = minilm_path()
    encoder = Encoder.load(model, pooling="mean", max_length=25, device="cpu")
    concepts = list(read_medic(MEDIC))
    kb = KnowledgeBase.from_concepts(concepts, source="medic")
    sets = {"BC5CDR-disease dev": load_docs(BC5CDR["dev"], ["Disease"]),
            "NCBI-disease train": load_docs(NCBI["train"], []),
            "NCBI-disease dev": load_docs(NCBI["dev"], []),
            "NCBI-disease test": load_docs(NCBI["test"], [])}
    no_id = {name: numpy.array([not m.ids for d in docs for m in d.mentions]) for name, docs in sets.items()}
    ece_rows, nolink_rows, bin_rows, select_rows, nil_rows = [], [], [], [], []
    figures: Dict[str, Any] = {"removed_concepts": None, "features": list(DEFAULT_FEATURES)}
    small_kb, removed = reduced_kb(concepts, REMOVED, args.seed)
    figures["removed_concepts"] = len(removed)
    for label, this_kb in (("full", kb), ("minus10", small_kb)):
        nlp, linker = make_linker(this_kb, encoder, args.cache_dir, model)
        devs = {name: dev_mentions(nlp, linker, docs) for name, docs in sets.items()}
        a, b = halves(devs["BC5CDR-disease dev"], args.seed)
        bc5_held_no_id = no_id["BC5CDR-disease dev"][held_half(devs["BC5CDR-disease dev"], args.seed)]
        na, nb = halves(devs["NCBI-disease dev"], args.seed)
        pairs = [("BC5CDR-disease dev, half -> other half", a, b),
                 ("NCBI-disease dev, half -> other half", na, nb),
                 ("NCBI-disease dev -> test", devs["NCBI-disease dev"], devs["NCBI-disease test"]),
                 ("NCBI-disease train + dev -> test", concat(devs["NCBI-disease train"], devs["NCBI-disease dev"]),
                  devs["NCBI-disease test"]),
                 ("NCBI-disease train + dev half -> other dev half", concat(devs["NCBI-disease train"], na), nb)]
        for name, fit_part, test_part in pairs:
            print(f"{label}: {name}: fit {len(fit_part.evidence)} mentions, measured on {len(test_part.evidence)}",
                  file=sys.stderr)
            cal = fit_on(linker, fit_part)
            if label == "full":
                # the defaults are chosen on the dev fit sets (BC5CDR's half, NCBI dev); NCBI's dev half (a part of
                # NCBI dev) and train + dev are shown, not used to choose
                select_rows.extend(selection_rows(name.split(" -> ")[0].replace(", half", ", fit half"), fit_part,
                                                  chooses=name in CHOOSERS))
                row, detail = ece_row(name, fit_part, test_part, cal, earlier=fit_on(linker, fit_part, EARLIER))
                ece_rows.append(row)
                figures.setdefault("miscalibration_by_text", {})[name] = by_text(test_part, cal)
                if name.startswith("BC5CDR"):  # the -1 mentions and the ids MEDIC lacks, each against the in-KB ones
                    for kind, mask in (("no gold id (-1)", bc5_held_no_id),
                                       ("gold id not in MEDIC", ~test_part.in_kb & ~bc5_held_no_id)):
                        nil_rows.extend([kind] + r for r in no_link_rows(name, fit_part, test_part, cal,
                                                                         keep=mask | test_part.in_kb))
                for cal_bin, raw_bin in zip(detail["calibrated"]["bins"], detail["cosine_as_probability"]["bins"]):
                    bin_rows.append([name, f"{cal_bin['lower']:.1f}-{cal_bin['upper']:.1f}", cal_bin["count"],
                                     _round(cal_bin["confidence"]), _round(cal_bin["accuracy"]), raw_bin["count"],
                                     _round(raw_bin["accuracy"])])
                figures.setdefault("coefficients", {})[name] = {f: round(c, 3) for f, c in zip(cal.feature_names,
                                                                                               cal.coef)}
            else:
                nolink_rows.extend(no_link_rows(name, fit_part, test_part, cal))
        if label == "full":
            split_table = split_rows(linker, devs, list(range(args.seed, args.seed + args.splits)))
        figures.setdefault("gold_not_in_kb", {})[label] = {n: int((~d.in_kb).sum()) for n, d in devs.items()}
        figures.setdefault("mentions", {})[label] = {n: len(d.evidence) for n, d in devs.items()}
    from spacy_sapbert.calibration.selection import FEATURE_SETS

    figures["chosen_by_cross_validation"] = chosen(select_rows)
    figures["defaults_are_the_chosen_set"] = list(FEATURE_SETS[figures["chosen_by_cross_validation"]]) == list(
        DEFAULT_FEATURES)
    tables = {
        "Calibration error, MiniLM (mean) + MEDIC": table(
            ["fit -> measured on", "fit mentions", "measured mentions", "top-1 right", "mean confidence",
             "ECE calibrated", "95 % interval (bootstrap over documents)", "noise floor (mean / 95th pct)",
             "ECE, the earlier seven features", "ECE raw cosine"], ece_rows),
        "Calibration error of the halves protocols over seeded splits, MiniLM (mean) + MEDIC": table(
            ["fit -> measured on", "splits", "mean ECE", "least", "largest", "splits with ECE <= 0.05",
             "mean noise floor"], split_table),
        "Reliability (10 equal-width bins), MiniLM (mean) + MEDIC": table(
            ["fit -> measured on", "confidence bin", "mentions", "mean confidence", "right", "mentions (raw cosine)",
             "right (raw cosine)"], bin_rows),
        "No-link with 10% of MEDIC removed, MiniLM (mean)": table(
            ["fit -> measured on", "method", "threshold", "no-link P", "no-link R", "no-link F1", "linked right",
             "should not link", "mentions"], nolink_rows),
        "No-link on BC5CDR's -1 mentions and ids not in MEDIC (full MEDIC), MiniLM (mean)": table(
            ["should not be linked", "fit -> measured on", "method", "threshold", "no-link P", "no-link R",
             "no-link F1", "linked right", "should not link", "mentions"], nil_rows),
        "Feature sets by document-grouped 5-fold cross-validation inside the fit set (5 seeds)": table(
            ["fit set", "feature set", "features", "out-of-fold ECE", "sd over seeds", "out-of-fold log loss",
             "chooses the defaults"], select_rows),
    }
    notes = [f"seed {args.seed} (the over-splits table: seeds {args.seed}-{args.seed + args.splits - 1}); {len(removed)} of {len(kb)} MEDIC concepts removed for the no-link table; "
             "gold spans; mentions whose gold is not in the KB (BC5CDR -1, removed concepts) count as wrong in "
             "the fit and as 'should not link'",
             "ECE raw cosine: the top-1 cosine (clipped to [0, 1]) read as a probability, for comparison",
             "the interval resamples whole documents (1000 times; normal interval): a mention the linker gets "
             "wrong repeats through a document, so its mentions are not independent; the noise floor draws the "
             "outcomes from the confidences themselves (1000 times)",
             "figures.miscalibration_by_text: on the measured set, after the features were chosen, the mention "
             "texts with the largest sum of (right - confidence): where the remaining error comes from"]
    if args.no_write:
        import json

        print(json.dumps(tables, indent=1))
        return
    print(write_results("calibration", tables, notes=notes, figures=figures))


if __name__ == "__main__":
    main()
