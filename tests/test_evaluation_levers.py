"""evaluate's candidate-stage and re-ranker keys ([evaluate.systems] candidates, query_variants, reranker,
reranker_k, reranker_margin, reranker_dense_weight): checked like the linker checks its own, and ranking what
``sapbert_linker`` with the same settings ranks, on the tiny fixture KB."""
from __future__ import annotations

import pytest
from thinc.api import Config

from helpers import linker_nlp, whole_doc_evidence

from spacy_sapbert.errors import ConfigError, IncompatibleError
from spacy_sapbert.evaluation.baselines import Dictionary
from spacy_sapbert.evaluation.run import build_systems, evaluate, load_kb
from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

QUERIES = ["breast cancer", "ovarian carcinoma", "tumor", "wilson disease", "mammary cancers", "ataxia",
           "cancers of the colon", "tumour growth", "degeneration hepatolenticular", "spinocerebellar ataxias"]
HYBRID = {"hybrid": True, "sparse_weight": 0.3, "sparse_k": 3}


def _settings(fixtures_dir, tmp_path, **systems):
    f = fixtures_dir / "eval"
    block = {"dataset": {"path": str(f / "test.pubtator"), "train": [str(f / "train.pubtator")]},
             "kb": {"sources": [[str(f / "kb_medic.txt"), "medic"]]}, "cache_dir": str(tmp_path / "cache"),
             "ks": [1, 3], "show_progress": False,
             "systems": {"tfidf": False, "scispacy": False, "exact_match": False, "device": "cpu",
                         "base_pooling": "mean", **systems}}
    return settings_from_config(merge_config(default_config(), Config({"evaluate": block}), {}))


def _systems(settings):
    kb, _ = load_kb(settings)
    return {s.name: s for s in build_systems(settings, kb, Dictionary.from_kb(kb))}, kb


def _linker_lists(nlp, texts, k):
    """The linker's candidates (concept ids and raw scores, best first) of each text as a whole-doc span."""
    found = whole_doc_evidence(nlp, texts)
    return [[(c, s) for c, s in per_doc[0][1].candidates[:k]] for per_doc in found]


def _same(ours, theirs):
    assert [[c for c, _ in r] for r in ours] == [[c for c, _ in r] for r in theirs]
    for r, t in zip(ours, theirs):
        assert [s for _, s in r] == pytest.approx([s for _, s in t], abs=1e-4)


@pytest.fixture(scope="module")
def fixture_kb_path(fixtures_dir, tmp_path_factory):
    from spacy_sapbert.kb.build import build_kb

    path = tmp_path_factory.mktemp("levers") / "kb"
    build_kb([(fixtures_dir / "eval" / "kb_medic.txt", "medic")]).to_disk(path)
    return path


@pytest.fixture(scope="module")
def fixture_reranker(fixtures_dir, tiny_bert_path, fixture_kb_path, tmp_path_factory):
    """A re-ranker trained briefly for the fixture KB and the tiny BERT (mean pooling, max_length 25)."""
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.mentions.datasets import read_dataset
    from spacy_sapbert.rerank import RerankerSettings, train_reranker

    kb = KnowledgeBase.from_disk(fixture_kb_path)
    encoder = Encoder.load(str(tiny_bert_path), pooling="mean", max_length=25, device="cpu")
    index = ConceptIndex.build(kb, encoder, kind="exact", show_progress=False)
    out = tmp_path_factory.mktemp("levers_reranker") / "run"
    docs = read_dataset(fixtures_dir / "eval" / "train.pubtator")
    train_reranker(docs, kb, index, encoder, out, base=str(tiny_bert_path), device="cpu", onnx=True,
                   show_progress=False, settings=RerankerSettings(k=3, epochs=1, batch_mentions=2, lr=1e-3,
                                                                  max_length=24, seed=3, pseudo_mentions=8))
    return out / "model"


