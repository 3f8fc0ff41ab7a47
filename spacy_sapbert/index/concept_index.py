"""ConceptIndex: nearest KB names for query vectors, aggregated to concepts.

Row ``i`` of the index is ``kb.names[i]``. Three back-ends share one API (``kind``):

- ``exact``: one ``Q @ X.T`` + ``topk`` in torch; chosen automatically up to :data:`EXACT_MAX_NAMES` names;
- ``hnsw``: a graph read whole into RAM at load, chosen below :data:`LARGE_MIN_NAMES`: faiss's HNSW over float16
  vectors by default (``hnsw16.py``), hnswlib's over float32 ones with ``hnsw_vectors = "float32"`` (and for every
  index saved before 2026-12-01);
- ``ivf``: faiss inverted lists of 4-bit fast-scan product codes, re-scored exactly against memory-mapped
  float16 vectors (``ivf.py``, ``two_stage.py``); chosen from :data:`LARGE_MIN_NAMES` names (all of UMLS).
  A saved index of the removed ``compact`` kind (usearch) is refused at load with E832, which says how to
  rebuild it.

Concept scores are the maximum over a concept's names; concepts are ranked by score, ties broken first
for the concept whose best name is its preferred name, then by concept id. Filters (semantic types,
definitions) are applied *before* the top-k cut, as
vectorised masks over the KB's rows. ``index_meta.json`` beside the index records the encoder
fingerprint, dimension, pooling, max_length, the KB checksum and each data file's size and hashes;
loading with another KB, querying with another encoder, or a damaged file are refused with a coded error.
"""
from __future__ import annotations

import json
import time
from typing import Any, Collection, Dict, List, Optional, Sequence, Tuple

import numpy

from ..about import __version__
from ..errors import ConfigError, EmptyResultError, Errors, IncompatibleError, MissingInputError
from .aggregate import aggregate_batch, preferred_rows
from ..encoding.bulk import BULK_BATCH_SIZE
from .build import _build_hnsw, _encode_names
from ..base.integrity import check_files, file_records
from ..base.util import PathLike, atomic_write, ensure_path, get_logger
from .filters import FilterMixin
from .guards import check_k, check_scores, check_self_scores, is_whole
from .meta import MAX_EF_SEARCH, check_meta
from .backends import HNSW_FILE, VECTORS_FILE, ExactBackend, HnswBackend
from .hnsw16 import STORAGE as HNSW16_STORAGE, Hnsw16Backend
from .sparse import SparseIndex, load_beside, write_beside
from .ivf import IvfBackend, sub_quantizers, check_settings as check_ivf_settings
from .settings import DEFAULTS, EXACT_MAX_NAMES, HNSW_EF_SEARCH, KINDS, LARGE_MIN_NAMES, IndexSettings, choose_kind

logger = get_logger("index")

META_FILE = "index_meta.json"
FORMAT_VERSION = 2
# the defaults' one home is settings.IndexSettings; these names are kept for their importers
DEFAULT_M = DEFAULTS.M
DEFAULT_EF_CONSTRUCTION = DEFAULTS.ef_construction
DEFAULT_EF_SEARCH = HNSW_EF_SEARCH
# an empty row→concept cache (checksum "" matches no KB): ConceptIndex builds the real one on first use
_NO_CSR = ("", numpy.zeros(1, numpy.int64), numpy.zeros(0, numpy.int32))
_NO_PREFERRED = ("", numpy.zeros(0, numpy.int64))
_BACKENDS = {"exact": ExactBackend, "hnsw": HnswBackend, "ivf": IvfBackend}
_TWO_STAGE = ("ivf",)  # float16 vectors re-scored, collected in a memory-mapped file while building


