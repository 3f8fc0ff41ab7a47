"""Index kinds: selection by size, the removed compact kind refused at load (E832), the two-stage re-scoring
(float16, memory-mapped) that the ivf index uses, vectorised filters, and the hnsw file check."""
from __future__ import annotations

import json
import struct
import sys

import numpy
import pytest

from spacy_sapbert.errors import ConfigError, IncompatibleError, IntegrityError, MissingInputError
from spacy_sapbert.index import LARGE_MIN_NAMES, META_FILE, ConceptIndex, choose_kind
from spacy_sapbert.index.two_stage import NORM_SAMPLE_ROWS, VECTORS_F16_FILE, RescoredBackend
from spacy_sapbert.kb import Concept, KnowledgeBase

DIM = 32
N_CENTRES = 300


class _Enc:
    """The fields an index checks its queries against (no model needed to index given vectors)."""
    fingerprint = "synthetic"
    dim = DIM
    pooling = "cls"
    max_length = 25
    name = "synthetic"


def _unit(arr):
    arr = numpy.asarray(arr, dtype=numpy.float32)
    return arr / numpy.linalg.norm(arr, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def clustered():
    """6,000 names of 1,200 concepts around 300 centres (near-duplicate concepts), types by concept."""
    rng = numpy.random.default_rng(5)
    centres = rng.normal(size=(N_CENTRES, DIM))
    concepts = []
    for c in range(1200):
        names = [f"n{c}_{j}" for j in range(5)]
        types = ("T1",) if c % 10 == 0 else ("T2",)
        definition = "defined" if c % 3 == 0 else ""
        concepts.append(Concept(f"C{c:05d}", names[0], tuple(names[1:]), types, definition))
    kb = KnowledgeBase.from_concepts(concepts)
    owner = numpy.array([int(n[1:].split("_")[0]) for n in kb.names])
    vectors = _unit(centres[owner % N_CENTRES] + 0.45 * rng.normal(size=(len(owner), DIM)))
    queries = _unit(centres[rng.integers(0, N_CENTRES, 200)] + 0.45 * rng.normal(size=(200, DIM)))
    return kb, vectors, queries


def test_choose_kind_by_size_and_by_request():
    assert choose_kind(100) == "exact"
    assert choose_kind(100_000) == "hnsw"
    assert choose_kind(LARGE_MIN_NAMES - 1) == "hnsw"
    assert LARGE_MIN_NAMES == 500_000
    assert choose_kind(LARGE_MIN_NAMES) == choose_kind(5_000_000) == "ivf"
    assert choose_kind(100, "ivf") == "ivf"
    assert choose_kind(5_000_000, exact=False) == "hnsw"
    for removed in ("faiss", "compact"):
        with pytest.raises(ConfigError, match="SB-E124.*auto, exact, hnsw, ivf"):
            choose_kind(100, removed)


def test_broken_faiss_is_a_coded_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss raises ImportError
    kb = KnowledgeBase.from_concepts([Concept(f"C{i:03d}", f"name {i}", (), ("T1",), "") for i in range(100)])
    for kind in ("ivf", "hnsw"):  # the float16 hnsw graph is faiss's too; its message names hnswlib's way out
        with pytest.raises(ConfigError, match="SB-E582.*pip install faiss-cpu.*--hnsw-vectors float32"):
            ConceptIndex.from_vectors(kb, _unit(numpy.eye(100, DIM) + 0.01), _Enc(), kind=kind, show_progress=False)


def test_a_saved_compact_index_is_refused_with_the_command_that_rebuilds_it(clustered, tmp_path):
    """The compact kind is gone: its saved folders fail at load (and at verify) with E832, naming the folder
    and the build-index / create-pipeline commands, filled in with the KB folder and model it records."""
    kb, vectors, _ = clustered
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="hnsw", show_progress=False).to_disk(tmp_path / "ix")
    meta = json.loads((tmp_path / "ix" / META_FILE).read_text())
    meta.update(kind="compact", connectivity=48, candidate_dims=16, kb_path="/data/kb", model="/models/sapbert")
    (tmp_path / "ix" / META_FILE).write_text(json.dumps(meta))
    for load in (lambda: ConceptIndex.from_disk(tmp_path / "ix", kb), lambda: ConceptIndex.verify(tmp_path / "ix")):
        with pytest.raises(IncompatibleError, match="SB-E832") as refused:
            load()
        message = str(refused.value)
        assert f"'{tmp_path / 'ix'}' is a 'compact' index" in message
        assert ("`spacy-sapbert build-index /data/kb --model /models/sapbert --output NEW_INDEX --kind auto`"
                in message)
        assert "`spacy-sapbert create-pipeline NEW_PIPELINE --kb /data/kb --model /models/sapbert --index NEW_INDEX`" \
            in message
    del meta["kb_path"], meta["model"]  # an index built in memory records neither: placeholders
    (tmp_path / "ix" / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(IncompatibleError, match="SB-E832.*build-index KB_FOLDER --model MODEL --output NEW_INDEX"):
        ConceptIndex.from_disk(tmp_path / "ix", kb)


def test_rescoring_ranks_candidates_by_their_float16_scores():
    """Each query's valid candidates scored against the stored float16 rows, best k by (-score, row); -1
    candidates (none found, or masked by a filter) never rank, and a query without any gives -1 rows."""
    rng = numpy.random.default_rng(3)
    X16 = _unit(rng.normal(size=(400, DIM))).astype(numpy.float16)
    backend = RescoredBackend(X16, rescore=64)
    Q = _unit(rng.normal(size=(6, DIM)))
    cand = numpy.argsort(rng.random((6, 400)), axis=1)[:, :50]  # distinct rows per query, as an index returns
    cand[rng.random(cand.shape) < 0.7] = -1  # sparse, as after a filter's mask
    cand[2] = -1
    rows, scores = backend._rescore(Q, cand, 5)
    for i in range(len(Q)):
        valid = cand[i][cand[i] >= 0]
        exact = X16[valid].astype(numpy.float64) @ Q[i]
        order = numpy.lexsort((valid, -exact))[:5]
        n = len(order)
        assert rows[i, :n].tolist() == valid[order].tolist()
        assert numpy.allclose(scores[i, :n], exact[order], atol=1e-5)
        assert (rows[i, n:] == -1).all() and numpy.isneginf(scores[i, n:]).all()
    assert (rows[2] == -1).all()


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_filtered_search_over_fetches_when_many_rows_are_allowed(clustered, monkeypatch, kind):
    """Above EXACT_FILTER_ROWS allowed rows the index is searched deeper and masked (no Python call
    per visited node); a query still short of rows is scanned exactly."""
    from spacy_sapbert.index import graph_search as filtered

    kb, vectors, queries = clustered
    monkeypatch.setattr(filtered, "EXACT_FILTER_ROWS", 10)
    exact = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact")
    graph = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind=kind, show_progress=False)
    got = graph.search(queries, 5, semantic_types=["T1"])
    want = exact.search(queries, 5, semantic_types=["T1"])
    agree = numpy.mean([g[0][0] == w[0][0] for g, w in zip(got, want)])
    assert agree >= 0.97
    assert all(kb.cui_to_entity[c].types == ("T1",) for r in got for c, _ in r)
    monkeypatch.setattr(filtered, "MAX_OVERFETCH", 1)  # the index never finds enough: all exact
    stored = graph.name_vectors(numpy.arange(len(kb.names)))  # float16 in both kinds, each rounding them its way
    want = ConceptIndex.from_vectors(kb, stored, _Enc(), kind="exact").search(queries[:20], 5, semantic_types=["T1"])
    forced = graph.search(queries[:20], 5, semantic_types=["T1"])
    assert [[c for c, _ in r] for r in forced] == [[c for c, _ in r] for r in want]
    assert [s for r in forced for _, s in r] == pytest.approx([s for r in want for _, s in r], abs=1e-5)


