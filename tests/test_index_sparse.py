"""SparseIndex (char n-gram tf-idf beside the dense index) and hybrid ranking (index/hybrid.py):
the weights scikit-learn gives, search against brute force, files (no pickle, memory-mapped, integrity,
KB / encoder mismatch), filters, score range, weight validation."""
from __future__ import annotations

import json

import numpy
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from helpers import make_toy_kb, unit_rows

from spacy_sapbert.errors import ConfigError, IncompatibleError, IntegrityError, MissingInputError
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.index.hybrid import MAX_WEIGHT, check_weight, gather, hybrid_search, rank
from spacy_sapbert.index.sparse import SPARSE_META, SparseIndex, load_beside, write_beside
from spacy_sapbert.kb import Concept, KnowledgeBase

QUERIES = ["myocardial infarct", "asprin", "influenza a", "mitral regurgitation", "zzz"]


@pytest.fixture(scope="module")
def sparse(toy_kb):
    return SparseIndex.from_kb(toy_kb, encoder_fingerprint="enc-1")


def _dense_index(kb, seed=0):
    vectors = unit_rows(numpy.random.default_rng(seed).normal(size=(len(kb.names), 8)))
    index = ConceptIndex(kb, {"kind": "exact", "dim": 8, "n_names": len(kb.names), "encoder_fingerprint": "enc-1",
                                "kb_checksum": kb.checksum},
                         vectors=vectors)
    return index, vectors


def test_weights_equal_scikit_learn_and_search_equals_brute_force(toy_kb, sparse):
    ref = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3), lowercase=False, dtype=numpy.float32)
    names_matrix = ref.fit_transform(list(toy_kb.names)).toarray()
    got = sparse.transform(QUERIES).toarray()
    numpy.testing.assert_allclose(got, ref.transform(QUERIES).toarray(), atol=1e-6)
    rows, scores = sparse.search(QUERIES, 3)
    brute = got @ names_matrix.T
    for q in range(len(QUERIES)):
        expected = sorted((i for i in range(len(toy_kb.names)) if brute[q, i] > 0), key=lambda i: (-brute[q, i], i))[:3]
        assert rows[q, :len(expected)].tolist() == expected
        numpy.testing.assert_allclose(scores[q, :len(expected)], brute[q, expected], atol=1e-5)
        assert (rows[q, len(expected):] == -1).all()  # "zzz" shares no n-gram: nothing
    assert rows[4].tolist() == [-1, -1, -1]


def _brute_top(sims, k, allowed=None):
    """Per query row of ``sims``: the k best positive columns, ties by column (what search promises)."""
    out = []
    for row in sims:
        cols = [i for i in range(len(row)) if row[i] > 0 and (allowed is None or allowed[i])]
        out.append(sorted(cols, key=lambda i: (-row[i], i))[:k])
    return out


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("masked", [False, True])
def test_search_with_many_ties_equals_brute_force(k, masked):
    """Repeated names tie exactly: the k-th and (k + 1)-th best of a query are often equal, the case where the
    top-(k + 1) product cannot tell which tied rows come first and the query is searched in full."""
    rng = numpy.random.default_rng(k)
    words = ["heart", "attack", "renal", "failure", "cardiac", "arrest", "acute", "kidney"]
    names = [" ".join(rng.choice(words, size=rng.integers(1, 3))) for _ in range(60)]
    sparse = SparseIndex.build(names, kb_checksum="x")
    queries = ["heart attack", "acute renal failure", "kidney", "cardiac", "attack heart", "qqq"]
    q = sparse.transform(queries)
    sims = (q @ sparse.matrix()).toarray()
    allowed = rng.random(len(names)) < 0.6 if masked else None
    rows, scores = sparse.search(queries, k, row_mask=allowed)
    expected = _brute_top(sims, k, allowed)
    ties = sum(len(e) == k and numpy.sum(numpy.isclose(sims[i], sims[i, e[-1]])) > 1 for i, e in enumerate(expected))
    assert ties >= 2  # the test holds ties at the cut
    for i, e in enumerate(expected):
        assert rows[i, :len(e)].tolist() == e and (rows[i, len(e):] == -1).all()
        numpy.testing.assert_array_equal(scores[i, :len(e)], numpy.minimum(sims[i, e], 1.0).astype(numpy.float32))