@pytest.mark.parametrize("key,value,code", [
    ("candidates", "round_robin", "SB-E814"), ("query_variants", ["plural"], "SB-E814"),
    ("query_variants", "number", "SB-E814"), ("reranker_k", 1, "SB-E814"), ("reranker_k", 2.5, "SB-E814"),
    ("reranker_margin", -0.1, "SB-E814"), ("reranker_margin", float("nan"), "SB-E814"),
    ("reranker_dense_weight", 1e9, "SB-E814"), ("reranker_dense_weight", -1.0, "SB-E814"),
    ("reranker_window", -0.1, "SB-E814"), ("reranker_window", float("nan"), "SB-E814"),
    ("reranker_window", "wide", "SB-E814"), ("reranker_precision", "fp16", "SB-E814"),
    ("reranker_precision", 8, "SB-E814"), ("reranker_precision", ["int8"], "SB-E814"),
])
def test_bad_lever_values_are_refused_with_the_key_named(fixtures_dir, tmp_path, key, value, code):
    with pytest.raises(ConfigError, match=f"{code}.*{key}"):
        _settings(fixtures_dir, tmp_path, **HYBRID, **{key: value})


def test_keys_that_need_another_are_refused(fixtures_dir, tmp_path):
    with pytest.raises(ConfigError, match="SB-E815.*candidates.*hybrid = true"):
        _settings(fixtures_dir, tmp_path, candidates="interleave")
    with pytest.raises(ConfigError, match="SB-E815.*query_variants"):
        _settings(fixtures_dir, tmp_path, query_variants=["number"])
    with pytest.raises(ConfigError, match="SB-E815.*reranker.*not one"):
        _settings(fixtures_dir, tmp_path, **HYBRID, reranker=str(tmp_path / "missing"))
    ok = _settings(fixtures_dir, tmp_path, **HYBRID, candidates="interleave", query_variants=["number", "word_order"])
    assert ok["systems"]["candidates"] == "interleave" and ok["systems"]["query_variants"] == ["number", "word_order"]


def test_candidate_keys_rank_as_the_linker_does(fixtures_dir, tmp_path, tiny_bert_path, fixture_kb_path):
    plain, _ = _systems(_settings(fixtures_dir, tmp_path, base_encoder=str(tiny_bert_path), **HYBRID))
    levers = _settings(fixtures_dir, tmp_path, base_encoder=str(tiny_bert_path), **HYBRID, candidates="interleave",
                       query_variants=["number", "word_order", "generic_head"])
    systems, _ = _systems(levers)
    name = "base encoder + hybrid"
    assert systems[name].describe()["candidates"] == "interleave"
    ours = [r.concepts for r in systems[name].rank(QUERIES, 3)]
    before = [r.concepts for r in plain[name].rank(QUERIES, 3)]
    assert [[c for c, _ in r] for r in ours] != [[c for c, _ in r] for r in before]  # the keys move the lists
    nlp = linker_nlp(tiny_bert_path, fixture_kb_path, k=3, max_entities_per_mention=3, sparse_weight=0.3,
                     sparse_k=3, candidates="interleave", query_variants=["number", "word_order", "generic_head"])
    _same(ours, _linker_lists(nlp, QUERIES, 3))
    plain_nlp = linker_nlp(tiny_bert_path, fixture_kb_path, k=3, max_entities_per_mention=3, sparse_weight=0.3,
                           sparse_k=3)
    _same(before, _linker_lists(plain_nlp, QUERIES, 3))


