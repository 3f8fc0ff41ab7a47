"""The hnsw index with float16 vectors (faiss's graph, ``hnsw16.py``): the default hnsw storage, its files, the
checks a load makes before faiss reads them, pickling, and searching in a process forked after a threaded search."""
from __future__ import annotations

import json
import pickle

import numpy
import pytest

from helpers import run_script_or_fail_on_hang, unit_rows
from spacy_sapbert.errors import ConfigError, IntegrityError, MissingInputError
from spacy_sapbert.index import META_FILE, ConceptIndex, IndexSettings
from spacy_sapbert.index.hnsw16 import LEVELS_FILE, NEIGHBORS_FILE, Hnsw16Backend
from spacy_sapbert.index.two_stage import VECTORS_F16_FILE
from spacy_sapbert.kb import Concept, KnowledgeBase

DIM = 16


class _Enc:
    """What an index checks queries against (no model needed to index given vectors)."""

    fingerprint, dim, pooling, max_length, name = "synthetic", DIM, "cls", 25, "synthetic"


@pytest.fixture(scope="module")
def data():
    """3,000 names of 1,000 concepts around 100 centres, and 100 queries."""
    rng = numpy.random.default_rng(7)
    centres = rng.normal(size=(100, DIM))
    kb = KnowledgeBase.from_concepts([Concept(f"C{c:04d}", f"n{c}_0", (f"n{c}_1", f"n{c}_2"),
                                              ("T1",) if c % 4 else ("T2",)) for c in range(1000)])
    owner = numpy.array([int(n[1:].split("_")[0]) for n in kb.names])
    vectors = unit_rows(centres[owner % 100] + 0.4 * rng.normal(size=(len(owner), DIM)))
    queries = unit_rows(centres[rng.integers(0, 100, 100)] + 0.4 * rng.normal(size=(100, DIM)))
    return kb, vectors, queries


@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    kb, vectors, _ = data
    folder = tmp_path_factory.mktemp("hnsw16") / "ix"
    index = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="hnsw", show_progress=False)
    index.to_disk(folder)
    return index, folder


def test_float16_is_the_default_hnsw_storage_and_finds_what_exact_search_finds(data, saved):
    kb, vectors, queries = data
    index, folder = saved
    assert IndexSettings().hnsw_vectors == "float16"
    assert isinstance(index._backend, Hnsw16Backend) and index.kind == "hnsw"
    meta = json.loads((folder / META_FILE).read_text())
    assert meta["vectors"] == "float16" and meta["kind"] == "hnsw"
    assert sorted(meta["files"]) == sorted([VECTORS_F16_FILE, LEVELS_FILE, NEIGHBORS_FILE])
    stored = numpy.load(folder / VECTORS_F16_FILE)
    assert stored.dtype == numpy.float16 and stored.shape == vectors.shape
    numpy.testing.assert_allclose(stored.astype(numpy.float32), vectors, atol=1e-3)
    exact = ConceptIndex.from_vectors(kb, stored.astype(numpy.float32), _Enc(), kind="exact")
    rows, scores = index.search_names(queries, 5)
    e_rows, e_scores = exact.search_names(queries, 5)
    assert numpy.mean(rows[:, 0] == e_rows[:, 0]) >= 0.98
    numpy.testing.assert_allclose(scores[rows[:, 0] == e_rows[:, 0], 0], e_scores[rows[:, 0] == e_rows[:, 0], 0],
                                  atol=1e-5)  # the graph scores the float16 vectors it holds


def test_a_loaded_graph_searches_as_the_built_one(data, saved):
    kb, vectors, queries = data
    index, folder = saved
    back = ConceptIndex.from_disk(folder, kb)
    assert isinstance(back._backend, Hnsw16Backend)
    for got, want in zip(back.search_names(queries, 7), index.search_names(queries, 7)):
        assert numpy.array_equal(got, want)
    assert numpy.array_equal(back.name_vectors([5, 0, 17]), index.name_vectors([5, 0, 17]))
    assert back.search(queries, 3, semantic_types=["T2"]) == index.search(queries, 3, semantic_types=["T2"])