def test_search_without_sparse_dot_topn_takes_scipys_path(toy_kb, sparse, monkeypatch):
    import sys

    expected = sparse.search(QUERIES, 3)
    monkeypatch.setitem(sys.modules, "sparse_dot_topn", None)  # import fails
    got = sparse.search(QUERIES, 3)
    for a, b in zip(got, expected):
        numpy.testing.assert_array_equal(a, b)


def test_a_process_forked_after_a_threaded_search_searches_without_hanging(monkeypatch):
    """sparse-dot-topn's OpenMP pool is process-wide: a child forked after the parent's threaded search used
    to wait forever in its first search (nlp.pipe(n_process=2) with a hybrid pipeline); it runs sequentially."""
    import os
    import select

    import spacy_sapbert.index.sparse as sparse_module
    from spacy_sapbert.index.threads import SPARSE_DOT_TOPN

    monkeypatch.setattr(sparse_module, "search_threads", lambda: 2)
    names = [f"name {i} heart attack renal {i % 7}" for i in range(3000)]
    index = SparseIndex.build(names, kb_checksum="x")
    index.search(["heart attack 3"], 5)  # the parent's pool starts here
    assert SPARSE_DOT_TOPN.started_in == os.getpid()
    expected = index.search(["renal 4"], 5)[0][0].tolist()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one search, its rows to the parent
        try:
            os.write(write, json.dumps(index.search(["renal 4"], 5)[0][0].tolist()).encode())
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 60)
    if not ready:
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    assert ready, "the forked child's search hung"
    assert json.loads(os.read(read, 1 << 16).decode()) == expected
    os.close(read)


def test_pair_scores_equal_the_full_product(toy_kb, sparse):
    q = sparse.transform(QUERIES)
    sims = (q @ sparse.matrix()).toarray()
    rng = numpy.random.default_rng(0)
    q_of = rng.integers(0, len(QUERIES), size=200)
    rows = rng.integers(0, len(toy_kb.names), size=200)
    got = sparse.pair_scores(q, q_of, rows, toy_kb.names)
    numpy.testing.assert_allclose(got, numpy.clip(sims[q_of, rows], 0, 1), atol=1e-6)
    assert sparse.pair_scores(q, q_of[:0], rows[:0], toy_kb.names).shape == (0,)


