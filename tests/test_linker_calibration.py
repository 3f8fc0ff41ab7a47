"""Calibration in the linker: the confidence attribute, threshold_on, config checks, the file travelling
with the pipeline (to_disk / spacy.load / bytes), and ``spacy-sapbert calibrate``."""
from __future__ import annotations

import json
import random
import warnings

import pytest
import spacy
from spacy.tokens import Span

from helpers import linker_nlp

from spacy_sapbert.calibration import Calibration
from spacy_sapbert.evaluation.calibration_fit import calibrate, dev_mentions, fit_dev, split_documents
from spacy_sapbert.errors import ConfigError, DataFormatError, IncompatibleError
from spacy_sapbert.kb import Concept, KnowledgeBase

CONCEPTS = [
    Concept("D001", "Heart attack", ("myocardial infarction", "cardiac infarction"), ("Disease",)),
    Concept("D002", "Mitral insufficiency", ("mitral regurgitation",), ("Disease",)),
    Concept("D003", "Influenza", ("flu", "grippe"), ("Disease",)),
    Concept("D004", "Asthma", ("bronchial asthma",), ("Disease",)),
    Concept("D005", "Migraine", ("migraine headache", "hemicrania"), ("Disease",)),
    Concept("D006", "Pneumonia", ("lung inflammation",), ("Disease",)),
    Concept("D007", "Hypertension", ("high blood pressure",), ("Disease",)),
    Concept("D008", "Diabetes mellitus", ("diabetes", "sugar disease"), ("Disease",)),
]