def test_a_graph_read_in_many_small_reads_is_the_same(data, saved, monkeypatch):
    from spacy_sapbert.index import hnsw16

    kb, _, queries = data
    index, folder = saved
    monkeypatch.setattr(hnsw16, "_READ_BYTES", 1000)  # every array in several reads, the last one short
    back = ConceptIndex.from_disk(folder, kb)
    for got, want in zip(back.search_names(queries, 7), index.search_names(queries, 7)):
        assert numpy.array_equal(got, want)


def test_the_same_vectors_build_the_same_files(data, saved, tmp_path):
    kb, vectors, _ = data
    _, folder = saved
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="hnsw", show_progress=False).to_disk(tmp_path / "again")
    for name in (VECTORS_F16_FILE, LEVELS_FILE, NEIGHBORS_FILE):
        assert (tmp_path / "again" / name).read_bytes() == (folder / name).read_bytes()
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="hnsw", seed=7, show_progress=False).to_disk(tmp_path / "s7")
    assert (tmp_path / "s7" / LEVELS_FILE).read_bytes() != (folder / LEVELS_FILE).read_bytes()  # the seed draws levels


def test_pickled_graphs_search_alike(data, saved):
    kb, vectors, queries = data
    index, folder = saved
    loaded = ConceptIndex.from_disk(folder, kb)
    built = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="hnsw", show_progress=False)  # never saved
    for original in (loaded, built):
        copy = pickle.loads(pickle.dumps(original._backend))
        for got, want in zip(copy.search(queries, 5, None), original._backend.search(queries, 5, None)):
            assert numpy.array_equal(got, want)


def test_bad_storage_values_are_refused(data, saved, tmp_path):
    kb, vectors, _ = data
    with pytest.raises(ConfigError, match="SB-E834.*hnsw_vectors"):
        IndexSettings(hnsw_vectors="int8")
    _, folder = saved
    copy = tmp_path / "ix"
    copy.mkdir()
    for path in folder.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    meta = json.loads((copy / META_FILE).read_text())
    (copy / META_FILE).write_text(json.dumps(dict(meta, vectors="bfloat16")))
    with pytest.raises(MissingInputError, match="SB-E557.*vectors"):
        ConceptIndex.from_disk(copy, kb)


def _unrecorded_copy(folder, tmp_path):
    """A copy of the index folder without file records: only the load's own checks stand between faiss and
    the bytes."""
    copy = tmp_path / "ix"
    copy.mkdir()
    for path in folder.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    meta = json.loads((copy / META_FILE).read_text())
    meta.pop("files")
    (copy / META_FILE).write_text(json.dumps(meta))
    return copy, meta


def _levels_and_neighbors(folder):
    import faiss

    levels = numpy.load(folder / LEVELS_FILE)
    graph = faiss.IndexHNSWSQ(DIM, faiss.ScalarQuantizer.QT_fp16, 32)  # held: its vectors die with it
    cum = faiss.vector_to_array(graph.hnsw.cum_nneighbor_per_level)
    offsets = numpy.concatenate([[0], numpy.cumsum(cum[levels])])
    return levels, numpy.load(folder / NEIGHBORS_FILE), offsets, cum


@pytest.mark.parametrize("damage,message", [
    ("level", "levels outside"), ("entry", "entry point"), ("neighbour", "neighbour id is out of range"),
    ("upper", "a level-1 neighbour is a name without that level"), ("vector", "not unit length"),
    ("nan", "row 7 has norm nan"), ("inf", "row 2047 has norm inf"), ("truncated", "bytes, expected"),
    ("dtype", "expected"), ("header", "")])
