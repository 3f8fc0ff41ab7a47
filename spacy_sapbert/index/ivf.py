"""The IVF index for KBs of millions of names: faiss inverted lists of 4-bit fast-scan product codes as the
candidate stage, re-scored exactly against memory-mapped float16 vectors (``two_stage.py``).

1. Candidates: faiss ``IVF{lists},PQ{m}x4fsr`` (inner product): the names are assigned to ``lists``
   k-means cells and stored as the product codes (``m`` = half the dimensions, 16 centroids a
   sub-quantizer, 4 bits) of their residual; a search scans the ``probes`` cells nearest the query with
   SIMD table look-ups and returns the ``rescore`` best rows. Built in minutes where a graph takes hours
   (``umls_scale_sweep`` ``ivfpq_*``: 95 s against 6,240 s at 3M names on 2 cores), and at 1M and 3M names it
   answers 2-3.6x the graph's queries/s at equal or better recall on the spectrum-matched vectors.
2. Re-scoring: the ``rescore`` candidates against ``vectors.f16.npy`` (memory-mapped): the searching,
   filtering, re-scoring and saving this class inherits from
   :class:`~spacy_sapbert.index.two_stage.RescoredBackend`.

The codes live in RAM (``m`` bytes a name: 192 at 384 dimensions, ~1.9 GB at 10M x 768). They are saved as
plain arrays (no faiss file: ``faiss.read_index`` would parse bytes from elsewhere in C++) and handed back to
faiss through its API after their shapes, ranges and sizes are checked: cell centroids, the sub-quantizers'
centroids, and per cell its row ids and packed codes (any byte is a valid pair of 4-bit codes).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy
from tqdm import tqdm

from ..errors import ConfigError, Errors
from ..base.integrity import NPY_READ_ERRORS
from ..base.util import atomic_write
from .files import write_npy
from .settings import IVF_RESCORE, IndexSettings
from .threads import faiss_threads
from .two_stage import VECTORS_F16_FILE, RescoredBackend, load_float16
from .two_stage import damaged as _damaged

CENTROIDS_FILE = "ivf.centroids.npy"  # float32 [lists, dim]
CODEBOOK_FILE = "ivf.codebook.npy"  # float32 [m * 16 * dim / m]: the sub-quantizers' centroids
IDS_FILE = "ivf.ids.npy"  # int64 [n]: the rows of each cell, cell after cell
OFFSETS_FILE = "ivf.offsets.npy"  # int64 [lists + 1]: cell i holds ids[offsets[i]:offsets[i + 1]]
CODES_FILE = "ivf.codes.npy"  # uint8: each cell's packed codes, its size rounded up to a block of 32 rows
ARRAY_FILES = (CENTROIDS_FILE, CODEBOOK_FILE, IDS_FILE, OFFSETS_FILE, CODES_FILE)
BLOCK = 32  # rows per packed block of fast-scan codes (faiss's bbs)
TRAIN_SAMPLE = 100_000  # names the cells and codebooks are trained on (as measured)
DEFAULT_IVF_RESCORE = IVF_RESCORE  # umls_scale_sweep ivfpq_*: 512 rows keep recall@5 >= 0.99 at 1M and 3M
HUGE_KB_NAMES = 2_000_000
MIN_NAMES = 64  # 16 code centroids per sub-quantizer and at least 8 names a cell need some names to train on


def default_lists(n_names: int) -> int:
    """Cells: the power of two nearest 4 * sqrt(names) (1M: 4096, 3M: 8192, 10M: 16384), at most one per
    8 names."""
    lists = 1 << max(0, round(math.log2(max(1.0, 4.0 * math.sqrt(n_names)))))
    return max(1, min(lists, n_names // 8))


def default_probes(n_names: int, lists: int) -> int:
    """Cells scanned per query: half of them below :data:`HUGE_KB_NAMES` names (1M: 2048 of 4096 gave
    0.9985 / 0.9983 recall@1 / @5), a quarter from there (3M: 2048 of 8192 gave 0.9975 / 0.994)."""
    return max(1, lists // (4 if n_names >= HUGE_KB_NAMES else 2))


def sub_quantizers(dim: int) -> int:
    """Product-code sub-quantizers: two dimensions each (one each for an odd dimension)."""
    return dim // 2 if dim % 2 == 0 else dim


def check_settings(n_names: int, lists: Optional[int]) -> int:
    """The cells of an ivf index of ``n_names`` names (``lists``, or the default), checked: E583, E584."""
    if n_names < MIN_NAMES:
        raise ConfigError(Errors.E583.format(minimum=MIN_NAMES, n=n_names))
    lists = default_lists(n_names) if lists is None else lists
    if isinstance(lists, bool) or not isinstance(lists, int) or not 1 <= lists <= n_names // 8:
        raise ConfigError(Errors.E584.format(what="lists", minimum=1, maximum=n_names // 8, value=lists))
    return lists


def _spec(lists: int, dim: int) -> str:
    return f"IVF{lists},PQ{sub_quantizers(dim)}x4fsr"


def _faiss() -> Any:
    try:
        import faiss  # lazy: faiss
    except ImportError as err:
        raise ConfigError(Errors.E582.format(reason=str(err))) from err
    return faiss


class IvfBackend(RescoredBackend):
    kind = "ivf"
    files = (VECTORS_F16_FILE, *ARRAY_FILES)

    def __init__(self, index: Any, vectors16: numpy.ndarray, *, rescore: int, probes: int,
                 folder: Optional[Path] = None) -> None:
        super().__init__(vectors16, rescore=rescore, folder=folder)
        self._ivf = index
        self.lists = int(index.nlist)
        self.set_ef(probes)

    def __reduce__(self) -> Any:
        """Pickled as its folder (the other process reads it again), or whole when built in memory."""
        if self._folder is not None:
            meta = {"n_names": len(self._X), "dim": self._X.shape[1], "rescore": self.rescore,
                    "ef_search": self.ef_search}
            return (IvfBackend.load, (self._folder, meta))
        return (IvfBackend._from_arrays, (self._arrays(), numpy.asarray(self._X), self.rescore, self.ef_search))

    @classmethod
    def _from_arrays(cls, arrays: Dict[str, numpy.ndarray], X: numpy.ndarray, rescore: int, probes: int,
                     folder: Optional[Path] = None) -> "IvfBackend":
        return cls(_rebuild(arrays, X.shape[0], X.shape[1], folder), X, rescore=rescore, probes=probes, folder=folder)

    # ---- building -----------------------------------------------------------------------
    @classmethod
    def build(cls, vectors: numpy.ndarray, settings: IndexSettings, *, show_progress: bool = True,
              chunk_size: int = 65_536) -> "IvfBackend":
        """Index ``vectors`` (float16 or float32 ``[n, dim]``, may be a memory map: read chunk by chunk) with
        ``settings.lists`` cells, ``settings.ef_search`` of them scanned per query and ``settings.rescore`` rows
        re-scored (None: the defaults), on ``settings.num_threads`` threads: cells and codebooks trained on up to
        :data:`TRAIN_SAMPLE` names drawn with ``settings.seed``."""
        n, dim = vectors.shape
        lists = check_settings(n, settings.lists)
        seed, num_threads, probes = settings.seed, settings.num_threads, settings.ef_search
        rescore = DEFAULT_IVF_RESCORE if settings.rescore is None else settings.rescore
        faiss = _faiss()
        index = faiss.index_factory(dim, _spec(lists, dim), faiss.METRIC_INNER_PRODUCT)
        index.cp.min_points_per_centroid = 1  # small samples are fine: no warning per training
        index.cp.seed = int(seed)
        faiss.omp_set_num_threads(max(1, int(num_threads)))
        rows = numpy.sort(numpy.random.default_rng(seed).choice(n, min(n, TRAIN_SAMPLE), replace=False))
        index.train(numpy.ascontiguousarray(vectors[rows], dtype=numpy.float32))
        with tqdm(total=n, desc="ivf", unit="name", disable=not show_progress) as bar:
            for start in range(0, n, chunk_size):
                stop = min(n, start + chunk_size)
                index.add(numpy.ascontiguousarray(vectors[start:stop], dtype=numpy.float32))  # ids: row numbers
                bar.update(stop - start)
        X16 = vectors if vectors.dtype == numpy.float16 else numpy.asarray(vectors, dtype=numpy.float16)
        return cls(index, X16, rescore=rescore, probes=default_probes(n, lists) if probes is None else probes)

    # ---- searching ----------------------------------------------------------------------
    def set_ef(self, ef: int) -> None:
        """The cells scanned per query (the index's ``ef_search``; more than there are: all of them)."""
        self.ef_search = int(ef)
        self._ivf.nprobe = max(1, min(self.ef_search, self.lists))

    def _candidates(self, vectors: numpy.ndarray, depth: int) -> numpy.ndarray:
        """int64 ``[n, depth]`` candidate rows, -1 where fewer were found."""
        n = len(self._X)
        depth = min(depth, n)
        _faiss().omp_set_num_threads(faiss_threads())
        _, rows = self._ivf.search(numpy.ascontiguousarray(vectors, dtype=numpy.float32), depth)
        rows = numpy.asarray(rows, dtype=numpy.int64)
        if (rows >= n).any() or (rows < -1).any():
            raise _damaged(self._path(IDS_FILE), "a candidate row is out of range: the file is damaged")
        return rows

    # ---- serialisation ------------------------------------------------------------------
    def _sizes(self) -> numpy.ndarray:
        return numpy.array([self._ivf.invlists.list_size(i) for i in range(self.lists)], dtype=numpy.int64)

    def _small_arrays(self, sizes: numpy.ndarray) -> Dict[str, numpy.ndarray]:
        """Cell centroids, the sub-quantizers' centroids and the cell offsets."""
        faiss = _faiss()
        return {CENTROIDS_FILE: self._ivf.quantizer.reconstruct_n(0, self.lists),
                CODEBOOK_FILE: faiss.vector_to_array(self._ivf.pq.centroids),
                OFFSETS_FILE: numpy.concatenate([[0], numpy.cumsum(sizes)]).astype(numpy.int64)}

    def _cells(self, sizes: numpy.ndarray, codes: bool) -> Iterator[numpy.ndarray]:
        """The row ids (or, with ``codes``, the packed codes) of each non-empty cell, in cell order, copied out
        of faiss one cell at a time."""
        faiss = _faiss()
        invlists, half = self._ivf.invlists, int(self._ivf.M2) // 2
        for i in numpy.flatnonzero(sizes).tolist():
            size = int(sizes[i])
            if codes:
                yield faiss.rev_swig_ptr(invlists.get_codes(i), int(_code_bytes(size, half))).copy()
            else:
                yield faiss.rev_swig_ptr(invlists.get_ids(i), size).copy()

    def _long_arrays(self, sizes: numpy.ndarray) -> Dict[str, Tuple[Any, int]]:
        """dtype and length of the ids and codes files."""
        half = int(self._ivf.M2) // 2
        return {IDS_FILE: (numpy.int64, int(sizes.sum())),
                CODES_FILE: (numpy.uint8, int(_code_bytes(sizes, half).sum()))}

    def _arrays(self) -> Dict[str, numpy.ndarray]:
        """The index as plain arrays in memory (the files of :data:`ARRAY_FILES`)."""
        sizes = self._sizes()
        return {**self._small_arrays(sizes),
                **{name: numpy.concatenate([numpy.zeros(0, dtype), *self._cells(sizes, codes=name == CODES_FILE)])
                   for name, (dtype, _length) in self._long_arrays(sizes).items()}}

    def _files(self) -> List[str]:
        return [VECTORS_F16_FILE, *ARRAY_FILES]

    def _save_candidates(self, folder: Path) -> None:
        """Write the index's arrays into ``folder`` (``save``, inherited, writes the float16 vectors); the row ids
        and codes cell by cell into memory-mapped files, so that saving holds no second copy of the codes."""
        sizes = self._sizes()
        for name, array in self._small_arrays(sizes).items():
            with atomic_write(folder / name, "wb") as fh:
                numpy.save(fh, array, allow_pickle=False)
        for name, (dtype, length) in self._long_arrays(sizes).items():
            write_npy(folder / name, dtype, (length,), self._cells(sizes, codes=name == CODES_FILE))

    @classmethod
    def load(cls, folder: Path, meta: Dict[str, Any]) -> "IvfBackend":
        n, dim = int(meta["n_names"]), int(meta["dim"])
        X = load_float16(folder, n, dim)
        arrays = {}
        for name in ARRAY_FILES:
            try:  # the codes stay memory-mapped: faiss copies them cell by cell
                arrays[name] = numpy.load(folder / name, mmap_mode="r" if name == CODES_FILE else None,
                                          allow_pickle=False)
            except NPY_READ_ERRORS as err:
                raise _damaged(folder / name, str(err) or type(err).__name__) from err
        return cls._from_arrays(arrays, X, int(meta.get("rescore", DEFAULT_IVF_RESCORE)),
                                int(meta.get("ef_search", 1)), folder=folder)


def _code_bytes(sizes: Any, half: int) -> Any:
    """Bytes of packed codes of cells of ``sizes`` rows: whole blocks of :data:`BLOCK` rows, ``half`` bytes a row
    (half the padded sub-quantizer count: two 4-bit codes a byte)."""
    return -(-sizes // BLOCK) * BLOCK * half


def _check(arrays: Dict[str, numpy.ndarray], n: int, dim: int, lists: int, half: int,
           folder: Optional[Path]) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Shapes, dtypes and ranges of the arrays (E107 naming the file); the per-cell sizes and code offsets."""
    where = folder if folder is not None else Path("<memory>")
    expect = {CENTROIDS_FILE: (numpy.float32, (lists, dim)), CODEBOOK_FILE: (numpy.float32, (16 * dim,)),
              IDS_FILE: (numpy.int64, (n,)), OFFSETS_FILE: (numpy.int64, (lists + 1,))}
    for name, (dtype, shape) in expect.items():
        a = arrays[name]
        if a.dtype != dtype or a.shape != shape:
            raise _damaged(where / name, f"{a.shape} {a.dtype}, expected {shape} {numpy.dtype(dtype).name}")
    for name in (CENTROIDS_FILE, CODEBOOK_FILE):
        if not numpy.isfinite(arrays[name]).all():
            raise _damaged(where / name, "values that are not finite")
    offsets, ids = arrays[OFFSETS_FILE], arrays[IDS_FILE]
    sizes = numpy.diff(offsets)
    if offsets[0] != 0 or offsets[-1] != n or (sizes < 0).any():
        raise _damaged(where / OFFSETS_FILE, "cell offsets that do not cover the names once")
    if n and (ids.min() < 0 or ids.max() >= n or numpy.bincount(ids, minlength=n).max() != 1):
        raise _damaged(where / IDS_FILE, "row ids that are out of range or repeated")
    code_sizes = _code_bytes(sizes, half)
    codes = arrays[CODES_FILE]
    if codes.dtype != numpy.uint8 or codes.ndim != 1 or codes.shape[0] != int(code_sizes.sum()):
        raise _damaged(where / CODES_FILE, f"{codes.shape} {codes.dtype}, expected ({int(code_sizes.sum())},) uint8")
    return sizes, numpy.concatenate([[0], numpy.cumsum(code_sizes)])


def _rebuild(arrays: Dict[str, numpy.ndarray], n: int, dim: int, folder: Optional[Path]) -> Any:
    """A faiss index from checked arrays, through faiss's API (no faiss file is parsed)."""
    faiss = _faiss()
    lists = int(arrays[OFFSETS_FILE].shape[0]) - 1 if arrays[OFFSETS_FILE].ndim == 1 else 0
    if lists < 1:
        raise _damaged((folder or Path("<memory>")) / OFFSETS_FILE, "no cells")
    index = faiss.index_factory(dim, _spec(lists, dim), faiss.METRIC_INNER_PRODUCT)
    sizes, code_at = _check(arrays, n, dim, lists, int(index.M2) // 2, folder)
    index.quantizer.add(numpy.ascontiguousarray(arrays[CENTROIDS_FILE]))
    faiss.copy_array_to_vector(numpy.ascontiguousarray(arrays[CODEBOOK_FILE]), index.pq.centroids)
    index.is_trained = True
    ids, codes = arrays[IDS_FILE], arrays[CODES_FILE]
    offsets = arrays[OFFSETS_FILE]
    for i in numpy.flatnonzero(sizes).tolist():
        cell_ids = numpy.ascontiguousarray(ids[offsets[i]:offsets[i + 1]])
        cell_codes = numpy.ascontiguousarray(codes[code_at[i]:code_at[i + 1]])
        index.invlists.add_entries(i, int(sizes[i]), faiss.swig_ptr(cell_ids), faiss.swig_ptr(cell_codes))
    index.ntotal = n
    return index


__all__ = ["IvfBackend", "ARRAY_FILES", "DEFAULT_IVF_RESCORE", "default_lists", "default_probes", "sub_quantizers",
           "check_settings"]
