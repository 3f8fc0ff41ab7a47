"""benchmarks/calibration.py without real data: its rows from hand-made dev mentions, its results file rendered."""
from __future__ import annotations

import numpy
import pytest

from spacy_sapbert.calibration import Evidence, feature_matrix, fit
from spacy_sapbert.evaluation.calibration_fit import DevMentions


@pytest.fixture()
def bench(bench_scripts):
    return bench_scripts.load("calibration"), bench_scripts.results_io, bench_scripts.render, bench_scripts.results


def _dev(n, seed):
    """Top scores uniform in [0, 1]; in-KB mentions right with probability = score; a fifth not in the KB."""
    rng = numpy.random.default_rng(seed)
    score = rng.uniform(0, 1, n)
    in_kb = rng.uniform(0, 1, n) > 0.2
    right = in_kb & (rng.uniform(0, 1, n) < score)
    evidence = [Evidence("m", [("A" if r else "B", float(s)), ("C", float(s) - 0.2)]) for s, r in zip(score, right)]
    gold = [frozenset({"A"}) if k else frozenset() for k in in_kb]
    return DevMentions(evidence, gold, [i // 4 for i in range(n)])


class _Linker:
    cfg = {"k": 10}
    kb = type("KB", (), {"checksum": "kb"})()
    encoder = type("Enc", (), {"fingerprint": "enc"})()


def test_rows_and_rendered_tables(bench):
    module, results_io, render, results = bench
    fit_part, test_part = _dev(2000, 1), _dev(2000, 2)
    cal = module.fit_on(_Linker(), fit_part)
    earlier = module.fit_on(_Linker(), fit_part, module.EARLIER)
    row, detail = module.ece_row("synthetic", fit_part, test_part, cal, earlier=earlier)
    assert row[0] == "synthetic" and row[1] == 2000 and row[2] == 2000 and row[5] < 0.05
    assert cal.feature_names != earlier.feature_names and 0 <= row[8] < 0.05  # the earlier seven features beside
    low, high = (float(v) for v in row[6].split("–"))
    floor, floor_95 = (float(v) for v in row[7].split(" / "))
    assert low <= row[5] <= high and 0 < floor < floor_95
    assert sum(b["count"] for b in detail["calibrated"]["bins"]) == 2000
    rows = module.no_link_rows("synthetic", fit_part, test_part, cal)
    assert [r[1] for r in rows] == ["cosine, fixed 0.5", "cosine, best on the fit part", "calibrated confidence, 0.5",
                                    "calibrated, threshold chosen on the fit part"]
    assert all(r[7] == int((~test_part.in_kb).sum()) and r[8] == 2000 for r in rows)
    # the fixed cosine threshold: every mention scoring below 0.5 is left unlinked
    fixed = rows[0]
    unlinked = numpy.array([ev.candidates[0][1] < 0.5 for ev in test_part.evidence])
    want = ~test_part.in_kb
    assert fixed[3] == round((unlinked & want).sum() / unlinked.sum(), 4)
    results_io.write_results("calibration", {"t": results_io.table(
        ["fit -> measured on", "method", "threshold", "no-link P", "no-link R", "no-link F1", "linked right",
         "should not link", "mentions"], rows)}, command="python benchmarks/calibration.py --seed 0")
    page = render.render_all(results)
    assert "calibrated, threshold chosen on the fit part" in page


def test_reduced_kb_removes_a_seeded_tenth(bench):
    from spacy_sapbert.kb import Concept

    module = bench[0]
    concepts = [Concept(f"D{i:03d}", f"disease {i}", (), ("Disease",), alt_ids=(f"OMIM:{i}",)) for i in range(50)]
    kb, removed = module.reduced_kb(concepts, 0.1, seed=0)
    assert len(removed) == 5 and len(kb) == 45
    assert all(cid not in kb for cid in removed)
    assert module.reduced_kb(concepts, 0.1, seed=0)[1] == removed != module.reduced_kb(concepts, 0.1, seed=1)[1]
    kept = next(c for c in concepts if c.concept_id not in removed)
    assert kb.resolve_id(kept.alt_ids[0]) == kept.concept_id  # alternative ids kept


def test_feature_matrix_of_the_synthetic_set_is_finite():
    dev = _dev(100, 0)
    x = feature_matrix(dev.evidence, ("top_score", "margin"))
    assert numpy.isfinite(x).all() and x.shape == (100, 2)
    fit(x, dev.correct, ("top_score", "margin"), kb_checksum="k", encoder_fingerprint="e")


def test_feature_selection_rows_choose_on_the_dev_fit_sets_only(bench):
    module = bench[0]
    both = module.concat(_dev(200, 1), _dev(200, 2))
    assert len(both.evidence) == 400 and both.doc_index[200] == 50 and len(set(both.doc_index)) == 100
    rows = module.selection_rows("synthetic", _dev(400, 3), chooses=True)
    from spacy_sapbert.calibration.selection import FEATURE_SETS

    assert sorted(r[1] for r in rows) == sorted(FEATURE_SETS) and all(r[-1] == "yes" for r in rows)
    assert [r[3] for r in rows] == sorted(r[3] for r in rows)
    # the set with the lowest mean ECE over the choosing fit sets; a set shown only ("no") never decides
    fake = [["a", "x", "", 0.03, 0, 0, "yes"], ["b", "x", "", 0.05, 0, 0, "yes"], ["a", "y", "", 0.045, 0, 0, "yes"],
            ["b", "y", "", 0.045, 0, 0, "yes"], ["c", "x", "", 0.5, 0, 0, "no"], ["c", "z", "", 0.0, 0, 0, "no"]]
    assert module.chosen(fake) == "x"
    assert module.chosen(fake[:4] + [["c", "y", "", 0.0, 0, 0, "yes"]]) == "y"
