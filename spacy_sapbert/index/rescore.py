"""Exact re-scoring of candidate rows against float16 name vectors (the two-stage ivf index holds a
:class:`Rescorer`, through ``two_stage.RescoredBackend``).

Each query's candidate rows are gathered as float16 and widened to float32 by torch, a query at a time:
torch converts float16 with the CPU's vector instructions on its intra-op threads, where numpy converts
element by element on one core. No [pairs, dim] float32 copy of a batch is made.

Right after a load the rows are on disk: the memory map is opened for scattered reads (no read-ahead), so
each row is a page fault that waits for the disk, one after another. :class:`PageIn` asks the kernel for all
the rows of a batch at once (``madvise(MADV_WILLNEED)``, which queues the reads) when a few of them turn out
not to be in the page cache.

Over thousands of queries a UMLS-sized vector file ends up mostly mapped into the process, and its RSS counts
those pages (10M x 768: 10.4 GB of the file after 10,000 queries) although they are the kernel's page cache,
dropped under memory pressure. :class:`MappedBudget` lets them go (``madvise(MADV_DONTNEED)``) after a batch
that left more than ``$SPACY_SAPBERT_MAPPED_MB`` MiB (default 2048; 0: no cap) of file pages mapped: the pages
leave the process and stay in the page cache, so the next read of such a row is a minor fault, not a disk read.
It costs queries/s where a batch's rows span more than the cap (``benchmarks/umls_scale.py``, 768 dimensions,
cache warm: 3M 226 -> 194 q/s, 10M 70 -> 56; RSS after 10,000 queries 5.2 -> 2.7 GB and 12.7 -> 3.3 GB).

``benchmarks/studies/rescore_speed.py`` (3M x 768, 512 rows a query): 0.17 ms a query against 0.89 ms for the numpy
code this replaced, cache warm; right after a load 449,000 rows/s read ahead against 55,000 faulted one by one.
In a runtime-only environment (no torch: the `[train]` extra is not installed) the same scores come from
:func:`candidate_scores_numpy` (float32 products, equal to torch's to ~1e-5), slower but without torch.
"""
from __future__ import annotations

import mmap
import os
import warnings
from pathlib import Path
from time import perf_counter
from typing import Any, Optional

import numpy

from ..base.extras import is_installed
from ..base.processes import fork_guard
from ..errors import ConfigError, Errors

COLD_ROW_SECONDS = 20e-6  # a row in the page cache is read in well under 1 us; one from disk in ~100 us
PROBE_ROWS = 32
MAPPED_ENV = "SPACY_SAPBERT_MAPPED_MB"
DEFAULT_MAPPED_MB = 2048  # file-backed pages a process keeps mapped (vector files up to this size: all of them)
_STATM = "/proc/self/statm"


def torch_rows(X16: numpy.ndarray) -> Any:
    """A torch view of ``X16`` (float16 ``[n, dim]``, often a read-only memory map: no copy, no page read).
    Only read through: torch warns that it cannot mark a read-only buffer as such."""
    import torch  # lazy: torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(X16)


def candidate_scores(rows16: Any, queries: numpy.ndarray, cand: numpy.ndarray) -> numpy.ndarray:
    """float32 ``[n, depth]`` inner products of each query with its candidate rows (``cand``, int64, -1 where
    there is none: -inf there) of ``rows16`` (:func:`torch_rows`)."""
    import torch  # lazy: torch

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


def candidate_scores_numpy(X16: numpy.ndarray, queries: numpy.ndarray, cand: numpy.ndarray) -> numpy.ndarray:
    """:func:`candidate_scores` without torch: ``X16`` itself (float16, often memory-mapped), a query at a time."""
    scores = numpy.full(cand.shape, -numpy.inf, dtype=numpy.float32)
    for i, (query, rows) in enumerate(zip(numpy.asarray(queries, dtype=numpy.float32), cand)):
        keep = rows >= 0
        if keep.all():
            scores[i] = numpy.take(X16, rows, axis=0).astype(numpy.float32) @ query
        elif keep.any():  # a filter's masked candidates, or fewer found than asked: score the rest only
            scores[i, keep] = numpy.take(X16, rows[keep], axis=0).astype(numpy.float32) @ query
    return scores


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


