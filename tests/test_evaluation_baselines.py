"""Baseline systems against brute-force references and hand-computed cases."""
from __future__ import annotations

import numpy as np
import pytest

from spacy_sapbert.evaluation.baselines import (
    DenseEncoder,
    Dictionary,
    ExactMatch,
    ScispacyLinker,
    TfidfCharNgrams,
    top_rows,
)
from spacy_sapbert.evaluation.preprocess import (
    InputOptions,
    expand_abbreviations,
    make_preprocessor,
    mention_queries,
)
from spacy_sapbert.mentions.datasets import Document, Mention
from spacy_sapbert.kb import Concept, KnowledgeBase


@pytest.fixture()
def kb():
    return KnowledgeBase.from_concepts([
        Concept("D001", "Breast Cancer", aliases=("mammary cancer",)),
        Concept("D002", "Ovarian Cancer"),
        Concept("D004", "Cancer", aliases=("tumor",)),
        Concept("D005", "Tumor"),
        Concept("D009", "Non-Hodgkin Lymphoma"),
        Concept("D010", "Non Hodgkin lymphoma, type 2"),
        Concept("D011", "non hodgkin lymphoma"),
    ])


def test_dictionary_from_kb_and_folding(kb):
    plain = Dictionary.from_kb(kb)
    assert len(plain) == len(kb.names)
    assert plain.concepts[plain.row("tumor")] == ("D004", "D005")
    folded = Dictionary.from_kb(kb, make_preprocessor(fold_punctuation=True))
    # "non-hodgkin lymphoma" and "non hodgkin lymphoma" become one name with both concepts
    assert folded.concepts[folded.row("non hodgkin lymphoma")] == ("D009", "D011")
    assert folded.row("non hodgkin lymphoma type 2") >= 0
    assert len(folded) == len(plain) - 1


def test_ranking_orders_concepts_by_score_then_preferred_name_then_id(kb):
    d = Dictionary.from_kb(kb)
    # "tumor" is D005's preferred name and a synonym of D004; "breast cancer" is D001's preferred name
    assert d.preferred[d.row("tumor")] == frozenset({"D005"})
    r = d.ranking([d.row("tumor"), d.row("breast cancer")], [0.9, 0.9], k=3)
    assert [n for n, _, _ in r.names] == ["tumor", "breast cancer"]
    assert r.concepts == [("D001", 0.9), ("D005", 0.9), ("D004", 0.9)]  # preferred names first, then by id
    assert d.ranking([d.row("tumor"), d.row("breast cancer")], [0.9, 0.9], k=2).concepts == [
        ("D001", 0.9), ("D005", 0.9)]  # cut at k
    plain = Dictionary(d.names, d.concepts)  # no preferred names given: ties by id alone
    assert plain.ranking([d.row("tumor")], [0.9], k=2).concepts == [("D004", 0.9), ("D005", 0.9)]
    # two of the first k names belong to D001: concepts reach past the k names given to the cut
    r = d.ranking([d.row("breast cancer"), d.row("mammary cancer"), d.row("ovarian cancer")], [0.9, 0.8, 0.7], k=2)
    assert [n for n, _, _ in r.names] == ["breast cancer", "mammary cancer"]
    assert r.concepts == [("D001", 0.9), ("D002", 0.7)]


