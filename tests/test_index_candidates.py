"""The hybrid candidate stage (index/hybrid.py ``mode`` and ``variants``, index/query_variants.py) and the
linker's ``candidates`` / ``query_variants`` keys: round-robin selection against a reference built from the
dense and sparse lists, the sparse-only find that score selection drops, query variants adding exactly
their lists' concepts while scores stay the mention's, validation and pipeline round trips."""
from __future__ import annotations

import numpy
import pytest
import spacy
from spacy.tokens import Span

from helpers import linker_nlp, write_toy_kb

from spacy_sapbert.errors import ConfigError, MissingInputError
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.index.aggregate import aggregate_batch
from spacy_sapbert.index.hybrid import check_mode, gather, hybrid_search, interleaved, rank
from spacy_sapbert.index.query_variants import check_kinds, query_variants
from spacy_sapbert.index.sparse import SPARSE_META, SparseIndex
from spacy_sapbert.kb import Concept, KnowledgeBase

WORDS = ["cardiac", "renal", "hepatic", "arrhythmia", "failure", "fibrosis", "necrosis", "tumour", "cyst",
         "atrophy", "lesion", "stenosis"]
CONCEPTS = [Concept(f"D{i:03d}", f"{WORDS[i % 12]} {WORDS[(i * 5 + 3) % 12]}", (f"{WORDS[(i * 7 + 1) % 12]} x{i}",))
            for i in range(30)]
QUERIES = ["cardiac failure", "renal cysts", "hepatic necrosis disease", "tumour", "lesion of the liver"]


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.from_concepts(CONCEPTS)


@pytest.fixture(scope="module")
def parts(kb):
    rng = numpy.random.default_rng(3)
    vectors = rng.normal(size=(len(kb.names), 8)).astype(numpy.float32)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    index = ConceptIndex(kb, {"kind": "exact", "dim": 8, "n_names": len(kb.names), "encoder_fingerprint": "enc-1",
                              "kb_checksum": kb.checksum}, vectors=vectors)
    sparse = SparseIndex.from_kb(kb, encoder_fingerprint="enc-1")
    queries = rng.normal(size=(len(QUERIES), 8)).astype(numpy.float32)
    queries /= numpy.linalg.norm(queries, axis=1, keepdims=True)
    return index, sparse, queries


def _dense_list(index, vector, k):
    return [cid for cid, _ in index.search(vector[None, :], k)[0]]


def _sparse_list(index, sparse, text, k):
    rows, scores = sparse.search([text], 4 * k + 16)
    _, ptr, idx = index._row_csr()
    ranked, _ = aggregate_batch(rows, scores, k, None, True, ptr, idx)
    return [index.kb.concept_ids[int(c)] for c in ranked[0][0]]


def _round_robin(lists, k):
    out = []
    for r in range(max(len(x) for x in lists)):
        for lst in lists:
            if r < len(lst) and lst[r] not in out:
                out.append(lst[r])
    return out[:k]


@pytest.mark.parametrize("k", [1, 3, 6])
def test_interleave_picks_the_round_robin_of_the_dense_and_sparse_lists(parts, k):
    index, sparse, queries = parts
    found = gather(index, sparse, QUERIES, queries, k=k, sparse_k=k)
    ranked = rank(found, 0.3, k, index.kb.concept_ids, mode="interleave")
    for q, text in enumerate(QUERIES):
        expected = _round_robin([_dense_list(index, queries[q], k), _sparse_list(index, sparse, text, k)], k)
        got = [x.concept_id for x in ranked[q]]
        assert sorted(got) == sorted(expected)
        assert [x.score for x in ranked[q]] == sorted((x.score for x in ranked[q]), reverse=True)
        for x in ranked[q]:  # still the mention's own hybrid score
            assert x.score == pytest.approx((x.dense + 0.3 * x.sparse) / 1.3, abs=1e-6)