def _garble(text, rng):
    chars = list(text)
    for _ in range(max(1, len(chars) // 3)):
        chars[rng.randrange(len(chars))] = rng.choice("xqzjkv")
    return "".join(chars)


def write_dev(path, n_docs=40, seed=0):
    """A PubTator dev set: each document names three concepts, as KB names or garbled (often wrong top
    concept); one mention per document has the id D999, which the KB lacks."""
    rng = random.Random(seed)
    names = [(c.concept_id, n) for c in CONCEPTS for n in (c.canonical_name, *c.aliases)]
    lines = []
    for d in range(n_docs):
        picks = [rng.choice(names) for _ in range(3)]
        texts = [n.lower() if rng.random() < 0.5 else _garble(n.lower(), rng) for _, n in picks]
        texts.append("zebra fever")
        title = " and ".join(texts)
        lines.append(f"{d}|t|{title}")
        lines.append(f"{d}|a|")
        start = 0
        for (cid, _), text in zip(picks + [("D999", "")], texts):
            lines.append(f"{d}\t{start}\t{start + len(text)}\t{text}\tDisease\t{cid}")
            start += len(text) + len(" and ")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal_kb") / "kb"
    KnowledgeBase.from_concepts(CONCEPTS).to_disk(path)
    return path


@pytest.fixture(scope="module")
def dev_path(tmp_path_factory):
    return write_dev(tmp_path_factory.mktemp("cal_dev") / "dev.txt")


@pytest.fixture(scope="module")
def pipeline(tiny_bert_path, kb_path, tmp_path_factory):
    """A saved pipeline (no calibration) and a calibration fitted for it through the CLI function."""
    path = tmp_path_factory.mktemp("cal_pipe") / "pipe"
    linker_nlp(tiny_bert_path, kb_path).to_disk(path)
    return path


@pytest.fixture(scope="module")
def fitted(pipeline, dev_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("cal_out") / "cal"
    report = calibrate(dev_path, pipeline, output=out, holdout=0.3, seed=0)
    return out / "calibration.json", report


def with_ents(nlp, text, spans, label="Disease"):
    doc = nlp.make_doc(text)
    doc.ents = [Span(doc, s, e, label=label) for s, e in spans]
    return doc


def test_calibrate_reports_counts_and_held_back_error(fitted, dev_path):
    path, report = fitted
    counts = report["counts"]
    assert counts["mentions"] == 160 and counts["gold_not_in_kb"] == 40
    assert counts["fit"] + counts["holdout"] == 160 and counts["holdout"] > 0  # not-in-KB mentions fitted as wrong
    assert 0 < report["fit"]["accuracy"] < 1  # both outcomes, else no fit
    assert report["holdout"]["n"] == counts["holdout"] and 0 <= report["holdout"]["ece"] <= 1
    low, high = report["holdout"]["ece_interval"]  # bootstrap over the held-back documents, around the ECE
    assert 0 <= low <= report["holdout"]["ece"] <= high
    floor, floor_95 = report["holdout"]["ece_noise_floor"]
    assert 0 < floor <= floor_95 < 1
    assert sum(b["count"] for b in report["holdout"]["bins"]) == counts["holdout"]
    cal = Calibration.from_disk(path)
    assert cal.info["ece_holdout"] == report["holdout"]["ece"] and cal.settings["k"] == 10
    assert json.loads((path.parent / "calibration_report.json").read_text())["counts"] == counts


def test_split_is_seeded_by_document():
    a, b = split_documents(40, 0.25, 7), split_documents(40, 0.25, 7)
    assert a.tolist() == b.tolist() and a.sum() == 10
    assert split_documents(40, 0.25, 8).tolist() != a.tolist()
    for bad in (1.0, -0.1, float("nan"), True):
        with pytest.raises(ConfigError, match="SB-E796"):
            split_documents(40, bad, 0)


def test_confidence_attribute_and_kb_ents_keep_raw_scores(pipeline, fitted):
    path, _ = fitted
    plain = spacy.load(pipeline)
    nlp = spacy.load(pipeline)
    nlp.get_pipe("sapbert_linker").set_calibration(Calibration.from_disk(path), path=path)
    text = "influenza and xqzkv disease"
    doc = nlp(with_ents(nlp, text, [(0, 1), (2, 4)]))
    ref = plain(with_ents(plain, text, [(0, 1), (2, 4)]))
    for ent, ref_ent in zip(doc.ents, ref.ents):
        assert ent._.kb_ents == ref_ent._.kb_ents  # raw scores, not probabilities
        assert ref_ent._.kb_confidence is None  # no calibration: no confidence
        assert 0.0 <= ent._.kb_confidence <= 1.0
    assert doc.ents[0].kb_id_ == "D003" and doc.ents[0]._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-5)
    # the confidence is the calibration's probability of the linker's own evidence
    linker = nlp.get_pipe("sapbert_linker")
    ev = [e for _, e in linker.evidence([with_ents(nlp, text, [(0, 1), (2, 4)])])[0]]
    assert [round(float(c), 6) for c in linker.calibration.confidence(ev)] == [e._.kb_confidence for e in doc.ents]
    assert ev[0].is_name and not ev[1].is_name and len(ev[0].candidates) == 8  # all candidates, uncut


def test_threshold_on_confidence_leaves_unlikely_mentions_unlinked(pipeline, fitted):
    path, _ = fitted
    cal = Calibration.from_disk(path)
    text = "influenza and xqzkv disease"
    spans = [(0, 1), (2, 4)]
    probe = spacy.load(pipeline)
    probe.get_pipe("sapbert_linker").set_calibration(cal)
    conf = [e._.kb_confidence for e in probe(with_ents(probe, text, spans)).ents]
    assert conf[0] > conf[1]  # a KB name is surer than a garbled one
    middle = (conf[0] + conf[1]) / 2
    # a pipeline with threshold_on = "confidence" needs its calibration: saved with it
    probe.to_disk(path.parent / "with_cal")
    nlp = spacy.load(path.parent / "with_cal", config={"components": {"sapbert_linker": {
        "threshold_on": "confidence", "confidence_threshold": middle, "threshold": 0.99,
        "max_entities_per_mention": 2}}})
    doc = nlp(with_ents(nlp, text, spans))
    sure, unsure = doc.ents
    assert sure.kb_id_ == "D003" and len(sure._.kb_ents) == 2  # threshold (0.99) is not applied
    assert sure._.kb_ents[1][1] < 0.99
    assert unsure.kb_id_ == "" and unsure._.kb_ents == [] and unsure._.kb_confidence == pytest.approx(conf[1])


def test_calibration_travels_with_the_pipeline(pipeline, fitted, tmp_path):
    path, _ = fitted
    nlp = spacy.load(pipeline)
    nlp.get_pipe("sapbert_linker").set_calibration(Calibration.from_disk(path))
    nlp.to_disk(tmp_path / "p")
    assert (tmp_path / "p" / "sapbert_linker" / "calibration.json").exists()
    loaded = spacy.load(tmp_path / "p")
    assert loaded.get_pipe("sapbert_linker").calibration == Calibration.from_disk(path)
    text = "grippe and hemicranix"
    a = nlp(with_ents(nlp, text, [(0, 1), (2, 3)]))
    b = loaded(with_ents(loaded, text, [(0, 1), (2, 3)]))
    assert [e._.kb_confidence for e in a.ents] == [e._.kb_confidence for e in b.ents]
    # bytes: the allow-list takes calibration.json
    again = spacy.blank("en")
    again.add_pipe("sapbert_linker", config={"device": "cpu"})
    again.get_pipe("sapbert_linker").from_bytes(nlp.get_pipe("sapbert_linker").to_bytes())
    assert again.get_pipe("sapbert_linker").calibration == Calibration.from_disk(path)
    # saving a linker without calibration over the folder removes the old file
    spacy.load(pipeline).to_disk(tmp_path / "p")
    assert not (tmp_path / "p" / "sapbert_linker" / "calibration.json").exists()


def test_calibrate_writes_into_the_pipeline_and_spacy_load_finds_it(pipeline, dev_path, tmp_path):
    import shutil

    copy = tmp_path / "pipe"
    shutil.copytree(pipeline, copy)
    report = calibrate(dev_path, copy, holdout=0.5, seed=1)
    assert report["path"] == str(copy / "sapbert_linker" / "calibration.json")
    assert not (copy / "sapbert_linker" / "calibration_report.json").exists()
    nlp = spacy.load(copy, config={"components": {"sapbert_linker": {"threshold_on": "confidence"}}})
    assert nlp.get_pipe("sapbert_linker").calibration.info["ece_holdout"] == report["holdout"]["ece"]


def test_calibration_for_another_kb_or_encoder_is_refused(pipeline, fitted, other_tiny_bert_path, tmp_path):
    path, _ = fitted
    other_kb = tmp_path / "kb"
    KnowledgeBase.from_concepts(CONCEPTS[:-1]).to_disk(other_kb)
    for model, kb in ((other_tiny_bert_path, None), (None, other_kb)):
        nlp = spacy.blank("en")
        linker = nlp.add_pipe("sapbert_linker", config={"model": str(model or spacy.load(pipeline).get_pipe(
            "sapbert_linker").cfg["model"]), "device": "cpu", "pooling": "mean"})
        with pytest.raises(IncompatibleError, match="SB-E790") as err:
            linker.initialize(kb_path=str(kb or pipeline / "sapbert_linker" / "kb"), calibration_path=str(path),
                              show_progress=False)
        assert ("encoder" if model else "KB") in str(err.value)
    # a calibration set before initialize is checked when the resources come
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(other_tiny_bert_path), "device": "cpu",
                                                    "pooling": "mean"})
    linker.set_calibration(Calibration.from_disk(path))
    with pytest.raises(IncompatibleError, match="SB-E790"):
        linker.initialize(kb_path=str(pipeline / "sapbert_linker" / "kb"), show_progress=False)
    # a damaged file in a pipeline folder: coded error at spacy.load
    nlp = spacy.load(pipeline)
    nlp.get_pipe("sapbert_linker").set_calibration(Calibration.from_disk(path))
    nlp.to_disk(tmp_path / "p")
    target = tmp_path / "p" / "sapbert_linker" / "calibration.json"
    target.write_text(target.read_text()[:100])
    with pytest.raises(DataFormatError, match="SB-E791"):
        spacy.load(tmp_path / "p")


