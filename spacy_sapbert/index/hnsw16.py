"""The hnsw index with float16 vectors: faiss's HNSW graph over its float16 scalar quantiser (``IndexHNSWSQ``,
``QT_fp16``), about half the memory of hnswlib's graph with float32 vectors and the same top-1 names on MEDIC
(docs/footprint.md, "The graph's storage"). ``IndexSettings.hnsw_vectors`` chooses it (``"float16"``) or hnswlib
(``"float32"``, :class:`~.backends.HnswBackend`).

Saved as plain arrays, never as a faiss file (``faiss.read_index`` parses bytes from elsewhere in C++):

- ``vectors.f16.npy``: float16 ``[n, dim]``, the graph's own codes (faiss's float16 rounding);
- ``hnsw16.levels.npy``: int32 ``[n]``, each name's number of levels (faiss's convention: 1 = the base level only);
- ``hnsw16.neighbors.npy``: int32, each name's neighbour lists, level after level (``cum_nneighbor_per_level``
  slots per level, -1 padded); the entry point is ``index_meta.json``'s ``entry_point``.

A load checks every array before faiss sees it (E107 naming the file): the levels within the graph's level table,
the entry point on the top level, the neighbour ids in range and, on the upper levels, on a name that has that
level (faiss reads a neighbour's lists at the level it was reached on), the vectors finite and of unit length. The
arrays are read from the files straight into faiss's buffers: no second copy, no mapping left resident.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy
from tqdm import tqdm

from ..base.integrity import unit_norm_problem
from ..base.util import atomic_write
from ..errors import SapbertError
from .files import link_or_copy
from .graph_search import masked_search
from .ivf import _faiss  # one message (E582) for a missing faiss
from .settings import DEFAULTS, HNSW_EF_SEARCH
from .threads import FAISS_OPENMP, faiss_threads
from .two_stage import VECTORS_F16_FILE, damaged

LEVELS_FILE = "hnsw16.levels.npy"
NEIGHBORS_FILE = "hnsw16.neighbors.npy"
FILES = (VECTORS_F16_FILE, LEVELS_FILE, NEIGHBORS_FILE)
STORAGE = "float16"
_ADD_CHUNK = 10_000  # names handed to faiss per call while building (a float32 copy of a float16 input's chunk)
_CHECK_CHUNK = 1_024  # rows whose norms are checked at a time (8,192 rows of 384 took 25 MB of temporaries)
_READ_BYTES = 1 << 28  # bytes read from a file into faiss's buffer per call

Result = Tuple[numpy.ndarray, numpy.ndarray]


def _empty_index(dim: int, M: int) -> Any:
    faiss = _faiss()
    return faiss.IndexHNSWSQ(int(dim), faiss.ScalarQuantizer.QT_fp16, int(M), faiss.METRIC_INNER_PRODUCT)


def _view(faiss: Any, vector: Any, dtype: Any, count: int) -> numpy.ndarray:
    """A numpy view of a faiss vector as ``count`` items of ``dtype`` (no copy; valid while it is not resized)."""
    if count == 0:
        return numpy.zeros(0, dtype=dtype)
    native = faiss.rev_swig_ptr(vector.data(), 1).dtype  # the vector's own item type
    return faiss.rev_swig_ptr(vector.data(), int(count) * numpy.dtype(dtype).itemsize // native.itemsize).view(dtype)


class Hnsw16Backend:
    kind = "hnsw"
    files = FILES
    storage = STORAGE

    def __init__(self, index: Any, ef_search: int, *, folder: Optional[Path] = None) -> None:
        self._index = index
        # a folder known to hold exactly this graph (loaded from or saved to), with its files' sizes and mtimes then:
        # saving again links them instead of writing, and the index keeps its hash records
        self._source: Optional[Tuple[Path, List[Tuple[int, int]]]] = None
        if folder is not None:
            self._remember(folder)
        self.reused_files = False
        self.M = int(index.hnsw.nb_neighbors(1))
        self.set_ef(ef_search)

    def __reduce__(self) -> Any:
        """Pickled as its folder while that is unchanged (the other process reads it again), else as its arrays."""
        folder = self._unchanged_source()
        if folder is not None:
            return (Hnsw16Backend.load, (folder, self._meta()))
        return (Hnsw16Backend._from_arrays, ({k: v.copy() for k, v in self._arrays().items()}, self._meta()))

    @staticmethod
    def _stats(folder: Path) -> List[Tuple[int, int]]:
        return [(st.st_size, st.st_mtime_ns) for st in (os.stat(folder / name) for name in FILES)]

    def _remember(self, folder: Path) -> None:
        self._source = (folder, self._stats(folder))

    def _unchanged_source(self) -> Optional[Path]:
        if self._source is None:
            return None
        folder, stats = self._source
        try:
            return folder if self._stats(folder) == stats else None
        except OSError:
            return None

    def _meta(self) -> Dict[str, Any]:
        return {"n_names": self.n, "dim": self.dim, "M": self.M, "ef_search": self.ef_search,
                "entry_point": self.entry_point}

    @property
    def n(self) -> int:
        return int(self._index.ntotal)

    @property
    def dim(self) -> int:
        return int(self._index.d)

    @property
    def entry_point(self) -> int:
        return int(self._index.hnsw.entry_point)

    # ---- building -----------------------------------------------------------------------
    @classmethod
    def build(cls, vectors: numpy.ndarray, *, M: int, ef_construction: int, ef_search: int, num_threads: int,
              seed: int, show_progress: bool = True) -> "Hnsw16Backend":
        """The graph of ``vectors`` (float32 or float16 ``[n, dim]``, L2-normalised, may be memory-mapped: read
        :data:`_ADD_CHUNK` rows at a time) on ``num_threads`` threads (1 builds the same graph every run); ``seed``
        draws each name's levels."""
        faiss = _faiss()
        n, dim = vectors.shape
        index = _empty_index(dim, M)
        index.hnsw.efConstruction = int(ef_construction)
        index.hnsw.rng = faiss.RandomGenerator(int(seed) % (1 << 63))
        faiss.omp_set_num_threads(FAISS_OPENMP.threads(max(1, int(num_threads))))
        with tqdm(total=n, desc="hnsw (float16)", unit="name", disable=not show_progress) as bar:
            for start in range(0, n, _ADD_CHUNK):
                stop = min(n, start + _ADD_CHUNK)
                index.add(numpy.ascontiguousarray(vectors[start:stop], dtype=numpy.float32))
                bar.update(stop - start)
        return cls(index, ef_search)

    # ---- searching ----------------------------------------------------------------------
    def set_ef(self, ef: int) -> None:
        self.ef_search = int(ef)

    def search(self, vectors: numpy.ndarray, k: int, row_mask: Optional[numpy.ndarray]) -> Result:
        if row_mask is None:
            return self._knn(vectors, k)
        return masked_search(vectors, k, row_mask, n_rows=self.n, base_depth=k, candidates=self._allowed_candidates,
                             gather=self.vectors)

    def _knn(self, vectors: numpy.ndarray, k: int) -> Result:
        faiss = _faiss()
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(self.ef_search, int(k))
        faiss.omp_set_num_threads(faiss_threads())
        scores, rows = self._index.search(numpy.ascontiguousarray(vectors, dtype=numpy.float32), int(k), params=params)
        rows = numpy.asarray(rows, dtype=numpy.int64)
        scores = numpy.asarray(scores, dtype=numpy.float32)
        missing = rows < 0
        if missing.any():
            scores[missing] = -numpy.inf
        return rows, scores

    def _allowed_candidates(self, vectors: numpy.ndarray, depth: int, row_mask: numpy.ndarray) -> Result:
        rows, scores = self._knn(vectors, depth)
        drop = (rows < 0) | ~row_mask[numpy.maximum(rows, 0)]
        rows[drop], scores[drop] = -1, -numpy.inf
        return rows, scores

    def vectors(self, rows: Any) -> numpy.ndarray:
        """float32 copies of ``rows`` (a list or an int array) of the graph's float16 vectors."""
        return numpy.asarray(self._vectors16()[numpy.asarray(rows, dtype=numpy.int64)], dtype=numpy.float32)

    def _vectors16(self) -> numpy.ndarray:
        storage = _faiss().downcast_index(self._index.storage)
        return _view(_faiss(), storage.codes, numpy.float16, self.n * self.dim).reshape(self.n, self.dim)

    # ---- serialisation ------------------------------------------------------------------
    def _arrays(self) -> Dict[str, numpy.ndarray]:
        """Views of faiss's arrays (the files of :data:`FILES`)."""
        faiss, hnsw = _faiss(), self._index.hnsw
        return {VECTORS_F16_FILE: self._vectors16(),
                LEVELS_FILE: _view(faiss, hnsw.levels, numpy.int32, hnsw.levels.size()),
                NEIGHBORS_FILE: _view(faiss, hnsw.neighbors, numpy.int32, hnsw.neighbors.size())}

    def save(self, folder: Path) -> List[str]:
        """Write the arrays; a graph loaded from (or saved to) a folder whose files are unchanged since (sizes and
        mtimes) is linked from there instead, and ``reused_files`` says so (their hashes still hold)."""
        source = self._unchanged_source()
        self.reused_files = source is not None
        if source is not None:
            if folder.resolve() != source.resolve():
                for name in FILES:
                    link_or_copy(source / name, folder / name)
            return list(FILES)
        for name, array in self._arrays().items():
            with atomic_write(folder / name, "wb") as fh:
                numpy.save(fh, array, allow_pickle=False)
        self._remember(folder)
        return list(FILES)

    def meta_fields(self) -> Dict[str, Any]:
        """What ``index_meta.json`` records of the graph besides its files."""
        return {"vectors": STORAGE, "M": self.M, "entry_point": self.entry_point}

    @classmethod
    def load(cls, folder: Path, meta: Dict[str, Any]) -> "Hnsw16Backend":
        n, dim = int(meta["n_names"]), int(meta["dim"])
        index = _empty_index(dim, int(meta.get("M", DEFAULTS.M)))
        _fill(index, folder, n, dim, meta.get("entry_point"), _read_into)
        return cls(index, int(meta.get("ef_search", HNSW_EF_SEARCH)), folder=folder)

    @classmethod
    def _from_arrays(cls, arrays: Dict[str, numpy.ndarray], meta: Dict[str, Any]) -> "Hnsw16Backend":
        n, dim = int(meta["n_names"]), int(meta["dim"])
        index = _empty_index(dim, int(meta["M"]))

        def copy_into(name: Path, dtype: Any, shape: Tuple[int, ...], dest: numpy.ndarray) -> None:
            src = arrays[name.name]
            if src.dtype != dtype or src.shape != shape:
                raise damaged(name, f"{src.shape} {src.dtype}, expected {shape} {numpy.dtype(dtype).name}")
            dest.reshape(shape)[...] = src

        _fill(index, Path("<memory>"), n, dim, meta["entry_point"], copy_into)
        return cls(index, int(meta["ef_search"]))


