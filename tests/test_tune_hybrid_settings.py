"""The sparse_weight tuners tune at the settings the linker will use (issue 29, item 4): ``spacy-sapbert
tune-hybrid --k/--candidates/--query-variants`` and evaluate's ``hybrid_tune`` (the system's own candidates,
query_variants and depth) rank each weight of the grid as ``sapbert_linker`` with those settings ranks, on the
tiny fixture KB (MEDIC lines) and the tiny random BERT (its dense top-1 is often wrong, the sparse part fixes it)."""
from __future__ import annotations

import json

import pytest
from thinc.api import Config
from typer.testing import CliRunner

from helpers import linker_nlp, whole_doc_evidence

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError

DEV = {"breast cancer": "D001", "ovarian carcinoma": "D002", "tumor": "D005", "wilson disease": "D006",
       "mammary cancers": "D001", "ataxia": "D007", "cancers of the colon": "D003", "tumour growth": "D005",
       "degeneration hepatolenticular": "D006", "spinocerebellar ataxias": "D008", "neoplasms": "D004",
       "colorectal carcinoma": "D003", "ovary cancer": "D002", "breast tumour": "D001",
       # at depth 3 with sparse_k 0 the query variants ("ataxia", "cancer", "colon neoplasm") move their top-1
       "ataxia disorder": "D007", "cancer syndrome": "D004", "neoplasm of the colon": "D003"}
KINDS = ["number", "word_order", "generic_head"]
CHECKED = (0.0, 0.1, 1.0, 5.0)  # grid weights each compared with a linker built at that weight


@pytest.fixture(scope="module")
def tuning(fixtures_dir, tmp_path_factory):
    """(KB folder, dev JSONL file) in a module folder."""
    from spacy_sapbert.kb.build import build_kb

    root = tmp_path_factory.mktemp("tune_settings")
    build_kb([(fixtures_dir / "eval" / "kb_medic.txt", "medic")]).to_disk(root / "kb")
    (root / "dev.jsonl").write_text("".join(json.dumps({"mention": m, "ids": [i]}) + "\n" for m, i in DEV.items()),
                                    encoding="utf8")
    return root / "kb", root / "dev.jsonl"


def _tune(tiny_bert_path, kb_dir, dev, out, *options):
    result = CliRunner().invoke(app, ["tune-hybrid", str(dev), "--kb", str(kb_dir), "-m", str(tiny_bert_path),
                                      "--pooling", "mean", "--max-length", "25", "--device", "cpu", "-o", str(out),
                                      *options])
    assert result.exit_code == 0, result.output + str(result.exception)
    return json.loads(out.read_text(encoding="utf8"))


def _linker_acc(nlp, golds):
    """Strict acc@1 of the linker's top concept, each text a whole-doc span."""
    found = whole_doc_evidence(nlp, golds)
    tops = [per_doc[0][1].candidates[0][0] if per_doc[0][1].candidates else None for per_doc in found]
    return sum(top == gold for top, gold in zip(tops, golds.values())) / len(golds)


def _options(k, sparse_k, candidates, kinds):
    return ["--k", str(k), "--sparse-k", str(sparse_k), "--candidates", candidates,
            *[word for kind in kinds for word in ("--query-variants", kind)]]


SETTINGS = [(1, 2, "score", []), (1, 2, "interleave", []), (3, 0, "score", []), (3, 0, "score", KINDS),
            (3, 0, "interleave", KINDS)]


@pytest.mark.parametrize("k,sparse_k,candidates,kinds", SETTINGS)
def test_tune_hybrid_grid_is_what_the_linker_links(tiny_bert_path, tuning, tmp_path, k, sparse_k, candidates, kinds):
    kb_dir, dev = tuning
    found = _tune(tiny_bert_path, kb_dir, dev, tmp_path / "tuned.json", *_options(k, sparse_k, candidates, kinds))
    assert (found["k"], found["sparse_k"], found["candidates"], found["query_variants"]) == (
        k, sparse_k, candidates, kinds)
    grid = {row["weight"]: row["acc@1"] for row in found["grid"]}
    for weight in CHECKED:
        nlp = linker_nlp(tiny_bert_path, kb_dir, max_length=25, k=k, max_entities_per_mention=k, sparse_k=sparse_k,
                         sparse_weight=weight, candidates=candidates, query_variants=kinds)
        assert grid[weight] == pytest.approx(_linker_acc(nlp, DEV)), weight


