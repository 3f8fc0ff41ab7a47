"""Work in processes forked after torch ran (``nlp.pipe(n_process=2)`` on Linux)."""
from __future__ import annotations

import os


def fork_guard(owner_pid: int) -> int:
    """Call before torch work; returns the current pid. In a process forked after torch ran its
    OpenMP thread pool (``nlp.pipe(n_process=2)`` on Linux), OpenMP would wait forever for pool
    threads that were not copied: such a child uses one intra-op thread instead."""
    pid = os.getpid()
    if pid != owner_pid:
        import torch  # lazy: torch (only a forked child that will run torch work gets here)

        torch.set_num_threads(1)
    return pid


__all__ = ["fork_guard"]