def _read_into(path: Path, dtype: Any, shape: Tuple[int, ...], dest: numpy.ndarray) -> None:
    """Read the ``.npy`` at ``path``, which must hold ``shape`` of little-endian ``dtype`` in C order, into ``dest``
    (a view of a faiss buffer of that many items): E107 for another header, size or a short read."""
    expected = numpy.dtype(dtype).newbyteorder("<")
    try:
        with open(path, "rb") as fh:
            version = numpy.lib.format.read_magic(fh)
            header = {(1, 0): numpy.lib.format.read_array_header_1_0,
                      (2, 0): numpy.lib.format.read_array_header_2_0}.get(version)
            if header is None:
                raise damaged(path, f".npy format version {version}, expected 1.0 or 2.0")
            found_shape, fortran, found = header(fh)  # the header only: no pickle, no data
            offset = fh.tell()
            if tuple(found_shape) != tuple(shape) or fortran or found != expected:
                raise damaged(path, f"{tuple(found_shape)} {found}, expected {tuple(shape)} {expected.name}")
            if os.fstat(fh.fileno()).st_size != offset + dest.nbytes:
                raise damaged(path, f"{os.fstat(fh.fileno()).st_size} bytes, expected {offset + dest.nbytes}")
            view = memoryview(dest.reshape(-1).view(numpy.uint8))  # flat bytes (dest is contiguous: no copy)
            for start in range(0, dest.nbytes, _READ_BYTES):  # a read(2) returns at most ~2 GiB at a time
                part = view[start:start + _READ_BYTES]
                if fh.readinto(part) != part.nbytes:
                    raise damaged(path, "truncated")
    except SapbertError:  # (E107 is an OSError too: raised above, not wrapped again)
        raise
    except (OSError, ValueError) as err:
        raise damaged(path, str(err) or type(err).__name__) from err


