"""Whole runs on the tiny fixtures: hand-computed numbers per setting, the report files, the CLI,
the bad-input errors, and the end-to-end mode through spaCy pipelines."""
from __future__ import annotations

import json

import pytest
from thinc.api import Config
from typer.testing import CliRunner

from helpers import linker_nlp

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, EmptyResultError, MissingInputError
from spacy_sapbert.evaluation.run import evaluate, evaluate_config
from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

# The fixture test set (tests/fixtures/eval/test.pubtator) and KB (kb_medic.txt), by hand:
#   1 "Breast cancer" D001 exact         5 "WD" D006 (not a KB name; "Wilson disease (WD)" in text)
#   2 "ovarian carcinoma" OMIM:114480     6 "mammary cancers" D001 (KB has "mammary cancer")
#     (alternate id of D002) exact        7 "breast and ovarian cancer" D001|D002 composite
#   3 "tumor" D005: name of D004 and D005 8 "seen" -1: left out
#     (D005's preferred name: strict rank 1, lenient rank 1)   9 "colon polyp" D999: not in the KB
#   4 "Wilson disease" D006 exact        10 "Aspirin" C001: not in the KB
#  11 "ataxias 1 and 2" D007+D008 composite (no exact match)   12 "Ataxia" D007 exact
# Exact match, composite kept: 11 evaluated; strict@1 5/11 (1,2,3,4,12; "tumor" goes to D005, whose preferred
# name it is, before D004, which lists it as a synonym), strict@5 5/11, lenient@1 5/11; ambiguous top-1 1/11.


def _settings(fixtures_dir, **evaluate_block):
    f = fixtures_dir / "eval"
    block = {"dataset": {"path": str(f / "test.pubtator"), "train": [str(f / "train.pubtator")]},
             "kb": {"sources": [[str(f / "kb_medic.txt"), "medic"]]}, "exclude_composite": False,
             "systems": {"tfidf": False, "scispacy": False}, "show_progress": False}
    for key, value in evaluate_block.items():
        if isinstance(value, dict) and isinstance(block.get(key), dict):
            block[key] = {**block[key], **value}
        else:
            block[key] = value
    config = merge_config(default_config(), Config({"evaluate": block}), {})
    return settings_from_config(config), config


def _run(fixtures_dir, **block):
    settings, _ = _settings(fixtures_dir, **block)
    with pytest.warns(UserWarning, match="SB-W30"):
        return evaluate(settings)


def _full(result, system="exact match", mode="mention_only"):
    return result["results"][mode][system]["full"]


def test_exact_match_by_hand(fixtures_dir):
    r = _run(fixtures_dir)
    full = _full(r)
    assert r["counts"]["read"] == 12 and r["counts"]["no_gold_id"] == 1 and r["counts"]["composite"] == 2
    assert r["counts"]["gold_not_in_kb"] == 2 and r["counts"]["evaluated"] == 11
    assert r["gold_not_in_kb"] == ["C001", "D999"]
    assert full["strict"]["acc@1"] == pytest.approx(5 / 11)
    assert full["strict"]["acc@5"] == pytest.approx(5 / 11)
    assert full["lenient"]["acc@1"] == pytest.approx(5 / 11)
    assert full["ambiguous_top1"] == pytest.approx(1 / 11)
    # filtered: names + training mentions ("mammary cancers", "wd") removed -> 7, 9, 10, 11 left;
    # filtered_lev0.2: none of those is within 0.2 of a name -> same 4; ambiguous: "tumor" (D004, D005)
    assert r["counts"]["subsets"] == {"full": 11, "filtered": 4, "filtered_lev0.2": 4, "ambiguous": 1}
    assert r["results"]["mention_only"]["exact match"]["ambiguous"]["strict"]["acc@1"] == 1.0  # D005's own name
    assert r["results"]["mention_only"]["exact match"]["filtered"]["strict"]["acc@1"] == 0.0


