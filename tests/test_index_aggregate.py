"""Batch aggregation of name rows to concepts (``index/aggregate.py``) against a plain per-query
reference: max over a concept's names, ties by concept index, filters, padding, and the
``complete`` flag that decides whether the search goes deeper."""
from __future__ import annotations

import numpy
import pytest

from spacy_sapbert.index.aggregate import aggregate_batch


def _reference(rows, scores, k, allowed, searched_all, ptr, idx):
    ranked, complete = [], []
    for r, s in zip(rows, scores):
        valid = r >= 0
        done = searched_all or not valid.all()
        best, first_col = {}, {}
        for col, (row, score) in enumerate(zip(r, s)):
            if row < 0:
                continue
            for c in idx[ptr[row]:ptr[row + 1]]:
                c = int(c)
                if c not in best:
                    best[c], first_col[c] = float(score), col
        if allowed is not None:
            best = {c: v for c, v in best.items() if allowed[c]}
        if len(best) >= k:
            kth_col = sorted(first_col[c] for c in best)[k - 1]
            done = done or bool(s[valid][-1] < s[kth_col])
        top = sorted(best.items(), key=lambda cv: (-cv[1], cv[0]))[:k]
        ranked.append(top)
        complete.append(done)
    return ranked, complete


def _csr(rng, n_rows, n_concepts):
    """Every row names one concept, a few name two (shared names)."""
    owners = [[int(rng.integers(n_concepts))] + ([int(rng.integers(n_concepts))] if rng.random() < 0.1 else [])
              for _ in range(n_rows)]
    owners = [sorted(set(o)) for o in owners]
    ptr = numpy.concatenate([[0], numpy.cumsum([len(o) for o in owners])]).astype(numpy.int64)
    return ptr, numpy.array([c for o in owners for c in o], dtype=numpy.int32)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("filtered", [False, True])
def test_aggregate_batch_equals_the_per_query_reference(seed, filtered):
    rng = numpy.random.default_rng(seed)
    n_rows, n_concepts, n_q, depth, k = 400, 120, 37, 24, 5
    ptr, idx = _csr(rng, n_rows, n_concepts)
    rows = numpy.stack([rng.choice(n_rows, depth, replace=False) for _ in range(n_q)]).astype(numpy.int64)
    # coarse scores: many ties between concepts, which must go to the smaller concept index
    scores = -numpy.sort(-numpy.round(rng.random((n_q, depth)) * (1 + seed % 3)) / 4, axis=1).astype(numpy.float32)
    scores[1::4] = 0.5  # all rows tied: the last row still reaches the k-th concept (search deeper)
    pad = rng.integers(0, depth + 1, n_q)
    for q in range(0, n_q, 3):  # some queries short of rows: -1 / -inf at the tail
        rows[q, pad[q]:], scores[q, pad[q]:] = -1, -numpy.inf
    allowed = rng.random(n_concepts) < 0.3 if filtered else None
    flags = {}
    for searched_all in (False, True):
        got, complete = aggregate_batch(rows, scores, k, allowed, searched_all, ptr, idx)
        want, want_complete = _reference(rows, scores, k, allowed, searched_all, ptr, idx)
        assert [list(zip(c.tolist(), s.tolist())) for c, s in got] == want
        assert complete.tolist() == want_complete
        flags[searched_all] = want_complete
    assert all(flags[True]) and not all(flags[False]) and any(flags[False])  # both outcomes are exercised


def test_aggregate_batch_with_no_valid_rows():
    ptr, idx = numpy.array([0, 1]), numpy.array([0], dtype=numpy.int32)
    rows = numpy.full((2, 3), -1, dtype=numpy.int64)
    scores = numpy.full((2, 3), -numpy.inf, dtype=numpy.float32)
    got, complete = aggregate_batch(rows, scores, 2, None, False, ptr, idx)
    assert [len(c) for c, _ in got] == [0, 0] and complete.tolist() == [True, True]