def _fill(index: Any, folder: Path, n: int, dim: int, entry: Any, read: Any) -> None:
    """Give ``index`` (an empty ``IndexHNSWSQ`` of the graph's degree) the graph of ``folder``'s arrays, each checked
    before faiss reads it (see the module docstring); ``read(path, dtype, shape, dest)`` fills one array."""
    faiss, hnsw = _faiss(), index.hnsw
    cum = faiss.vector_to_array(hnsw.cum_nneighbor_per_level).astype(numpy.int64)  # slots below each level
    levels = numpy.empty(n, dtype=numpy.int32)
    read(folder / LEVELS_FILE, numpy.int32, (n,), levels)
    top = int(levels.max()) if n else 0
    if n and (int(levels.min()) < 1 or top > len(cum) - 1):
        raise damaged(folder / LEVELS_FILE, f"levels outside 1..{len(cum) - 1}")
    if not isinstance(entry, int) or isinstance(entry, bool) or not 0 <= entry < n or levels[entry] != top:
        raise damaged(folder / LEVELS_FILE, f"entry point {entry!r} is not a name on the top level {top}")
    offsets = numpy.zeros(n + 1, dtype=numpy.uint64)
    numpy.cumsum(cum[levels], out=offsets[1:])
    total = int(offsets[-1])
    hnsw.neighbors.resize(total)
    neighbors = _view(faiss, hnsw.neighbors, numpy.int32, total)
    read(folder / NEIGHBORS_FILE, numpy.int32, (total,), neighbors)
    _check_links(folder / NEIGHBORS_FILE, neighbors, levels, offsets, cum, n)
    storage = faiss.downcast_index(index.storage)
    storage.codes.resize(n * dim * 2)
    vectors = _view(faiss, storage.codes, numpy.float16, n * dim).reshape(n, dim)
    read(folder / VECTORS_F16_FILE, numpy.float16, (n, dim), vectors)
    quantizer = storage.sq  # faiss's float16 decoder (vectorised), the codes as faiss reads them: ~2x numpy's cast

    def to_float32(block: numpy.ndarray) -> numpy.ndarray:
        return quantizer.decode(numpy.ascontiguousarray(block).view(numpy.uint8))

    problem = unit_norm_problem(vectors, rows_per_block=_CHECK_CHUNK, to_float32=to_float32)
    if problem is not None:
        raise damaged(folder / VECTORS_F16_FILE, f"stored vectors are not unit length: {problem}")
    faiss.copy_array_to_vector(levels, hnsw.levels)
    faiss.copy_array_to_vector(offsets, hnsw.offsets)
    hnsw.entry_point, hnsw.max_level = int(entry), top - 1
    storage.ntotal = index.ntotal = n


def _check_links(path: Path, neighbors: numpy.ndarray, levels: numpy.ndarray, offsets: numpy.ndarray,
                 cum: numpy.ndarray, n: int) -> None:
    """Every used slot holds a name (-1 = unused); a neighbour on level ``l >= 1`` has more than ``l`` levels."""
    if neighbors.size and (int(neighbors.min()) < -1 or int(neighbors.max()) >= n):
        raise damaged(path, "a neighbour id is out of range")
    for level in range(1, int(levels.max()) if n else 0):
        nodes = numpy.flatnonzero(levels > level)
        width = int(cum[level + 1] - cum[level])
        slots = (offsets[nodes].astype(numpy.int64) + int(cum[level]))[:, None] + numpy.arange(width)[None, :]
        ids = neighbors[slots]
        ids = ids[ids >= 0]
        if ids.size and (levels[ids] <= level).any():
            raise damaged(path, f"a level-{level} neighbour is a name without that level")


__all__ = ["Hnsw16Backend", "FILES", "LEVELS_FILE", "NEIGHBORS_FILE", "STORAGE"]