def test_a_damaged_graph_is_refused_before_faiss_reads_it(data, saved, tmp_path, damage, message):
    kb, _, queries = data
    copy, meta = _unrecorded_copy(saved[1], tmp_path)
    levels, neighbors, offsets, cum = _levels_and_neighbors(copy)
    if damage == "level":
        levels[3] = 99
        numpy.save(copy / LEVELS_FILE, levels)
    elif damage == "entry":
        meta["entry_point"] = int(numpy.flatnonzero(levels == 1)[0])
        (copy / META_FILE).write_text(json.dumps(meta))
    elif damage == "neighbour":
        neighbors[offsets[10]] = len(kb.names) + 5
        numpy.save(copy / NEIGHBORS_FILE, neighbors)
    elif damage == "upper":  # a name's level-1 list names a name that has only the base level
        node = int(numpy.flatnonzero(levels >= 2)[0])
        neighbors[offsets[node] + cum[1]] = int(numpy.flatnonzero(levels == 1)[0])
        numpy.save(copy / NEIGHBORS_FILE, neighbors)
    elif damage == "vector":
        X = numpy.load(copy / VECTORS_F16_FILE)
        X[100] *= 3
        numpy.save(copy / VECTORS_F16_FILE, X)
    elif damage in ("nan", "inf"):  # read through faiss's float16 decoder, as faiss reads them
        X = numpy.load(copy / VECTORS_F16_FILE)
        X[7 if damage == "nan" else 2047, 3] = numpy.nan if damage == "nan" else numpy.inf
        numpy.save(copy / VECTORS_F16_FILE, X)
    elif damage == "truncated":
        raw = (copy / NEIGHBORS_FILE).read_bytes()
        (copy / NEIGHBORS_FILE).write_bytes(raw[: len(raw) - 40])
    elif damage == "dtype":
        numpy.save(copy / LEVELS_FILE, levels.astype(numpy.int64))
    else:
        (copy / VECTORS_F16_FILE).write_bytes(b"not an npy file at all")
    with pytest.raises(MissingInputError, match=f"SB-E107.*{message}") as caught:
        ConceptIndex.from_disk(copy, kb).search_names(queries, 5)
    assert str(caught.value).count("SB-E107") == 1  # one message, not one wrapped in another


def test_a_damaged_file_with_its_records_is_refused_by_the_hash_check(data, saved, tmp_path):
    kb, _, _ = data
    copy = tmp_path / "ix"
    copy.mkdir()
    for path in saved[1].iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    raw = bytearray((copy / NEIGHBORS_FILE).read_bytes())
    raw[200] ^= 0xFF
    (copy / NEIGHBORS_FILE).write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match=f"SB-E551.*{NEIGHBORS_FILE}"):
        ConceptIndex.verify(copy)
    with pytest.raises((IntegrityError, MissingInputError)):
        ConceptIndex.from_disk(copy, kb)


_FORKED_SEARCH = """
import json, os, select, sys
import numpy
import spacy_sapbert.index.threads as t
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.kb import Concept, KnowledgeBase

t.search_threads = lambda: 2  # a threaded search in the parent, whatever this machine's cores
rng = numpy.random.default_rng(0)
kb = KnowledgeBase.from_concepts([Concept(f"C{i:05d}", f"n{i}") for i in range(20000)])
vectors = rng.normal(size=(20000, 32)).astype("float32")
vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)

class Enc:
    fingerprint, dim, pooling, max_length, name = "x", 32, "cls", 25, "x"

index = ConceptIndex.from_vectors(kb, vectors, Enc(), kind=sys.argv[1], show_progress=False)
expected = index.search_names(vectors[:300], 5)[0].tolist()  # the parent's OpenMP pool starts here
assert t.FAISS_OPENMP.started_in == os.getpid()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        os.write(write, json.dumps(index.search_names(vectors[:300], 5)[0].tolist()).encode())
    finally:
        os._exit(0)
os.close(write)
chunks = []
while True:
    chunk = os.read(read, 1 << 20)
    if not chunk:
        break
    chunks.append(chunk)
os.waitpid(pid, 0)
assert json.loads(b"".join(chunks).decode()) == expected
print("ok")
"""


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_a_process_forked_after_a_threaded_faiss_search_searches_without_hanging(tmp_path, kind):
    """faiss shares libgomp with sparse-dot-topn: a child forked after the parent's threaded search waited forever in
    its first parallel region (the ivf index before 2026-12-01); it searches on one thread."""
    out = run_script_or_fail_on_hang(_FORKED_SEARCH, [kind], tmp_path, timeout=120,
                                     what=f"a forked child's {kind} search")
    assert out.strip() == "ok"