def test_filters_equal_the_per_concept_definition_on_the_hand_kb():
    """The vectorised masks select exactly the concepts a per-concept check selects."""
    concepts = [Concept("A1", "alpha", ("shared",), ("T1",), "has one"), Concept("A2", "beta", ("shared",), ("T2",)),
                Concept("A3", "gamma", (), ("T1", "T2"))]
    kb = KnowledgeBase.from_concepts(concepts)
    vectors = _unit(numpy.eye(len(kb.names), DIM) + 0.01)
    index = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact")
    row_mask, cmask = index._filter(["T1"], False)
    assert [kb.concept_ids[i] for i in numpy.flatnonzero(cmask)] == ["A1", "A3"]
    assert [kb.names[i] for i in numpy.flatnonzero(row_mask)] == ["alpha", "gamma", "shared"]
    row_mask, cmask = index._filter(["T2"], True)
    assert not cmask.any() and not row_mask.any()
    assert index.search(vectors[:1], 3, semantic_types=["T2"], require_definition=True) == [[]]


def _mapped_rss_kb(path):
    """Resident kB of the mappings of ``path`` in this process (from /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="utf8") as fh:
        for line in fh:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5:
                inside = parts[-1] == str(path)
            elif inside and parts[0] == "Rss:":
                total += int(parts[1])
    return total


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/smaps"), reason="needs Linux /proc")
def test_loading_does_not_read_the_vector_file(tmp_path):
    """8 MB of float16 vectors: after from_disk, (almost) none of it is resident; a query pages in little."""
    rng = numpy.random.default_rng(0)
    n, dim = 16_384, 256
    concepts = [Concept(f"C{i:06d}", f"name {i}") for i in range(n)]
    kb = KnowledgeBase.from_concepts(concepts)
    enc = type("E", (_Enc,), {"dim": dim})()
    vectors = _unit(rng.normal(size=(n, dim)))
    # 16 rows re-scored a query: the 4 queries below touch at most 64 rows' pages
    ConceptIndex.from_vectors(kb, vectors, enc, kind="ivf", rescore=16, show_progress=False).to_disk(tmp_path / "ix")
    import os

    vfile = (tmp_path / "ix" / VECTORS_F16_FILE).resolve()
    with open(vfile, "rb") as fh:  # drop the file's pages from the page cache (no root needed)
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    back = ConceptIndex.from_disk(tmp_path / "ix", kb)
    size_kb = vfile.stat().st_size // 1024
    assert _mapped_rss_kb(vfile) < size_kb * 0.2
    back.search(vectors[:4], 5)
    assert _mapped_rss_kb(vfile) < size_kb * 0.5


def test_damaged_vectors_are_caught_at_query_time_when_records_are_bypassed(clustered, tmp_path):
    """Even with matching records (say, rewritten by hand), out-of-range scores are refused, not returned."""
    kb, vectors, queries = clustered
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="ivf", show_progress=False).to_disk(tmp_path / "ix")
    meta = json.loads((tmp_path / "ix" / META_FILE).read_text())
    meta.pop("files")
    (tmp_path / "ix" / META_FILE).write_text(json.dumps(meta))
    X = numpy.load(tmp_path / "ix" / VECTORS_F16_FILE, mmap_mode="r+")
    original = numpy.array(X)
    X[:] = X * 30
    X.flush()
    with pytest.raises(MissingInputError, match="SB-E107.*not unit length"):  # the load's sample of rows sees it
        ConceptIndex.from_disk(tmp_path / "ix", kb)
    sampled = numpy.unique(numpy.linspace(0, len(X) - 1, NORM_SAMPLE_ROWS).round().astype(int))
    X[sampled] = original[sampled]  # damage only where the load does not look
    X.flush()
    del X
    back = ConceptIndex.from_disk(tmp_path / "ix", kb)
    with pytest.raises(MissingInputError, match="SB-E107.*not unit length"):
        back.search(queries[:5], 5)
    with pytest.raises(IntegrityError, match=r"SB-E556.*the index at '.*ix'"):  # a KB name's vector reused as query
        back.name_vectors([1])


def test_from_vectors_refuses_a_shape_that_does_not_match_the_kb(clustered):
    kb, vectors, _ = clustered
    with pytest.raises(ConfigError, match="SB-E125"):
        ConceptIndex.from_vectors(kb, vectors[:-1], _Enc(), kind="ivf")


def _hnsw_folder(clustered, tmp_path):
    kb, vectors, _ = clustered
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="hnsw", hnsw_vectors="float32",
                              show_progress=False).to_disk(tmp_path / "h")
    meta = json.loads((tmp_path / "h" / META_FILE).read_text())
    meta.pop("files")  # a format-1 index (no hashes): only the file check stands between hnswlib and the bytes
    (tmp_path / "h" / META_FILE).write_text(json.dumps(meta))
    return kb, tmp_path / "h" / meta["file"]


@pytest.mark.parametrize("damage", ["neighbour", "vector", "label"])
def test_damaged_hnsw_file_is_refused_before_hnswlib_reads_it(clustered, tmp_path, damage):
    kb, path = _hnsw_folder(clustered, tmp_path)
    raw = bytearray(path.read_bytes())
    header = struct.unpack_from("<QQQQQQiIQQQdQ", raw, 0)
    per_element, label_offset, data_offset = header[3], header[4], header[5]
    elem = 96 + 17 * per_element
    if damage == "neighbour":
        struct.pack_into("<I", raw, elem, 1)  # one link ...
        struct.pack_into("<I", raw, elem + 4, 10 ** 8)  # ... to a node that does not exist
    elif damage == "vector":
        struct.pack_into("<f", raw, elem + data_offset, 19.0)
    else:
        struct.pack_into("<Q", raw, elem + label_offset, 10 ** 9)
    path.write_bytes(bytes(raw))
    with pytest.raises(MissingInputError, match="SB-E107.*damaged hnsw file"):
        ConceptIndex.from_disk(path.parent, kb)


def test_truncated_hnsw_file_is_refused(clustered, tmp_path):
    kb, path = _hnsw_folder(clustered, tmp_path)
    raw = path.read_bytes()
    meta = json.loads((path.parent / META_FILE).read_text())
    for cut in (50, len(raw) // 2, len(raw) - 3):
        path.write_bytes(raw[:cut])
        meta["file_size"] = cut
        (path.parent / META_FILE).write_text(json.dumps(meta))
        with pytest.raises(MissingInputError, match="SB-E107.*damaged hnsw file"):
            ConceptIndex.from_disk(path.parent, kb)


def test_a_pipeline_holding_a_compact_index_is_refused_at_load(tiny_bert_path, tmp_path):
    import spacy

    from spacy_sapbert.commands.pipeline import create_pipeline

    from helpers import write_toy_kb

    write_toy_kb(tmp_path / "kb", "D003", "C004")
    create_pipeline(tmp_path / "p", kb_path=tmp_path / "kb", model=str(tiny_bert_path), show_progress=False,
                    config={"device": "cpu", "pooling": "mean", "runtime": "torch"}, kind="hnsw")
    spacy.load(tmp_path / "p")  # loads as saved
    path = tmp_path / "p" / "sapbert_linker" / "index" / META_FILE
    path.write_text(json.dumps(dict(json.loads(path.read_text()), kind="compact", kb_path="/data/kb")))
    with pytest.raises(IncompatibleError, match=r"SB-E832.*sapbert_linker/index' is a 'compact' index.*"
                                                r"build-index /data/kb --model"):
        spacy.load(tmp_path / "p")


# ---- exact search: numpy only, ties by row --------------------------------------------------------
def test_exact_topk_equals_a_full_sort_with_ties_by_row_and_masks():
    from spacy_sapbert.index.graph_search import exact_topk

    rng = numpy.random.default_rng(11)
    X = _unit(rng.normal(size=(500, DIM)))
    X[100:140] = X[7]  # 41 equal rows: the cut at k falls inside the tie for queries near X[7]
    Q = numpy.vstack([X[7], _unit(rng.normal(size=(5, DIM)))])
    mask = numpy.ones(len(X), dtype=bool)
    mask[::3] = False
    for row_mask in (None, mask):
        for k in (1, 10, 30, 40):  # 40: cut at the k-th best itself (500 rows <= 16 k), the others at a sample first
            rows, scores = exact_topk(X, Q, k, row_mask)
            sims = Q @ X.T
            if row_mask is not None:
                sims[:, ~row_mask] = -numpy.inf
            for i in range(len(Q)):
                want = sorted(range(len(X)), key=lambda r: (-sims[i, r], r))[:k]
                assert rows[i].tolist() == want
                assert numpy.allclose(scores[i], sims[i, want])


def test_exact_topk_marks_missing_rows_when_fewer_are_allowed():
    from spacy_sapbert.index.graph_search import exact_topk

    X = _unit(numpy.eye(DIM)[:6])
    mask = numpy.zeros(6, dtype=bool)
    mask[[1, 4]] = True
    rows, scores = exact_topk(X, X[:2], 4, mask)
    assert rows[:, 2:].tolist() == [[-1, -1], [-1, -1]] and numpy.isneginf(scores[:, 2:]).all()
    assert sorted(rows[0, :2].tolist()) == [1, 4]


KINDS_WITHOUT_TORCH = ("exact", "hnsw", "ivf")


def test_every_index_kind_searches_without_torch(clustered, tmp_path):
    """A runtime-only environment (no torch) searches every index kind, filtered (10 % of the concepts: hnsw scans
    them exactly) or not: a subprocess that refuses to import torch finds the same concepts as this process."""
    import subprocess
    import textwrap

    kb, vectors, queries = clustered
    for kind in KINDS_WITHOUT_TORCH:
        ConceptIndex.from_vectors(kb, vectors, _Enc(), kind=kind, show_progress=False).to_disk(tmp_path / kind)
    kb.to_disk(tmp_path / "kb")
    queries = queries[:40]
    numpy.save(tmp_path / "queries.npy", queries)
    code = textwrap.dedent(f"""
        import importlib.abc, json, sys
        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torch":
                    raise ImportError("torch refused")
        sys.meta_path.insert(0, Refuse())
        import numpy
        from spacy_sapbert.index import ConceptIndex
        from spacy_sapbert.kb import KnowledgeBase
        root = {str(tmp_path)!r}
        kb = KnowledgeBase.from_disk(root + "/kb")
        q = numpy.load(root + "/queries.npy")
        out = {{}}
        for kind in {KINDS_WITHOUT_TORCH!r}:
            index = ConceptIndex.from_disk(root + "/" + kind, kb)
            out[kind] = [[c for c, _ in found] for found in index.search(q, k=5)]
            out[kind + " T1"] = [[c for c, _ in found] for found in index.search(q, k=5, semantic_types=["T1"])]
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for kind in KINDS_WITHOUT_TORCH:
        index = ConceptIndex.from_disk(tmp_path / kind, kb)
        assert got[kind] == [[c for c, _ in found] for found in index.search(queries, k=5)]
        assert got[kind + " T1"] == [[c for c, _ in found] for found in index.search(queries, k=5, semantic_types=["T1"])]
        assert all(len(found) == 5 for found in got[kind + " T1"])


