"""Batch searches run on the cores the process may use (its CPU set), not one thread per core of the machine."""
from __future__ import annotations

import os

import numpy
import pytest

from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.index import threads as threads_mod
from spacy_sapbert.index.threads import search_threads
from spacy_sapbert.kb import Concept, KnowledgeBase


class _Enc:
    fingerprint, dim, pooling, max_length, name = "synthetic", 16, "cls", 25, "synthetic"


@pytest.fixture(scope="module")
def small():
    rng = numpy.random.default_rng(3)
    kb = KnowledgeBase.from_concepts([Concept(f"C{c:03d}", f"name {c}", (f"alias {c}",), ("T1",), "")
                                      for c in range(60)])
    X = rng.normal(size=(len(kb.names), 16)).astype(numpy.float32)
    return kb, X / numpy.linalg.norm(X, axis=1, keepdims=True)


def test_search_threads_follow_the_cpu_set(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5}, raising=False)
    assert search_threads() == 2


def test_search_threads_fall_back_to_the_library_default(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert search_threads() == 0


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_index_searches_with_the_cpu_set_threads(small, kind, monkeypatch):
    kb, X = small
    index = ConceptIndex.from_vectors(kb, X, _Enc(), kind=kind, show_progress=False)
    expected = index.search(X[:4], 3)
    seen = []
    monkeypatch.setattr(threads_mod.os, "sched_getaffinity", lambda pid: seen.append(pid) or {0}, raising=False)
    assert index.search(X[:4], 3) == expected
    assert seen, f"the {kind} search did not ask for the process's CPU set"
