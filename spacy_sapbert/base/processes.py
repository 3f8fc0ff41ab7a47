"""Work in processes forked after torch or ONNX Runtime ran (``nlp.pipe(n_process=2)`` on Linux).

Importing this module registers :func:`collect_before_fork` to run before every ``os.fork()`` of the process
(``multiprocessing``'s fork start method included; not ``subprocess``, which execs): an ONNX Runtime session
that became unreachable inside a reference cycle (a pipeline loaded and dropped) is then destroyed in the
parent, where its thread pool exists, instead of by the child's first garbage collection, which waited forever
on the pool's condition variables (a ``link-corpus --n-process 2`` worker hung in ``gc`` so). Its cost: one full
collection per fork, ~0.24 s in a process holding torch, transformers and spaCy (~460,000 tracked objects).
"""
from __future__ import annotations

import gc
import os
from typing import Any, Callable, List


def fork_guard(owner_pid: int) -> int:
    """Call before torch work; returns the current pid. In a process forked after torch ran its
    OpenMP thread pool (``nlp.pipe(n_process=2)`` on Linux), OpenMP would wait forever for pool
    threads that were not copied: such a child uses one intra-op thread instead."""
    pid = os.getpid()
    if pid != owner_pid:
        import torch  # lazy: torch (only a forked child that will run torch work gets here)

        torch.set_num_threads(1)
    return pid


class ProcessSession:
    """One ONNX Runtime session per process: ``make(threads)`` makes one. In a process forked after it was made
    (it has none of the session's pool threads) :meth:`get` makes a new one with one thread, and keeps the
    inherited one alive, never destroyed: destroying it there waits forever on its pool's condition variables."""

    def __init__(self, make: Callable[[int], Any], threads: int) -> None:
        self._make = make
        self._pid = os.getpid()
        self._current = make(threads)
        self._inherited: List[Any] = []

    def get(self) -> Any:
        """This process's session."""
        if os.getpid() != self._pid:
            self._inherited.append(self._current)
            self._pid, self._current = os.getpid(), self._make(1)
        return self._current


def collect_before_fork() -> None:
    """Collect the garbage of reference cycles now, in the process about to fork (see the module docstring)."""
    gc.collect()


os.register_at_fork(before=collect_before_fork)  # once per process: a module is imported once


__all__ = ["fork_guard", "collect_before_fork", "ProcessSession"]