class _NoGetItems:
    """An hnswlib graph whose ``get_items`` fails: what reads the stored vectors without hnswlib's copy."""

    def __init__(self, hnsw, calls=None):
        self._hnsw, self.calls = hnsw, calls

    def __getattr__(self, name):
        if name == "get_items":
            if self.calls is None:
                raise AssertionError("read through hnswlib's get_items")
            self.calls.append(1)
        return getattr(self._hnsw, name)


def _permuted_hnsw(clustered, tmp_path):
    """A saved hnswlib graph whose element order is not its label order (as a multi-threaded build leaves it)."""
    import hnswlib

    from spacy_sapbert.index.backends import HnswBackend

    _, vectors, _ = clustered
    perm = numpy.random.default_rng(3).permutation(len(vectors))
    hnsw = hnswlib.Index(space="ip", dim=DIM)
    hnsw.init_index(max_elements=len(vectors), ef_construction=40, M=8, random_seed=1)
    hnsw.add_items(vectors[perm], perm, num_threads=1)
    (tmp_path / "p").mkdir()
    hnsw.save_index(str(tmp_path / "p" / "names.hnsw"))
    return HnswBackend.load(tmp_path / "p", {"n_names": len(vectors), "dim": DIM}), vectors


def test_hnsw_name_vectors_are_read_from_the_unchanged_file_bit_for_bit(clustered, tmp_path, monkeypatch):
    import os

    from spacy_sapbert.index import backends

    monkeypatch.setattr(backends, "STORED_READ_MIN_ROWS", 1)

    backend, vectors = _permuted_hnsw(clustered, tmp_path)
    rows = [5, 0, 5999, 17, 17, 3000]
    expected = numpy.asarray(backend._hnsw.get_items(rows, return_type="numpy"), dtype=numpy.float32)
    assert numpy.array_equal(expected, vectors[rows])
    graph = backend._hnsw
    backend._hnsw = _NoGetItems(graph)  # the file, not hnswlib's per-row copy
    got = backend.vectors(rows)
    assert got.dtype == numpy.float32 and got.flags.writeable and numpy.array_equal(got, expected)
    assert backend.vectors(numpy.asarray([], dtype=numpy.int64)).shape == (0, DIM)
    backend._hnsw = graph
    with pytest.raises(RuntimeError):  # a row out of range: hnswlib's own error, never another row's vector
        backend.vectors([6000])
    # the file changed since the load (new mtime): hnswlib's copy is the graph, read through get_items again
    calls = []
    backend._hnsw = _NoGetItems(graph, calls)
    os.utime(tmp_path / "p" / "names.hnsw", ns=(1, 1))
    assert numpy.array_equal(backend.vectors(rows), expected) and calls == [1]