class ConceptIndex(FilterMixin):
    """Nearest-name search over a KB's name vectors. Build with :meth:`build` (encodes the names) or
    :meth:`from_vectors`, load with :meth:`from_disk`. ``meta`` holds what the index was built with."""

    def __init__(self, kb: Any, meta: Dict[str, Any], *, hnsw: Any = None, vectors: Optional[numpy.ndarray] = None,
                 backend: Any = None) -> None:
        self.kb = kb
        self.meta = meta
        self.ef_search = int(meta.get("ef_search", HNSW_EF_SEARCH))
        self.languages: Optional[Tuple[str, ...]] = tuple(meta["languages"]) if meta.get("languages") else None
        if backend is None:
            backend = HnswBackend(hnsw, self.ef_search) if hnsw is not None else ExactBackend(vectors)
        self._backend = backend
        self._masks: Dict[Tuple[Any, ...], Tuple[numpy.ndarray, numpy.ndarray]] = {}
        self._known_types: Optional[frozenset] = None
        self._csr: Tuple[str, numpy.ndarray, numpy.ndarray] = _NO_CSR
        self._preferred: Tuple[str, numpy.ndarray] = _NO_PREFERRED
        self._concept_csr: Tuple[str, numpy.ndarray, numpy.ndarray] = _NO_CSR
        self.path: Optional[Any] = None  # the folder it was loaded from
        self.sparse: Optional[SparseIndex] = None  # char n-gram tf-idf of the same names (hybrid.py), saved beside

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_masks"] = {}  # rebuilt on demand
        state["_csr"] = _NO_CSR  # rebuilt on demand
        state["_preferred"] = _NO_PREFERRED
        state["_concept_csr"] = _NO_CSR
        return state

    # ---- properties ---------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return str(self._backend.kind)

    @property
    def exact(self) -> bool:
        return self.kind == "exact"

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    def __len__(self) -> int:
        return int(self.meta["n_names"])

    def set_ef(self, ef_search: int) -> None:
        """Search depth (hnsw ``ef``, the cells an ivf index scans; higher:
        better recall, slower); no effect on exact search."""
        if isinstance(ef_search, int) and not isinstance(ef_search, bool) and ef_search < 1:
            raise ConfigError(Errors.E111.format(what="ef_search", minimum=1, value=ef_search))
        if not is_whole(ef_search, 1, MAX_EF_SEARCH):
            raise ConfigError(Errors.E559.format(what="ef_search", minimum=1, maximum=MAX_EF_SEARCH, value=ef_search))
        self.ef_search = int(ef_search)
        self.meta["ef_search"] = self.ef_search
        self._backend.set_ef(self.ef_search)

    # ---- building -----------------------------------------------------------------------
    @classmethod
    def build(cls, kb: Any, enc: Any, settings: Optional[IndexSettings] = None, *, batch_size: int = BULK_BATCH_SIZE,
              work_dir: Optional[PathLike] = None, show_progress: bool = True, chunk_size: int = 8192,
              **options: Any) -> "ConceptIndex":
        """Encode every KB name with ``enc`` and index the vectors as ``settings`` say (an
        :class:`IndexSettings`; keyword ``options`` change single settings, e.g. ``kind="ivf"``), see
        :meth:`from_vectors`. With ``work_dir`` the name vectors are written there chunk by chunk and an
        interrupted build resumes from the chunks already done; an ivf build then keeps the float16 vectors
        in a memory-mapped file there instead of RAM."""
        settings = IndexSettings.of(settings, **options)
        n = len(kb.names)
        if n == 0:
            raise EmptyResultError(Errors.E106)
        kind = settings.chosen_kind(n)
        if kind == "ivf":
            check_ivf_settings(n, settings.lists)  # E583 / E584 before the encoding, not after
        if settings.languages:
            kb.row_language_mask(settings.languages)  # an unknown code likewise (E735)
        t0 = time.perf_counter()
        out = _float16_buffer(work_dir, n, int(enc.dim)) if kind in _TWO_STAGE else None
        vectors = _encode_names(kb, enc, batch_size=batch_size, work_dir=work_dir, show_progress=show_progress,
                                chunk_size=chunk_size, out=out)
        encode_s = time.perf_counter() - t0
        index = cls.from_vectors(kb, vectors, enc, settings.replace(kind=kind), show_progress=show_progress)
        index.meta["encode_seconds"] = round(encode_s, 3)
        index.meta["build_seconds"] = round(time.perf_counter() - t0, 3)
        logger.info("indexed %d names (%s) in %.1f s", n, kind, index.meta["build_seconds"])
        return index

    @classmethod
    def from_vectors(cls, kb: Any, vectors: numpy.ndarray, enc: Any, settings: Optional[IndexSettings] = None, *,
                     show_progress: bool = True, **options: Any) -> "ConceptIndex":
        """Index name vectors computed elsewhere (row ``i`` = ``kb.names[i]``, L2-normalised, float32
        or float16, may be memory-mapped) as ``settings`` say (keyword ``options`` change single settings).
        ``enc`` gives the fields the index checks queries against: ``fingerprint``, ``dim``, ``pooling``,
        ``max_length`` (and ``name``). An ivf index's ``ef_search`` is the cells scanned per query (None:
        :func:`~spacy_sapbert.index.ivf.default_probes`), its ``lists`` the cells (None:
        :func:`~spacy_sapbert.index.ivf.default_lists`). ``settings.languages`` becomes the default language
        restriction (:meth:`set_languages`); ``settings.sparse`` fits the char n-gram part beside."""
        settings = IndexSettings.of(settings, **options)
        n = len(kb.names)
        if vectors.ndim != 2 or vectors.shape[0] != n or vectors.shape[1] != int(enc.dim):
            raise ConfigError(Errors.E125.format(shape=list(vectors.shape), n=n, dim=int(enc.dim)))
        kind = settings.chosen_kind(n)
        ef_search = settings.ef_search
        if ef_search is None and kind != "ivf":  # ivf: the backend picks it from its cells
            ef_search = HNSW_EF_SEARCH
        t0 = time.perf_counter()
        meta: Dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "spacy_sapbert_version": __version__,
            "kind": kind,
            "space": "ip",
            "n_names": n,
            "n_concepts": len(kb),
            "dim": int(enc.dim),
            "encoder_fingerprint": enc.fingerprint,
            "encoder_name": getattr(enc, "name", ""),
            "pooling": enc.pooling,
            "max_length": int(enc.max_length),
            "kb_checksum": kb.checksum,
            "ef_search": None if ef_search is None else int(ef_search),
            "seed": int(settings.seed),
        }
        if kind == "exact":
            backend: Any = ExactBackend(numpy.asarray(vectors, dtype=numpy.float32))
        elif kind == "hnsw" and settings.hnsw_vectors == HNSW16_STORAGE:
            backend = Hnsw16Backend.build(vectors, M=settings.M, ef_construction=settings.ef_construction,
                                          ef_search=int(ef_search), num_threads=settings.num_threads,
                                          seed=settings.seed, show_progress=show_progress)
            meta.update(ef_construction=settings.ef_construction, **backend.meta_fields())
        elif kind == "hnsw":
            meta.update(M=settings.M, ef_construction=settings.ef_construction, vectors="float32")
            hnsw = _build_hnsw(numpy.asarray(vectors, dtype=numpy.float32), M=settings.M,
                               ef_construction=settings.ef_construction, num_threads=settings.num_threads,
                               seed=settings.seed, show_progress=show_progress)
            backend = HnswBackend(hnsw, int(ef_search))
        else:
            backend = IvfBackend.build(vectors, settings, show_progress=show_progress)
            meta.update(lists=backend.lists, rescore=backend.rescore, ef_search=backend.ef_search,
                        sub_quantizers=sub_quantizers(int(enc.dim)))
        meta["graph_seconds"] = meta["build_seconds"] = round(time.perf_counter() - t0, 3)
        index = cls(kb, meta, backend=backend)
        if settings.languages:
            index.set_languages(settings.languages)  # E735 / E739 for codes no name has
        if settings.sparse:
            index.sparse = SparseIndex.from_kb(kb, encoder_fingerprint=enc.fingerprint,
                                               ngram_range=settings.sparse_ngrams)
        return index

    # ---- searching ----------------------------------------------------------------------
    def search_names(self, vectors: numpy.ndarray, k: int, *, row_mask: Optional[numpy.ndarray] = None
                     ) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The ``k`` best name rows per query: rows int64 ``[n, k]``, scores float32 ``[n, k]``,
        best first. Where fewer than ``k`` rows exist (or pass ``row_mask``) the tail is row -1,
        score -inf."""
        vectors = self._check_queries(vectors)
        check_k(k)
        n_q = vectors.shape[0]
        rows = numpy.full((n_q, k), -1, dtype=numpy.int64)
        scores = numpy.full((n_q, k), -numpy.inf, dtype=numpy.float32)
        n_allowed = len(self) if row_mask is None else int(row_mask.sum())
        kk = min(k, n_allowed)
        if n_q == 0 or kk == 0:
            return rows, scores
        r, s = self._backend.search(vectors, kk, row_mask)
        check_scores(vectors, r, s, self.path)  # E556: no score outside [-1, 1] leaves the index
        rows[:, : r.shape[1]] = r
        scores[:, : s.shape[1]] = s
        return rows, scores

    def name_vectors(self, rows: Sequence[int]) -> numpy.ndarray:
        """The stored vectors of name ``rows`` (what the encoder gave ``kb.names[row]`` at build
        time), float32 ``[len(rows), dim]`` (float16-rounded for the ivf index)."""
        wanted = numpy.asarray(rows, dtype=numpy.int64).reshape(-1)
        if len(wanted) and not (0 <= int(wanted.min()) and int(wanted.max()) < len(self)):
            raise ConfigError(Errors.E111.format(what="name row", minimum=0, value=wanted.tolist()))
        if not len(wanted):
            return numpy.zeros((0, self.dim), dtype=numpy.float32)
        found = self._backend.vectors(wanted)
        check_self_scores(found, self.path)  # a reused name vector is a query: E556 when not unit length
        return found

    def search(
        self,
        vectors: numpy.ndarray,
        k: int,
        *,
        semantic_types: Optional[Collection[str]] = None,
        require_definition: bool = False,
        languages: Optional[Collection[str]] = None,
    ) -> List[List[Tuple[str, float]]]:
        """The ``k`` best concepts per query as ``[(concept_id, score), ...]``, best first.

        A concept's score is its best name's score; at equal scores a concept whose best name is its preferred
        (canonical) name comes first, then the smaller concept id. With
        ``semantic_types`` only concepts having one of those types are searched (unknown types
        are an error); with ``require_definition`` only concepts with a definition; with
        ``languages`` (default: :attr:`languages`, see :meth:`set_languages`) only names in them.
        """
        vectors = self._check_queries(vectors)
        check_k(k)
        row_mask, allowed = self._filter(semantic_types, require_definition, languages or self.languages)
        n_allowed = len(self) if row_mask is None else int(row_mask.sum())
        results: List[List[Tuple[str, float]]] = [[] for _ in range(vectors.shape[0])]
        pending = list(range(vectors.shape[0]))
        names_per_concept = -(-len(self) // max(1, len(self.kb)))
        # the ivf index re-scores ``rescore`` rows whatever is asked: aggregating all of them
        # settles more queries in the first round
        natural = int(getattr(self._backend, "natural_depth", 0))
        depth = min(n_allowed, max(2 * k, k + 16, k * names_per_concept, natural))
        _, ptr, idx = self._row_csr()
        ids = self.kb.concept_ids
        while pending and depth > 0:
            rows, scores = self.search_names(vectors[pending], depth, row_mask=row_mask)
            ranked, complete = aggregate_batch(rows, scores, k, allowed, depth >= n_allowed, ptr, idx,
                                               self.preferred_rows())
            for q, (cidx, best) in zip(pending, ranked):
                results[q] = [(ids[c], s) for c, s in zip(cidx.tolist(), best.tolist())]
            if depth >= n_allowed:
                break
            pending, depth = [q for q, done in zip(pending, complete.tolist()) if not done], min(n_allowed, depth * 4)
        return results

    def concept_rows(self) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The KB's concept -> name rows CSR (``kb.concept_row_csr``), built once per KB checksum (again after
        ``kb.add_alias``)."""
        if self._concept_csr[0] != self.kb.checksum:
            self._concept_csr = (self.kb.checksum, *self.kb.concept_row_csr())
        return self._concept_csr[1], self._concept_csr[2]

    def preferred_rows(self) -> numpy.ndarray:
        """Each concept's preferred (canonical) name row (:meth:`concept_rows` order), -1 for none; built
        once per KB checksum (again after ``kb.add_alias``)."""
        if self._preferred[0] != self.kb.checksum:
            self._preferred = (self.kb.checksum, preferred_rows(*self.concept_rows()))
        return self._preferred[1]

    def _row_csr(self) -> Tuple[str, numpy.ndarray, numpy.ndarray]:
        if self._csr[0] != self.kb.checksum:  # built once; again only after kb.add_alias
            self._csr = (self.kb.checksum, *self.kb.row_concept_csr())
        return self._csr

    def _check_queries(self, vectors: numpy.ndarray) -> numpy.ndarray:
        vectors = numpy.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ConfigError(Errors.E110.format(shape=list(vectors.shape), dim=self.dim))
        return numpy.ascontiguousarray(vectors, dtype=numpy.float32)

    # ---- compatibility and serialisation ------------------------------------------------
    def check_compatible(self, enc: Any, *, path: Any = "<memory>") -> None:
        """Raise :class:`IncompatibleError` unless ``enc`` is the encoder this index was built with."""
        for field, value in (("encoder_fingerprint", enc.fingerprint), ("dim", int(enc.dim)),
                             ("pooling", enc.pooling), ("max_length", int(enc.max_length))):
            if self.meta.get(field) != value:
                raise IncompatibleError(Errors.E108.format(path=path, field=field,
                                                           index_value=self.meta.get(field), encoder_value=value))

    def to_disk(self, path: PathLike) -> None:
        """Write the data files, then ``index_meta.json`` (with each file's size and hashes) last."""
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        files = self._backend.save(path)
        known = self.meta.get("files", {})
        if getattr(self._backend, "reused_files", False) and all(known.get(f, {}).get("sha256") for f in files):
            records = {f: known[f] for f in files}  # linked from a file already recorded: no re-hashing
        else:
            records = file_records(path, files)
        self.meta = dict(self.meta, files=records)
        meta = dict(self.meta, kind=self.kind, file=files[0], file_size=records[files[0]]["size"])
        write_beside(self.sparse, path, self.meta.get("encoder_fingerprint", ""))  # or remove a stale one
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
        except (ValueError, UnicodeDecodeError) as err:
            raise MissingInputError(Errors.E107.format(path=meta_path, reason=f"unreadable metadata: {err}")) from err
        meta = check_meta(meta, meta_path)  # every field's type and range (E557); a null ef_search dropped
        if "files" not in meta:  # format 1: one data file, its size recorded
            meta["files"] = {meta["file"]: {"size": int(meta["file_size"])}}
        return meta

    @classmethod
    def verify(cls, path: PathLike, *, full: bool = True) -> Dict[str, Any]:
        """Check the data files of the index folder at ``path`` against ``index_meta.json`` (full
        sha256 with ``full``, else sizes and sampled hashes); raise a coded error naming the damaged file."""
        path = ensure_path(path)
        meta = cls.read_meta(path)
        _check_data_files(path, meta["files"], full=full)
        return meta

    @classmethod
    def from_disk(cls, path: PathLike, kb: Any, *, ef_search: Optional[int] = None) -> "ConceptIndex":
        """Load an index written by :meth:`to_disk`; refuse it if it was built for another KB or a
        data file does not match its record (size and sampled hash). The ivf index's vectors are memory-mapped;
        an index of a removed kind (``compact``) is refused with E832, which says how to rebuild it."""
        path = ensure_path(path)
        meta = cls.read_meta(path)
        if meta.get("kb_checksum") != kb.checksum or int(meta["n_names"]) != len(kb.names):
            raise IncompatibleError(Errors.E109.format(path=path, index_value=meta.get("kb_checksum"),
                                                       kb_value=kb.checksum, index_size=meta["n_names"],
                                                       kb_size=len(kb.names)))
        _check_data_files(path, meta["files"])
        backend = backend_class(meta).load(path, meta)
        index = cls(kb, meta, backend=backend)
        index.path = path
        index.sparse = load_beside(path, kb, meta.get("encoder_fingerprint"))  # None without sparse_meta.json
        if ef_search is not None:
            index.set_ef(ef_search)
        return index


