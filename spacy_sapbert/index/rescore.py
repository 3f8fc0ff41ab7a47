"""Exact re-scoring of candidate rows against float16 name vectors (both two-stage index kinds).

Each query's candidate rows are gathered as float16 and widened to float32 by torch, a query at a time:
torch converts float16 with the CPU's vector instructions on its intra-op threads, where numpy converts
element by element on one core. No [pairs, dim] float32 copy of a batch is made.

Right after a load the rows are on disk: the memory map is opened for scattered reads (no read-ahead), so
each row is a page fault that waits for the disk, one after another. :class:`PageIn` asks the kernel for all
the rows of a batch at once (``madvise(MADV_WILLNEED)``, which queues the reads) when a few of them turn out
not to be in the page cache.

Over thousands of queries a UMLS-sized vector file ends up mostly mapped into the process, and its RSS counts
those pages (10M x 768: 10.4 GB of the file after 10,000 queries) although they are the kernel's page cache,
dropped under memory pressure. :class:`MappedBudget` lets them go (``madvise(MADV_DONTNEED)``) when the rows
re-scored since the last release may have mapped more than :data:`MAPPED_BUDGET_BYTES`: the pages leave the
process and stay in the page cache, so the next read of such a row is a minor fault, not a disk read.

``benchmarks/rescore_speed.py`` (3M x 768, 512 rows a query): 0.17 ms a query against 0.89 ms for the numpy
code this replaced, cache warm; right after a load 449,000 rows/s read ahead against 55,000 faulted one by one.
"""
from __future__ import annotations

import mmap
import warnings
from time import perf_counter
from typing import Any

import numpy

COLD_ROW_SECONDS = 20e-6  # a row in the page cache is read in well under 1 us; one from disk in ~100 us
PROBE_ROWS = 32
MAPPED_BUDGET_BYTES = 2 << 30  # vector-file pages a process keeps mapped (files up to this size: all of them)


def torch_rows(X16: numpy.ndarray) -> Any:
    """A torch view of ``X16`` (float16 ``[n, dim]``, often a read-only memory map: no copy, no page read).
    Only read through: torch warns that it cannot mark a read-only buffer as such."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(X16)


def candidate_scores(rows16: Any, queries: numpy.ndarray, cand: numpy.ndarray) -> numpy.ndarray:
    """float32 ``[n, depth]`` inner products of each query with its candidate rows (``cand``, int64, -1 where
    there is none: -inf there) of ``rows16`` (:func:`torch_rows`)."""
    import torch

    q = torch.from_numpy(numpy.ascontiguousarray(queries, dtype=numpy.float32))
    c = torch.from_numpy(numpy.ascontiguousarray(cand, dtype=numpy.int64))
    valid = c >= 0
    full = valid.all(1).tolist()
    with torch.inference_mode():
        scores = torch.full(c.shape, float("-inf"), dtype=torch.float32)
        for i, whole in enumerate(full):
            if whole:
                scores[i] = rows16.index_select(0, c[i]).float() @ q[i]
            else:  # a filter's masked candidates, or fewer found than asked: score the rest only
                keep = valid[i]
                if bool(keep.any()):
                    scores[i, keep] = rows16.index_select(0, c[i][keep]).float() @ q[i]
    return scores.numpy()


class PageIn:
    """Reads the rows a batch will re-score ahead when a probe of them is slow (they are not in the page cache).
    Only a hint: which rows are read, and the scores, do not depend on it."""

    def __init__(self, X16: numpy.ndarray) -> None:
        self._X = X16
        self._map = getattr(X16, "_mmap", None) if hasattr(mmap, "MADV_WILLNEED") else None
        if self._map is not None:
            self._start = int(X16.offset) % mmap.ALLOCATIONGRANULARITY  # where row 0 begins in the map
            self._row_bytes = int(X16.shape[1]) * X16.itemsize

    def __call__(self, cand: numpy.ndarray) -> None:
        if self._map is None:
            return
        rows = numpy.unique(cand[cand >= 0])
        if not len(rows):
            return
        probe = rows[numpy.linspace(0, len(rows) - 1, min(PROBE_ROWS, len(rows))).astype(numpy.int64)]
        t0 = perf_counter()
        numpy.take(self._X, probe, axis=0)
        if (perf_counter() - t0) / len(probe) < COLD_ROW_SECONDS:
            return
        page = mmap.PAGESIZE
        begin = self._start + rows * self._row_bytes
        first = begin // page * page
        last = numpy.minimum((begin + self._row_bytes + page - 1) // page * page, len(self._map))
        gaps = numpy.flatnonzero(first[1:] > last[:-1]) + 1  # rows are sorted: merge touching page ranges
        try:
            for a, b in zip(first[numpy.r_[0, gaps]].tolist(), last[numpy.r_[gaps - 1, len(rows) - 1]].tolist()):
                self._map.madvise(mmap.MADV_WILLNEED, a, b - a)
        except OSError:  # a file system that refuses the hint: the rows are read on demand, as without it
            self._map = None


class MappedBudget:
    """Keeps the part of a memory-mapped vector file that this process maps within ``budget`` bytes (module
    docstring). Counts an upper bound (every candidate row, as many pages as a row may span): no system call
    unless a release is due. Files no larger than the budget are left alone."""

    def __init__(self, X16: numpy.ndarray, budget: int = MAPPED_BUDGET_BYTES) -> None:
        handle = getattr(X16, "_mmap", None)
        big = handle is not None and len(handle) > budget
        self._map = handle if big and hasattr(mmap, "MADV_DONTNEED") else None
        row_bytes = int(X16.shape[1]) * X16.itemsize
        self._row_pages = 1 + -(-(row_bytes - 1) // mmap.PAGESIZE)  # pages one row may span
        self._budget_pages = budget // mmap.PAGESIZE
        self._mapped = 0
        self.releases = 0

    def __call__(self, cand: numpy.ndarray) -> None:
        if self._map is None:
            return
        pages = int((cand >= 0).sum()) * self._row_pages
        if self._mapped + pages > self._budget_pages:
            try:
                self._map.madvise(mmap.MADV_DONTNEED)
            except OSError:  # refused: the pages stay mapped, as without the budget
                self._map = None
                return
            self._mapped = 0
            self.releases += 1
        self._mapped += pages


__all__ = ["candidate_scores", "torch_rows", "PageIn", "MappedBudget", "MAPPED_BUDGET_BYTES"]
