"""Character n-gram tf-idf over a KB's names: the sparse half of hybrid (sparse + dense) linking.

:class:`SparseIndex` fits scikit-learn's ``TfidfVectorizer`` (``char_wb`` n-grams, smoothed idf, l2
norm) over the KB's normalised names; row ``i`` is ``kb.names[i]``, the dense index's row order. Only
the *feature-major* (inverted) matrix is kept: per n-gram, the names holding it and their weights, so
the best names of a query are found by reading the posting lists of the query's few n-grams. The
sparse score of a given name (a dense candidate) is computed from its string, transformed at query time.

Saved beside the dense index (same folder) without pickle: ``sparse_vocab.json`` (the n-grams, in
column order), ``sparse_idf.npy``, ``sparse_indptr.npy`` / ``sparse_indices.npy`` / ``sparse_data.npy``
(the CSR arrays, memory-mapped at load), and ``sparse_meta.json`` last (settings, the KB checksum, the
dense index's encoder fingerprint, each file's size and hashes). The vectorizer is rebuilt at load
from the vocabulary and idf. A file set built for another KB or beside another encoder's index is
refused (E781), a damaged or truncated one too (E551 / E782).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ..errors import ConfigError, Errors, IncompatibleError, IntegrityError, MissingInputError
from ..base.integrity import check_files, file_records
from ..base.util import PathLike, atomic_write, ensure_path, get_logger
from .threads import SPARSE_DOT_TOPN, search_threads

logger = get_logger("index.sparse")

SPARSE_META = "sparse_meta.json"
VOCAB_FILE = "sparse_vocab.json"
ARRAY_FILES = ("sparse_idf.npy", "sparse_indptr.npy", "sparse_indices.npy", "sparse_data.npy")
SPARSE_FORMAT = 1
ANALYZERS = ("char_wb", "char")
DEFAULT_ANALYZER = "char_wb"
DEFAULT_NGRAM_RANGE: Tuple[int, int] = (2, 3)  # picked on NCBI train (benchmarks/hybrid_unseen.py --ngram-grid)
MAX_NGRAM = 6
_PAIRS_PER_BLOCK = 65_536  # (query, candidate name) pairs whose sparse scores one block computes
_SCORES_PER_CHUNK = 16_000_000  # query x name scores a search chunk may hold (a query touches up to every name)
# above this many names the sparse side only re-scores the dense candidates (no sparse top-k search):
# a query's char n-grams then read millions of postings (benchmarks/hybrid_unseen.py --scale, docs/scale.md)
SEARCH_MAX_NAMES = 1_000_000
# up to this many nonzeros (~8 bytes each) the name-major copy is kept in RAM for pair scores; above, the
# candidate names' strings are transformed (a UMLS-sized matrix stays memory-mapped, feature-major only)
NAME_MAJOR_MAX_NNZ = 8_000_000


def check_settings(analyzer: str, ngram_range: Sequence[int]) -> Tuple[str, Tuple[int, int]]:
    """``(analyzer, (lo, hi))`` or E780."""
    try:
        lo, hi = (int(x) for x in ngram_range)
    except (TypeError, ValueError):
        raise ConfigError(Errors.E780.format(what="ngram_range", value=ngram_range,
                                             allowed=f"two integers 1 <= lo <= hi <= {MAX_NGRAM}")) from None
    if not 1 <= lo <= hi <= MAX_NGRAM:
        raise ConfigError(Errors.E780.format(what="ngram_range", value=list(ngram_range),
                                             allowed=f"two integers 1 <= lo <= hi <= {MAX_NGRAM}"))
    if analyzer not in ANALYZERS:
        raise ConfigError(Errors.E780.format(what="analyzer", value=analyzer, allowed=", ".join(ANALYZERS)))
    return analyzer, (lo, hi)


class SparseIndex:
    """Tf-idf of char n-grams over a name list (see the module docstring). Build with :meth:`build`
    (or :meth:`from_kb`), load with :meth:`from_disk`."""

    def __init__(self, meta: Dict[str, Any], vocabulary: List[str], idf: numpy.ndarray, indptr: numpy.ndarray,
                 indices: numpy.ndarray, data: numpy.ndarray) -> None:
        self.meta = meta
        self.vocabulary = vocabulary
        self.idf = idf
        self.indptr, self.indices, self.data = indptr, indices, data
        self._counter: Any = None
        self._matrix: Any = None  # scipy view over the (memory-mapped) arrays, made on first use
        self._by_name: Any = None  # name-major copy (small KBs only: NAME_MAJOR_MAX_NNZ)

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_counter"] = state["_matrix"] = state["_by_name"] = None
        return state

    # ---- properties -----------------------------------------------------------------------
    @property
    def n_names(self) -> int:
        return int(self.meta["n_names"])

    @property
    def n_features(self) -> int:
        return len(self.vocabulary)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays (the matrix is memory-mapped after a load: pages are read when used)."""
        return int(self.idf.nbytes + self.indptr.nbytes + self.indices.nbytes + self.data.nbytes)

    # ---- building -------------------------------------------------------------------------
    @classmethod
    def build(cls, names: Sequence[str], *, kb_checksum: str, encoder_fingerprint: str = "",
              analyzer: str = DEFAULT_ANALYZER, ngram_range: Sequence[int] = DEFAULT_NGRAM_RANGE) -> "SparseIndex":
        """Fit the tf-idf over ``names`` (already normalised) and keep the feature-major matrix."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        analyzer, ngrams = check_settings(analyzer, ngram_range)
        names = list(names)
        vectorizer = TfidfVectorizer(analyzer=analyzer, ngram_range=ngrams, lowercase=False, dtype=numpy.float32)
        matrix = vectorizer.fit_transform(names) if names else None
        if matrix is None or matrix.shape[1] == 0:
            raise ConfigError(Errors.E780.format(what="names", value=len(names),
                                                 allowed="at least one name with a character n-gram"))
        vocab_map = vectorizer.vocabulary_
        vocabulary = [""] * len(vocab_map)
        for term, col in vocab_map.items():
            vocabulary[col] = term
        inverted = matrix.T.tocsr()  # feature-major: the names of each n-gram, by row
        inverted.sort_indices()
        index_dtype = numpy.int32 if inverted.nnz < 2 ** 31 else numpy.int64
        meta = {"format": SPARSE_FORMAT, "analyzer": analyzer, "ngram_range": list(ngrams), "n_names": len(names),
                "n_features": len(vocabulary), "nnz": int(inverted.nnz), "kb_checksum": kb_checksum,
                "encoder_fingerprint": encoder_fingerprint, "norm": "l2", "smooth_idf": True}
        return cls(meta, vocabulary, numpy.asarray(vectorizer.idf_, dtype=numpy.float32),
                   inverted.indptr.astype(index_dtype), inverted.indices.astype(numpy.int32),
                   inverted.data.astype(numpy.float32))

    @classmethod
    def from_kb(cls, kb: Any, *, encoder_fingerprint: str = "", analyzer: str = DEFAULT_ANALYZER,
                ngram_range: Sequence[int] = DEFAULT_NGRAM_RANGE) -> "SparseIndex":
        """:meth:`build` over ``kb.names`` (the dense index's rows)."""
        return cls.build(kb.names, kb_checksum=kb.checksum, encoder_fingerprint=encoder_fingerprint,
                         analyzer=analyzer, ngram_range=ngram_range)

    # ---- scoring --------------------------------------------------------------------------
    def transform(self, texts: Sequence[str]) -> Any:
        """Tf-idf rows (scipy CSR, float32, l2-normalised) of ``texts``: the same weights the fit gave."""
        from sklearn.preprocessing import normalize

        if self._counter is None:
            from sklearn.feature_extraction.text import CountVectorizer

            lo, hi = self.meta["ngram_range"]
            self._counter = CountVectorizer(analyzer=self.meta["analyzer"], ngram_range=(int(lo), int(hi)),
                                            lowercase=False, dtype=numpy.float32,
                                            vocabulary={t: i for i, t in enumerate(self.vocabulary)})
        counts = self._counter.transform(list(texts)).tocsr()
        counts.data *= numpy.asarray(self.idf)[counts.indices]
        return normalize(counts, norm="l2", copy=False)

    def matrix(self) -> Any:
        """The feature-major matrix ``[n_features, n_names]`` as scipy CSR over the stored arrays (no copy)."""
        if self._matrix is None:
            from scipy.sparse import csr_matrix

            self._matrix = csr_matrix((self.data, self.indices, self.indptr), shape=(self.n_features, self.n_names),
                                      copy=False)
        return self._matrix

    @property
    def searchable(self) -> bool:
        """Whether a sparse top-k search is worth its cost (up to :data:`SEARCH_MAX_NAMES` names); above, hybrid
        ranking re-scores only the dense candidates sparsely."""
        return self.n_names <= SEARCH_MAX_NAMES

    def postings(self, queries: Any) -> numpy.ndarray:
        """Per query, the postings (name, weight) a search reads: the summed lengths of its n-grams' lists."""
        q = self.transform(queries) if isinstance(queries, (list, tuple)) else queries
        lengths = numpy.diff(numpy.asarray(self.indptr, dtype=numpy.int64))
        query_of = numpy.repeat(numpy.arange(q.shape[0]), numpy.diff(q.indptr))
        return numpy.bincount(query_of, weights=lengths[q.indices], minlength=q.shape[0]).astype(numpy.int64)

    def search(self, queries: Any, k: int, *, row_mask: Optional[numpy.ndarray] = None,
               chunk_size: Optional[int] = None) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The ``k`` best names per query (rows int64 ``[n, k]``, cosine float32 ``[n, k]``, best first,
        ties by row; -1 / -inf where fewer names share an n-gram with the query or pass ``row_mask``).
        ``queries``: strings, or rows of :meth:`transform`."""
        if k < 1:
            raise ConfigError(Errors.E111.format(what="sparse k", minimum=1, value=k))
        q = self.transform(queries) if isinstance(queries, (list, tuple)) else queries
        n_q = q.shape[0]
        rows = numpy.full((n_q, k), -1, dtype=numpy.int64)
        scores = numpy.full((n_q, k), -numpy.inf, dtype=numpy.float32)
        todo = numpy.arange(n_q)
        if row_mask is None and n_q:  # the top k + 1 of each query in one multi-threaded product
            todo = self._search_topn(q, k, rows, scores)
        matrix = self.matrix()
        chunk_size = chunk_size or max(1, min(256, _SCORES_PER_CHUNK // max(1, self.n_names)))
        for start in range(0, len(todo), chunk_size):
            part_rows = todo[start:start + chunk_size]
            sims = (q[part_rows] @ matrix).tocsr()
            for i, query in enumerate(part_rows.tolist()):
                cols = sims.indices[sims.indptr[i]:sims.indptr[i + 1]]
                vals = sims.data[sims.indptr[i]:sims.indptr[i + 1]]
                if row_mask is not None:
                    keep = row_mask[cols]
                    cols, vals = cols[keep], vals[keep]
                _put_top(cols, vals, k, rows[query], scores[query])
        return rows, scores

    def _search_topn(self, q: Any, k: int, rows: numpy.ndarray, scores: numpy.ndarray) -> numpy.ndarray:
        """Fill ``rows`` / ``scores`` from sparse_dot_topn's top ``k + 1`` names per query (the same float32
        products as scipy's); return the queries whose k-th and (k + 1)-th scores tie (the tie may reach
        past what was kept: those are searched in full)."""
        try:
            from sparse_dot_topn import sp_matmul_topn
        except ImportError:  # a runtime dependency; installed without it (--no-deps), every query takes scipy's path
            return numpy.arange(q.shape[0], dtype=numpy.int64)
        threads = SPARSE_DOT_TOPN.threads(search_threads())  # 1 in a process forked after the pool started
        top = sp_matmul_topn(q.astype(numpy.float32, copy=False), self.matrix(), top_n=k + 1, threshold=0.0,
                             n_threads=threads if threads > 1 else None)
        redo = []
        for i in range(q.shape[0]):
            lo, hi = top.indptr[i], top.indptr[i + 1]
            cols, vals = top.indices[lo:hi], top.data[lo:hi]
            if len(vals) > k:
                ordered = numpy.sort(vals)
                if ordered[-k] == ordered[-k - 1]:
                    redo.append(i)
                    continue
            _put_top(cols, vals, k, rows[i], scores[i])
        return numpy.asarray(redo, dtype=numpy.int64)

    def pair_scores(self, queries: Any, q_of: numpy.ndarray, rows: numpy.ndarray, names: Sequence[str]) -> numpy.ndarray:
        """Cosine of query ``q_of[j]`` (a row of ``queries``, from :meth:`transform`) and name ``rows[j]``
        (whose string is ``names[rows[j]]``), float32 in [0, 1]: the names' strings are transformed."""
        q_of = numpy.asarray(q_of, dtype=numpy.int64)
        rows = numpy.asarray(rows, dtype=numpy.int64)
        if len(rows) == 0:
            return numpy.zeros(0, dtype=numpy.float32)
        unique, inverse = numpy.unique(rows, return_inverse=True)
        if len(self.indices) <= NAME_MAJOR_MAX_NNZ:  # the fitted weights, rows of the name-major copy
            if self._by_name is None:
                self._by_name = self.matrix().T.tocsr()
            names_tf = self._by_name[unique]
        else:  # each distinct candidate name's string, transformed once
            names_tf = self.transform([names[int(r)] for r in unique])
        out = numpy.zeros(len(rows), dtype=numpy.float32)
        queries = queries.tocsr()
        for start in range(0, len(rows), _PAIRS_PER_BLOCK):  # each pair's two rows, multiplied and summed
            part = slice(start, start + _PAIRS_PER_BLOCK)
            products = queries[q_of[part]].multiply(names_tf[inverse[part]])
            out[part] = numpy.asarray(products.sum(axis=1), dtype=numpy.float32).ravel()
        return numpy.clip(out, 0.0, 1.0)

    # ---- files ----------------------------------------------------------------------------
    def to_disk(self, path: PathLike) -> None:
        """Write the files into the (index) folder ``path``, ``sparse_meta.json`` last."""
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        with atomic_write(path / VOCAB_FILE) as fh:
            json.dump(self.vocabulary, fh, ensure_ascii=True)
        for name, array in zip(ARRAY_FILES, (self.idf, self.indptr, self.indices, self.data)):
            tmp = path / f".{name}.tmp"
            with open(tmp, "wb") as fh:
                numpy.save(fh, numpy.asarray(array), allow_pickle=False)
            os.replace(tmp, path / name)
        meta = dict(self.meta, files=file_records(path, (VOCAB_FILE,) + ARRAY_FILES))
        with atomic_write(path / SPARSE_META) as fh:
            json.dump(meta, fh, indent=2, sort_keys=True)
        self.meta = meta

    @staticmethod
    def exists(path: PathLike) -> bool:
        return (ensure_path(path) / SPARSE_META).is_file()

    @classmethod
    def read_meta(cls, path: PathLike) -> Dict[str, Any]:
        file = ensure_path(path) / SPARSE_META
        if not file.is_file():
            raise MissingInputError(Errors.E783.format(path=ensure_path(path)))
        try:
            meta = json.loads(file.read_text(encoding="utf8"))
            check_settings(meta["analyzer"], meta["ngram_range"])
            ok = (meta["format"] == SPARSE_FORMAT and isinstance(meta["files"], dict)
                  and int(meta["n_names"]) >= 0 and int(meta["n_features"]) > 0)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, ConfigError) as err:
            raise IntegrityError(Errors.E782.format(path=file, why=f"unreadable metadata ({type(err).__name__}: {err})")) from None
        if not ok or set(meta["files"]) != {VOCAB_FILE, *ARRAY_FILES}:
            raise IntegrityError(Errors.E782.format(path=file, why="not sparse metadata of this version"))
        return meta

    @classmethod
    def from_disk(cls, path: PathLike, *, kb: Any, encoder_fingerprint: Optional[str] = None,
                  full: bool = False) -> "SparseIndex":
        """Load and check: the KB (checksum, names), the dense index's encoder (``encoder_fingerprint``,
        when given), each file's size and sampled hash (all bytes with ``full``); arrays memory-mapped."""
        path = ensure_path(path)
        meta = cls.read_meta(path)
        if meta.get("kb_checksum") != kb.checksum or int(meta["n_names"]) != len(kb.names):
            raise IncompatibleError(Errors.E781.format(path=path, what="knowledge base",
                                                       built=f"{meta.get('kb_checksum')} ({meta['n_names']} names)",
                                                       given=f"{kb.checksum} ({len(kb.names)} names)"))
        if encoder_fingerprint is not None and meta.get("encoder_fingerprint") != encoder_fingerprint:
            raise IncompatibleError(Errors.E781.format(path=path, what="encoder (the dense index's)",
                                                       built=meta.get("encoder_fingerprint"), given=encoder_fingerprint))
        check_files(path, meta["files"], full=full, what="sparse index")
        return cls._load_arrays(path, meta)

    @classmethod
    def _load_arrays(cls, path: Path, meta: Dict[str, Any]) -> "SparseIndex":
        try:
            vocabulary = json.loads((path / VOCAB_FILE).read_text(encoding="utf8"))
            # copy-on-write maps: the same shared, lazily read pages as read-only ones (nothing here writes to
            # them), but sparse_dot_topn's extension accepts only writable arrays
            idf, indptr, indices, data = (numpy.load(path / name, mmap_mode="c", allow_pickle=False)
                                          for name in ARRAY_FILES)
        except (ValueError, OSError, UnicodeDecodeError) as err:
            raise IntegrityError(Errors.E782.format(path=path, why=f"unreadable array ({type(err).__name__}: {err})")) from None
        n_f, n_names = int(meta["n_features"]), int(meta["n_names"])
        why = ""
        if not isinstance(vocabulary, list) or len(vocabulary) != n_f or not all(isinstance(t, str) for t in vocabulary):
            why = f"the vocabulary is not {n_f} strings"
        elif idf.shape != (n_f,) or idf.dtype != numpy.float32:
            why = f"idf of shape {idf.shape} / {idf.dtype}, {n_f} float32 expected"
        elif indptr.shape != (n_f + 1,) or indptr.dtype.kind != "i" or int(indptr[0]) != 0:
            why = f"indptr of shape {indptr.shape} / {indptr.dtype}"
        elif int(indptr[-1]) != len(indices) or indices.shape != data.shape or indices.dtype != numpy.int32 \
                or data.dtype != numpy.float32 or len(indices) != int(meta.get("nnz", -1)):
            why = f"{len(indices)} indices, {len(data)} weights, indptr ends at {int(indptr[-1])}"
        elif len(indices) and not (0 <= int(indices[0]) < n_names and 0 <= int(indices[-1]) < n_names):
            why = "a name row outside the KB"
        if why:
            raise IntegrityError(Errors.E782.format(path=path, why=why))
        return cls(meta, vocabulary, idf, indptr, indices, data)


