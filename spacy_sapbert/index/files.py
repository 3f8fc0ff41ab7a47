"""File helpers of index folders (the size and hash records are :mod:`spacy_sapbert.integrity`'s)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path


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