def test_round_trip_is_memory_mapped_without_pickle(toy_kb, sparse, tmp_path):
    sparse.to_disk(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([SPARSE_META, "sparse_vocab.json", "sparse_idf.npy", "sparse_indptr.npy",
                            "sparse_indices.npy", "sparse_data.npy"])
    loaded = SparseIndex.from_disk(tmp_path, kb=toy_kb, encoder_fingerprint="enc-1")
    assert isinstance(loaded.data, numpy.memmap) and isinstance(loaded.indices, numpy.memmap)
    assert loaded.vocabulary == sparse.vocabulary
    for a, b in zip(loaded.search(QUERIES, 4), sparse.search(QUERIES, 4)):
        numpy.testing.assert_array_equal(a, b)
    meta = json.loads((tmp_path / SPARSE_META).read_text())
    assert meta["kb_checksum"] == toy_kb.checksum and meta["ngram_range"] == [2, 3]


def test_other_kb_or_encoder_is_refused_naming_both(toy_kb, sparse, tmp_path):
    sparse.to_disk(tmp_path)
    other = make_toy_kb("D001", "D002", "D003")
    with pytest.raises(IncompatibleError, match=r"SB-E781.*knowledge base") as err:
        SparseIndex.from_disk(tmp_path, kb=other)
    assert toy_kb.checksum in str(err.value) and other.checksum in str(err.value)
    with pytest.raises(IncompatibleError, match=r"SB-E781.*encoder.*enc-1.*enc-2"):
        SparseIndex.from_disk(tmp_path, kb=toy_kb, encoder_fingerprint="enc-2")


@pytest.mark.parametrize("damage", ["truncate", "edit", "meta", "delete"])
def test_damaged_files_give_coded_errors(toy_kb, sparse, tmp_path, damage):
    sparse.to_disk(tmp_path)
    data = tmp_path / "sparse_data.npy"
    if damage == "truncate":
        data.write_bytes(data.read_bytes()[:-8])
    elif damage == "edit":
        raw = bytearray(data.read_bytes())
        raw[-3] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif damage == "meta":
        (tmp_path / SPARSE_META).write_text("{not json")
    else:
        data.unlink()
    with pytest.raises(IntegrityError, match=r"SB-E(551|782)"):
        SparseIndex.from_disk(tmp_path, kb=toy_kb)


def test_arrays_that_disagree_with_the_metadata_are_refused(toy_kb, sparse, tmp_path):
    sparse.to_disk(tmp_path)
    meta = json.loads((tmp_path / SPARSE_META).read_text())
    meta["nnz"] += 1  # records rewritten to match: only the consistency check can see it
    (tmp_path / SPARSE_META).write_text(json.dumps(meta))
    with pytest.raises(IntegrityError, match=r"SB-E782.*indices"):
        SparseIndex.from_disk(tmp_path, kb=toy_kb)


def test_bad_settings_and_missing_files(toy_kb, tmp_path):
    with pytest.raises(ConfigError, match="SB-E780"):
        SparseIndex.from_kb(toy_kb, ngram_range=(3, 2))
    with pytest.raises(ConfigError, match="SB-E780"):
        SparseIndex.from_kb(toy_kb, analyzer="word")
    with pytest.raises(MissingInputError, match="SB-E783"):
        SparseIndex.from_disk(tmp_path, kb=toy_kb)
    assert load_beside(tmp_path, toy_kb, None) is None


def test_index_folder_carries_the_sparse_part_and_drops_a_stale_one(toy_kb, sparse, tmp_path):
    index, _ = _dense_index(toy_kb)
    index.sparse = sparse
    index.to_disk(tmp_path)
    loaded = ConceptIndex.from_disk(tmp_path, toy_kb)
    assert loaded.sparse is not None and loaded.sparse.vocabulary == sparse.vocabulary
    loaded.sparse = None
    loaded.to_disk(tmp_path)  # saved without it: the files of the old one go
    assert not (tmp_path / SPARSE_META).exists() and not (tmp_path / "sparse_data.npy").exists()
    assert ConceptIndex.from_disk(tmp_path, toy_kb).sparse is None
    write_beside(sparse, tmp_path, "enc-other")
    with pytest.raises(IncompatibleError, match="SB-E781"):  # beside another encoder's index
        ConceptIndex.from_disk(tmp_path, toy_kb)


def test_weight_zero_is_the_dense_ranking_and_scores_stay_in_range(toy_kb, sparse):
    index, vectors = _dense_index(toy_kb)
    queries = unit_rows(numpy.random.default_rng(3).normal(size=(len(QUERIES), 8)))
    dense = index.search(queries, 3)
    hybrid = hybrid_search(index, sparse, QUERIES, queries, k=3, sparse_k=3, weight=0.0)
    for d, h in zip(dense, hybrid):
        assert [c for c, _ in d] == [x.concept_id for x in h]
        numpy.testing.assert_allclose([s for _, s in d], [x.score for x in h], atol=1e-5)
    found = gather(index, sparse, QUERIES, queries, k=5, sparse_k=5)
    for weight in (0.0, 0.5, 3.0, MAX_WEIGHT):
        for ranked in rank(found, weight, 10, toy_kb.concept_ids):
            scores = [x.score for x in ranked]
            assert all(-1.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
            for x in ranked:
                assert x.score == pytest.approx((x.dense + weight * x.sparse) / (1 + weight))


def test_hybrid_fixes_what_dense_alone_gets_wrong(toy_kb, sparse):
    index, vectors = _dense_index(toy_kb)
    names = list(toy_kb.names)
    query = vectors[[names.index("grippe")]]  # the dense side is sure it is influenza ...
    text = ["myocardial infarctions"]  # ... the string says heart attack
    assert index.search(query, 1)[0][0][0] == "D003"
    best = hybrid_search(index, sparse, text, query, k=3, sparse_k=3, weight=2.0)[0][0]
    assert best.concept_id == "D001" and best.row == names.index("myocardial infarction")
    assert best.sparse > 0.8 and best.dense < 0.9


def test_filters_apply_to_the_sparse_side(toy_kb, sparse):
    index, vectors = _dense_index(toy_kb)
    query = vectors[[0]]
    found = hybrid_search(index, sparse, ["myocardial infarct"], query, k=5, sparse_k=5, weight=5.0,
                          semantic_types=["Chemical"])[0]
    assert {x.concept_id for x in found} <= {"C004", "C005"} and found


def test_weight_validation():
    for bad in (float("nan"), float("inf"), -0.1, MAX_WEIGHT + 1, "1", True, None):
        with pytest.raises(ConfigError, match="SB-E784"):
            check_weight(bad)
    assert check_weight(0) == 0.0 and check_weight(2.5) == 2.5


def test_language_filter_applies_to_the_sparse_side():
    kb = KnowledgeBase.from_concepts([
        Concept("C1", "fever", ("fiebre",), languages=(("en",), ("es",))),
        Concept("C2", "fiebre amarilla", ("yellow fever",), languages=(("es",), ("en",))),
        Concept("C3", "headache", ("cefalea",), languages=(("en",), ("es",)))])
    sparse = SparseIndex.from_kb(kb)
    index, vectors = _dense_index(kb)
    found = hybrid_search(index, sparse, ["fiebre amarila"], vectors[[0]], k=3, sparse_k=3, weight=5.0,
                          languages=["en"])[0]
    names = list(kb.names)
    assert found and all(kb.languages_of_row(x.row) == ("en",) for x in found)
    assert names[found[0].row] in ("fever", "yellow fever", "headache")


def test_sparse_k_zero_only_rescores_the_dense_candidates(toy_kb, sparse):
    index, vectors = _dense_index(toy_kb)
    query = vectors[[list(toy_kb.names).index("grippe")]]
    dense = {c for c, _ in index.search(query, 2)[0]}
    found = gather(index, sparse, ["myocardial infarctions"], query, k=2, sparse_k=0)
    assert {toy_kb.concept_ids[int(c)] for c in found.concept} == dense
    with_sparse = gather(index, sparse, ["myocardial infarctions"], query, k=2, sparse_k=2)
    assert "D001" in {toy_kb.concept_ids[int(c)] for c in with_sparse.concept} - dense


def test_postings_count_what_a_search_reads(toy_kb, sparse):
    q = sparse.transform(["flu", "zzz", "heart"])
    lengths = numpy.diff(numpy.asarray(sparse.indptr))
    expected = [int(lengths[q.indices[q.indptr[i]:q.indptr[i + 1]]].sum()) for i in range(3)]
    assert sparse.postings(q).tolist() == expected and expected[1] == 0 and expected[0] > 0


def test_top1_is_what_rank_puts_first(toy_kb, sparse):
    from spacy_sapbert.index.hybrid import top1

    index, vectors = _dense_index(toy_kb)
    queries = unit_rows(numpy.random.default_rng(5).normal(size=(len(QUERIES), 8)))
    queries[1] = vectors[list(toy_kb.names).index("mi")]  # a tie between D001 and D002: the smaller id
    found = gather(index, sparse, QUERIES, queries, k=5, sparse_k=5)
    weights = [0.0, 0.3, 1.0, 4.0]
    for w, best in zip(weights, top1(found, weights)):
        ranked = rank(found, w, 1, toy_kb.concept_ids)
        assert [toy_kb.concept_ids[c] if c >= 0 else None for c in best.tolist()] == \
            [r[0].concept_id if r else None for r in ranked]


@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_hybrid_works_over_other_index_kinds(toy_kb, sparse, kind):
    from types import SimpleNamespace

    _, vectors = _dense_index(toy_kb)
    enc = SimpleNamespace(fingerprint="enc-1", dim=8, pooling="mean", max_length=25, name="fake")
    index = ConceptIndex.from_vectors(toy_kb, vectors, enc, kind=kind, show_progress=False)
    assert index.kind == kind
    query = vectors[[list(toy_kb.names).index("grippe")]]
    best = hybrid_search(index, sparse, ["myocardial infarctions"], query, k=3, sparse_k=3, weight=2.0)[0][0]
    assert best.concept_id == "D001"
    zero = hybrid_search(index, sparse, ["myocardial infarctions"], query, k=3, sparse_k=3, weight=0.0)[0]
    assert [x.concept_id for x in zero] == [c for c, _ in index.search(query, 3)[0]]
