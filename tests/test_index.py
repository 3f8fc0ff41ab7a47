"""ConceptIndex: exact and hnsw search, aggregation to concepts, filters, metadata, resume, errors."""
from __future__ import annotations

import json

import numpy
import pytest

from helpers import make_toy_kb, unit_rows

from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import ConfigError, EmptyResultError, IncompatibleError, IntegrityError, MissingInputError
from spacy_sapbert.index import META_FILE, ConceptIndex
from spacy_sapbert.kb import Concept, KnowledgeBase


@pytest.fixture(scope="module")
def enc(tiny_bert_path):
    return Encoder.load(tiny_bert_path, device="cpu")


def _hand_index(kb, vectors):
    meta = {"kind": "exact", "dim": vectors.shape[1], "n_names": len(kb.names)}
    return ConceptIndex(kb, meta, vectors=vectors)


def _brute_force(kb, vectors, query, k, keep=lambda cid: True):
    best = {}
    for row, score in enumerate(vectors @ query):
        for cid in kb.concepts_of_row(row):
            if keep(cid):
                best[cid] = max(best.get(cid, -9.0), float(score))
    return sorted(best.items(), key=lambda it: (-it[1], it[0]))[:k]


def test_aggregation_is_max_over_names_with_ties_by_concept_id(toy_kb):
    names = list(toy_kb.names)
    rng = numpy.random.default_rng(0)
    vectors = unit_rows(rng.normal(size=(len(names), 4)))
    # "mi" is shared by D001 and D002: both get its score, D001 first on the tie.
    vectors[names.index("mi")] = unit_rows([[1, 0, 0, 0]])[0]
    index = _hand_index(toy_kb, vectors)
    query = unit_rows([[1, 0, 0, 0]])
    result = index.search(query, k=5)[0]
    assert result[:2] == [("D001", pytest.approx(1.0)), ("D002", pytest.approx(1.0))]
    assert index.search(query, k=1)[0] == [("D001", pytest.approx(1.0))]  # a tie at the cut: smaller id
    expected = _brute_force(toy_kb, vectors, query[0], 5)
    assert [c for c, _ in result] == [c for c, _ in expected]
    numpy.testing.assert_allclose([s for _, s in result], [s for _, s in expected], rtol=1e-5)


def test_search_matches_brute_force_for_random_queries(toy_kb):
    rng = numpy.random.default_rng(1)
    vectors = unit_rows(rng.normal(size=(len(toy_kb.names), 8)))
    index = _hand_index(toy_kb, vectors)
    queries = unit_rows(rng.normal(size=(20, 8)))
    for k in (1, 2, 5, 9):
        got = index.search(queries, k=k)
        for q, res in zip(queries, got):
            expected = _brute_force(toy_kb, vectors, q, k)
            assert [c for c, _ in res] == [c for c, _ in expected]
    assert all(len(r) == 5 for r in index.search(queries, k=9))  # only 5 concepts exist


def test_aggregation_sees_aliases_added_after_the_index_was_built():
    """A name row that gains a concept through kb.add_alias links to it at once (same score)."""
    kb = make_toy_kb()
    names = list(kb.names)
    vectors = unit_rows(numpy.random.default_rng(2).normal(size=(len(names), 4)))
    index = _hand_index(kb, vectors)
    query = vectors[names.index("flu")][None, :]
    assert index.search(query, k=1)[0][0][0] == "D003"
    kb.add_alias("C004", "flu")
    result = index.search(query, k=2)[0]
    assert [c for c, _ in result] == ["C004", "D003"]  # the tie goes to the smaller id
    assert result[0][1] == pytest.approx(result[1][1])
    assert result == _brute_force(kb, vectors, query[0], 2)


def test_type_filter_is_applied_before_the_cut(toy_kb):
    rng = numpy.random.default_rng(2)
    vectors = unit_rows(rng.normal(size=(len(toy_kb.names), 8)))
    index = _hand_index(toy_kb, vectors)
    queries = unit_rows(rng.normal(size=(10, 8)))
    for res, q in zip(index.search(queries, k=1, semantic_types=["Chemical"]), queries):
        expected = _brute_force(toy_kb, vectors, q, 1, keep=lambda c: c.startswith("C"))
        assert res == [(expected[0][0], pytest.approx(expected[0][1], rel=1e-5))]
    with_def = index.search(queries, k=5, require_definition=True)
    assert all({c for c, _ in r} == {"D001", "D003"} for r in with_def)
    with pytest.raises(ConfigError, match="SB-E113"):
        index.search(queries, k=1, semantic_types=["Chemical", "Gene"])


