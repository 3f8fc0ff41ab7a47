"""The compact index's PCA-reduced candidate graph (``candidate_dims``): defaults, recall against exact
search, round trip and pickling, indexes built before it, and coded errors for a bad setting or a
missing / damaged projection file."""
from __future__ import annotations

import json
import pickle

import numpy
import pytest

from spacy_sapbert.errors import ConfigError, IntegrityError, MissingInputError
from spacy_sapbert.index import META_FILE, ConceptIndex
from spacy_sapbert.index.compact import (PROJECTION_FILE, CompactBackend, default_candidate_dims, fit_projection,
                                         resolve_candidate_dims)
from spacy_sapbert.kb import Concept, KnowledgeBase
from test_index_compact import _Enc as _Enc32, _unit

DIM = 64


class _Enc(_Enc32):
    dim = DIM


@pytest.fixture(scope="module")
def anisotropic():
    """4,000 names of 800 concepts; most variance in the first 24 of 64 directions (as real name vectors)."""
    rng = numpy.random.default_rng(3)
    scale = numpy.where(numpy.arange(DIM) < 24, 1.0, 0.15)
    basis = numpy.linalg.qr(rng.normal(size=(DIM, DIM)))[0]
    centres = (rng.normal(size=(800, DIM)) * scale) @ basis
    kb = KnowledgeBase.from_concepts([Concept(f"C{c:05d}", f"n{c}_0", tuple(f"n{c}_{j}" for j in range(1, 5)))
                                      for c in range(800)])
    owner = numpy.array([int(n[1:].split("_")[0]) for n in kb.names])
    noise = (rng.normal(size=(len(owner), DIM)) * scale) @ basis
    vectors = _unit(centres[owner] + 0.35 * noise)
    queries = _unit(centres[rng.integers(0, 800, 300)] + 0.35 * (rng.normal(size=(300, DIM)) * scale) @ basis)
    return kb, vectors, queries


def test_default_candidate_dims_and_bad_values():
    assert default_candidate_dims(768) == 384 and default_candidate_dims(384) == 192
    assert default_candidate_dims(64) == 0  # small encoders: the full dimension
    assert resolve_candidate_dims(None, 768) == 384
    assert resolve_candidate_dims(0, 768) == 0 and resolve_candidate_dims(768, 768) == 0
    assert resolve_candidate_dims(128, 768) == 128
    for bad in (-1, 4, 769):
        with pytest.raises(ConfigError, match="SB-E581"):
            resolve_candidate_dims(bad, 768)


def test_bad_candidate_dims_is_refused_before_building(anisotropic):
    kb, vectors, _ = anisotropic
    with pytest.raises(ConfigError, match="SB-E581.*got 100"):
        ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="compact", candidate_dims=100, show_progress=False)


def test_projection_is_the_principal_axes_and_seeded(anisotropic):
    _, vectors, _ = anisotropic
    P = fit_projection(vectors, 24, seed=1)
    assert P.shape == (DIM, 24) and P.dtype == numpy.float32
    numpy.testing.assert_allclose(P.T @ P, numpy.eye(24), atol=1e-5)  # orthonormal axes
    centred = vectors - vectors.mean(0)
    kept = numpy.linalg.norm(centred @ P) ** 2 / numpy.linalg.norm(centred) ** 2
    assert kept > 0.85  # the 24 strong directions hold almost all the variance
    numpy.testing.assert_array_equal(P, fit_projection(vectors, 24, seed=1))


def test_reduced_candidates_keep_recall_against_exact(anisotropic):
    kb, vectors, queries = anisotropic
    exact = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact")
    compact = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="compact", candidate_dims=24, show_progress=False)
    assert compact.meta["candidate_dims"] == 24 and compact._backend._graph.ndim == 24
    got, want = compact.search(queries, 5), exact.search(queries, 5)
    top1 = numpy.mean([g[0][0] == w[0][0] for g, w in zip(got, want)])
    recall5 = numpy.mean([len({c for c, _ in g} & {c for c, _ in w}) / 5 for g, w in zip(got, want)])
    assert top1 >= 0.99 and recall5 >= 0.99
    for g, w in zip(got[:20], want[:20]):  # scores are full-dimension inner products, not projected ones
        if g[0][0] == w[0][0]:
            assert abs(g[0][1] - w[0][1]) < 2e-3


def test_round_trip_and_pickle_keep_the_projection(anisotropic, tmp_path):
    kb, vectors, queries = anisotropic
    index = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="compact", candidate_dims=24, show_progress=False)
    index.to_disk(tmp_path / "ix")
    meta = json.loads((tmp_path / "ix" / META_FILE).read_text())
    assert meta["candidate_dims"] == 24 and PROJECTION_FILE in meta["files"]
    back = ConceptIndex.from_disk(tmp_path / "ix", kb)
    assert back._backend.candidate_dims == 24
    assert back.search(queries[:50], 5) == index.search(queries[:50], 5)
    for original in (back, index):
        assert pickle.loads(pickle.dumps(original)).search(queries[:20], 5) == index.search(queries[:20], 5)
    back.to_disk(tmp_path / "again")  # saved from a loaded index: the files are linked, projection included
    assert ConceptIndex.from_disk(tmp_path / "again", kb).search(queries[:20], 5) == index.search(queries[:20], 5)


def test_index_built_before_the_projection_still_loads(anisotropic, tmp_path):
    kb, vectors, queries = anisotropic
    index = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="compact", candidate_dims=0, show_progress=False)
    index.to_disk(tmp_path / "ix")
    assert not (tmp_path / "ix" / PROJECTION_FILE).exists()
    meta = json.loads((tmp_path / "ix" / META_FILE).read_text())
    del meta["candidate_dims"]  # as written before the setting existed
    (tmp_path / "ix" / META_FILE).write_text(json.dumps(meta))
    back = ConceptIndex.from_disk(tmp_path / "ix", kb)
    assert back._backend.candidate_dims == 0
    assert back.search(queries[:30], 5) == index.search(queries[:30], 5)


def test_missing_or_damaged_projection_gives_coded_errors(anisotropic, tmp_path):
    kb, vectors, _ = anisotropic
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="compact", candidate_dims=24,
                              show_progress=False).to_disk(tmp_path / "ix")
    path = tmp_path / "ix" / PROJECTION_FILE
    good = path.read_bytes()
    path.unlink()
    with pytest.raises(IntegrityError, match="SB-E551"):  # the recorded files are checked first
        ConceptIndex.from_disk(tmp_path / "ix", kb)
    meta = json.loads((tmp_path / "ix" / META_FILE).read_text())
    load_meta = {"n_names": meta["n_names"], "dim": DIM, "candidate_dims": 24}
    with pytest.raises(MissingInputError, match="SB-E580.*candidates.pca.npy"):  # records bypassed: still coded
        CompactBackend.load(tmp_path / "ix", load_meta)
    path.write_bytes(good[:100])
    with pytest.raises(MissingInputError, match="SB-E580"):
        CompactBackend.load(tmp_path / "ix", load_meta)
    numpy.save(path, numpy.zeros((DIM, 12), dtype=numpy.float32))
    with pytest.raises(MissingInputError, match=r"SB-E580.*expected \(64, 24\)"):
        CompactBackend.load(tmp_path / "ix", load_meta)
    numpy.save(path, numpy.full((DIM, 24), numpy.nan, dtype=numpy.float32))
    with pytest.raises(MissingInputError, match="SB-E580.*not unit-axis"):
        CompactBackend.load(tmp_path / "ix", load_meta)
    path.write_bytes(good)
    CompactBackend.load(tmp_path / "ix", load_meta)