@pytest.mark.parametrize("hybrid", [False, True])
def test_reranker_keys_rank_as_the_linker_does(fixtures_dir, tmp_path, tiny_bert_path, fixture_kb_path,
                                               fixture_reranker, hybrid):
    extra = {**HYBRID, "candidates": "interleave"} if hybrid else {}
    name = "base encoder + hybrid + re-ranker" if hybrid else "base encoder + re-ranker"
    linker_cfg = {**({"sparse_weight": 0.3, "sparse_k": 3, "candidates": "interleave"} if hybrid else {})}
    # reranker_skip_names: a query that is a KB name keeps its stage list in both; reranker_window: both read the
    # same candidates (0: the best two only)
    # same candidates (0: the best two only); reranker_precision: both run the same graph
    for skip, window, precision in ((False, 1.0, "int8"), (True, 1.0, "int8"), (False, 0.0, "int8"),
                                    (False, 1.0, "float32")):
        settings = _settings(fixtures_dir, tmp_path, base_encoder=str(tiny_bert_path), reranker=str(fixture_reranker),
                             reranker_k=3, reranker_margin=1.0, reranker_dense_weight=2.5, reranker_skip_names=skip,
                             reranker_window=window, reranker_precision=precision, **extra)
        systems, _ = _systems(settings)
        system = systems[name]
        assert system.describe()["reranker_window"] == window
        assert system.describe()["reranker_precision"] == precision
        ours = [r.concepts for r in system.rank(QUERIES, 3)]
        if not skip and window == 1.0:
            assert all(abs(sum(s for _, s in r) - 1.0) < 1e-6 for r in ours if len(r) == 3)  # softmax over the top 3
        if window == 0.0:
            assert all(len(r) <= 2 for r in ours)  # every query re-ranked, each over its best two
        nlp = linker_nlp(tiny_bert_path, fixture_kb_path, reranker_path=fixture_reranker, k=3,
                         max_entities_per_mention=3, reranker_k=3, reranker_margin=1.0, reranker_dense_weight=2.5,
                         reranker_skip_names=skip, reranker_window=window, reranker_precision=precision,
                         **linker_cfg)
        _same(ours, _linker_lists(nlp, QUERIES, 3))
    settings = _settings(fixtures_dir, tmp_path, base_encoder=str(tiny_bert_path), reranker=str(fixture_reranker),
                         reranker_k=3, reranker_margin=1.0, reranker_dense_weight=2.5, reranker_skip_names=False,
                         reranker_window=1.0, **extra)
    system = _systems(settings)[0][name]
    ours = [r.concepts for r in system.rank(QUERIES, 3)]
    stage = [r.concepts for r in system.candidate_stage.rank(QUERIES, 3)]
    assert ours != stage  # re-ordered and re-scored
    # a margin of 0 re-ranks only exact ties: (nearly) every list stays the stage's
    tight = _settings(fixtures_dir, tmp_path, base_encoder=str(tiny_bert_path), reranker=str(fixture_reranker),
                      reranker_k=3, reranker_margin=0.0, **extra)
    kept = [r.concepts for r in _systems(tight)[0][name].rank(QUERIES, 3)]
    assert sum(a == b for a, b in zip(kept, stage)) > sum(a == b for a, b in zip(ours, stage))


def test_evaluate_reports_the_reranker_with_its_stage_recall(fixtures_dir, tmp_path, tiny_bert_path,
                                                             fixture_reranker):
    settings = _settings(fixtures_dir, tmp_path, base_encoder=str(tiny_bert_path), reranker=str(fixture_reranker),
                         reranker_k=3, reranker_margin=1.0, **HYBRID)
    with pytest.warns(UserWarning, match="SB-W30"):
        result = evaluate(settings, output=tmp_path / "report")
    assert "base encoder + hybrid + re-ranker" in (tmp_path / "report" / "report.md").read_text(encoding="utf8")
    names = set(result["results"]["mention_only"])
    assert names == {"base encoder", "hybrid: sparse only", "base encoder + hybrid", "base encoder + hybrid + re-ranker"}
    recall = result["candidate_recall"]["mention_only"]
    assert recall["base encoder + hybrid + re-ranker"] == recall["base encoder + hybrid"]  # its stage's
    described = result["systems"]["base encoder + hybrid + re-ranker"]
    assert described["candidate_stage"] == "base encoder + hybrid" and described["reranker_k"] == 3
    assert described["mentions_per_s"] and 0 < described["distinct_texts_reordered"] <= 1
    assert "neither" in result["classes"]["mention_only"]["base encoder + hybrid + re-ranker"]


def test_a_reranker_for_another_kb_is_refused(fixtures_dir, tmp_path, tiny_bert_path, fixture_reranker):
    settings = _settings(fixtures_dir, tmp_path, base_encoder=str(tiny_bert_path), reranker=str(fixture_reranker))
    settings["input"]["backoff"] = True  # training mentions become aliases: another KB than the re-ranker's
    with pytest.raises(IncompatibleError, match="SB-E811.*KB") as refused, pytest.warns(UserWarning, match="SB-W30"):
        evaluate(settings)
    # the KB is evaluate's system's, not a linker's
    assert "than the one of evaluate's system 'base encoder' (" in str(refused.value)
    assert "linker" not in str(refused.value)


def test_a_reranker_without_a_dense_system_is_refused(fixtures_dir, tmp_path, fixture_reranker):
    from spacy_sapbert.errors import ConfigError as _ConfigError

    settings = _settings(fixtures_dir, tmp_path, exact_match=True, reranker=str(fixture_reranker))
    with pytest.raises(_ConfigError, match="SB-E305.*reranker.*base_encoder"):
        _systems(settings)