@pytest.mark.parametrize("key,value", [("confidence_threshold", float("nan")), ("confidence_threshold", 1.5),
                                       ("confidence_threshold", -0.1),
                                       ("threshold_on", "probability"), ("confidence_attr", "kb-conf"),
                                       ("confidence_attr", "kb_ents")])
def test_bad_confidence_settings_are_refused_when_the_pipeline_is_built(key, value):
    from spacy_sapbert.linker import SapbertLinker

    nlp = spacy.blank("en")
    with pytest.raises(ConfigError, match=r"SB-E793") as err:
        if isinstance(value, float) and value != value:  # spaCy's config refuses NaN itself (E961), before us
            SapbertLinker(nlp.vocab, **{key: value})
        else:
            nlp.add_pipe("sapbert_linker", config={key: value})
    assert key in str(err.value)


def test_threshold_on_confidence_without_a_calibration_is_refused(tiny_bert_path, kb_path, pipeline):
    with pytest.raises(ConfigError, match="SB-E794"):
        linker_nlp(tiny_bert_path, kb_path, threshold_on="confidence")
    with pytest.raises(ConfigError, match="SB-E794"):
        spacy.load(pipeline, config={"components": {"sapbert_linker": {"threshold_on": "confidence"}}})


def test_changed_linker_settings_warn(pipeline, fitted):
    path, _ = fitted
    nlp = spacy.load(pipeline, config={"components": {"sapbert_linker": {"k": 3}}})
    with pytest.warns(UserWarning, match=r"SB-W785.*k 10 then, 3 now"):
        nlp.get_pipe("sapbert_linker").set_calibration(Calibration.from_disk(path), path=path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spacy.load(pipeline).get_pipe("sapbert_linker").set_calibration(Calibration.from_disk(path))


def test_dev_mentions_follow_the_linkers_labels(pipeline, dev_path):
    from spacy_sapbert.mentions.datasets import read_dataset

    nlp = spacy.load(pipeline, config={"components": {"sapbert_linker": {"labels": ["DISEASE_X"]}}})
    linker = nlp.get_pipe("sapbert_linker")
    dev = dev_mentions(nlp, linker, read_dataset(dev_path)[:5])
    assert len(dev.evidence) == 20 and all(ev.candidates for ev in dev.evidence)
    cal, report = fit_dev(linker, dev, holdout=0.0)
    assert "holdout" not in report and report["counts"]["fit"] == 20


def test_cli_calibrate(pipeline, dev_path, tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["calibrate", str(dev_path), "--pipeline", str(pipeline), "-o", str(tmp_path / "c"),
                                 "--holdout", "0.25", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "expected calibration error" in result.output and (tmp_path / "c" / "calibration.json").exists()
    assert "95 % bootstrap interval over documents" in result.output
    bad = runner.invoke(app, ["calibrate", str(dev_path), "--pipeline", str(pipeline), "-o", str(tmp_path / "d"),
                              "--holdout", "1.5"])
    assert bad.exit_code != 0 and "SB-E796" in str(bad.exception)
    missing = runner.invoke(app, ["calibrate", str(dev_path), "--pipeline", str(tmp_path / "nope")])
    assert missing.exit_code != 0 and "SB-E001" in str(missing.exception)


def _calibrated_evaluation(pipeline, calibration_path, dataset, tmp_path):
    """``(block, settings)`` of an evaluate run with the calibration section over ``dataset``, whose one pipeline
    system ("calibrated") is ``pipeline`` saved with the calibration at ``calibration_path``."""
    from thinc.api import Config

    from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

    nlp = spacy.load(pipeline)
    nlp.get_pipe("sapbert_linker").set_calibration(Calibration.from_disk(calibration_path))
    nlp.to_disk(tmp_path / "calibrated")
    block = {"dataset": {"path": str(dataset)}, "kb": {"path": str(pipeline / "sapbert_linker" / "kb")},
             "systems": {"tfidf": False, "scispacy": False, "pipeline": str(tmp_path / "calibrated"),
                         "pipeline_name": "calibrated"},
             "show_progress": False, "calibration": True, "calibration_bins": 5}
    return block, settings_from_config(merge_config(default_config(), Config({"evaluate": block}), {}))


def test_evaluate_reports_the_calibration_section(pipeline, fitted, dev_path, tmp_path):
    from thinc.api import Config

    from spacy_sapbert.evaluation.report import render_markdown
    from spacy_sapbert.evaluation.run import evaluate
    from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

    block, settings = _calibrated_evaluation(pipeline, fitted[0], dev_path, tmp_path)
    with pytest.warns(UserWarning, match="SB-W300"):  # D999 is not in the KB
        result = evaluate(settings)
    sec = result["calibration"]["calibrated"]
    cal = sec["calibration"]
    assert cal["n"] == 160 and len(cal["bins"]) == 5 and sum(b["count"] for b in cal["bins"]) == 160
    assert sec["gold_not_in_kb"] == 40
    # threshold -1 links everything: nothing left unlinked, no-link recall 0; the decision is the score's
    by_score = sec["no_link"]["score >= threshold (-1.0)"]
    assert by_score["left_unlinked"] == 0 and by_score["recall"] == 0.0 and by_score["should_not_link"] == 40
    assert sec["no_link"]["linker's decision (threshold_on = score)"] == by_score
    by_conf = sec["no_link"]["confidence >= confidence_threshold (0.5)"]
    assert by_conf["left_unlinked"] > 0 and by_conf["tp"] > 0
    page = render_markdown(result)
    assert "## Calibration — calibrated" in page and f"**{cal['ece']:.4f}**" in page
    # off by default; a bad number of bins is a coded error
    with pytest.warns(UserWarning, match="SB-W300"):
        plain = evaluate(settings_from_config(merge_config(default_config(), Config(
            {"evaluate": {**block, "calibration": False}}), {})))
    assert "calibration" not in plain
    for bins in (0, 10**8):  # 10**8: refused when the config is read, not after the mentions are linked
        with pytest.raises(ConfigError, match=r"SB-E303.*calibration_bins"):
            settings_from_config(merge_config(default_config(), Config({"evaluate": {**block, "calibration_bins": bins}}),
                                              {}))


def test_reliability_plot(tmp_path):
    pytest.importorskip("matplotlib")  # the [plot] extra, as for acc_at_k.png
    from spacy_sapbert.calibration.metrics import plot_reliability, reliability

    plot_reliability({"a": reliability([0.1, 0.9, 0.8], [False, True, False])}, tmp_path / "r.png", title="t")
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_changed_candidate_stage_and_reranker_settings_warn(pipeline, fitted):
    """The candidate-stage and re-ranker keys shape the scores too: a calibration records them (W785 on a change)."""
    path, _ = fitted
    nlp = spacy.load(pipeline, config={"components": {"sapbert_linker": {"reranker_margin": 0.5}}})
    with pytest.warns(UserWarning, match=r"SB-W785.*reranker_margin 0.05 then, 0.5 now"):
        nlp.get_pipe("sapbert_linker").set_calibration(Calibration.from_disk(path), path=path)


def test_evaluate_scores_mentions_without_gold_id_as_should_not_link(pipeline, fitted, dev_path, tmp_path):
    """BC5CDR's ``-1`` mentions: left out of accuracy (W301), but the no-link section scores them as
    "should not be linked", apart from the mentions whose concept the KB lacks, for both thresholds."""
    from spacy_sapbert.evaluation.calibration import NO_GOLD_ID, NOT_IN_KB
    from spacy_sapbert.evaluation.report import render_markdown
    from spacy_sapbert.evaluation.run import evaluate

    lines = dev_path.read_text(encoding="utf8").splitlines()
    nil_dev = tmp_path / "nil_dev.txt"  # the D999 mention of every even document becomes a -1 mention
    nil_dev.write_text("\n".join(ln[:-4] + "-1" if ln.endswith("\tD999") and int(ln.split("\t")[0]) % 2 == 0
                                 else ln for ln in lines) + "\n", encoding="utf8")
    _, settings = _calibrated_evaluation(pipeline, fitted[0], nil_dev, tmp_path)
    with pytest.warns(UserWarning, match="SB-W301"), pytest.warns(UserWarning, match="SB-W300"):
        result = evaluate(settings)
    assert result["counts"]["no_gold_id"] == 20 and result["counts"]["evaluated"] == 140  # accuracy: without them
    sec = result["calibration"]["calibrated"]
    assert sec["no_gold_id"] == 20 and sec["gold_not_in_kb"] == 20
    assert sec["calibration"]["n"] == 140  # the ECE: mentions with a gold id only
    score_rule, conf_rule = "score >= threshold (-1.0)", "confidence >= confidence_threshold (0.5)"
    assert sec["no_link"][score_rule]["should_not_link"] == 40 and sec["no_link"][score_rule]["n"] == 160
    for kind in (NO_GOLD_ID, NOT_IN_KB):
        for rule in (score_rule, conf_rule):
            scores = sec["no_link_by_kind"][kind][rule]
            assert scores["should_not_link"] == 20 and scores["n"] == 140  # this kind against the 120 in the KB
    # threshold -1 links all; the confidence leaves some of each kind unlinked, its false alarms shared
    assert sec["no_link_by_kind"][NO_GOLD_ID][score_rule]["recall"] == 0.0
    by_conf = [sec["no_link_by_kind"][kind][conf_rule] for kind in (NO_GOLD_ID, NOT_IN_KB)]
    assert by_conf[0]["tp"] + by_conf[1]["tp"] == sec["no_link"][conf_rule]["tp"] > 0
    assert by_conf[0]["fp"] == by_conf[1]["fp"] == sec["no_link"][conf_rule]["fp"]
    page = render_markdown(result)
    assert f"| {NO_GOLD_ID} | {conf_rule} |" in page and "no gold id (-1): 20" in page


def test_a_pipeline_without_calibration_gets_the_fixed_thresholds_no_link(pipeline, dev_path, tmp_path):
    """No calibration: the -1 mentions and the ones whose concept the KB lacks are still scored, by the linker's
    decision and its fixed threshold (no confidence rule), and the report says so."""
    from spacy_sapbert.evaluation.calibration import (NO_GOLD_ID, NO_LINK_ONLY, NOT_IN_KB, WITHOUT,
                                                      calibration_results, render_calibration)
    from spacy_sapbert.mentions.datasets import read_dataset, select_mentions

    # a fixed threshold that leaves mentions unlinked
    spacy.load(pipeline, config={"components": {"sapbert_linker": {"threshold": 0.99}}}).to_disk(tmp_path / "plain")
    lines = dev_path.read_text(encoding="utf8").splitlines()
    nil_dev = tmp_path / "nil_dev.txt"
    nil_dev.write_text("\n".join(ln[:-4] + "-1" if ln.endswith("\tD999") and int(ln.split("\t")[0]) < 10 else ln
                                 for ln in lines) + "\n", encoding="utf8")
    docs, _ = select_mentions(read_dataset(nil_dev), exclude_composite=False, keep_without_id=True)
    systems = {"model": None, "base_encoder": None, "model_name": "m", "base_encoder_name": "b",
               "pipeline": str(tmp_path / "plain"), "pipeline_name": "plain"}
    found = calibration_results({"systems": systems}, docs, bins=5)
    assert found[WITHOUT] == ["plain"] and "plain" not in found
    sec = found[NO_LINK_ONLY]["plain"]
    assert sec["no_gold_id"] == 10 and sec["gold_not_in_kb"] == 30 and "calibration" not in sec
    rules = list(sec["no_link"])
    assert rules == ["linker's decision (threshold_on = score)", "score >= threshold (0.99)"]
    minus_one = sec["no_link_by_kind"][NO_GOLD_ID][rules[1]]
    assert minus_one["should_not_link"] == 10 and minus_one["n"] == 130 and minus_one["left_unlinked"] > 0
    assert sec["no_link_by_kind"][NOT_IN_KB][rules[1]]["should_not_link"] == 30
    page = "\n".join(render_calibration({"calibration": found}))
    assert "## No-link — plain (no calibration: the fixed threshold only)" in page
    assert f"| {NO_GOLD_ID} | {rules[1]} |" in page and "_No calibration in: plain" in page