def test_a_few_rows_come_from_hnswlib_until_a_large_request_makes_the_file_reader(clustered, tmp_path):
    from spacy_sapbert.index.backends import STORED_READ_MIN_ROWS

    backend, vectors = _permuted_hnsw(clustered, tmp_path)
    calls = []
    graph, backend._hnsw = backend._hnsw, _NoGetItems(backend._hnsw, calls)
    few = [3, 1]
    assert numpy.array_equal(backend.vectors(few), vectors[few]) and calls == [1] and backend._stored is None
    many = list(range(STORED_READ_MIN_ROWS))
    assert numpy.array_equal(backend.vectors(many), vectors[many]) and calls == [1]  # the file's bytes
    assert numpy.array_equal(backend.vectors(few), vectors[few]) and calls == [1]  # the reader, once made, serves all
    backend._hnsw = graph


def test_hnsw_name_vectors_of_a_graph_never_saved_come_from_hnswlib(clustered, tmp_path, monkeypatch):
    from spacy_sapbert.index import backends

    monkeypatch.setattr(backends, "STORED_READ_MIN_ROWS", 1)
    kb, vectors, _ = clustered
    index = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="hnsw", hnsw_vectors="float32", show_progress=False)
    calls = []
    index._backend._hnsw = _NoGetItems(index._backend._hnsw, calls)
    assert numpy.array_equal(index.name_vectors([3, 1]), vectors[[3, 1]]) and calls == [1]
    index.to_disk(tmp_path / "h")  # saved: the file now holds the graph
    assert numpy.array_equal(index.name_vectors([3, 1]), vectors[[3, 1]]) and calls == [1]
    back = ConceptIndex.from_disk(tmp_path / "h", kb)
    back._backend._hnsw = _NoGetItems(back._backend._hnsw)
    assert numpy.array_equal(back.name_vectors(list(range(0, 6000, 7))), vectors[list(range(0, 6000, 7))])
