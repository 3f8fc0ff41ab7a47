"""The linker's hybrid scores (sparse_weight, sparse_k): config validation, initialize building the
sparse part, nlp.to_disk -> spacy.load, to_bytes, the coded error of a pipeline without the sparse
files, build-index --sparse on the command line."""
from __future__ import annotations

import shutil

import pytest
import spacy
from spacy.tokens import Span
from typer.testing import CliRunner

from helpers import linker_nlp

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, MissingInputError
from spacy_sapbert.index.sparse import SPARSE_META


def linked(nlp, text, start, end):
    doc = nlp.make_doc(text)
    doc.ents = [Span(doc, start, end, label="DISEASE")]
    return nlp.get_pipe("sapbert_linker")(doc).ents[0]


@pytest.mark.parametrize("bad", [-1.0, 1e9])
def test_bad_weights_are_refused_when_the_pipeline_is_built(bad):
    nlp = spacy.blank("en")
    with pytest.raises(ConfigError, match="SB-E784"):
        nlp.add_pipe("sapbert_linker", config={"sparse_weight": bad})


def test_nan_weight_is_refused():  # spaCy's add_pipe refuses NaN itself (E961); a config file gets ours
    from spacy_sapbert.linker import SapbertLinker

    for bad in (float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="SB-E784"):
            SapbertLinker(spacy.blank("en").vocab, sparse_weight=bad)


def test_bad_sparse_k_is_refused():
    with pytest.raises(ConfigError, match="SB-E784.*sparse_k"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"sparse_k": -1})


def test_hybrid_scores_travel_with_the_pipeline(tiny_bert_path, toy_kb_path, tmp_path):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, index_path=tmp_path / "index", sparse_weight=3.0, sparse_k=3)
    assert (tmp_path / "index" / SPARSE_META).exists()  # built at initialize, saved with the index
    linker = nlp.get_pipe("sapbert_linker")
    ent = linked(nlp, "myocardial infarctions", 0, 2)
    assert ent.kb_id_ == "D001"  # the string wins over the tiny random encoder
    assert all(-1.0 <= s <= 1.0 for _, s in ent._.kb_ents)
    parts = linker.score_parts(["myocardial infarctions"])[0]
    assert parts[0].concept_id == "D001" and parts[0].sparse > 0.5
    assert parts[0].score == pytest.approx((parts[0].dense + 3.0 * parts[0].sparse) / 4.0)
    assert [(p.concept_id, pytest.approx(p.score, abs=1e-6)) for p in parts[:5]] == ent._.kb_ents
    nlp.to_disk(tmp_path / "pipe")
    assert (tmp_path / "pipe" / "sapbert_linker" / "index" / SPARSE_META).exists()
    loaded = spacy.load(tmp_path / "pipe")
    assert loaded.get_pipe("sapbert_linker").cfg["sparse_weight"] == 3.0
    again = linked(loaded, "myocardial infarctions", 0, 2)
    assert again._.kb_ents == ent._.kb_ents
    blank = spacy.blank("en")
    blank.add_pipe("sapbert_linker", config={"sparse_weight": 3.0, "sparse_k": 3, "pooling": "mean", "threshold": -1.0})
    blank.get_pipe("sapbert_linker").from_bytes(linker.to_bytes())
    assert linked(blank, "myocardial infarctions", 0, 2)._.kb_ents == ent._.kb_ents


def test_weight_zero_is_the_dense_linker(tiny_bert_path, toy_kb_path):
    dense = linker_nlp(tiny_bert_path, toy_kb_path)
    hybrid = linker_nlp(tiny_bert_path, toy_kb_path, sparse_weight=0.0)
    for text, span in (("myocardial infarctions", (0, 2)), ("flu", (0, 1))):
        assert linked(dense, text, *span)._.kb_ents == linked(hybrid, text, *span)._.kb_ents


def test_a_pipeline_without_the_sparse_files_says_how_to_fix_it(tiny_bert_path, toy_kb_path, tmp_path):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, sparse_weight=1.0)
    nlp.to_disk(tmp_path / "pipe")
    index_dir = tmp_path / "pipe" / "sapbert_linker" / "index"
    (index_dir / SPARSE_META).unlink()
    with pytest.raises(MissingInputError, match=r"SB-E783.*build-index.*--sparse"):
        spacy.load(tmp_path / "pipe")


