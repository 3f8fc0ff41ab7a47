"""ConceptIndex: nearest KB names for query vectors, aggregated to concepts.

Row ``i`` of the index is ``kb.names[i]``. Two back-ends share one API:

- hnswlib (inner product over L2-normalised name vectors): approximate, for large KBs;
- exact: one ``Q @ X.T`` + ``topk`` in torch, for KBs up to :data:`EXACT_MAX_NAMES` names (chosen
  automatically with ``exact=None``) or whenever asked for.

Concept scores are the maximum over a concept's names; concepts are ranked by score, ties broken
by concept id. Filters (semantic types, definitions) are applied *before* the top-k cut: the index
searches only rows that have an allowed concept. ``index_meta.json`` beside the index records the
encoder fingerprint, dimension, pooling, max_length and the KB checksum; loading with another KB and
querying with another encoder are refused with a coded error.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Collection, Dict, List, Optional, Sequence, Tuple

import numpy

from .about import __version__
from .encoder import fork_guard
from .index_build import _build_hnsw, _encode_names, _filtered_query
from .errors import ConfigError, EmptyResultError, Errors, IncompatibleError, MissingInputError
from .util import PathLike, atomic_write, ensure_path, get_logger

logger = get_logger("index")

META_FILE = "index_meta.json"
HNSW_FILE = "names.hnsw"
VECTORS_FILE = "vectors.npy"
FORMAT_VERSION = 1
EXACT_MAX_NAMES = 20_000
DEFAULT_M = 32
DEFAULT_EF_CONSTRUCTION = 200
DEFAULT_EF_SEARCH = 200
# Upper bound of the float32 score matrix one exact-search step holds in memory.
_EXACT_BLOCK = 32_000_000
# an empty row→concept cache (checksum "" matches no KB): ConceptIndex builds the real one on first use
_NO_CSR = ("", numpy.zeros(1, numpy.int64), numpy.zeros(0, numpy.int32))


class ConceptIndex:
    """Nearest-name search over a KB's name vectors. Build with :meth:`build`, load with
    :meth:`from_disk`. ``meta`` holds what the index was built with."""

    def __init__(self, kb: Any, meta: Dict[str, Any], *, hnsw: Any = None, vectors: Optional[numpy.ndarray] = None) -> None:
        self.kb = kb
        self.meta = meta
        self._hnsw = hnsw
        self._vectors = None
        if vectors is not None:
            import torch

            self._vectors = torch.from_numpy(numpy.ascontiguousarray(vectors, dtype=numpy.float32))
        self._masks: Dict[Tuple[Any, ...], Tuple[numpy.ndarray, Callable[[str], bool]]] = {}
        self._known_types: Optional[frozenset] = None
        self._csr: Tuple[str, numpy.ndarray, numpy.ndarray] = _NO_CSR
        self._pid = os.getpid()
        self.ef_search = int(meta.get("ef_search", DEFAULT_EF_SEARCH))
        if hnsw is not None:
            hnsw.set_ef(self.ef_search)

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_masks"] = {}  # filter closures are rebuilt on demand
        state["_csr"] = _NO_CSR  # rebuilt on demand
        return state

    # ---- properties ---------------------------------------------------------------------
    @property
    def exact(self) -> bool:
        return self._hnsw is None

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    def __len__(self) -> int:
        return int(self.meta["n_names"])

    def set_ef(self, ef_search: int) -> None:
        """Search depth of the hnsw graph (higher: better recall, slower); no-op for exact search."""
        if ef_search < 1:
            raise ConfigError(Errors.E111.format(what="ef_search", minimum=1, value=ef_search))
        self.ef_search = int(ef_search)
        self.meta["ef_search"] = self.ef_search
        if self._hnsw is not None:
            self._hnsw.set_ef(self.ef_search)

    # ---- building -----------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        kb: Any,
        enc: Any,
        *,
        exact: Optional[bool] = None,
        M: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        ef_search: int = DEFAULT_EF_SEARCH,
        batch_size: int = 256,
        work_dir: Optional[PathLike] = None,
        show_progress: bool = True,
        chunk_size: int = 8192,
        num_threads: int = 1,
        seed: int = 100,
    ) -> "ConceptIndex":
        """Encode every KB name with ``enc`` and index the vectors.

        ``exact=None`` picks exact search up to :data:`EXACT_MAX_NAMES` names. With ``work_dir``
        the name vectors are written there chunk by chunk and an interrupted build resumes from
        the chunks already done. ``num_threads=1`` builds the same hnsw graph every time; more
        threads build faster but the graph (and rare near-ties) may differ between runs.
        """
        for what, value, minimum in (("M", M, 2), ("ef_construction", ef_construction, 1),
                                     ("ef_search", ef_search, 1), ("chunk_size", chunk_size, 1)):
            if value < minimum:
                raise ConfigError(Errors.E111.format(what=what, minimum=minimum, value=value))
        names = kb.names
        n = len(names)
        if n == 0:
            raise EmptyResultError(Errors.E106)
        if exact is None:
            exact = n <= EXACT_MAX_NAMES
        t0 = time.perf_counter()
        vectors = _encode_names(kb, enc, batch_size=batch_size, work_dir=work_dir,
                                show_progress=show_progress, chunk_size=chunk_size)
        encode_s = time.perf_counter() - t0
        meta: Dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "spacy_sapbert_version": __version__,
            "kind": "exact" if exact else "hnsw",
            "space": "ip",
            "n_names": n,
            "n_concepts": len(kb),
            "dim": int(enc.dim),
            "encoder_fingerprint": enc.fingerprint,
            "encoder_name": getattr(enc, "name", ""),
            "pooling": enc.pooling,
            "max_length": int(enc.max_length),
            "kb_checksum": kb.checksum,
            "M": int(M),
            "ef_construction": int(ef_construction),
            "ef_search": int(ef_search),
            "seed": int(seed),
            "encode_seconds": round(encode_s, 3),
        }
        if exact:
            index = cls(kb, meta, vectors=vectors)
        else:
            hnsw = _build_hnsw(vectors, M=M, ef_construction=ef_construction, num_threads=num_threads,
                               seed=seed, show_progress=show_progress)
            index = cls(kb, meta, hnsw=hnsw)
        meta["build_seconds"] = round(time.perf_counter() - t0, 3)
        logger.info("indexed %d names (%s) in %.1f s", n, meta["kind"], meta["build_seconds"])
        return index

    # ---- searching ----------------------------------------------------------------------
    def search_names(self, vectors: numpy.ndarray, k: int, *, row_mask: Optional[numpy.ndarray] = None
                     ) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The ``k`` best name rows per query: rows int64 ``[n, k]``, scores float32 ``[n, k]``,
        best first. Where fewer than ``k`` rows exist (or pass ``row_mask``) the tail is row -1,
        score -inf."""
        vectors = self._check_queries(vectors)
        if k < 1:
            raise ConfigError(Errors.E111.format(what="k", minimum=1, value=k))
        n_q = vectors.shape[0]
        rows = numpy.full((n_q, k), -1, dtype=numpy.int64)
        scores = numpy.full((n_q, k), -numpy.inf, dtype=numpy.float32)
        n_allowed = len(self) if row_mask is None else int(row_mask.sum())
        kk = min(k, n_allowed)
        if n_q == 0 or kk == 0:
            return rows, scores
        if self._hnsw is None:
            r, s = self._exact_search(vectors, kk, row_mask)
        else:
            r, s = self._hnsw_search(vectors, kk, row_mask)
        rows[:, : r.shape[1]] = r
        scores[:, : s.shape[1]] = s
        return rows, scores

    def name_vectors(self, rows: Sequence[int]) -> numpy.ndarray:
        """The stored vectors of name ``rows`` (what the encoder gave ``kb.names[row]`` at build
        time), float32 ``[len(rows), dim]``."""
        rows = [int(r) for r in rows]
        if any(not 0 <= r < len(self) for r in rows):
            raise ConfigError(Errors.E111.format(what="name row", minimum=0, value=rows))
        if not rows:
            return numpy.zeros((0, self.dim), dtype=numpy.float32)
        if self._hnsw is None:
            return self._vectors[rows].numpy().copy()
        return numpy.asarray(self._hnsw.get_items(rows, return_type="numpy"), dtype=numpy.float32)

    def search(
        self,
        vectors: numpy.ndarray,
        k: int,
        *,
        semantic_types: Optional[Collection[str]] = None,
        require_definition: bool = False,
    ) -> List[List[Tuple[str, float]]]:
        """The ``k`` best concepts per query as ``[(concept_id, score), ...]``, best first.

        A concept's score is its best name's score; ties go to the smaller concept id. With
        ``semantic_types`` only concepts having one of those types are searched (unknown types
        are an error); with ``require_definition`` only concepts with a definition.
        """
        vectors = self._check_queries(vectors)
        if k < 1:
            raise ConfigError(Errors.E111.format(what="k", minimum=1, value=k))
        row_mask, allowed = self._filter(semantic_types, require_definition)
        n_allowed = len(self) if row_mask is None else int(row_mask.sum())
        results: List[List[Tuple[str, float]]] = [[] for _ in range(vectors.shape[0])]
        pending = list(range(vectors.shape[0]))
        names_per_concept = -(-len(self) // max(1, len(self.kb)))
        depth = min(n_allowed, max(2 * k, k + 16, k * names_per_concept))
        while pending and depth > 0:
            rows, scores = self.search_names(vectors[pending], depth, row_mask=row_mask)
            still: List[int] = []
            for j, q in enumerate(pending):
                ranked, complete = self._aggregate(rows[j], scores[j], k, allowed, depth >= n_allowed)
                results[q] = ranked
                if not complete:
                    still.append(q)
            if depth >= n_allowed:
                break
            pending, depth = still, min(n_allowed, depth * 4)
        return results

    def _aggregate(self, rows: numpy.ndarray, scores: numpy.ndarray, k: int,
                   allowed: Optional[Callable[[str], bool]], searched_all: bool) -> Tuple[List[Tuple[str, float]], bool]:
        """Max over names (rows come best first, so a concept's first row is its best), the top
        ``k`` by (-score, concept id). ``complete`` is False when the rows ran out before a row
        scored below the ``k``-th concept (a deeper search could still add one); the caller then
        searches deeper. Vectorised over the rows; ids are looked up for the winners only."""
        valid = rows >= 0
        complete = searched_all or not bool(valid.all())
        rows, scores = rows[valid], scores[valid]
        pos, cidx = self._row_links(rows)
        if not len(cidx):
            return [], complete
        uniq, first = numpy.unique(cidx, return_index=True)  # first link of each concept = its best row
        best = scores[pos[first]]
        ids = self.kb.concept_ids
        if allowed is not None:
            keep = numpy.fromiter((allowed(ids[int(c)]) for c in uniq), dtype=bool, count=len(uniq))
            uniq, first, best = uniq[keep], first[keep], best[keep]
        if len(uniq) >= k:
            # the score of the row where the k-th concept first appeared: a later row scoring lower
            # proves that nothing deeper can enter the top k
            kth = scores[numpy.sort(pos[first])[k - 1]]
            complete = complete or bool(scores[-1] < kth)
        top = numpy.lexsort((uniq, -best.astype(numpy.float64)))[:k]
        return [(ids[int(uniq[i])], float(best[i])) for i in top], complete

    def _row_links(self, rows: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """``(position in rows, concept index)`` per (row, concept) link, in ``rows`` order; concept
        index order is concept id order (the KB's ids are sorted)."""
        if self._csr[0] != self.kb.checksum:  # built once; again only after kb.add_alias
            self._csr = (self.kb.checksum, *self.kb.row_concept_csr())
        _, ptr, idx = self._csr
        start = numpy.asarray(ptr[rows], dtype=numpy.int64)
        lengths = numpy.asarray(ptr[rows + 1], dtype=numpy.int64) - start
        pos = numpy.repeat(numpy.arange(len(rows), dtype=numpy.int64), lengths)
        offsets = numpy.arange(len(pos), dtype=numpy.int64) - numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
        return pos, numpy.asarray(idx[numpy.repeat(start, lengths) + offsets], dtype=numpy.int64)

    def _check_queries(self, vectors: numpy.ndarray) -> numpy.ndarray:
        vectors = numpy.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ConfigError(Errors.E110.format(shape=list(vectors.shape), dim=self.dim))
        return numpy.ascontiguousarray(vectors, dtype=numpy.float32)

    def _exact_search(self, vectors: numpy.ndarray, k: int, row_mask: Optional[numpy.ndarray]
                      ) -> Tuple[numpy.ndarray, numpy.ndarray]:
        import torch

        self._pid = fork_guard(self._pid)
        X = self._vectors
        mask = None if row_mask is None else torch.from_numpy(~row_mask)
        step = max(1, _EXACT_BLOCK // max(1, X.shape[0]))
        out_r, out_s = [], []
        with torch.inference_mode():
            for start in range(0, vectors.shape[0], step):
                Q = torch.from_numpy(vectors[start : start + step])
                sims = Q @ X.T
                if mask is not None:
                    sims[:, mask] = -float("inf")
                s, r = torch.topk(sims, k, dim=1)
                out_r.append(r.numpy().astype(numpy.int64))
                out_s.append(s.numpy())
        return numpy.concatenate(out_r), numpy.concatenate(out_s)

    def _hnsw_search(self, vectors: numpy.ndarray, k: int, row_mask: Optional[numpy.ndarray]
                     ) -> Tuple[numpy.ndarray, numpy.ndarray]:
        hnsw = self._hnsw
        hnsw.set_ef(max(self.ef_search, k))
        try:
            if row_mask is None:
                labels, dist = hnsw.knn_query(vectors, k=k)
            else:
                allowed = row_mask.tolist()
                labels, dist = _filtered_query(hnsw, vectors, k, lambda label: allowed[label])
        finally:
            hnsw.set_ef(self.ef_search)
        return labels.astype(numpy.int64), (1.0 - dist).astype(numpy.float32)

    # ---- filters ------------------------------------------------------------------------
    def known_types(self) -> frozenset:
        if self._known_types is None:
            found = set()
            for cid in self.kb.concept_ids:
                found.update(self.kb.cui_to_entity[cid].types)
            self._known_types = frozenset(found)
        return self._known_types

    def check_types(self, semantic_types: Collection[str]) -> None:
        known = self.known_types()
        unknown = sorted(set(semantic_types) - known)
        if unknown:
            raise ConfigError(Errors.E113.format(unknown=unknown, known=sorted(known)[:20]))

    def _filter(self, semantic_types: Optional[Collection[str]], require_definition: bool
                ) -> Tuple[Optional[numpy.ndarray], Optional[Callable[[str], bool]]]:
        if not semantic_types and not require_definition:
            return None, None
        key = (frozenset(semantic_types or ()), bool(require_definition))
        if key not in self._masks:
            wanted = key[0]
            if wanted:
                self.check_types(wanted)
            kb = self.kb
            verdict: Dict[str, bool] = {}

            def allowed(cid: str) -> bool:
                if cid not in verdict:
                    entity = kb.cui_to_entity[cid]
                    ok = not wanted or bool(wanted.intersection(entity.types))
                    verdict[cid] = ok and (not require_definition or bool(entity.definition))
                return verdict[cid]

            mask = numpy.fromiter((any(allowed(c) for c in kb.concepts_of_row(i)) for i in range(len(self))),
                                  dtype=bool, count=len(self))
            self._masks[key] = (mask, allowed)
        return self._masks[key]

    # ---- compatibility and serialisation ------------------------------------------------
    def check_compatible(self, enc: Any, *, path: Any = "<memory>") -> None:
        """Raise :class:`IncompatibleError` unless ``enc`` is the encoder this index was built with."""
        for field, value in (("encoder_fingerprint", enc.fingerprint), ("dim", int(enc.dim)),
                             ("pooling", enc.pooling), ("max_length", int(enc.max_length))):
            if self.meta.get(field) != value:
                raise IncompatibleError(Errors.E108.format(path=path, field=field,
                                                           index_value=self.meta.get(field), encoder_value=value))

    def to_disk(self, path: PathLike) -> None:
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self._hnsw is not None:
            tmp = path / f".{HNSW_FILE}.tmp"
            self._hnsw.save_index(str(tmp))
            tmp.replace(path / HNSW_FILE)
            data_file = path / HNSW_FILE
        else:
            with atomic_write(path / VECTORS_FILE, "wb") as fh:
                numpy.save(fh, self._vectors.numpy())
            data_file = path / VECTORS_FILE
        meta = dict(self.meta, file=data_file.name, file_size=data_file.stat().st_size)
        with atomic_write(path / META_FILE) as fh:
            json.dump(meta, fh, indent=2, sort_keys=True)

    @classmethod
    def read_meta(cls, path: PathLike) -> Dict[str, Any]:
        path = ensure_path(path)
        meta_path = path / META_FILE
        if not meta_path.exists():
            raise MissingInputError(Errors.E107.format(path=meta_path, reason="no such file"))
        try:
            meta = json.loads(meta_path.read_text(encoding="utf8"))
            meta["kind"], meta["dim"], meta["n_names"], meta["file"], meta["file_size"]  # noqa: B018
        except (ValueError, KeyError, TypeError) as err:
            raise MissingInputError(Errors.E107.format(path=meta_path, reason=f"unreadable metadata: {err}")) from err
        return meta

    @classmethod
    def from_disk(cls, path: PathLike, kb: Any, *, ef_search: Optional[int] = None) -> "ConceptIndex":
        """Load an index written by :meth:`to_disk`; refuse it if it was built for another KB."""
        path = ensure_path(path)
        meta = cls.read_meta(path)
        if meta.get("kb_checksum") != kb.checksum or int(meta["n_names"]) != len(kb.names):
            raise IncompatibleError(Errors.E109.format(path=path, index_value=meta.get("kb_checksum"),
                                                       kb_value=kb.checksum, index_size=meta["n_names"],
                                                       kb_size=len(kb.names)))
        data_file = path / meta["file"]
        if not data_file.exists():
            raise MissingInputError(Errors.E107.format(path=data_file, reason="no such file"))
        if data_file.stat().st_size != int(meta["file_size"]):
            raise MissingInputError(Errors.E107.format(
                path=data_file, reason=f"size {data_file.stat().st_size} != {meta['file_size']} bytes recorded"))
        if meta["kind"] == "exact":
            try:
                vectors = numpy.load(data_file, allow_pickle=False)
            except ValueError as err:
                raise MissingInputError(Errors.E107.format(path=data_file, reason=str(err))) from err
            if vectors.shape != (int(meta["n_names"]), int(meta["dim"])):
                raise MissingInputError(Errors.E107.format(path=data_file, reason=f"shape {vectors.shape}"))
            index = cls(kb, meta, vectors=vectors)
        else:
            import hnswlib

            hnsw = hnswlib.Index(space="ip", dim=int(meta["dim"]))
            try:
                hnsw.load_index(str(data_file), max_elements=int(meta["n_names"]))
            except (RuntimeError, ValueError, MemoryError) as err:
                raise MissingInputError(Errors.E107.format(path=data_file, reason=str(err))) from err
            if hnsw.get_current_count() != int(meta["n_names"]):
                raise MissingInputError(Errors.E107.format(
                    path=data_file, reason=f"{hnsw.get_current_count()} vectors, expected {meta['n_names']}"))
            index = cls(kb, meta, hnsw=hnsw)
        if ef_search is not None:
            index.set_ef(ef_search)
        return index


__all__ = ["ConceptIndex", "EXACT_MAX_NAMES", "DEFAULT_M", "DEFAULT_EF_CONSTRUCTION", "DEFAULT_EF_SEARCH"]