def test_mention_classes_by_hand(fixtures_dir):
    # classes of the normalised mention: a dictionary name (KB before back-off): 1 breast cancer, 2 ovarian
    # carcinoma, 3 tumor, 4 wilson disease, 12 ataxia -> 5; a train mention: 5 wd, 6 mammary cancers -> 2;
    # neither (refined): 7 breast and ovarian cancer, 9 colon polyp, 10 aspirin, 11 ataxias 1 and 2 -> 4;
    # unseen in train: all but 5 and 6 -> 9. Exact match right at strict@1: 1, 2, 3, 4, 12
    r = _run(fixtures_dir)
    assert r["counts"]["classes"] == {"dictionary": 5, "train": 2, "neither": 4, "unseen_in_train": 9}
    split = r["classes"]["mention_only"]["exact match"]
    assert split["overall"] == {"n": 11, "acc": pytest.approx(5 / 11)}
    assert split["dictionary"] == {"n": 5, "acc": 1.0}
    assert split["train"] == {"n": 2, "acc": 0.0} and split["neither"] == {"n": 4, "acc": 0.0}
    assert split["unseen_in_train"] == {"n": 9, "acc": pytest.approx(5 / 9)}
    assert "seen_unseen" not in r  # one protocol: the mixed "seen" is gone from the report
    # back-off adds the training mentions as names: 5 and 6 now match; the classes do not move (the
    # dictionary class is the KB's own names, before back-off)
    backoff = _run(fixtures_dir, input={"backoff": True})
    assert backoff["counts"]["classes"] == r["counts"]["classes"]
    assert backoff["classes"]["mention_only"]["exact match"]["train"] == {"n": 2, "acc": 1.0}
    # case kept: the classes are taken on the protocol's normalisation, not the query as the systems see it
    kept = _run(fixtures_dir, input={"lowercase": False})
    assert kept["counts"]["classes"] == r["counts"]["classes"]
    from spacy_sapbert.evaluation.report import render_markdown

    md = render_markdown(r)
    assert ("| system | overall (n = 11) | a dictionary name (n = 5) | a train mention (n = 2) | neither (refined) "
            "(n = 4) | unseen in train (n = 9) |") in md
    assert "| exact match | 45.5 | 100.0 | 0.0 | 0.0 | 55.6 |" in md
    assert "a dictionary name (of the KB before back-off) / a train mention (not a dictionary name) / neither = " \
           "the refined subset" in md


def test_candidate_recall_has_its_own_depth_and_leaves_acc_at_k_alone(fixtures_dir):
    # exact match: "tumor" is a name of D004 and D005, gold D005 first (its preferred name) -> 5/11 at every depth
    r = _run(fixtures_dir, candidate_ks=[1, 2, 64], ks=[1])
    rec = r["candidate_recall"]["mention_only"]["exact match"]
    assert rec == {"depth": 64, "n": 11, "recall@1": pytest.approx(5 / 11), "recall@2": pytest.approx(5 / 11),
                   "recall@64": pytest.approx(5 / 11), "recall@depth": pytest.approx(5 / 11)}
    assert _full(r)["strict"] == {"acc@1": pytest.approx(5 / 11)}  # acc@k is ranked at max(ks), as before
    # tf-idf ranks concepts over a name pool that grows with the depth: acc@k must not move with candidate_ks
    shallow = _run(fixtures_dir, candidate_ks=[1], systems={"tfidf": True})
    deep = _run(fixtures_dir, systems={"tfidf": True})
    assert shallow["results"] == deep["results"]
    tfidf = deep["candidate_recall"]["mention_only"]["char-3gram tf-idf"]
    assert tfidf["depth"] == 64 and tfidf["recall@64"] >= _full(deep, "char-3gram tf-idf")["strict"]["acc@20"]
    assert shallow["candidate_recall"]["mention_only"]["char-3gram tf-idf"]["recall@1"] == tfidf["recall@1"]
    # scispaCy's linker proposes its own k concepts at most: beyond that depth there is no recall to report
    sci = _run(fixtures_dir, systems={"scispacy": True, "scispacy_k": 3}, ks=[1, 2])
    rec = sci["candidate_recall"]["mention_only"]["scispaCy EntityLinker"]
    assert rec["depth"] == 3 and rec["recall@64"] is None and rec["recall@1"] is not None
    from spacy_sapbert.evaluation.report import render_markdown

    md = render_markdown(sci)
    assert "| system | candidates (depth) | recall@1 | recall@5 | recall@16 | recall@64 | recall, all candidates |" in md
    assert "| exact match | 64 | 45.5 | 45.5 | 45.5 | 45.5 | 45.5 |" in md
    assert "candidate recall@k: share of mentions whose gold concept is among the first k concepts" in md


