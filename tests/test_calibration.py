"""Calibration without spaCy: features, fitting where the truth is known, ECE against a brute-force
reference, no-link scores, and the JSON file (round trip, wrong KB / encoder, damage)."""
from __future__ import annotations

import json
import math

import numpy
import pytest

from spacy_sapbert.calibration import Calibration, Evidence, feature_matrix, fit
from spacy_sapbert.calibration.features import DEFAULT_FEATURES, FEATURES, check_features, describe
from spacy_sapbert.calibration.metrics import (best_threshold, calibration_report, expected_calibration_error,
                                               no_link_scores, reliability)
from spacy_sapbert.errors import ConfigError, DataFormatError, EmptyResultError, IncompatibleError


def test_features_of_one_mention():
    ev = Evidence("heart attack 2", [("D1", 0.9), ("D2", 0.89), ("D3", 0.5)], is_name=True)
    got = describe(ev, list(FEATURES))
    assert set(DEFAULT_FEATURES) < set(FEATURES)
    assert got["top_score"] == pytest.approx(0.9)
    assert got["margin"] == pytest.approx(0.01)
    assert got["close_concepts"] == 1.0  # D2 within 0.02, D3 not
    assert got["is_kb_name"] == 1.0
    assert got["log_chars"] == pytest.approx(math.log1p(14))
    assert got["words"] == 3.0 and got["has_digit"] == 1.0
    lonely = describe(Evidence("flu", [("D1", 0.4)]), ["margin", "close_concepts", "is_kb_name", "has_digit"])
    assert lonely == {"margin": pytest.approx(1.4), "close_concepts": 0.0, "is_kb_name": 0.0, "has_digit": 0.0}


def test_extra_features_and_unknown_names():
    ev = Evidence("flu", [("D1", 0.4)], extras={"sparse": 0.25})
    assert feature_matrix([ev], ["extra:sparse", "top_score"]).tolist() == [[0.25, 0.4]]
    with pytest.raises(ConfigError, match=r"SB-E792.*extra:rerank"):
        feature_matrix([ev], ["extra:rerank"])
    with pytest.raises(ConfigError, match=r"SB-E792.*no_such_feature"):
        check_features(["top_score", "no_such_feature"], path="cal.json")
    check_features(["extra:sparse"], extras=["sparse"])


def _logistic_sample(n, seed, a=-3.0, b=6.0):
    """Top scores uniform in [0, 1]; the top concept is right with probability sigmoid(a + b * score)."""
    rng = numpy.random.default_rng(seed)
    score = rng.uniform(0, 1, n)
    truth = 1 / (1 + numpy.exp(-(a + b * score)))
    right = rng.uniform(0, 1, n) < truth
    evidence = [Evidence("m", [("C1", float(s)), ("C2", float(s) - 0.1)]) for s in score]
    return evidence, right, truth


def test_fit_recovers_a_known_monotone_truth():
    evidence, right, _ = _logistic_sample(20000, seed=1)
    x = feature_matrix(evidence, ["top_score"])
    cal = fit(x, right, ["top_score"], kb_checksum="kb1", encoder_fingerprint="enc1")
    # the standardised coefficient back on the raw scale: b = coef / scale, a = intercept - coef * mean / scale
    b = cal.coef[0] / cal.scale[0]
    a = cal.intercept - cal.coef[0] * cal.mean[0] / cal.scale[0]
    assert b == pytest.approx(6.0, abs=0.5) and a == pytest.approx(-3.0, abs=0.3)
    test_ev, test_right, truth = _logistic_sample(5000, seed=2)
    predicted = cal.confidence(test_ev)
    assert numpy.abs(predicted - truth).max() < 0.05
    assert expected_calibration_error(predicted, test_right) < 0.03
    order = numpy.argsort([ev.candidates[0][1] for ev in test_ev])
    assert (numpy.diff(predicted[order]) >= 0).all()  # monotone in the score
    # a mention without candidates has confidence 0, whatever the model says
    assert cal.confidence([Evidence("", [])]).tolist() == [0.0]
    # deterministic
    again = fit(x, right, ["top_score"], kb_checksum="kb1", encoder_fingerprint="enc1")
    assert again == cal