def test_semantic_type_filter_holds_with_hybrid_scores(tiny_bert_path, toy_kb_path):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, sparse_weight=5.0, semantic_types=["Chemical"])
    ent = linked(nlp, "myocardial infarction", 0, 2)
    assert {c for c, _ in ent._.kb_ents} <= {"C004", "C005"}


def test_build_index_sparse_cli(tiny_bert_path, toy_kb_path, tmp_path):
    out = tmp_path / "index"
    result = CliRunner().invoke(app, ["build-index", str(toy_kb_path), "-m", str(tiny_bert_path), "-o", str(out),
                                      "--pooling", "mean", "--device", "cpu", "--sparse", "--sparse-ngrams", "2,4"])
    assert result.exit_code == 0, result.output
    assert "Sparse part" in result.output and (out / SPARSE_META).exists()
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, index_path=out, sparse_weight=1.0)
    assert nlp.get_pipe("sapbert_linker").index.sparse.meta["ngram_range"] == [2, 4]
    bad = CliRunner().invoke(app, ["build-index", str(toy_kb_path), "-m", str(tiny_bert_path), "-o",
                                   str(tmp_path / "bad"), "--sparse", "--sparse-ngrams", "4,2"])
    assert bad.exit_code != 0 and "SB-E780" in str(bad.exception) + bad.output
    shutil.rmtree(out)


def _eval_settings(fixtures_dir, tiny_bert_path, tmp_path, **systems):
    from thinc.api import Config

    from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

    f = fixtures_dir / "eval"
    block = {"dataset": {"path": str(f / "test.pubtator"), "train": [str(f / "train.pubtator")]},
             "kb": {"sources": [[str(f / "kb_medic.txt"), "medic"]]}, "cache_dir": str(tmp_path / "cache"),
             "systems": {"tfidf": False, "scispacy": False, "exact_match": False, "base_encoder": str(tiny_bert_path),
                         "base_pooling": "mean", "device": "cpu", "hybrid": True, **systems},
             "show_progress": False}
    return settings_from_config(merge_config(default_config(), Config({"evaluate": block}), {}))


def test_evaluate_reports_sparse_only_and_hybrid_beside_name_only(fixtures_dir, tiny_bert_path, tmp_path):
    from spacy_sapbert.evaluation.run import evaluate

    settings = _eval_settings(fixtures_dir, tiny_bert_path, tmp_path, sparse_weight=1.0, hybrid_tune=True)
    with pytest.warns(UserWarning, match="SB-W30"):
        result = evaluate(settings)
    full = {name: r["full"]["strict"]["acc@1"] for name, r in result["results"]["mention_only"].items()}
    assert set(full) == {"base encoder", "hybrid: sparse only", "base encoder + hybrid"}
    described = result["systems"]["base encoder + hybrid"]
    assert described["tuned"]["on"] == "train mentions" and described["sparse_weight"] in [
        row["weight"] for row in described["tuned"]["grid"]]
    assert full["base encoder + hybrid"] >= full["base encoder"] - 1e-9 or described["sparse_weight"] > 0


def test_evaluate_hybrid_settings_are_checked(fixtures_dir, tiny_bert_path, tmp_path):
    with pytest.raises(ConfigError, match="SB-E784"):
        _eval_settings(fixtures_dir, tiny_bert_path, tmp_path, sparse_weight=-1.0)
    with pytest.raises(ConfigError, match="SB-E780"):
        _eval_settings(fixtures_dir, tiny_bert_path, tmp_path, sparse_ngrams=[4, 1])


def test_tune_hybrid_cli(fixtures_dir, tiny_bert_path, toy_kb_path, tmp_path):
    import json

    f = fixtures_dir / "eval"
    kb_dir = tmp_path / "kb"
    from spacy_sapbert.kb.build import build_kb

    build_kb([(f / "kb_medic.txt", "medic")]).to_disk(kb_dir)
    out = tmp_path / "tuned.json"
    result = CliRunner().invoke(app, ["tune-hybrid", str(f / "train.pubtator"), "--kb", str(kb_dir), "-m",
                                      str(tiny_bert_path), "--pooling", "mean", "--device", "cpu", "--ngrams", "2,3",
                                      "--ngrams", "3,3", "-o", str(out)])
    assert result.exit_code == 0, result.output + str(result.exception)
    assert "sparse_weight =" in result.output
    found = json.loads(out.read_text())
    assert found["best"]["ngram_range"] in ([2, 3], [3, 3])
    assert found["best"]["acc@1"] == max(row["acc@1"] for row in found["grid"])
    assert found["best"]["acc@1"] >= found["name_only_acc@1"]