def test_score_selection_drops_a_sparse_only_find_that_interleave_keeps(parts):
    index, sparse, _ = parts
    kb = index.kb
    text = f"{WORDS[(20 * 7 + 1) % 12]} x20"  # D020's own name: the sparse list's first concept
    away = -index.name_vectors([kb.row_of_name(text)])[0]  # the dense side puts that name last
    vec = numpy.asarray(away / numpy.linalg.norm(away), numpy.float32)[None, :]
    found = gather(index, sparse, [text], vec, k=4, sparse_k=4)
    by_score = [x.concept_id for x in rank(found, 0.05, 4, kb.concept_ids)[0]]
    by_turns = [x.concept_id for x in rank(found, 0.05, 4, kb.concept_ids, mode="interleave")[0]]
    assert _sparse_list(index, sparse, text, 1) == ["D020"]
    assert "D020" not in by_score and "D020" in by_turns


def test_query_variants_add_exactly_their_lists_and_score_against_the_mention(parts):
    index, sparse, queries = parts
    kb = index.kb
    variants = [query_variants(t, ["number", "generic_head", "word_order"]) for t in QUERIES]
    assert variants[1] == ["renal cyst", "cysts, renal"] and "hepatic necrosis" in variants[2]
    flat = [v for vs in variants for v in vs]
    v_vectors = numpy.random.default_rng(5).normal(size=(len(flat), 8)).astype(numpy.float32)
    v_vectors /= numpy.linalg.norm(v_vectors, axis=1, keepdims=True)
    found = gather(index, sparse, QUERIES, queries, k=2, sparse_k=2, variants=variants, variant_vectors=v_vectors)
    plain = gather(index, sparse, QUERIES, queries, k=2, sparse_k=2)
    at = 0
    for q, text in enumerate(QUERIES):
        lists = [_dense_list(index, queries[q], 2), _sparse_list(index, sparse, text, 2)]
        for v in variants[q]:
            lists += [_dense_list(index, v_vectors[at], 2), _sparse_list(index, sparse, v, 2)]
            at += 1
        got = {kb.concept_ids[int(c)] for c in found.concept[found.query == q]}
        assert got == {c for lst in lists for c in lst}
    # a candidate's scores are the mention's own: the same as without variants where both have it
    same = {(int(a), int(b)): (d, s) for a, b, d, s in zip(plain.query, plain.row, plain.dense, plain.sparse)}
    for a, b, d, s in zip(found.query, found.row, found.dense, found.sparse):
        if (int(a), int(b)) in same:
            assert (d, s) == pytest.approx(same[int(a), int(b)], abs=1e-6)
    # interleaving with variants keeps k concepts, the mention's own first picks included
    ranked = rank(found, 0.3, 3, kb.concept_ids, mode="interleave")
    for q in range(len(QUERIES)):
        ids = [x.concept_id for x in ranked[q]]
        assert len(ids) == 3 and _dense_list(index, queries[q], 1)[0] in ids


def test_query_variants_are_deterministic_and_leave_the_mention_out():
    assert query_variants("ovarian cyst", ["number"]) == ["ovarian cysts"]
    assert query_variants("huntington disease", ["generic_head"]) == ["huntington"]
    assert query_variants("b2 disease", ["generic_head"]) == []  # nothing of three letters left
    assert query_variants("non-hodgkin lymphoma", ["punctuation"]) == ["non hodgkin lymphoma", "nonhodgkin lymphoma"]
    assert query_variants("carcinoma of the breast", ["word_order"]) == ["breast carcinoma"]
    assert query_variants("breast cancer", ["word_order", "number"]) == ["cancer, breast", "breast cancers"]
    assert query_variants("flu", ["number", "generic_head", "punctuation", "word_order"]) == []
    assert query_variants("renal cysts disease", ["number", "generic_head"], limit=1) == ["renal cysts diseases"]


@pytest.mark.parametrize("bad", ["union", "", None, 3])
def test_bad_candidate_mode_is_refused(bad):
    with pytest.raises(ConfigError, match="SB-E786.*candidates"):
        check_mode(bad)