def test_fit_needs_both_outcomes_and_matching_shapes():
    x = numpy.zeros((4, 1))
    with pytest.raises(EmptyResultError, match=r"SB-E795.*4 mentions, 4 with the right"):
        fit(x, [True] * 4, ["top_score"], kb_checksum="k", encoder_fingerprint="e")
    with pytest.raises(ConfigError, match="SB-E795"):
        fit(x, [True, False, True], ["top_score"], kb_checksum="k", encoder_fingerprint="e")
    with pytest.raises(ConfigError, match="SB-E792"):
        fit(x, [True, False, True, False], ["nope"], kb_checksum="k", encoder_fingerprint="e")


def _brute_force_ece(conf, right, bins):
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [i for i, c in enumerate(conf) if (lo <= c < hi) or (b == bins - 1 and c == 1.0)]
        if members:
            acc = sum(right[i] for i in members) / len(members)
            mean = sum(conf[i] for i in members) / len(members)
            total += len(members) / len(conf) * abs(acc - mean)
    return total


@pytest.mark.parametrize("bins", [1, 3, 10, 15])
def test_ece_matches_a_brute_force_reference(bins):
    rng = numpy.random.default_rng(bins)
    conf = numpy.concatenate([rng.uniform(0, 1, 300), [0.0, 1.0, 0.5, 0.1, 0.9]])
    right = rng.uniform(0, 1, conf.size) < conf ** 2
    assert expected_calibration_error(conf, right, bins) == pytest.approx(_brute_force_ece(conf.tolist(),
                                                                                         right.tolist(), bins))
    table = reliability(conf, right, bins)
    assert sum(b["count"] for b in table) == conf.size and len(table) == bins
    assert table[-1]["upper"] == 1.0


def test_ece_of_hand_made_bins():
    # bin [0.8, 0.9): two mentions at 0.8, one right -> |0.5 - 0.8| * 2/4; bin [0.2, 0.3): two at 0.2, none right
    conf, right = [0.8, 0.8, 0.2, 0.2], [True, False, False, False]
    assert expected_calibration_error(conf, right, 10) == pytest.approx(0.5 * 0.3 + 0.5 * 0.2)
    report = calibration_report(conf, right, 10)
    assert report["n"] == 4 and report["accuracy"] == 0.25 and report["bins"][8]["count"] == 2
    assert expected_calibration_error([], [], 10) == 0.0


@pytest.mark.parametrize("conf,bins", [([float("nan")], 10), ([1.5], 10), ([-0.1], 10), ([0.5], 0), ([0.5], True)])
def test_ece_refuses_bad_input(conf, bins):
    with pytest.raises(ConfigError, match="SB-E796"):
        expected_calibration_error(conf, [True], bins)


def test_no_link_scores_and_best_threshold():
    should_link = [True, True, True, False, False]
    linked = [True, False, True, False, True]
    got = no_link_scores(should_link, linked)
    # left unlinked: mention 1 (should link: fp) and 3 (right: tp); mention 4 linked but should not (fn)
    assert (got["tp"], got["fp"], got["fn"]) == (1, 1, 1)
    assert got["precision"] == 0.5 and got["recall"] == 0.5 and got["f1"] == 0.5
    assert no_link_scores([True], [True])["f1"] == 0.0
    values = [0.9, 0.8, 0.7, 0.3, 0.2]
    t = best_threshold(values, should_link)
    assert 0.3 < t <= 0.7 and no_link_scores(should_link, [v >= t for v in values])["f1"] == 1.0


@pytest.fixture()
def calibration():
    evidence, right, _ = _logistic_sample(500, seed=3)
    x = feature_matrix(evidence, DEFAULT_FEATURES)
    return fit(x, right, DEFAULT_FEATURES, kb_checksum="kb-sum", encoder_fingerprint="enc-fp",
               settings={"k": 10}, info={"ece_holdout": 0.01})


