"""Filtered search without a Python call per visited node, shared by the hnsw and ivf
back-ends: the graph is searched deeper by the inverse of the allowed fraction and the candidates are
masked with the filter's row mask; when few rows are allowed (``EXACT_FILTER_ROWS``), or a query is
still short of allowed rows after the deepest search, those rows are scanned exactly."""
from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import numpy


# Upper bound of the float32 score matrix one exact-search step holds in memory.
_EXACT_BLOCK = 32_000_000
# below this many allowed rows a filtered search scans them exactly (at 768 dims 100k rows are 300 MB
# as float32, gathered once per query batch)
EXACT_FILTER_ROWS = 100_000
MAX_OVERFETCH = 8192

Result = Tuple[numpy.ndarray, numpy.ndarray]
# (queries, depth, row_mask) -> allowed candidate rows (-1 padded) and their exact scores, best first
Candidates = Callable[[numpy.ndarray, int, numpy.ndarray], Result]
# rows -> their float32 vectors
Gather = Callable[[numpy.ndarray], numpy.ndarray]


def exact_topk(X: numpy.ndarray, vectors: numpy.ndarray, k: int, row_mask: Optional[numpy.ndarray]) -> Result:
    """Exact top ``k`` rows of ``X`` (float32 ``[n, dim]``) for each query, best first, ties by row; masked rows
    excluded (-1 / -inf where fewer than ``k`` rows are allowed). numpy only: no torch on the linking path."""
    n = X.shape[0]
    k = min(int(k), n)
    step = max(1, _EXACT_BLOCK // max(1, n))
    out_r, out_s = [], []
    for start in range(0, vectors.shape[0], step):
        sims = numpy.ascontiguousarray(vectors[start: start + step], dtype=numpy.float32) @ X.T
        if row_mask is not None:
            sims[:, ~row_mask] = -numpy.inf
        rows, scores = _best_of(sims, k)
        out_r.append(rows)
        out_s.append(scores)
    if not out_r:
        return numpy.empty((0, k), dtype=numpy.int64), numpy.empty((0, k), dtype=numpy.float32)
    return numpy.concatenate(out_r), numpy.concatenate(out_s)


def _best_of(sims: numpy.ndarray, k: int) -> Result:
    """The ``k`` best columns of each row of ``sims`` by (-score, column), as a full sort would give them: each row is
    cut at a score at or below its ``k``-th best, and only the columns at or above the cut (ties at the ``k``-th
    score included) are sorted. numpy's partial sort of whole rows runs on one core and costs more than the product
    itself at tens of thousands of names, so the cut is first taken from a sample: the ``m``-th best of every
    ``stride``-th column, ``m`` about three times the ``k`` the sample holds on average. A row that keeps fewer
    than ``k`` columns (or whose cut is -inf: masked rows) is cut at its ``k``-th best itself."""
    n_q, n = sims.shape
    rows = numpy.full((n_q, k), -1, dtype=numpy.int64)
    scores = numpy.full((n_q, k), -numpy.inf, dtype=numpy.float32)
    if k == 0 or n_q == 0:
        return rows, scores
    cut = numpy.full(n_q, -numpy.inf, dtype=numpy.float32)
    if n > 16 * k:
        stride = max(1, n // (32 * k))
        sample = sims[:, ::stride]
        m = min(sample.shape[1], 3 * (k // stride + 1))
        cut = numpy.partition(sample, sample.shape[1] - m, axis=1)[:, sample.shape[1] - m]
    hit = sims >= cut[:, None]
    short = ~numpy.isfinite(cut) | (hit.sum(axis=1) < k)
    if short.any():
        cut[short] = numpy.partition(sims[short], n - k, axis=1)[:, n - k]
        hit[short] = sims[short] >= cut[short, None]
    r, c = numpy.nonzero(hit)
    s = sims[r, c]
    order = numpy.lexsort((c, -s.astype(numpy.float64), r))
    r, c, s = r[order], c[order], s[order]
    rank = numpy.arange(len(r)) - numpy.searchsorted(r, numpy.arange(n_q))[r]
    keep = rank < k
    rows[r[keep], rank[keep]] = c[keep]
    scores[r[keep], rank[keep]] = s[keep]
    rows[~numpy.isfinite(scores)] = -1
    return rows, scores


def exact_allowed(vectors: numpy.ndarray, k: int, row_mask: numpy.ndarray, gather: Gather,
                  block: int = EXACT_FILTER_ROWS) -> Result:
    """Exact top ``k`` among the allowed rows, gathered ``block`` rows at a time."""
    allowed = numpy.flatnonzero(row_mask)
    best_r = numpy.full((len(vectors), k), -1, dtype=numpy.int64)
    best_s = numpy.full((len(vectors), k), -numpy.inf, dtype=numpy.float32)
    for start in range(0, len(allowed), block):
        part = allowed[start:start + block]
        X = numpy.ascontiguousarray(gather(part), dtype=numpy.float32)
        r, s = exact_topk(X, vectors, min(k, len(part)), None)
        best_r, best_s = top_k(numpy.concatenate([best_r, numpy.where(r >= 0, part[r], -1)], axis=1),
                               numpy.concatenate([best_s, s], axis=1), k)
    return best_r, best_s


def top_k(rows: numpy.ndarray, scores: numpy.ndarray, k: int) -> Result:
    """The ``k`` best per query by (-score, row); -1 / -inf where fewer rows are valid."""
    key = numpy.where(rows >= 0, rows, numpy.iinfo(numpy.int64).max)
    order = numpy.lexsort((key, -scores.astype(numpy.float64)), axis=1)[:, :k]
    best_r = numpy.take_along_axis(rows, order, 1)
    best_s = numpy.take_along_axis(scores, order, 1)
    best_r[~numpy.isfinite(best_s)] = -1
    return best_r, best_s


def masked_search(vectors: numpy.ndarray, k: int, row_mask: numpy.ndarray, *, n_rows: int, base_depth: int,
                  candidates: Candidates, gather: Gather) -> Result:
    allowed = int(row_mask.sum())
    if allowed <= EXACT_FILTER_ROWS:
        return exact_allowed(vectors, k, row_mask, gather)
    rows = numpy.full((len(vectors), k), -1, dtype=numpy.int64)
    scores = numpy.full((len(vectors), k), -numpy.inf, dtype=numpy.float32)
    pending = numpy.arange(len(vectors))
    depth = min(n_rows, math.ceil(max(k, base_depth) * n_rows / allowed * 1.5))
    while len(pending):
        cand, cand_s = candidates(vectors[pending], depth, row_mask)
        enough = (cand >= 0).sum(1) >= min(k, allowed)
        done = enough | (depth >= min(n_rows, MAX_OVERFETCH))
        ok, short = done & enough, done & ~enough
        if ok.any():
            rows[pending[ok]], scores[pending[ok]] = top_k(cand[ok], cand_s[ok], k)
        if short.any():  # still short of allowed rows after the deepest search: scan them exactly
            rows[pending[short]], scores[pending[short]] = exact_allowed(vectors[pending[short]], k, row_mask, gather)
        pending = pending[~done]
        depth = min(n_rows, depth * 4)
    return rows, scores


__all__ = ["exact_topk", "EXACT_FILTER_ROWS", "MAX_OVERFETCH", "masked_search", "exact_allowed", "top_k"]
