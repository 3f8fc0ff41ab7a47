"""Threads for a batch search: the cores this process may run on."""
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


__all__ = ["search_threads"]