@pytest.mark.parametrize("storage", ["float16", "float32"])
def test_build_with_encoder_exact_and_hnsw_agree(toy_kb, enc, storage):
    exact = ConceptIndex.build(toy_kb, enc, show_progress=False)
    assert exact.exact and exact.meta["kind"] == "exact"
    approx = ConceptIndex.build(toy_kb, enc, exact=False, hnsw_vectors=storage, show_progress=False)
    assert not approx.exact and approx.meta["vectors"] == storage
    query = enc.encode(["heart attack", "flu", "aspirin tablets"])
    # a name finds itself first
    rows, scores = exact.search_names(query[:2], k=3)
    assert list(toy_kb.names)[rows[0, 0]] == "heart attack" and scores[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert rows.dtype == numpy.int64 and scores.dtype == numpy.float32
    assert numpy.all(numpy.diff(scores, axis=1) <= 1e-6)  # best first
    # the tiny random encoder's names differ by less than float16's rounding: the float16 graph is compared with
    # exact search over the vectors it holds
    held = exact if storage == "float32" else ConceptIndex.from_vectors(
        toy_kb, approx.name_vectors(range(len(toy_kb.names))), enc, kind="exact")
    assert [[c for c, _ in r] for r in held.search(query, 3)] == [[c for c, _ in r] for r in approx.search(query, 3)]
    rows, scores = exact.search_names(query, k=50)  # more than the KB holds: padded
    assert rows.shape == (3, 50) and (rows[:, len(toy_kb.names):] == -1).all()
    assert numpy.isneginf(scores[:, len(toy_kb.names):]).all()
    assert exact.meta["encoder_fingerprint"] == enc.fingerprint and exact.meta["kb_checksum"] == toy_kb.checksum


def test_hnsw_filtered_search_pads_when_few_rows_are_allowed(toy_kb, enc):
    approx = ConceptIndex.build(toy_kb, enc, exact=False, show_progress=False)
    query = enc.encode(["aspirin"])
    res = approx.search(query, k=5, semantic_types=["Chemical"])[0]
    assert {c for c, _ in res} == {"C004", "C005"}


def test_hnsw_recall_at_5_against_exact_on_clustered_data():
    """Default M / ef_search on clustered vectors (realistic: many near-duplicate names)."""
    rng = numpy.random.default_rng(3)
    centres = rng.normal(size=(200, 48))
    vectors = unit_rows(centres[rng.integers(0, 200, 6000)] + 0.35 * rng.normal(size=(6000, 48)))
    concepts = [Concept(f"X{i:05d}", f"name {i}") for i in range(len(vectors))]
    big_kb = KnowledgeBase.from_concepts(concepts)
    order = [int(n.split()[1]) for n in big_kb.names]  # kb.names is sorted: align rows
    vectors = vectors[order]
    from spacy_sapbert.index import DEFAULT_EF_CONSTRUCTION, DEFAULT_M, _build_hnsw

    hnsw = _build_hnsw(vectors, M=DEFAULT_M, ef_construction=DEFAULT_EF_CONSTRUCTION, num_threads=1, seed=1,
                       show_progress=False)
    meta = {"kind": "hnsw", "dim": 48, "n_names": len(vectors)}
    approx = ConceptIndex(big_kb, meta, hnsw=hnsw)
    exact = ConceptIndex(big_kb, dict(meta, kind="exact"), vectors=vectors)
    queries = unit_rows(centres[rng.integers(0, 200, 300)] + 0.35 * rng.normal(size=(300, 48)))
    a, _ = approx.search_names(queries, 5)
    e, _ = exact.search_names(queries, 5)
    recall = numpy.mean([len(set(x) & set(y)) / 5 for x, y in zip(a, e)])
    assert recall >= 0.99


def test_round_trip_and_refusals(toy_kb, enc, other_tiny_bert_path, tmp_path):
    for exact in (True, False):
        index = ConceptIndex.build(toy_kb, enc, exact=exact, show_progress=False)
        path = tmp_path / f"idx_{exact}"
        index.to_disk(path)
        back = ConceptIndex.from_disk(path, toy_kb)
        back.check_compatible(enc)
        query = enc.encode(["myocardial infarction", "grippe"])
        assert back.search(query, 3) == index.search(query, 3)
        assert back.exact == exact
    other = make_toy_kb("D001", "D002", "D003")
    with pytest.raises(IncompatibleError, match="SB-E109"):
        ConceptIndex.from_disk(path, other)
    with pytest.raises(IncompatibleError, match="SB-E108"):
        back.check_compatible(Encoder.load(other_tiny_bert_path, device="cpu"))
    with pytest.raises(IncompatibleError, match="SB-E108"):
        back.check_compatible(Encoder.load(enc.name, device="cpu", pooling="mean"))


def test_missing_and_corrupt_index_files(toy_kb, enc, tmp_path):
    with pytest.raises(MissingInputError, match="SB-E107"):
        ConceptIndex.from_disk(tmp_path / "nothing", toy_kb)
    for exact in (True, False):
        path = tmp_path / f"c{exact}"
        ConceptIndex.build(toy_kb, enc, exact=exact, show_progress=False).to_disk(path)
        meta = json.loads((path / META_FILE).read_text())
        data = path / meta["file"]
        data.write_bytes(data.read_bytes()[:-10])  # truncated
        with pytest.raises(IntegrityError, match="SB-E551.*size"):
            ConceptIndex.from_disk(path, toy_kb)
        data.write_bytes(b"\0" * meta["file_size"])  # right size, garbage content
        with pytest.raises(IntegrityError, match="SB-E551.*sample_sha256"):
            ConceptIndex.from_disk(path, toy_kb)
        data.unlink()
        with pytest.raises(IntegrityError, match="SB-E551.*missing"):
            ConceptIndex.from_disk(path, toy_kb)
    (path / META_FILE).write_text("{not json")
    with pytest.raises(MissingInputError, match="SB-E107"):
        ConceptIndex.from_disk(path, toy_kb)


class _CountingEncoder:
    def __init__(self, enc):
        self.enc = enc
        self.encoded = 0
        self.dim, self.pooling, self.max_length = enc.dim, enc.pooling, enc.max_length
        self.fingerprint, self.name = enc.fingerprint, enc.name

    def encode(self, texts, **kwargs):
        self.encoded += len(texts)
        return self.enc.encode(texts, **kwargs)


def test_build_resumes_from_chunks_in_work_dir(toy_kb, enc, tmp_path):
    work = tmp_path / "work"
    counting = _CountingEncoder(enc)
    first = ConceptIndex.build(toy_kb, counting, work_dir=work, chunk_size=4, show_progress=False)
    n = len(toy_kb.names)
    assert counting.encoded == n
    chunks = sorted(work.glob("chunk_*.npy"))
    assert len(chunks) == -(-n // 4)
    chunks[1].unlink()  # as if the build had stopped before this chunk
    counting.encoded = 0
    again = ConceptIndex.build(toy_kb, counting, work_dir=work, chunk_size=4, show_progress=False)
    assert counting.encoded == 4
    q = enc.encode(["flu"])
    assert again.search(q, 3) == first.search(q, 3)
    with pytest.raises(IncompatibleError, match="SB-E112"):
        ConceptIndex.build(toy_kb, counting, work_dir=work, chunk_size=8, show_progress=False)


def test_bad_arguments(toy_kb, enc):
    with pytest.raises(EmptyResultError, match="SB-E106"):
        ConceptIndex.build(KnowledgeBase.from_concepts([]), enc, show_progress=False)
    with pytest.raises(ConfigError, match="SB-E111"):
        ConceptIndex.build(toy_kb, enc, M=1, show_progress=False)
    index = ConceptIndex.build(toy_kb, enc, show_progress=False)
    with pytest.raises(ConfigError, match="SB-E110"):
        index.search(numpy.zeros((2, 7), dtype=numpy.float32), 3)
    with pytest.raises(ConfigError, match="SB-E111"):
        index.search(enc.encode(["flu"]), 0)
    with pytest.raises(ConfigError, match="SB-E111"):
        index.set_ef(0)
    assert index.search(numpy.zeros((0, enc.dim), dtype=numpy.float32), 3) == []


def test_name_vectors_are_the_encoded_names(toy_kb, enc):
    names = list(toy_kb.names)
    for exact, storage, atol in ((True, "float16", 1e-5), (False, "float32", 1e-5), (False, "float16", 5e-4)):
        index = ConceptIndex.build(toy_kb, enc, exact=exact, hnsw_vectors=storage, show_progress=False)
        numpy.testing.assert_allclose(index.name_vectors([2, 0]), enc.encode([names[2], names[0]]), atol=atol)
        assert index.name_vectors([]).shape == (0, enc.dim)
        with pytest.raises(ConfigError, match="SB-E111"):
            index.name_vectors([len(names)])


@pytest.mark.parametrize("storage,data_file", [("float32", "names.hnsw"), ("float16", "hnsw16.neighbors.npy")])
def test_hnsw_to_disk_reuses_its_records_while_the_file_is_unchanged(toy_kb, enc, tmp_path, monkeypatch, storage,
                                                                      data_file):
    import os

    from spacy_sapbert.index import concept_index

    hashed = []
    real = concept_index.file_records
    monkeypatch.setattr(concept_index, "file_records", lambda folder, names: hashed.append(folder) or real(folder, names))
    index = ConceptIndex.build(toy_kb, enc, kind="hnsw", hnsw_vectors=storage, show_progress=False)
    index.to_disk(tmp_path / "a")
    index.to_disk(tmp_path / "b")  # the same graph, saved again: linked from a, not re-hashed
    assert hashed == [tmp_path / "a"]
    back = ConceptIndex.from_disk(tmp_path / "a", toy_kb)
    back.to_disk(tmp_path / "c")  # loaded and saved: the load's records hold
    back.to_disk(tmp_path / "a")  # into the folder it came from
    assert hashed == [tmp_path / "a"]
    for name in "abc":
        meta = ConceptIndex.verify(tmp_path / name)  # full sha256 against the records written
        assert meta["files"] == json.loads((tmp_path / "a" / META_FILE).read_text())["files"]
    query = enc.encode(["grippe"])
    assert ConceptIndex.from_disk(tmp_path / "c", toy_kb).search(query, 3) == index.search(query, 3)
    # the file it would link from changed since (same size, new mtime): written and hashed again
    os.utime(tmp_path / "a" / data_file, ns=(1, 1))
    back.to_disk(tmp_path / "d")
    assert hashed == [tmp_path / "a", tmp_path / "d"]
    ConceptIndex.verify(tmp_path / "d")