def test_tune_hybrid_candidate_settings_change_the_grid_and_default_to_the_linkers(tiny_bert_path, tuning, tmp_path):
    """At depth 1 interleave keeps the dense list's first concept whatever the weight; score lets the sparse
    part move the top-1. At depth 3 without sparse lists the query variants' dense lists bring other concepts.
    Either way the tuned grid differs; the defaults are the linker's."""
    from spacy_sapbert.linker.settings import DEFAULT_CONFIG

    kb_dir, dev = tuning

    def grid(*setting):
        found = _tune(tiny_bert_path, kb_dir, dev, tmp_path / "tuned.json", *_options(*setting))
        return [row["acc@1"] for row in found["grid"]]

    score, interleave = grid(1, 2, "score", []), grid(1, 2, "interleave", [])
    assert score != interleave and len(set(interleave)) == 1 and max(score) > max(interleave)
    assert grid(3, 0, "score", []) != grid(3, 0, "score", KINDS)
    defaults = _tune(tiny_bert_path, kb_dir, dev, tmp_path / "defaults.json")
    assert {key: defaults[key] for key in ("candidates", "query_variants", "sparse_k")} == {
        key: DEFAULT_CONFIG[key] for key in ("candidates", "query_variants", "sparse_k")}
    assert defaults["k"] == max(DEFAULT_CONFIG["k"], DEFAULT_CONFIG["max_entities_per_mention"])
    defaults = _tune(tiny_bert_path, kb_dir, dev, tmp_path / "defaults.json")
    assert (defaults["candidates"], defaults["query_variants"]) == (DEFAULT_CONFIG["candidates"],
                                                                   DEFAULT_CONFIG["query_variants"])
    assert defaults["k"] == max(DEFAULT_CONFIG["k"], DEFAULT_CONFIG["max_entities_per_mention"])


@pytest.mark.parametrize("options,named", [(["--candidates", "round_robin"], "--candidates"),
                                           (["--query-variants", "plural"], "--query-variants"),
                                           (["--query-variants", "number", "--query-variants", "number"],
                                            "--query-variants"),
                                           (["--k", "0"], "--k")])
def test_tune_hybrid_refuses_settings_the_linker_would_refuse(tiny_bert_path, tuning, tmp_path, options, named):
    kb_dir, dev = tuning
    result = CliRunner().invoke(app, ["tune-hybrid", str(dev), "--kb", str(kb_dir), "-m", str(tiny_bert_path),
                                      "--pooling", "mean", "--device", "cpu", *options])
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError) and "SB-E785" in str(result.exception)
    assert named in str(result.exception)


def _evaluate_systems(fixtures_dir, tiny_bert_path, tmp_path, dev, ks, **systems):
    from spacy_sapbert.evaluation.baselines import Dictionary
    from spacy_sapbert.evaluation.run import build_systems, load_kb
    from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

    f = fixtures_dir / "eval"
    block = {"dataset": {"path": str(f / "test.pubtator"), "train": [str(dev)]},
             "kb": {"sources": [[str(f / "kb_medic.txt"), "medic"]]}, "cache_dir": str(tmp_path / "cache"),
             "ks": ks, "show_progress": False,
             "systems": {"tfidf": False, "scispacy": False, "exact_match": False, "device": "cpu",
                         "base_encoder": str(tiny_bert_path), "base_pooling": "mean", "hybrid": True,
                         "hybrid_tune": True, **systems}}
    settings = settings_from_config(merge_config(default_config(), Config({"evaluate": block}), {}))
    kb, _ = load_kb(settings)
    return {s.name: s for s in build_systems(settings, kb, Dictionary.from_kb(kb))}["base encoder + hybrid"]