def _put_top(cols: numpy.ndarray, vals: numpy.ndarray, k: int, rows: numpy.ndarray, scores: numpy.ndarray) -> None:
    """Write the ``k`` best positive ``vals`` (ties by the smaller column) and their ``cols`` into ``rows`` /
    ``scores`` (one query's)."""
    keep = vals > 0
    cols, vals = cols[keep], vals[keep]
    if len(cols) > k:
        part = numpy.argpartition(-vals, k - 1)[:k]
        kth = vals[part].min()
        cand = numpy.flatnonzero(vals >= kth)  # every tie of the k-th score: ties go to the row
        cols, vals = cols[cand], vals[cand]
    order = numpy.lexsort((cols, -vals))[:k]
    rows[:len(order)] = cols[order]
    scores[:len(order)] = numpy.minimum(vals[order], 1.0)


def write_beside(sparse: Optional[SparseIndex], path: PathLike, encoder_fingerprint: str) -> None:
    """Save ``sparse`` into the index folder ``path`` as the sparse part of the index built with
    ``encoder_fingerprint``; None: remove a sparse part left there by an earlier index."""
    path = ensure_path(path)
    if sparse is None:
        if (path / SPARSE_META).exists():
            (path / SPARSE_META).unlink()  # the metadata first: the rest is then never read
            for name in (VOCAB_FILE,) + ARRAY_FILES:
                if (path / name).exists():
                    (path / name).unlink()
        return
    sparse.meta = dict(sparse.meta, encoder_fingerprint=encoder_fingerprint)
    sparse.to_disk(path)


def load_beside(path: PathLike, kb: Any, encoder_fingerprint: Optional[str]) -> Optional[SparseIndex]:
    """The sparse index saved in the index folder ``path``, or None when there is none."""
    return SparseIndex.from_disk(path, kb=kb, encoder_fingerprint=encoder_fingerprint) if SparseIndex.exists(path) else None


__all__ = ["SparseIndex", "load_beside", "write_beside", "check_settings", "SPARSE_META", "DEFAULT_NGRAM_RANGE", "DEFAULT_ANALYZER",
           "ANALYZERS"]
