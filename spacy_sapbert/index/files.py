"""File helpers of index folders (the size and hash records are :mod:`spacy_sapbert.base.integrity`'s)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterable, Tuple

import numpy


def link_or_copy(src: Path, dst: Path) -> None:
    """Put a finished, never-modified data file at ``dst``: a hard link where the file system allows
    (no extra disk, instant), else a copy; through a temporary name, so ``dst`` appears whole."""
    tmp = dst.with_name(f".{dst.name}.tmp")
    if tmp.exists():
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def write_npy(path: Path, dtype: Any, shape: Tuple[int, ...], parts: Iterable[numpy.ndarray]) -> None:
    """Write a ``.npy`` of ``shape`` at ``path`` from ``parts`` (consecutive blocks along the first axis), through a
    memory-mapped temporary file: the whole array is never in RAM, and ``path`` appears whole or not at all."""
    tmp = path.with_name(f".{path.name}.tmp")
    out = numpy.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
    at = 0
    for part in parts:
        out[at:at + len(part)] = part
        at += len(part)
    out.flush()
    del out  # the map is closed before the file is renamed
    os.replace(tmp, path)
