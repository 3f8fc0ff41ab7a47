"""Search back-ends of :class:`~spacy_sapbert.index.ConceptIndex`: nearest name rows for query vectors.

Every back-end answers ``search(vectors, k, row_mask) -> (rows int64 [n, k'], scores float32 [n, k'])``
best first (``k' <= k``; -1 / -inf where fewer rows exist), ``vectors(rows)``, ``save(folder)`` (returns
the file names written) and ``load(folder, meta)``. Scores are inner products of L2-normalised vectors.

- :class:`ExactBackend`: one ``Q @ X.T`` + ``topk`` in torch; small KBs.
- :class:`HnswBackend`: hnswlib, float32, read whole into RAM (``hnsw_vectors = "float32"``); mid-sized KBs get
  faiss's graph over float16 vectors by default (``hnsw16.Hnsw16Backend``).

Filters go through ``graph_search.masked_search`` (graph back-ends) or a mask on the scores (exact).
- ``ivf.IvfBackend``: faiss fast-scan codes + exact re-scoring against memory-mapped float16 vectors
  (``two_stage.py``); KBs of millions of names (see ``ivf.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy

from ..base.integrity import NPY_READ_ERRORS, unit_norm_problem
from ..base.util import atomic_write
from ..errors import Errors, MissingInputError
from .files import link_or_copy
from .graph_search import exact_topk, masked_search
from .hnsw_file import StoredVectors, check_hnsw_file
from .settings import HNSW_EF_SEARCH
from .threads import search_threads

HNSW_FILE = "names.hnsw"
VECTORS_FILE = "vectors.npy"

Result = Tuple[numpy.ndarray, numpy.ndarray]
# an hnsw index reads stored vectors from its file (HnswBackend.vectors) once a request asks for this many rows:
# making the reader reads every label of the file (0.08 s at MEDIC's 75k names), which a request for a few rows
# (the known names of a document's mentions) would pay on the first document for ~100 us a row saved
STORED_READ_MIN_ROWS = 256


class ExactBackend:
    kind = "exact"
    files = (VECTORS_FILE,)  # what a load reads (verify checks the meta records them)

    def __init__(self, vectors: numpy.ndarray) -> None:
        self._X = numpy.ascontiguousarray(vectors, dtype=numpy.float32)

    def search(self, vectors: numpy.ndarray, k: int, row_mask: Optional[numpy.ndarray]) -> Result:
        return exact_topk(self._X, vectors, k, row_mask)

    def vectors(self, rows: Any) -> numpy.ndarray:
        return self._X[numpy.asarray(rows, dtype=numpy.int64)]  # fancy indexing: a copy

    def set_ef(self, ef: int) -> None:
        pass

    def save(self, folder: Path) -> List[str]:
        with atomic_write(folder / VECTORS_FILE, "wb") as fh:
            numpy.save(fh, self._X)
        return [VECTORS_FILE]

    @classmethod
    def load(cls, folder: Path, meta: Dict[str, Any]) -> "ExactBackend":
        path = folder / VECTORS_FILE
        try:  # mapped first: a header claiming a huge shape is refused below, not allocated
            vectors = numpy.load(path, mmap_mode="r", allow_pickle=False)
        except NPY_READ_ERRORS as err:
            raise MissingInputError(Errors.E107.format(path=path, reason=str(err) or type(err).__name__)) from err
        if vectors.shape != (int(meta["n_names"]), int(meta["dim"])) or vectors.dtype != numpy.float32:
            raise MissingInputError(Errors.E107.format(path=path, reason=f"shape {vectors.shape} {vectors.dtype}"))
        vectors = numpy.array(vectors)  # searched in RAM
        problem = unit_norm_problem(vectors)  # all rows: the array is in RAM anyway (~5 ms per 1M floats)
        if problem is not None:
            raise MissingInputError(Errors.E107.format(path=path, reason=f"stored vectors are not unit length: {problem}"))
        return cls(vectors)


class HnswBackend:
    kind = "hnsw"
    files = (HNSW_FILE,)

    def __init__(self, hnsw: Any, ef_search: int, *, source: Optional[Path] = None) -> None:
        self._hnsw = hnsw
        self.ef_search = ef_search
        hnsw.set_ef(ef_search)
        # a file known to hold exactly this graph (loaded from or saved to), with its size and mtime then:
        # saving again links it instead of re-serialising, and the index keeps its hash records
        self._source: Optional[Tuple[Path, int, int]] = None
        if source is not None:
            self._remember(source)
        self.reused_files = False
        self._stored: Optional[Tuple[Any, Optional[StoredVectors]]] = None  # (source it was read from, reader)

    def _remember(self, path: Path) -> None:
        st = path.stat()
        self._source = (path, st.st_size, st.st_mtime_ns)

    def _source_unchanged(self) -> bool:
        if self._source is None:
            return False
        path, size, mtime = self._source
        try:
            st = path.stat()
        except OSError:
            return False
        return st.st_size == size and st.st_mtime_ns == mtime

    def set_ef(self, ef: int) -> None:
        self.ef_search = ef
        self._hnsw.set_ef(ef)

    def search(self, vectors: numpy.ndarray, k: int, row_mask: Optional[numpy.ndarray]) -> Result:
        if row_mask is None:
            return self._knn(vectors, k)
        return masked_search(vectors, k, row_mask, n_rows=self._hnsw.get_current_count(), base_depth=k,
                             candidates=self._allowed_candidates, gather=self.vectors)

    def _knn(self, vectors: numpy.ndarray, k: int) -> Result:
        hnsw = self._hnsw
        hnsw.set_ef(max(self.ef_search, k))
        try:
            labels, dist = hnsw.knn_query(vectors, k=k, num_threads=search_threads() or -1)
        finally:
            hnsw.set_ef(self.ef_search)
        return labels.astype(numpy.int64), (1.0 - dist).astype(numpy.float32)

    def _allowed_candidates(self, vectors: numpy.ndarray, depth: int, row_mask: numpy.ndarray) -> Result:
        rows, scores = self._knn(vectors, depth)
        drop = ~row_mask[rows]
        rows[drop], scores[drop] = -1, -numpy.inf
        return rows, scores

    def vectors(self, rows: Any) -> numpy.ndarray:
        """float32 copies of ``rows`` (a list or an int array): read from the graph's file while it is
        unchanged since loaded or saved (the same bytes, ~10x faster: :class:`~.hnsw_file.StoredVectors`),
        else from hnswlib; from hnswlib too until a request of :data:`STORED_READ_MIN_ROWS` rows makes the reader."""
        wanted = numpy.asarray(rows, dtype=numpy.int64)
        few = self._stored is None and len(wanted) < STORED_READ_MIN_ROWS
        stored = None if few else self._stored_vectors()
        if stored is not None and (not len(wanted) or (wanted.min() >= 0 and wanted.max() < stored.n)):
            try:  # (a row out of range: hnswlib's error, as before)
                return stored.read(wanted)
            except (OSError, MissingInputError):  # the file changed under us: hnswlib's copy is the graph
                self._stored = (self._source, None)
        return numpy.asarray(self._hnsw.get_items(numpy.asarray(rows).tolist(), return_type="numpy"),
                             dtype=numpy.float32)

    def _stored_vectors(self) -> Optional[StoredVectors]:
        """The reader of the source file when it still holds this graph (size and mtime), else None."""
        if not self._source_unchanged():
            return None
        if self._stored is None or self._stored[0] != self._source:
            try:
                reader: Optional[StoredVectors] = StoredVectors(self._source[0], n=self._hnsw.get_current_count(),
                                                                dim=self._hnsw.dim)  # type: ignore[index]
            except (OSError, MissingInputError):
                reader = None
            self._stored = (self._source, reader)
        return self._stored[1]

    def save(self, folder: Path) -> List[str]:
        """Write ``names.hnsw``; a graph loaded from (or saved to) a file that is unchanged since (same
        size and mtime) is linked from it instead, and ``reused_files`` says so (its hashes still hold)."""
        dst = folder / HNSW_FILE
        self.reused_files = self._source_unchanged()
        if self.reused_files:
            src = self._source[0]  # type: ignore[index]
            if src.resolve() != dst.resolve():
                link_or_copy(src, dst)
            return [HNSW_FILE]
        tmp = folder / f".{HNSW_FILE}.tmp"
        self._hnsw.save_index(str(tmp))
        tmp.replace(dst)
        self._remember(dst)
        return [HNSW_FILE]

    @classmethod
    def load(cls, folder: Path, meta: Dict[str, Any]) -> "HnswBackend":
        import hnswlib

        path = folder / HNSW_FILE
        n, dim = int(meta["n_names"]), int(meta["dim"])
        # hnswlib trusts its file: out-of-range neighbour ids segfault at the first query and damaged
        # vectors give scores far outside [-1, 1]; both are checked before hnswlib sees the file
        check_hnsw_file(path, n=n, dim=dim)
        hnsw = hnswlib.Index(space="ip", dim=dim)
        try:
            hnsw.load_index(str(path), max_elements=n)
        except (RuntimeError, ValueError, MemoryError) as err:
            raise MissingInputError(Errors.E107.format(path=path, reason=str(err))) from err
        if hnsw.get_current_count() != n:
            raise MissingInputError(Errors.E107.format(
                path=path, reason=f"{hnsw.get_current_count()} vectors, expected {n}"))
        return cls(hnsw, int(meta.get("ef_search", HNSW_EF_SEARCH)), source=path)


__all__ = ["ExactBackend", "HnswBackend", "exact_topk", "HNSW_FILE", "VECTORS_FILE"]