def test_top_rows_deterministic_ties():
    scores = np.array([[0.5, 0.9, 0.9, 0.1, 0.9], [0.0, 0.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    (cols, vals), (cols0, _) = top_rows(scores, 2, min_score=0.0)
    assert cols.tolist() == [1, 2] and vals.tolist() == pytest.approx([0.9, 0.9])
    assert cols0.tolist() == []
    assert top_rows(scores, 10)[0][0].tolist() == [1, 2, 4, 0, 3]


def test_exact_match(kb):
    d = Dictionary.from_kb(kb)
    r = ExactMatch(d).rank(["tumor", "mammary cancer", "unknown thing"], 5)
    assert [c for c, _ in r[0].concepts] == ["D005", "D004"]  # "tumor" is D005's preferred name
    assert r[1].concepts == [("D001", 1.0)] and r[1].names[0][0] == "mammary cancer"
    assert r[2].concepts == [] and r[2].names == []


def test_tfidf_matches_brute_force(kb):
    from sklearn.feature_extraction.text import TfidfVectorizer

    d = Dictionary.from_kb(kb)
    system = TfidfCharNgrams(d, chunk_size=2)
    queries = ["breast cancers", "tumour", "lymphoma non hodgkin", "zzz"]
    got = system.rank(queries, 3)
    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3), min_df=1).fit(d.names)
    sims = (vec.transform(queries) @ vec.transform(d.names).T).toarray()
    for q, row, ranking in zip(queries, sims, got):
        order = sorted((i for i in range(len(row)) if row[i] > 0), key=lambda i: (-row[i], i))[:3]
        assert [n for n, _, _ in ranking.names] == [d.names[i] for i in order], q
        assert [s for _, _, s in ranking.names] == pytest.approx([row[i] for i in order], abs=1e-5)
    assert got[0].names[0][0] == "breast cancer"
    assert got[3].concepts == []  # no shared 3-gram: no prediction


class _CountingEncoder:
    def __init__(self, inner):
        self.inner = inner
        self.calls = []
        self.fingerprint, self.pooling, self.max_length, self.dim = (
            inner.fingerprint, inner.pooling, inner.max_length, inner.dim)

    def encode(self, texts, **kwargs):
        self.calls.append(list(texts))
        return self.inner.encode(texts, **{k: v for k, v in kwargs.items() if k == "batch_size"})


def test_dense_encoder_exact_and_cached(kb, tiny_bert_path, tmp_path):
    from spacy_sapbert.encoding.torch_encoder import Encoder

    enc = _CountingEncoder(Encoder.load(str(tiny_bert_path), device="cpu"))
    d = Dictionary.from_kb(kb)
    system = DenseEncoder(enc, d, cache_dir=tmp_path, show_progress=False, chunk_size=2)
    queries = ["breast cancers", "tumour", "cancer"]
    got = system.rank(queries, 4)
    names = enc.inner.encode(d.names)
    qv = enc.inner.encode(queries)
    sims = qv @ names.T
    for row, ranking in zip(sims, got):
        order = sorted(range(len(row)), key=lambda i: (-round(float(row[i]), 5), i))[:4]
        assert [s for _, _, s in ranking.names] == pytest.approx([row[i] for i in order], abs=1e-4)
    assert got[2].names[0][0] == "cancer" and got[2].names[0][2] == pytest.approx(1.0, abs=1e-4)
    # a second system with the same encoder reads the cache: only new names are encoded
    enc.calls.clear()
    bigger = Dictionary(d.names + ["brand new name"], d.concepts + [("D001",)])
    DenseEncoder(enc, bigger, cache_dir=tmp_path, show_progress=False)
    assert enc.calls == [["brand new name"]]
    assert system.describe()["search"] == "exact"


def test_scispacy_linker_same_dictionary(kb):
    d = Dictionary.from_kb(kb)
    system = ScispacyLinker(d, kb, k=5)
    got = system.rank(["breast cancer", "ovarian cancers", ""], 3)
    assert got[0].concepts[0][0] == "D001" and got[0].concepts[0][1] == pytest.approx(1.0, abs=1e-4)
    assert got[1].concepts[0][0] == "D002"
    assert got[2].concepts == [] and got[0].names is None
    assert system.describe()["filter_for_definitions"] is False


def test_preprocessing_and_abbreviations():
    prep = make_preprocessor(lowercase=False, fold_punctuation=True)
    assert prep("Non-Hodgkin  (NHL)") == "Non Hodgkin NHL"
    assert make_preprocessor()("  Wilson  Disease ") == "wilson disease"
    assert expand_abbreviations("WD-like WD patients", {"WD": "Wilson disease"}) == \
        "Wilson disease-like Wilson disease patients"
    assert expand_abbreviations("AWD", {"WD": "x"}) == "AWD"
    text = "Patients with Wilson disease (WD) were seen. WD is rare."
    doc = Document("1", text, [Mention("WD", ("D006",), 46, 48, doc_id="1")])
    plain = mention_queries([doc], InputOptions())
    resolved = mention_queries([doc], InputOptions(resolve_abbreviations=True))
    assert plain == [("wd", "WD")]
    assert resolved == [("wilson disease", "WD")]
    desc = InputOptions(resolve_abbreviations=True, backoff=True).describe()
    assert "abbreviations resolved" in desc and "dictionary back-off" in desc
