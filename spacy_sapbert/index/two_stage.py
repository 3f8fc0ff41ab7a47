"""Two-stage search for KBs of millions of names: candidate rows from a coarse stage, re-scored exactly
against the float16 name vectors, a memory-mapped ``vectors.f16.npy`` (only the rows touched are paged in).

:class:`RescoredBackend` holds the second stage, the filters and the saving of the float16 file; a
back-end adds its candidate stage (``_candidates``, ``_save_candidates``, ``_files``, ``load``): the ivf
index (``ivf.py``). Scores are true inner products of the stored vectors, so the coarse stage's rounding
never decides the ranking. Filters (semantic types, definitions) are applied without a Python call per
visited node (``graph_search.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional, Tuple

import numpy

from ..errors import Errors, MissingInputError
from ..base.integrity import NPY_READ_ERRORS, unit_norm_problem
from .files import link_or_copy, write_npy
from .graph_search import masked_search, top_k
from .rescore import Rescorer

VECTORS_F16_FILE = "vectors.f16.npy"
NORM_SAMPLE_ROWS = 64  # rows of vectors.f16.npy whose length is checked at load (64 pages read)
_SCORE_LIMIT = 1.02  # inner products of unit vectors; float16 rounding stays far below this

Result = Tuple[numpy.ndarray, numpy.ndarray]


def damaged(path: Path, reason: str) -> MissingInputError:
    """E107 naming the damaged file of an index folder and why."""
    return MissingInputError(Errors.E107.format(path=path, reason=reason))


def _advise_random(X: numpy.ndarray) -> None:
    """Re-scoring reads scattered rows: without this hint each page fault reads ahead ~128 KiB
    around the row, and the resident set grows tens of times faster than the rows touched."""
    import mmap

    handle = getattr(X, "_mmap", None)
    if handle is not None and hasattr(mmap, "MADV_RANDOM"):
        handle.madvise(mmap.MADV_RANDOM)


def save_float16(X: numpy.ndarray, folder: Path) -> None:
    """Write ``X`` as ``vectors.f16.npy`` in ``folder`` (atomically, chunk by chunk: ``X`` may be memory-mapped)."""
    write_npy(folder / VECTORS_F16_FILE, numpy.float16, X.shape,
              (X[start:start + (1 << 18)] for start in range(0, len(X), 1 << 18)))


def load_float16(folder: Path, n: int, dim: int) -> numpy.ndarray:
    """``vectors.f16.npy`` of ``folder``, memory-mapped for scattered reads, checked to be ``[n, dim]`` float16."""
    path = folder / VECTORS_F16_FILE
    try:
        X = numpy.load(path, mmap_mode="r", allow_pickle=False)
    except NPY_READ_ERRORS as err:
        raise damaged(path, str(err)) from err
    if X.shape != (n, dim) or X.dtype != numpy.float16:
        raise damaged(path, f"shape {X.shape} {X.dtype}, expected ({n}, {dim}) float16")
    _advise_random(X)
    # a sample of rows (memory-mapped: reading all 15 GB of a UMLS index at every load is no option; one page
    # each): a file of zeros or scaled vectors fails here; damage elsewhere is caught when a search re-scores the
    # row (_SCORE_LIMIT) and by `verify` (every row)
    problem = unit_norm_problem(X, sample=NORM_SAMPLE_ROWS)
    if problem is not None:
        raise damaged(path, f"stored vectors are not unit length: {problem}")
    return X


class RescoredBackend:
    """The re-scoring stage and what goes with it; a subclass supplies the candidate stage."""

    kind = "rescored"

    def __init__(self, vectors16: numpy.ndarray, *, rescore: int, folder: Optional[Path] = None) -> None:
        self._X = vectors16
        self._scores = Rescorer(vectors16)
        self.rescore = int(rescore)
        self._folder = folder
        self.reused_files = False  # set by save: the files were linked from the folder it was loaded from

    # ---- the candidate stage (a subclass's) ---------------------------------------------
    def _candidates(self, vectors: numpy.ndarray, depth: int) -> numpy.ndarray:
        """int64 ``[n, depth]`` candidate rows, -1 where fewer were found."""
        raise NotImplementedError

    def _files(self) -> List[str]:
        """The data files of the index folder, the float16 vectors first."""
        return [VECTORS_F16_FILE]

    def _save_candidates(self, folder: Path) -> None:
        """Write the candidate stage's files into ``folder``."""

    def set_ef(self, ef: int) -> None:
        self.ef_search = int(ef)

    # ---- searching ----------------------------------------------------------------------
    def _rescore(self, vectors: numpy.ndarray, cand: numpy.ndarray, k: int) -> Result:
        """Exact scores of the candidate rows; the ``k`` best per query by (-score, row)."""
        scores = self._scores(vectors, cand)
        valid = cand >= 0
        if not (numpy.abs(scores[valid]) <= _SCORE_LIMIT).all():  # also false for NaN
            raise damaged(self._path(VECTORS_F16_FILE), "stored name vectors are not unit length: the file is damaged")
        return top_k(cand, scores, k)

    @property
    def natural_depth(self) -> int:
        """Rows a search re-scores anyway: asking for fewer saves nothing."""
        return self.rescore

    def search(self, vectors: numpy.ndarray, k: int, row_mask: Optional[numpy.ndarray]) -> Result:
        if row_mask is None:
            return self._rescore(vectors, self._candidates(vectors, max(k, self.rescore)), k)
        return masked_search(vectors, k, row_mask, n_rows=len(self._X), base_depth=self.rescore,
                             candidates=self._allowed_candidates, gather=self.vectors)

    def _allowed_candidates(self, vectors: numpy.ndarray, depth: int, row_mask: numpy.ndarray) -> Result:
        cand = self._candidates(vectors, depth)
        cand[(cand >= 0) & ~row_mask[numpy.maximum(cand, 0)]] = -1
        return self._rescore(vectors, cand, depth)

    def vectors(self, rows: Any) -> numpy.ndarray:
        """float32 copies of ``rows`` (a list or an int array) of the float16 vectors."""
        return numpy.asarray(self._X[rows], dtype=numpy.float32)

    # ---- serialisation ------------------------------------------------------------------
    def _path(self, name: str) -> Path:
        return (self._folder / name) if self._folder is not None else Path("<memory>") / name

    def save(self, folder: Path) -> List[str]:
        self.reused_files = self._folder is not None
        files = self._files()
        if self._folder is not None:  # loaded from disk (memory-mapped, read-only): the files are final
            if folder.resolve() != self._folder.resolve():
                for name in files:
                    link_or_copy(self._folder / name, folder / name)
            return files
        save_float16(self._X, folder)
        self._save_candidates(folder)
        return files


__all__ = ["RescoredBackend", "VECTORS_F16_FILE", "NORM_SAMPLE_ROWS", "damaged", "save_float16", "load_float16"]
