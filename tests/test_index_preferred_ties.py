"""Ties between concepts that share a name: the concept whose preferred (canonical) name it is comes first,
then the smaller concept id — in the dense search (``ConceptIndex.search``, ``aggregate_batch``), the hybrid
ranking (``index/hybrid.py``) and the linker's ``kb_ents``."""
from __future__ import annotations

import numpy
import pytest

from helpers import unit_rows

from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.index.aggregate import aggregate_batch, preferred_rows
from spacy_sapbert.index.hybrid import gather, hybrid_search, rank
from spacy_sapbert.index.sparse import SparseIndex
from spacy_sapbert.kb import Concept, KnowledgeBase


@pytest.fixture(scope="module")
def kb():
    # "acrocephalosyndactylia" (A010, smaller id) lists "saethre chotzen syndrome" as a synonym; it is the
    # preferred name of B020 (MEDIC: MESH:D000168 and OMIM:101400)
    return KnowledgeBase.from_concepts([
        Concept("A010", "Acrocephalosyndactylia", aliases=("Saethre Chotzen Syndrome", "ACS")),
        Concept("B020", "Saethre Chotzen Syndrome", aliases=("ACS III",)),
        Concept("C030", "Cleft Palate", aliases=("palatoschisis",)),
        Concept("D040", "Palatoschisis", aliases=()),  # a second concept naming "palatoschisis" first
    ])


def _index(kb, seed=0):
    vectors = unit_rows(numpy.random.default_rng(seed).normal(size=(len(kb.names), 8)))
    index = ConceptIndex(kb, {"kind": "exact", "dim": 8, "n_names": len(kb.names), "encoder_fingerprint": "enc-1",
                              "kb_checksum": kb.checksum}, vectors=vectors)
    return index, vectors


def test_preferred_rows_are_each_concepts_canonical_row(kb):
    rows = preferred_rows(*kb.concept_row_csr())
    names = list(kb.names)
    assert [names[r] for r in rows.tolist()] == ["acrocephalosyndactylia", "saethre chotzen syndrome",
                                                  "cleft palate", "palatoschisis"]
    empty = preferred_rows(numpy.array([0, 1, 1, 3]), numpy.array([5, 7, 8]))
    assert empty.tolist() == [5, -1, 7]  # a concept without rows gets -1


def test_a_shared_name_goes_to_the_concept_it_names_first(kb):
    index, vectors = _index(kb)
    names = list(kb.names)
    for name, first, second in (("saethre chotzen syndrome", "B020", "A010"), ("palatoschisis", "D040", "C030")):
        found = index.search(vectors[[names.index(name)]], 2)[0]
        assert [c for c, _ in found] == [first, second]  # the larger id first: its preferred name
        assert found[0][1] == found[1][1]  # a true tie: one shared row
    # a tie where neither concept has the name as its preferred one stays by concept id
    ptr, idx = kb.row_concept_csr()
    rows = numpy.array([[names.index("acs"), names.index("cleft palate")]], dtype=numpy.int64)
    scores = numpy.array([[0.9, 0.9]], dtype=numpy.float32)
    ranked, _ = aggregate_batch(rows, scores, 3, None, True, ptr, idx, index.preferred_rows())
    assert [kb.concept_ids[c] for c in ranked[0][0].tolist()] == ["C030", "A010"]  # C030's preferred name first
    ranked, _ = aggregate_batch(rows, scores, 3, None, True, ptr, idx)  # without preferred rows: by id
    assert [kb.concept_ids[c] for c in ranked[0][0].tolist()] == ["A010", "C030"]


def test_hybrid_ranking_breaks_the_tie_the_same_way(kb):
    index, vectors = _index(kb)
    sparse = SparseIndex.from_kb(kb, encoder_fingerprint="enc-1")
    names = list(kb.names)
    texts = ["saethre chotzen syndrome", "palatoschisis"]
    queries = vectors[[names.index(t) for t in texts]]
    for mode in ("score", "interleave"):
        for weight in (0.0, 0.5):
            found = hybrid_search(index, sparse, texts, queries, k=2, sparse_k=2, weight=weight, mode=mode)
            assert [[x.concept_id for x in r] for r in found] == [["B020", "A010"], ["D040", "C030"]]
            assert [names[r[0].row] for r in found] == texts
    candidates = gather(index, sparse, texts, queries, k=2, sparse_k=2)
    assert candidates.preferred is not None and len(candidates.preferred) == len(candidates.row)
    no_preference = candidates._replace(preferred=None)  # candidates built without the flags: ties by id
    assert [[x.concept_id for x in r] for r in rank(no_preference, 0.0, 2, kb.concept_ids)] == [
        ["A010", "B020"], ["C030", "D040"]]