def test_save_load_round_trip(calibration, tmp_path):
    path = tmp_path / "calibration.json"
    calibration.to_disk(path)
    loaded = Calibration.from_disk(path, kb_checksum="kb-sum", encoder_fingerprint="enc-fp")
    assert loaded == calibration
    evidence, _, _ = _logistic_sample(50, seed=4)
    assert loaded.confidence(evidence).tolist() == calibration.confidence(evidence).tolist()
    assert json.loads(path.read_text())["calibration"]["feature_names"] == list(DEFAULT_FEATURES)
    assert loaded.settings_diff({"k": 20, "other": 1}) == {"k": (10, 20)}


@pytest.mark.parametrize("kb,enc,names", [("other-kb", "enc-fp", ("kb-sum", "other-kb")),
                                          ("kb-sum", "other-enc", ("enc-fp", "other-enc"))])
def test_a_calibration_of_another_kb_or_encoder_is_refused_naming_both(calibration, tmp_path, kb, enc, names):
    path = tmp_path / "calibration.json"
    calibration.to_disk(path)
    with pytest.raises(IncompatibleError, match="SB-E790") as err:
        Calibration.from_disk(path, kb_checksum=kb, encoder_fingerprint=enc)
    assert all(name in str(err.value) for name in names) and str(path) in str(err.value)


def _damage(text, how):
    data = json.loads(text)
    if how == "truncated":
        return text[: len(text) // 2]
    if how == "edited":
        data["calibration"]["coef"][0] += 1.0
    elif how == "format":
        data["format"] = "something.else"
    elif how == "version":
        data["version"] = 99
    elif how == "resigned_nan":  # a consistent sha256 over a payload that is not usable
        from spacy_sapbert.base.signed_json import digest as _digest

        data["calibration"]["scale"][0] = -1.0
        data["sha256"] = _digest(data["calibration"])
    elif how == "resigned_lengths":
        from spacy_sapbert.base.signed_json import digest as _digest

        data["calibration"]["coef"] = data["calibration"]["coef"][:2]
        data["sha256"] = _digest(data["calibration"])
    return json.dumps(data)


@pytest.mark.parametrize("how", ["truncated", "edited", "format", "version", "resigned_nan", "resigned_lengths",
                                 "binary", "empty"])
def test_a_damaged_calibration_file_is_a_coded_error_at_load(calibration, tmp_path, how):
    path = tmp_path / "calibration.json"
    calibration.to_disk(path)
    if how == "binary":
        path.write_bytes(b"\xff\xfe\x00garbage")
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.write_text(_damage(path.read_text(), how))
    with pytest.raises(DataFormatError, match="SB-E791") as err:
        Calibration.from_disk(path)
    assert str(path) in str(err.value)


def test_missing_feature_at_load_is_a_coded_error(calibration, tmp_path):
    from spacy_sapbert.base.signed_json import digest as _digest

    path = tmp_path / "calibration.json"
    calibration.to_disk(path)
    data = json.loads(path.read_text())
    data["calibration"]["feature_names"][0] = "extra:rerank_score"
    data["sha256"] = _digest(data["calibration"])
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"SB-E792.*extra:rerank_score"):
        Calibration.from_disk(path, kb_checksum="kb-sum", encoder_fingerprint="enc-fp")


def _documents(n_docs=60, per_doc=12, seed=0):
    """Mentions in documents: a known P(right) = sigmoid(4 * (top - 0.6)); each document's mentions share a
    length (a feature that says nothing about being right)."""
    rng = numpy.random.default_rng(seed)
    evidence, right, groups = [], [], []
    for d in range(n_docs):
        words = int(rng.integers(1, 6))
        for _ in range(per_doc):
            top = float(rng.uniform(0.2, 1.0))
            evidence.append(Evidence(" ".join(["w"] * words), [("A", top), ("B", top - 0.1)]))
            right.append(bool(rng.random() < 1 / (1 + numpy.exp(-8 * (top - 0.6)))))
            groups.append(d)
    return evidence, numpy.array(right), numpy.array(groups)