def mapped_budget_bytes() -> Optional[int]:
    """The cap of :class:`MappedBudget`: ``$SPACY_SAPBERT_MAPPED_MB`` MiB, :data:`DEFAULT_MAPPED_MB` where unset,
    None for 0 (no cap). A value that is not a whole number >= 0 is E585."""
    raw = os.environ.get(MAPPED_ENV, "").strip()
    if not raw:
        return DEFAULT_MAPPED_MB << 20
    if not (raw.isascii() and raw.isdigit()):
        raise ConfigError(Errors.E585.format(name=MAPPED_ENV, value=raw))
    return (int(raw) << 20) or None


class MappedBudget:
    """Keeps this process's file-backed resident pages within ``budget`` bytes by letting the vector file's
    mapping go after a batch that left more (module docstring). Reading a row maps more than its own page: the
    kernel maps the cached pages around a fault too (fault-around, 64 KiB), so the check reads the resident
    count (``/proc/self/statm``; where there is none, nothing is done). Files no larger than the budget are
    left alone."""

    def __init__(self, X16: numpy.ndarray, budget: Optional[int]) -> None:
        handle = getattr(X16, "_mmap", None)
        big = handle is not None and budget is not None and len(handle) > budget
        self._map = handle if big and hasattr(mmap, "MADV_DONTNEED") and Path(_STATM).exists() else None
        self._budget_pages = (budget or 0) // mmap.PAGESIZE
        self.releases = 0

    def file_pages(self) -> int:
        """Resident file-backed (and shared) pages of this process."""
        return int(Path(_STATM).read_text().split()[2])

    def __call__(self) -> None:
        """Call after a batch's rows were read."""
        if self._map is None:
            return
        try:
            if self.file_pages() <= self._budget_pages:
                return
            self._map.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError, IndexError):  # refused or unreadable: the pages stay mapped, as without it
            self._map = None
            return
        self.releases += 1


class Rescorer:
    """What a two-stage index re-scores with: :func:`candidate_scores` over a torch view of ``X16``, with its
    :class:`PageIn` before and :class:`MappedBudget` after each batch. The cap is read when it is made (a bad
    ``$SPACY_SAPBERT_MAPPED_MB`` is E585 at load); torch is first touched at the first batch. In a process
    forked after torch ran, torch gets one intra-op thread (:func:`fork_guard`). Where torch is not installed
    (``use_torch`` None: decided by what is installed) the scores come from :func:`candidate_scores_numpy`."""

    def __init__(self, X16: numpy.ndarray, *, use_torch: Optional[bool] = None) -> None:
        self._X = X16
        self._budget_bytes = mapped_budget_bytes()
        self._use_torch = is_installed("torch") if use_torch is None else bool(use_torch)
        self._rows16: Any = None
        self._pid = os.getpid()

    def __call__(self, queries: numpy.ndarray, cand: numpy.ndarray) -> numpy.ndarray:
        """float32 ``[n, depth]`` scores of ``cand`` (:func:`candidate_scores`)."""
        if self._use_torch:
            self._pid = fork_guard(self._pid)
        if self._rows16 is None:
            self._rows16 = torch_rows(self._X) if self._use_torch else self._X
            self._page_in, self._budget = PageIn(self._X), MappedBudget(self._X, self._budget_bytes)
        self._page_in(cand)
        scores = (candidate_scores if self._use_torch else candidate_scores_numpy)(self._rows16, queries, cand)
        self._budget()
        return scores


__all__ = ["candidate_scores", "candidate_scores_numpy", "torch_rows", "PageIn", "MappedBudget", "Rescorer",
           "mapped_budget_bytes", "MAPPED_ENV"]