def test_linking_speed_is_labelled_and_counts_what_is_linked(fixtures_dir):
    from spacy_sapbert.evaluation.protocol import SPEED
    from spacy_sapbert.evaluation.report import render_markdown

    r = _run(fixtures_dir)
    desc = r["systems"]["exact match"]
    assert desc["link_seconds"] > 0 and desc["mentions_per_s"] == pytest.approx(11 / desc["link_seconds"], rel=0.1)
    assert "seconds" not in desc  # no unlabelled timing: a speed is mentions/s of linking, or nothing
    md = render_markdown(r)
    assert "## Linking speed" in md and SPEED in md and "| system | mentions | linking s | mentions/s |" in md
    assert r["setting"]["protocol"]["speed"] == SPEED


def test_ambiguous_subset_has_one_definition_named_in_the_report(fixtures_dir, tiny_bert_path):
    from spacy_sapbert.evaluation.protocol import AMBIGUOUS, AMBIGUOUS_NO_REFERENCE
    from spacy_sapbert.evaluation.report import render_markdown

    plain = _run(fixtures_dir)
    assert plain["setting"]["protocol"]["ambiguous"] == AMBIGUOUS_NO_REFERENCE
    assert AMBIGUOUS_NO_REFERENCE in render_markdown(plain)
    dense = {"base_encoder": str(tiny_bert_path), "pooling": "mean", "device": "cpu", "context_weight": 0.05,
             "example_names": True}
    without = _run(fixtures_dir, systems=dense)
    with_context = _run(fixtures_dir, systems={**dense, "context": True})
    named = AMBIGUOUS.format(reference="base encoder")
    for r in (without, with_context):  # the same subset and wording whether or not a context system runs
        assert r["setting"]["protocol"]["ambiguous"] == named and named in render_markdown(r)
    assert with_context["counts"]["subsets"]["ambiguous"] == without["counts"]["subsets"]["ambiguous"] >= 1
    # every context report shows the example names only next to context
    systems = list(with_context["results"]["mention_only"])
    assert systems[-2:] == ["base encoder + context", "base encoder + example names only"]
    only = with_context["systems"]["base encoder + example names only"]
    assert only["weights"]["context_weight"] == 0.0 and only["weights"]["example_names"] is True
    ctx = with_context["systems"]["base encoder + context"]
    assert "context" not in only["encodes"] and "context" in ctx["encodes"] and only["contexts_encoded"] == 0
    # as the linker, only the contexts of the mentions re-ranked (ties, one sense per document) are encoded
    assert ctx["contexts_encoded"] < with_context["counts"]["evaluated"]
    for name in systems[-2:]:
        assert with_context["systems"][name]["mentions_per_s"] > 0 and with_context["systems"][name]["setup_seconds"] >= 0
        assert with_context["candidate_recall"]["mention_only"][name]["depth"] == 30  # the re-ranked candidates
    md = render_markdown(with_context)
    assert "| base encoder + example names only |" in md and "| base encoder + context |" in md
    # weights tuned on a dev file at the run's (the linker's) margin and one sense per document
    f = fixtures_dir / "eval"
    tuned = _run(fixtures_dir, systems={**dense, "context": True, "context_dev": str(f / "train.pubtator"),
                                        "context_margin": 0.02, "one_sense_per_document": False})
    desc = tuned["systems"]["base encoder + context"]
    assert desc["tuned_on"]["mentions"] == 2
    assert desc["weights"]["context_margin"] == 0.02 and desc["weights"]["one_sense_per_document"] is False


def test_exclude_composite_default_is_one_thing_everywhere():
    import inspect
    from pathlib import Path

    from spacy_sapbert.cli.evaluate import evaluate_command

    cfg = Config().from_disk(Path(__file__).resolve().parents[1] / "configs" / "evaluate.cfg", interpolate=False)
    option = inspect.signature(evaluate_command).parameters["exclude_composite"].default
    assert option.default is True and "--keep-composite" in option.param_decls[0]
    assert cfg["evaluate"]["exclude_composite"] is True
    assert default_config()["evaluate"]["exclude_composite"] is True


def test_exclude_composite(fixtures_dir):
    r = _run(fixtures_dir, exclude_composite=True)
    assert r["counts"]["evaluated"] == 9
    assert _full(r)["strict"]["acc@1"] == pytest.approx(5 / 9)