@pytest.mark.parametrize("bad", ["number", ["number", "number"], ["plural"], [1], None])
def test_bad_query_variant_kinds_are_refused(bad):
    with pytest.raises(ConfigError, match="SB-E786.*query_variants"):
        check_kinds(bad)


def test_variant_vectors_must_match_the_variants(parts):
    index, sparse, queries = parts
    with pytest.raises(ConfigError, match="SB-E787"):
        gather(index, sparse, QUERIES[:1], queries[:1], k=2, sparse_k=2, variants=[["a b", "c d"]],
               variant_vectors=queries[:1])
    with pytest.raises(ConfigError, match="SB-E787"):
        gather(index, sparse, QUERIES[:1], queries[:1], k=2, sparse_k=2, variants=[["a b"]])


def test_interleaved_is_identity_without_slots(parts):
    index, sparse, queries = parts
    found = gather(index, sparse, QUERIES, queries, k=3, sparse_k=3)
    assert len(interleaved(found._replace(slot=None), 1).row) == len(found.row)
    assert hybrid_search(index, sparse, QUERIES, queries, k=3, sparse_k=3, weight=0.3, mode="interleave") == \
        rank(found, 0.3, 3, index.kb.concept_ids, mode="interleave")


# ---- the linker's keys -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    """The toy KB's diseases and "Ovarian cysts" (a plural for the ``number`` query variant)."""
    return write_toy_kb(tmp_path_factory.mktemp("candidate_kb") / "kb", "D001", "D002", "D003",
                        extra=[Concept("D004", "Ovarian cysts", (), ("Disease",))])


def _nlp(model, kb_path, **config):
    return linker_nlp(model, kb_path, **{"k": 2, "sparse_k": 1, "max_entities_per_mention": 2, **config})


def _ents(nlp, text):
    doc = nlp.make_doc(text)
    doc.ents = [Span(doc, 0, len(doc), label="DISEASE")]
    return nlp.get_pipe("sapbert_linker")(doc).ents[0]._.kb_ents


@pytest.mark.parametrize("key,bad", [("candidates", "rrf"), ("query_variants", ["typo"]),
                                     ("query_variants", ["number", "number"])])
def test_bad_candidate_keys_are_refused_when_the_pipeline_is_built(key, bad):
    with pytest.raises(ConfigError, match="SB-E786"):
        spacy.blank("en").add_pipe("sapbert_linker", config={key: bad})


def test_candidate_keys_travel_with_the_pipeline(tiny_bert_path, kb_path, tmp_path):
    nlp = _nlp(tiny_bert_path, kb_path, candidates="interleave", query_variants=["number", "generic_head"])
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.index.sparse is not None  # built at initialize though sparse_weight = 0
    ents = _ents(nlp, "ovarian cyst disease")
    expected = hybrid_search(linker.index, linker.index.sparse, ["ovarian cyst disease"],
                             linker._vectors(["ovarian cyst disease"]), k=2, sparse_k=1, weight=0.0,
                             mode="interleave", variants=[["ovarian cyst diseases", "ovarian cyst"]],
                             variant_vectors=linker._vectors(["ovarian cyst diseases", "ovarian cyst"]))[0]
    assert ents == [(x.concept_id, pytest.approx(x.score, abs=1e-6)) for x in expected]
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    cfg = loaded.get_pipe("sapbert_linker").cfg
    assert cfg["candidates"] == "interleave" and cfg["query_variants"] == ["number", "generic_head"]
    assert _ents(loaded, "ovarian cyst disease") == ents
    (tmp_path / "pipe" / "sapbert_linker" / "index" / SPARSE_META).unlink()
    with pytest.raises(MissingInputError, match=r"SB-E788.*candidates = 'interleave'.*--sparse"):
        spacy.load(tmp_path / "pipe")


def test_context_reranking_says_it_ignores_the_candidate_keys(tiny_bert_path, kb_path):
    with pytest.warns(UserWarning, match="SB-W781"):
        _nlp(tiny_bert_path, kb_path, query_variants=["number"], type_priors={"DISEASE": ["D*"]})