def test_cross_validated_probabilities_never_see_their_own_document():
    from spacy_sapbert.calibration.selection import cross_validated

    evidence, right, groups = _documents()
    x = feature_matrix(evidence, ["top_score"])
    p = cross_validated(x, right, groups, ["top_score"], folds=5, seed=0)
    assert p.shape == right.shape and expected_calibration_error(p, right) < 0.08
    # flipping the outcomes of one document changes the others' probabilities, never its own
    flipped = right.copy()
    flipped[groups == 7] = ~flipped[groups == 7]
    q = cross_validated(x, flipped, groups, ["top_score"], folds=5, seed=0)
    assert numpy.array_equal(p[groups == 7], q[groups == 7]) and not numpy.array_equal(p, q)
    with pytest.raises(ConfigError, match="SB-E796"):
        cross_validated(x, right, groups, ["top_score"], folds=61)


def test_compare_feature_sets_ranks_by_out_of_fold_error():
    from spacy_sapbert.calibration.selection import compare_feature_sets, cross_validated

    evidence, right, groups = _documents()
    sets = {"top": ["top_score"], "words": ["words"], "top, words": ["top_score", "words"]}
    rows = compare_feature_sets(evidence, right, groups, sets, seeds=(0, 1))
    assert sorted(r["name"] for r in rows) == sorted(sets)
    assert [r["ece"] for r in rows] == sorted(r["ece"] for r in rows)
    for row in rows:  # each row: the mean over the seeds of the out-of-fold ECE and log loss of its set
        x = feature_matrix(evidence, sets[row["name"]])
        probs = [numpy.clip(cross_validated(x, right, groups, sets[row["name"]], seed=s), 1e-6, 1 - 1e-6)
                 for s in (0, 1)]
        assert row["ece"] == pytest.approx(numpy.mean([expected_calibration_error(p, right) for p in probs]))
        assert row["log_loss"] == pytest.approx(numpy.mean([-numpy.mean(numpy.where(right, numpy.log(p),
                                                                                    numpy.log(1 - p))) for p in probs]))
        assert row["features"] == sets[row["name"]]
    by_name = {r["name"]: r for r in rows}  # ECE alone also rewards a set that predicts the base rate:
    assert by_name["top"]["log_loss"] < by_name["words"]["log_loss"]  # the log loss beside it shows which one knows


def test_ece_interval_and_noise_floor():
    from spacy_sapbert.calibration.metrics import ece_interval, ece_noise_floor

    rng = numpy.random.default_rng(3)
    conf = rng.uniform(0, 1, 2000)
    right = rng.random(2000) < conf  # calibrated: the ECE is only noise
    low, high = ece_interval(conf, right, resamples=300)
    assert 0 <= low <= expected_calibration_error(conf, right) <= high < 0.06
    mean, upper = ece_noise_floor(conf, draws=300)
    assert 0 < mean < upper < 0.05
    # outcomes shared within documents: resampling documents gives a wider interval than resampling mentions
    groups = numpy.repeat(numpy.arange(40), 50)
    clumped = numpy.repeat(rng.random(40) < 0.5, 50)
    flat = numpy.full(2000, 0.5)
    by_doc, by_mention = ece_interval(flat, clumped, groups, resamples=300), ece_interval(flat, clumped, resamples=300)
    assert by_doc[1] - by_doc[0] > 3 * (by_mention[1] - by_mention[0])
    with pytest.raises(ConfigError, match="SB-E796"):
        ece_interval(conf, right, groups[:10])
    with pytest.raises(ConfigError, match="SB-E796"):
        ece_noise_floor(conf, level=1.0)


def test_a_file_fitted_on_the_earlier_seven_features_keeps_loading(tmp_path):
    """The default features changed (log_chars and has_digit dropped); a calibration.json fitted before names
    its own seven, all still computed: it loads, checks and gives the confidences it gave."""
    earlier = ("top_score", "margin", "close_concepts", "is_kb_name", "log_chars", "words", "has_digit")
    assert tuple(DEFAULT_FEATURES) != earlier
    evidence, right, _ = _logistic_sample(300, seed=5)
    old = fit(feature_matrix(evidence, earlier), right, earlier, kb_checksum="kb", encoder_fingerprint="enc")
    old.to_disk(tmp_path / "calibration.json")
    loaded = Calibration.from_disk(tmp_path / "calibration.json", kb_checksum="kb", encoder_fingerprint="enc")
    assert loaded.feature_names == earlier
    assert loaded.confidence(evidence).tolist() == old.confidence(evidence).tolist()
