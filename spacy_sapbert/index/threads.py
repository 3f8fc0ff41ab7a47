"""Threads for a batch search: the cores this process may run on, and whether a forked process may use an
OpenMP library's threads."""
from __future__ import annotations

import os


def search_threads() -> int:
    """The cores this process may run on (a container's CPU set, ``taskset``), where the ANN libraries'
    own default starts one thread per core of the whole machine; 0 where the OS cannot say (the
    libraries' default then)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return 0


class OpenMPPool:
    """Which process started an OpenMP library's thread pool. GNU OpenMP (``libgomp``, which sparse-dot-topn
    bundles) keeps one pool per process, and a process forked after the pool started cannot use it: its first
    parallel region waits forever for threads fork did not copy (``nlp.pipe(n_process=2)``, ``link-corpus
    --n-process 2``, a fork-based ``multiprocessing.Pool``). The record mirrors that process-wide state, so it
    is process-wide too (:data:`SPARSE_DOT_TOPN`)."""

    def __init__(self) -> None:
        self.started_in = 0  # pid; 0: never started

    def threads(self, wanted: int) -> int:
        """``wanted`` threads where this process may run the pool (it started it, or nobody did: it is started
        now), else 1: a process forked after another started it runs sequentially."""
        pid = os.getpid()
        if wanted <= 1 or self.started_in not in (0, pid):
            return 1
        self.started_in = pid
        return wanted


# One record for both libraries: the sparse-dot-topn, faiss-cpu and scikit-learn wheels bundle the same libgomp
# (one soname, libgomp-e985bcbb.so.1.0.0, loaded once per process: /proc/self/maps lists faiss's copy alone after
# importing all three), so one thread pool serves sparse search, the ivf index and the float16 hnsw graph.
SPARSE_DOT_TOPN = FAISS_OPENMP = OpenMPPool()


def faiss_threads() -> int:
    """faiss's OpenMP threads for a search here: the cores this process may use; one in a process forked after
    another one started the thread pool."""
    return FAISS_OPENMP.threads(search_threads() or os.cpu_count() or 1)


__all__ = ["search_threads", "OpenMPPool", "SPARSE_DOT_TOPN", "FAISS_OPENMP", "faiss_threads"]