def test_abbreviations_and_backoff(fixtures_dir):
    abbr = _run(fixtures_dir, input={"resolve_abbreviations": True})
    assert _full(abbr)["strict"]["acc@1"] == pytest.approx(6 / 11)  # "WD" -> "Wilson disease"
    backoff = _run(fixtures_dir, input={"backoff": True})
    # "Mammary cancers" -> D001 and "WD" -> D006 become aliases: 6 and 5 now match exactly
    assert backoff["counts"]["backoff_names"] == 2
    assert _full(backoff)["strict"]["acc@1"] == pytest.approx(7 / 11)
    assert _full(backoff)["lenient"]["acc@1"] == pytest.approx(7 / 11)
    assert "dictionary back-off" in backoff["setting"]["input"]


def test_no_train_files_means_dictionary_only_filter(fixtures_dir):
    r = _run(fixtures_dir, dataset={"train": []})
    # without training mentions "wd" and "mammary cancers" stay in "filtered"; "mammary cancers" is
    # one edit from a name and leaves the Levenshtein subset
    assert r["counts"]["subsets"] == {"full": 11, "filtered": 6, "filtered_lev0.2": 5, "ambiguous": 1}


def test_report_files_and_rerun_from_config(fixtures_dir, tmp_path):
    settings, config = _settings(fixtures_dir, systems={"tfidf": True, "scispacy": True}, error_sample=2)
    out = tmp_path / "report"
    with pytest.warns(UserWarning):
        result = evaluate(settings, config_text=config.to_str(), output=out)
    names = {p.name for p in out.iterdir()}
    assert names == {"metrics.json", "report.md", "errors.tsv", "errors.md", "acc_at_k.png", "config.cfg",
                     ".spacy_sapbert.json"}  # the marker every output folder carries
    assert (out / "acc_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["results"] == json.loads(json.dumps(result["results"]))
    md = (out / "report.md").read_text()
    assert "input: lowercase, punctuation kept, abbreviations as written, no back-off" in md
    assert "| exact match | 45.5 | 45.5 | 45.5 | 45.5 | 9.1 |" in md
    assert "| scispaCy EntityLinker |" in md and "filtered_lev0.2 (n = 4)" in md
    rows = (out / "errors.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["system", "mode", "doc_id", "mention", "query", "gold", "predicted",
                                   "predicted_name", "score"]
    per_system = {}
    for row in rows[1:]:
        per_system[row.split("\t")[0]] = per_system.get(row.split("\t")[0], 0) + 1
    assert per_system["exact match"] == 2  # sampled down to error_sample
    with pytest.raises(ConfigError, match="SB-E003"):
        evaluate(settings, output=out)
    again = tmp_path / "again"
    with pytest.warns(UserWarning):
        rerun = evaluate_config(out / "config.cfg", again)
    assert rerun["results"] == result["results"]


def test_cli_arguments_and_config(fixtures_dir, tmp_path):
    f = fixtures_dir / "eval"
    runner = CliRunner()
    out = tmp_path / "cli"
    with pytest.warns(UserWarning, match="SB-W30"):
        res = runner.invoke(app, ["evaluate", str(f / "test.pubtator"), "--output", str(out),
                                  "--kb-source", f"{f / 'kb_medic.txt'}:medic", "--train", str(f / "train.pubtator"),
                                  "--no-scispacy", "--exclude-composite", "--ks", "1,3", "--backoff",
                                  "--set", "evaluate.show_progress=false"])
    assert res.exit_code == 0, res.output
    assert "9 mentions evaluated (2 with gold not in KB)" in res.output
    assert "[mention_only] exact match: strict acc@1 77.8" in res.output  # 7/9
    assert "mentions/s" in res.output
    # a dictionary name 1-4 and 12 (all hit), a train mention 5, 6 (both hit), neither 9, 10 (no hit);
    # unseen in train: all but 5 and 6 (5 of 7 hit)
    assert ("strict acc@1 overall 77.8, a dictionary name 100.0 (n = 5), a train mention 100.0 (n = 2), "
            "neither (refined) 0.0 (n = 2), unseen in train 71.4 (n = 7)") in res.output
    assert "candidate recall @1 77.8, @5 77.8, @16 77.8, @64 77.8 (depth 64)" in res.output
    # the default leaves composite mentions out, as configs/evaluate.cfg does; --keep-composite keeps them
    for flag, n in (([], 9), (["--keep-composite"], 11)):
        with pytest.warns(UserWarning, match="SB-W30"):
            res = runner.invoke(app, ["evaluate", str(f / "test.pubtator"), "--output", str(tmp_path / f"d{n}"),
                                      "--kb-source", f"{f / 'kb_medic.txt'}:medic", "--no-scispacy",
                                      "--set", "evaluate.show_progress=false", *flag])
        assert res.exit_code == 0, res.output
        assert f"{n} mentions evaluated" in res.output
    with pytest.warns(UserWarning, match="SB-W30"):
        res = runner.invoke(app, ["evaluate", str(out / "config.cfg"), "--output", str(tmp_path / "cli2")])
    assert res.exit_code == 0, res.output
    assert "strict acc@1 77.8" in res.output
    bad = runner.invoke(app, ["evaluate", str(f / "test.pubtator"), "--output", str(tmp_path / "x"),
                              "--kb-source", "nocolon"])
    assert isinstance(bad.exception, ConfigError) and "PATH:FORMAT" in str(bad.exception)
    bad = runner.invoke(app, ["evaluate", str(f / "test.pubtator"), "--output", str(tmp_path / "x"),
                              "--kb", str(tmp_path), "--ks", "1,a"])
    assert isinstance(bad.exception, ConfigError) and "SB-E304" in str(bad.exception)
    bad = runner.invoke(app, ["evaluate", str(f / "test.pubtator"), "--output", str(tmp_path / "x"),
                              "--kb", str(tmp_path), "--set", "novalue"])
    assert isinstance(bad.exception, ConfigError) and "KEY=VALUE" in str(bad.exception)


def test_config_errors(fixtures_dir, tmp_path):
    f = fixtures_dir / "eval"
    cfg = tmp_path / "e.cfg"
    cases = [
        ("[evaluate]\ncolour = 1\n", "unknown key 'evaluate.colour'"),
        ("[other]\nx = 1\n", "no \\[evaluate\\] block"),
        ("[evaluate\n", "cannot parse it"),
        ('[evaluate.dataset]\npath = "x"\n', "cannot parse it.*Section 'evaluate' is not defined"),
        (f'[evaluate]\n[evaluate.dataset]\npath = "{f / "test.pubtator"}"\n', "set exactly one of"),
        ('[evaluate]\n[evaluate.kb]\npath = "x"\n', "path is not set"),
        ('[evaluate]\nlevenshtein_threshold = 1.5\n[evaluate.dataset]\npath = "x"\n[evaluate.kb]\npath = "y"\n',
         "levenshtein_threshold"),
        ('[evaluate]\nmodes = ["online"]\n[evaluate.dataset]\npath = "x"\n[evaluate.kb]\npath = "y"\n',
         "SB-E002"),
        ('[evaluate]\n[evaluate.dataset]\npath = "x"\nformat = "bioc"\n[evaluate.kb]\npath = "y"\n', "SB-E002"),
        ('[evaluate]\ndataset = 3\n', "must be a block"),
        ('[evaluate]\n[evaluate.input]\nbackoff = true\n[evaluate.dataset]\npath = "x"\n[evaluate.kb]\npath = "y"\n',
         "backoff needs training files"),
    ]
    for text, what in cases:
        cfg.write_text(text, encoding="utf8")
        with pytest.raises(ConfigError, match=what):
            evaluate_config(cfg)
    with pytest.raises(ConfigError, match="unknown override"):
        cfg.write_text('[evaluate]\n[evaluate.dataset]\npath = "x"\n[evaluate.kb]\npath = "y"\n', encoding="utf8")
        evaluate_config(cfg, overrides={"evaluate.nope.x": 1})
    with pytest.raises(MissingInputError, match="SB-E001"):
        evaluate_config(tmp_path / "missing.cfg")


def test_bad_input_errors(fixtures_dir, tmp_path):
    settings, _ = _settings(fixtures_dir, dataset={"types": ["Nothing"]})
    with pytest.raises(EmptyResultError, match="SB-E302"):
        evaluate(settings)
    other_kb = tmp_path / "kb.tsv"
    other_kb.write_text("X1\tsomething else\n", encoding="utf8")
    settings, _ = _settings(fixtures_dir, kb={"sources": [[str(other_kb), "tsv"]]})
    with pytest.warns(UserWarning, match="SB-W301"), pytest.raises(EmptyResultError, match="SB-E306"):
        evaluate(settings)
    settings, _ = _settings(fixtures_dir, kb={"sources": [], "path": str(tmp_path / "nokb")})
    with pytest.warns(UserWarning, match="SB-W301"), pytest.raises(MissingInputError, match="SB-E001"):
        evaluate(settings)
    settings, _ = _settings(fixtures_dir, systems={"exact_match": False})
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match="no system is switched on"):
        evaluate(settings)
    f = fixtures_dir / "eval"
    settings, _ = _settings(fixtures_dir, modes=["end_to_end"],
                            dataset={"path": str(f / "mentions_positional.tsv"), "train": []})
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match="SB-E305.*documents with text"):
        evaluate(settings)