def test_evaluate_hybrid_tune_uses_the_systems_candidate_settings(fixtures_dir, tiny_bert_path, tuning, tmp_path):
    """evaluate tunes the hybrid system at its own candidates / query_variants and the depth it ranks at (the
    run's largest k), records them, and each grid row is the linker's acc@1 at that weight."""
    kb_dir, dev = tuning

    def tuned(ks, sparse_k, candidates, kinds):
        system = _evaluate_systems(fixtures_dir, tiny_bert_path, tmp_path, dev, ks, sparse_k=sparse_k,
                                   candidates=candidates, query_variants=kinds)
        assert {key: system.tuned[key] for key in ("candidates", "query_variants", "k")} == {
            "candidates": candidates, "query_variants": kinds, "k": max(ks)}
        grid = {row["weight"]: row["acc@1"] for row in system.tuned["grid"]}
        for weight in (0.0, 1.0):
            nlp = linker_nlp(tiny_bert_path, kb_dir, max_length=25, k=max(ks), max_entities_per_mention=max(ks),
                             sparse_k=sparse_k, sparse_weight=weight, candidates=candidates, query_variants=kinds)
            assert grid[weight] == pytest.approx(_linker_acc(nlp, DEV)), weight
        return list(grid.values())

    assert tuned([1], 2, "score", []) != tuned([1], 2, "interleave", [])
    assert tuned([1, 3], 0, "score", []) != tuned([1, 3], 0, "score", KINDS)


def test_tune_hybrid_resolves_abbreviations_as_the_linker_by_default(tiny_bert_path, tuning, tmp_path):
    """"WD" is read as the "wilson disease" its document defines (a KB name: its own vector, top-1 at every weight)
    unless --as-written; the count of resolved mentions is recorded."""
    kb_dir, _ = tuning
    title, abstract = "Wilson disease (WD) is rare.", "Patients with WD and breast cancer."
    at = len(title) + 1
    dev = tmp_path / "abbr.pubtator"
    dev.write_text(f"1|t|{title}\n1|a|{abstract}\n"
                   f"1\t0\t14\tWilson disease\tDisease\tD006\n1\t16\t18\tWD\tDisease\tD006\n"
                   f"1\t{at + 14}\t{at + 16}\tWD\tDisease\tD006\n"
                   f"1\t{at + 21}\t{at + 34}\tbreast cancer\tDisease\tD001\n\n",
                   encoding="utf8")
    resolved = _tune(tiny_bert_path, kb_dir, dev, tmp_path / "resolved.json")
    written = _tune(tiny_bert_path, kb_dir, dev, tmp_path / "written.json", "--as-written")
    assert (resolved["resolve_abbreviations"], resolved["abbreviations_resolved"]) == (True, 2)
    assert (written["resolve_abbreviations"], written["abbreviations_resolved"]) == (False, 0)
    assert resolved["mentions"] == written["mentions"] == 4
    assert {row["acc@1"] for row in resolved["grid"]} == {1.0}
    nlp = linker_nlp(tiny_bert_path, kb_dir, max_length=25, resolve_abbreviations=False)
    wd_right = _linker_acc(nlp, {"wd": "D006"})  # what "WD" as written links to
    assert written["name_only_acc@1"] == pytest.approx((2 + 2 * wd_right) / 4)
    # an abbreviation table reads "WD" as the linker with that table does, with the document's definitions off
    table = tmp_path / "abbreviations.tsv"
    table.write_text("WD\twilson disease\n", encoding="utf8")
    tabled = _tune(tiny_bert_path, kb_dir, dev, tmp_path / "table.json", "--as-written", "--abbreviation-table",
                   str(table))
    assert (tabled["abbreviations_resolved"], tabled["abbreviation_table"]) == (2, str(table))
    assert {row["acc@1"] for row in tabled["grid"]} == {1.0}
