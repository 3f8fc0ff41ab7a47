"""The compact index for KBs of millions of names (all of UMLS): two stages, both memory-mapped.

1. Candidates: a usearch HNSW graph over int8 copies of the name vectors projected on their first
   ``candidate_dims`` principal axes (default: half the dimensions from 256 dimensions up; the axes,
   fitted on a sample of the names, are ``candidates.pca.npy``, <= 1.2 MB at 768 dims; cosine metric,
   which is what makes usearch scale the vectors into the int8 range), opened with
   ``Index.restore(path, view=True)``: nothing is read at load, the pages a query touches are read
   on demand and stay in the page cache, which the OS can reclaim. Half the dimensions halve the
   graph's bytes per visited node, the search's cost (``umls_scale_sweep``: 2.1-2.8x the queries/s at
   the same recall at 200k names); the exact re-scoring below makes up for the projection.
2. Re-scoring: the ``rescore`` best candidates per query are scored exactly against the float16 name
   vectors, a memory-mapped ``.npy`` (only the rows touched are paged in), so scores are true
   inner products of the stored vectors and the int8 rounding never decides the ranking.

Filters (semantic types, definitions) are applied without a Python call per visited node
(``filtered.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy
from tqdm import tqdm

from ..errors import ConfigError, Errors, MissingInputError
from ..base.integrity import NPY_READ_ERRORS, unit_norm_problem
from .files import link_or_copy, write_npy
from .graph_search import masked_search, top_k
from .rescore import Rescorer
from .threads import search_threads

GRAPH_FILE = "names.usearch"
VECTORS_F16_FILE = "vectors.f16.npy"
PROJECTION_FILE = "candidates.pca.npy"
MIN_CANDIDATE_DIMS = 8
PCA_SAMPLE = 50_000  # names the principal axes are fitted on
# umls_scale_sweep, 1M x 384 spectrum, PCA-192 graph, same run: M 48 gives more recall at a given beam and as
# many q/s for it (ef 384: recall@1 0.992 at 326 q/s; M 32 at ef 512: 0.987 at 293); at 200k names likewise
DEFAULT_CONNECTIVITY = 48
DEFAULT_EXPANSION_ADD = 200
# the beam: >= 0.99 recall@1 and @5 at 200k names from 384 (M 48: 0.9985 / 0.9972); at 1M names 512 gives
# 0.995 / 0.9896 and 768 0.9975 / 0.9948, so KBs of LARGE_KB_NAMES and more get the larger beam (docs/scale.md)
DEFAULT_EXPANSION_SEARCH = 512
LARGE_KB_EXPANSION_SEARCH = 768
LARGE_KB_NAMES = 500_000
# at 3M names (umls_scale_sweep beam_n3000000_d384_spectrum) 768 gives 0.985 / 0.9798, 1024 0.99 / 0.9862, 1536
# 0.993 / 0.9925: KBs of HUGE_KB_NAMES and more get 1536
HUGE_KB_EXPANSION_SEARCH = 1536
HUGE_KB_NAMES = 2_000_000
DEFAULT_RESCORE = 64
CANDIDATE_DTYPES = ("i8", "f16")
NORM_SAMPLE_ROWS = 64  # rows of vectors.f16.npy whose length is checked at load (64 pages read)
_SCORE_LIMIT = 1.02  # inner products of unit vectors; float16 rounding stays far below this

Result = Tuple[numpy.ndarray, numpy.ndarray]


def _damaged(path: Path, reason: str) -> MissingInputError:
    return MissingInputError(Errors.E107.format(path=path, reason=reason))


def default_expansion_search(n_names: int) -> int:
    """The search beam an index of ``n_names`` names is built with (recall falls with the number of names
    at a fixed beam): :data:`DEFAULT_EXPANSION_SEARCH`, :data:`LARGE_KB_EXPANSION_SEARCH` from
    :data:`LARGE_KB_NAMES` names, :data:`HUGE_KB_EXPANSION_SEARCH` from :data:`HUGE_KB_NAMES`."""
    if n_names >= HUGE_KB_NAMES:
        return HUGE_KB_EXPANSION_SEARCH
    return LARGE_KB_EXPANSION_SEARCH if n_names >= LARGE_KB_NAMES else DEFAULT_EXPANSION_SEARCH


def default_candidate_dims(dim: int) -> int:
    """Half the dimensions from 256 dimensions up (MiniLM 384 -> 192, SapBERT 768 -> 384), else all (0)."""
    return dim // 2 if dim >= 256 else 0


def resolve_candidate_dims(value: Optional[int], dim: int) -> int:
    """``None``: the default; 0 or ``dim``: the full dimension (0); else checked (E581)."""
    if value is None:
        return default_candidate_dims(dim)
    if value == dim or value == 0:
        return 0
    if not MIN_CANDIDATE_DIMS <= value < dim:
        raise ConfigError(Errors.E581.format(dim=dim, minimum=MIN_CANDIDATE_DIMS, value=value))
    return int(value)


def fit_projection(vectors: numpy.ndarray, dims: int, seed: int) -> numpy.ndarray:
    """float32 ``[dim, dims]``: the first ``dims`` principal axes of up to :data:`PCA_SAMPLE` rows of
    ``vectors`` drawn with ``seed`` (the same axes every run)."""
    n = len(vectors)
    rows = numpy.sort(numpy.random.default_rng(seed).choice(n, min(n, PCA_SAMPLE), replace=False))
    sample = numpy.asarray(vectors[rows], dtype=numpy.float64)
    sample -= sample.mean(0)
    values, axes = numpy.linalg.eigh(sample.T @ sample)
    top = axes[:, numpy.argsort(-values, kind="stable")[:dims]]
    top *= numpy.where(top[numpy.abs(top).argmax(0), numpy.arange(dims)] < 0, -1.0, 1.0)  # a fixed sign per axis
    return numpy.ascontiguousarray(top, dtype=numpy.float32)


def _load_projection(path: Path, dim: int, dims: int) -> numpy.ndarray:
    try:
        P = numpy.load(path, allow_pickle=False)
    except NPY_READ_ERRORS as err:
        raise MissingInputError(Errors.E580.format(path=path, why=str(err) or type(err).__name__)) from err
    if P.shape != (dim, dims) or P.dtype != numpy.float32:
        why = f"shape {P.shape} {P.dtype}, expected ({dim}, {dims}) float32"
        raise MissingInputError(Errors.E580.format(path=path, why=why))
    if not numpy.isfinite(P).all() or not (numpy.abs(P) <= 1.0 + 1e-3).all():
        raise MissingInputError(Errors.E580.format(path=path, why="values that are not unit-axis coordinates"))
    return P


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
        raise _damaged(path, str(err)) from err
    if X.shape != (n, dim) or X.dtype != numpy.float16:
        raise _damaged(path, f"shape {X.shape} {X.dtype}, expected ({n}, {dim}) float16")
    _advise_random(X)
    # a sample of rows (memory-mapped: reading all 15 GB of a UMLS index at every load is no option; one page
    # each): a file of zeros or scaled vectors fails here; damage elsewhere is caught when a search re-scores the
    # row (_SCORE_LIMIT) and by `verify` (every row)
    problem = unit_norm_problem(X, sample=NORM_SAMPLE_ROWS)
    if problem is not None:
        raise _damaged(path, f"stored vectors are not unit length: {problem}")
    return X


class CompactBackend:
    kind = "compact"

    def __init__(self, graph: Any, vectors16: numpy.ndarray, *, rescore: int, expansion_search: int,
                 folder: Optional[Path] = None, projection: Optional[numpy.ndarray] = None) -> None:
        self._graph = graph
        self._X = vectors16
        self._scores = Rescorer(vectors16)
        self._P = projection  # float32 [dim, candidate_dims], or None: the graph holds full vectors
        self.rescore = int(rescore)
        self.ef_search = int(expansion_search)
        self._folder = folder
        self.reused_files = False  # set by save: the files were linked from the folder it was loaded from
        graph.expansion_search = self.ef_search

    def __reduce__(self) -> Any:
        """Pickled (e.g. for ``nlp.pipe(n_process=2)`` with the spawn start method) as its folder, which
        the other process maps again; an index built in memory is sent whole."""
        if self._folder is not None:
            meta = {"n_names": len(self._X), "dim": self._X.shape[1], "rescore": self.rescore,
                    "ef_search": self.ef_search, "candidate_dims": self.candidate_dims}
            return (CompactBackend.load, (self._folder, meta))
        return (CompactBackend._from_state, (self._graph.save(), numpy.asarray(self._X), self.rescore, self.ef_search,
                                             self._P))

    @classmethod
    def _from_state(cls, graph_bytes: Any, X: numpy.ndarray, rescore: int, ef: int,
                    projection: Optional[numpy.ndarray] = None) -> "CompactBackend":
        from usearch.index import Index

        return cls(Index.restore(graph_bytes), X, rescore=rescore, expansion_search=ef, projection=projection)

    @property
    def candidate_dims(self) -> int:
        """Dimensions of the candidate graph's vectors; 0: all of them (no projection)."""
        return 0 if self._P is None else int(self._P.shape[1])

    # ---- building -----------------------------------------------------------------------
    @classmethod
    def build(cls, vectors: numpy.ndarray, *, dtype: str = "i8", connectivity: int = DEFAULT_CONNECTIVITY,
              expansion_add: int = DEFAULT_EXPANSION_ADD, expansion_search: int = DEFAULT_EXPANSION_SEARCH,
              rescore: int = DEFAULT_RESCORE, num_threads: int = 1, show_progress: bool = True,
              chunk_size: int = 65_536, candidate_dims: Optional[int] = None, seed: int = 100) -> "CompactBackend":
        """Index ``vectors`` (float16 or float32 ``[n, dim]``, may be a memory map: read chunk by chunk).
        ``candidate_dims``: the graph's PCA dimensions (None: :func:`default_candidate_dims`, 0: all).
        ``num_threads=1`` builds the same graph every run."""
        from usearch.index import Index

        n, dim = vectors.shape
        dims = resolve_candidate_dims(candidate_dims, dim)
        P = fit_projection(vectors, dims, seed) if dims else None
        graph = Index(ndim=dims or dim, metric="cos", dtype=dtype, connectivity=connectivity,
                      expansion_add=expansion_add, expansion_search=expansion_search)
        with tqdm(total=n, desc="usearch", unit="name", disable=not show_progress) as bar:
            for start in range(0, n, chunk_size):
                stop = min(n, start + chunk_size)
                chunk = numpy.ascontiguousarray(vectors[start:stop], dtype=numpy.float32)
                if P is not None:
                    chunk = chunk @ P
                graph.add(numpy.arange(start, stop, dtype=numpy.uint64), chunk, threads=num_threads)
                bar.update(stop - start)
        X16 = vectors if vectors.dtype == numpy.float16 else numpy.asarray(vectors, dtype=numpy.float16)
        return cls(graph, X16, rescore=rescore, expansion_search=expansion_search, projection=P)

    # ---- searching ----------------------------------------------------------------------
    def set_ef(self, ef: int) -> None:
        self.ef_search = int(ef)
        self._graph.expansion_search = self.ef_search

    def _candidates(self, vectors: numpy.ndarray, depth: int) -> numpy.ndarray:
        """int64 ``[n, depth]`` candidate rows from the graph, -1 where it returned fewer."""
        n = len(self._X)
        depth = min(depth, n)
        self._graph.expansion_search = max(self.ef_search, depth)
        if self._P is not None:
            vectors = vectors @ self._P
        try:
            found = self._graph.search(vectors, depth, threads=search_threads())
        finally:
            self._graph.expansion_search = self.ef_search
        if hasattr(found, "counts"):  # a batch
            keys = numpy.asarray(found.keys, dtype=numpy.int64).reshape(len(vectors), -1)
            counts = numpy.asarray(found.counts).reshape(-1)
        else:  # one query: usearch returns its matches unpadded
            keys = numpy.full((1, depth), -1, dtype=numpy.int64)
            keys[0, : len(found.keys)] = numpy.asarray(found.keys, dtype=numpy.int64)
            counts = numpy.array([len(found.keys)])
        keys[numpy.arange(keys.shape[1])[None, :] >= counts[:, None]] = -1
        if (keys >= n).any():
            raise _damaged(self._path(GRAPH_FILE), "a candidate row is out of range: the graph file is damaged")
        return keys

    def _rescore(self, vectors: numpy.ndarray, cand: numpy.ndarray, k: int) -> Result:
        """Exact scores of the candidate rows; the ``k`` best per query by (-score, row)."""
        scores = self._scores(vectors, cand)
        valid = cand >= 0
        if not (numpy.abs(scores[valid]) <= _SCORE_LIMIT).all():  # also false for NaN
            raise _damaged(self._path(VECTORS_F16_FILE), "stored name vectors are not unit length: the file is damaged")
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

    def _files(self) -> List[str]:
        """The data files of the index folder, the float16 vectors first."""
        return [VECTORS_F16_FILE, GRAPH_FILE] + ([PROJECTION_FILE] if self._P is not None else [])

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

    def _save_candidates(self, folder: Path) -> None:
        """Write the candidate stage's files (the graph, the projection) into ``folder``."""
        gtmp = folder / f".{GRAPH_FILE}.tmp"
        self._graph.save(str(gtmp))
        gtmp.replace(folder / GRAPH_FILE)
        if self._P is not None:
            from ..base.util import atomic_write

            with atomic_write(folder / PROJECTION_FILE, "wb") as fh:
                numpy.save(fh, self._P)

    @classmethod
    def load(cls, folder: Path, meta: Dict[str, Any]) -> "CompactBackend":
        from usearch.index import Index

        n, dim = int(meta["n_names"]), int(meta["dim"])
        gpath = folder / GRAPH_FILE
        X = load_float16(folder, n, dim)
        dims = int(meta.get("candidate_dims") or 0)  # indexes built before the projection: 0
        P = _load_projection(folder / PROJECTION_FILE, dim, dims) if dims else None
        try:
            graph = Index.restore(str(gpath), view=True)
        except (RuntimeError, ValueError, OSError) as err:
            raise _damaged(gpath, f"usearch cannot open it: {err}") from err
        if graph is None or graph.ndim != (dims or dim) or len(graph) != n:
            found = "no usearch index" if graph is None else f"{len(graph)} vectors of {graph.ndim} dims"
            raise _damaged(gpath, f"{found}, expected {n} of {dims or dim}")
        return cls(graph, X, rescore=int(meta.get("rescore", DEFAULT_RESCORE)),
                   expansion_search=int(meta.get("ef_search", DEFAULT_EXPANSION_SEARCH)), folder=folder, projection=P)


__all__ = ["CompactBackend", "GRAPH_FILE", "VECTORS_F16_FILE", "PROJECTION_FILE", "default_candidate_dims",
           "resolve_candidate_dims", "fit_projection", "CANDIDATE_DTYPES", "DEFAULT_RESCORE",
           "DEFAULT_CONNECTIVITY", "DEFAULT_EXPANSION_ADD", "DEFAULT_EXPANSION_SEARCH", "default_expansion_search"]