def test_end_to_end_links_every_gold_span_of_a_label_restricted_pipeline(fixtures_dir, tiny_bert_path, tmp_path):
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.readers import read_medic

    kb_dir = tmp_path / "kb"
    KnowledgeBase.from_concepts(read_medic(fixtures_dir / "eval" / "kb_medic.txt")).to_disk(kb_dir)
    scores = {}
    for labels in ([], ["Disease"]):  # the fixture's gold types are not "Disease"
        nlp = linker_nlp(tiny_bert_path, kb_dir, labels=labels)
        path = tmp_path / f"pipeline_{len(labels)}"
        nlp.to_disk(path)
        settings, _ = _settings(fixtures_dir, modes=["end_to_end"],
                                systems={"pipeline": str(path), "pipeline_name": "p"})
        with pytest.warns(UserWarning, match="SB-W30"):
            r = evaluate(settings)
        scores[len(labels)] = r["results"]["end_to_end"]["p"]["full"]["strict"]
    assert scores[1] == scores[0]
    assert scores[0]["acc@1"] > 0


def test_end_to_end_with_pipelines(fixtures_dir, tiny_bert_path, tmp_path):
    settings, _ = _settings(fixtures_dir, modes=["mention_only", "end_to_end"], cache_dir=str(tmp_path / "cache"),
                            systems={"model": str(tiny_bert_path), "scispacy": True, "model_name": "tiny"})
    with pytest.warns(UserWarning, match="SB-W30"):
        r = evaluate(settings, output=tmp_path / "out")
    e2e = r["results"]["end_to_end"]
    assert set(e2e) == {"tiny (pipeline)", "scispaCy EntityLinker (pipeline)"}
    for name in e2e:
        assert 0.0 <= r["nel"][name]["nel_micro_f"] <= 1.0
        assert e2e[name]["full"]["n"] == 11 and e2e[name]["full"]["lenient"] is None
    # the same encoder, mention-only (our exact search) and end to end (sapbert_linker + ConceptIndex)
    mention_only = r["results"]["mention_only"]["tiny"]["full"]["strict"]
    assert e2e["tiny (pipeline)"]["full"]["strict"]["acc@1"] == pytest.approx(mention_only["acc@1"])
    # scispaCy's linker end to end sees the same dictionary as mention-only
    assert e2e["scispaCy EntityLinker (pipeline)"]["full"]["strict"] == \
        r["results"]["mention_only"]["scispaCy EntityLinker"]["full"]["strict"]
    assert "nel_micro_f" in (tmp_path / "out" / "report.md").read_text()


def test_abbreviation_table_input_option(fixtures_dir, tmp_path):
    """A table read "WD" as Wilson disease with the document's own definitions off, as the linker's
    abbreviation_table does; named in the report's input line; a missing file is refused before the run."""
    table = tmp_path / "abbreviations.tsv"
    table.write_text("WD\tWilson disease\n", encoding="utf8")
    r = _run(fixtures_dir, input={"abbreviation_table": str(table)})
    assert _full(r)["strict"]["acc@1"] == pytest.approx(6 / 11)  # as with resolve_abbreviations
    assert "abbreviation table abbreviations.tsv" in r["setting"]["input"]
    assert r["setting"]["input_options"]["abbreviation_table"] == str(table)
    with pytest.raises(MissingInputError, match="SB-E001"):
        _settings(fixtures_dir, input={"abbreviation_table": str(tmp_path / "missing.tsv")})