def backend_class(meta: Dict[str, Any]) -> Any:
    """The back-end that reads an index of this ``meta`` (an hnsw index without ``vectors`` is hnswlib's)."""
    if meta["kind"] == "hnsw" and meta.get("vectors") == HNSW16_STORAGE:
        return Hnsw16Backend
    return _BACKENDS[meta["kind"]]


def _check_data_files(path: Any, records: Dict[str, Dict[str, Any]], *, full: bool = False) -> None:
    """Sizes and hashes against the records (integrity.check_files, E551); a format-1 index records
    only its one file's size."""
    if all("sample_sha256" in rec for rec in records.values()):
        check_files(path, records, full=full, what="index")
        return
    for name, rec in records.items():
        data = path / name
        if not data.exists():
            raise MissingInputError(Errors.E107.format(path=data, reason="no such file"))
        if data.stat().st_size != int(rec["size"]):
            raise MissingInputError(Errors.E107.format(
                path=data, reason=f"size {data.stat().st_size} != {rec['size']} bytes recorded"))


def _float16_buffer(work_dir: Optional[PathLike], n: int, dim: int) -> numpy.ndarray:
    """Where an ivf build collects the name vectors: a memory-mapped float16 file in ``work_dir``
    (kept for resuming), else RAM."""
    if work_dir is None:
        return numpy.empty((n, dim), dtype=numpy.float16)
    work = ensure_path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    return numpy.lib.format.open_memmap(work / "vectors.f16.npy", mode="w+", dtype=numpy.float16, shape=(n, dim))


__all__ = ["ConceptIndex", "IndexSettings", "backend_class", "choose_kind", "EXACT_MAX_NAMES", "LARGE_MIN_NAMES", "KINDS", "DEFAULT_M",
           "DEFAULT_EF_CONSTRUCTION", "DEFAULT_EF_SEARCH", "META_FILE", "HNSW_FILE", "VECTORS_FILE"]
