"""Name rows to concepts for a whole batch of queries at once (no Python loop per query).

A concept's score is the best score of its names; concepts are ranked by (-score, preferred, concept index):
at equal scores the concept whose best name is (or ties with) its own preferred (canonical) name comes first
— a name shared by several concepts goes to the concept it names first — then the smaller concept index
(concept index order is concept id order). ``complete`` says whether the rows searched prove the top ``k``:
False when every row was valid and the last one still scored at least the ``k``-th concept's first row (a deeper
search could add a concept); the caller then searches deeper.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy

Ranked = Tuple[numpy.ndarray, numpy.ndarray]  # concept indices, scores (best first)


def preferred_rows(concept_ptr: numpy.ndarray, concept_rows: numpy.ndarray) -> numpy.ndarray:
    """The preferred (canonical) name row of each concept from the KB's concept → rows CSR (canonical first;
    ``KnowledgeBase.concept_row_csr``), int64 ``[n_concepts]``, -1 for a concept without rows."""
    ptr = numpy.asarray(concept_ptr, dtype=numpy.int64)
    out = numpy.full(len(ptr) - 1, -1, dtype=numpy.int64)
    has = ptr[1:] > ptr[:-1]
    out[has] = numpy.asarray(concept_rows, dtype=numpy.int64)[ptr[:-1][has]]
    return out


def aggregate_batch(rows: numpy.ndarray, scores: numpy.ndarray, k: int, allowed: Optional[numpy.ndarray],
                    searched_all: bool, ptr: numpy.ndarray, idx: numpy.ndarray,
                    preferred: Optional[numpy.ndarray] = None) -> Tuple[List[Ranked], numpy.ndarray]:
    """``rows`` / ``scores`` ``[n_q, depth]`` (best first, -1 / -inf padded), the row → concept CSR
    (``ptr``, ``idx``), an optional bool mask of allowed concepts and the concepts' preferred rows
    (:func:`preferred_rows`; None: ties by concept index only): per query the top ``k``
    ``(concept indices, scores)`` and a bool ``complete`` array ``[n_q]``."""
    n_q, depth = rows.shape
    valid = rows >= 0
    complete = numpy.full(n_q, bool(searched_all)) | ~valid.all(1)
    q_of, col = numpy.nonzero(valid)  # query-major, best row first within a query
    flat = rows[q_of, col]
    start = numpy.asarray(ptr[flat], dtype=numpy.int64)
    lengths = numpy.asarray(ptr[flat + 1], dtype=numpy.int64) - start
    link_q = numpy.repeat(q_of, lengths)
    link_col = numpy.repeat(col, lengths)
    offsets = numpy.arange(len(link_q), dtype=numpy.int64) - numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
    link_c = numpy.asarray(idx[numpy.repeat(start, lengths) + offsets], dtype=numpy.int64)
    n_c = int(link_c.max()) + 1 if len(link_c) else 1
    # the first link of each (query, concept) is the concept's best row (rows come best first)
    key, first, inverse = numpy.unique(link_q * n_c + link_c, return_index=True, return_inverse=True)
    uq, uc = key // n_c, key % n_c
    fcol = link_col[first]
    best = scores[uq, fcol]
    # a concept is "preferred" when its preferred row is among its rows that score its best score
    mine = numpy.zeros(len(key), dtype=bool)
    if preferred is not None and len(link_c):
        hit = (numpy.asarray(preferred)[link_c] == rows[link_q, link_col]) & (
            scores[link_q, link_col] == best[inverse])
        mine = numpy.bincount(inverse, weights=hit, minlength=len(key)) > 0
    if allowed is not None:
        keep = allowed[uc]
        uq, uc, fcol, best, mine = uq[keep], uc[keep], fcol[keep], best[keep], mine[keep]
    counts = numpy.bincount(uq, minlength=n_q)
    group = numpy.concatenate([[0], numpy.cumsum(counts)[:-1]])
    full = counts >= k
    if full.any():
        # the score of the row where the k-th concept first appeared: a later row scoring lower proves
        # that nothing deeper can enter the top k
        by_col = numpy.lexsort((fcol, uq))
        kth_col = fcol[by_col][group[full] + k - 1]
        last_col = depth - 1 - numpy.argmax(valid[full, ::-1], axis=1)
        qs = numpy.flatnonzero(full)
        complete[qs] |= scores[qs, last_col] < scores[qs, kth_col]
    order = numpy.lexsort((uc, ~mine, -best.astype(numpy.float64), uq))  # at equal scores, preferred first
    rank = numpy.arange(len(order)) - numpy.repeat(group, counts)
    top = order[rank < k]
    out_c, out_s = uc[top], best[top]
    bounds = numpy.cumsum(numpy.minimum(counts, k))[:-1]
    ranked = list(zip(numpy.split(out_c, bounds), numpy.split(out_s, bounds)))
    return ranked, complete


__all__ = ["aggregate_batch", "preferred_rows"]
