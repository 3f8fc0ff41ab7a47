"""How an index is built: one typed, frozen object, :class:`IndexSettings`, with every default in one place.

Every door that builds an index makes one and passes it down: ``build-index`` (``cli/index.py``) and
:func:`~spacy_sapbert.commands.pipeline.build_index_dir`, ``create-pipeline`` and
:func:`~spacy_sapbert.commands.pipeline.create_pipeline`, the linker's ``initialize`` (its ``index_settings``
argument, also from ``[initialize.components.sapbert_linker.index_settings]``), then
:meth:`ConceptIndex.build <spacy_sapbert.index.ConceptIndex.build>` → ``from_vectors`` → the back-ends. A bad
value is refused when the object is made, before any encoding, with the code the index used before for it.

What is *not* here: how the names are encoded (model, pooling, device, precision, runtime, batch size) and
where the work happens (work folder, chunks, Ray) — those are the encoder's and the command's.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigError, Errors
from .meta import HNSW_VECTORS, MAX_EF_SEARCH, MAX_M, MAX_RESCORE
from .sparse import check_settings as check_sparse_settings

KINDS = ("auto", "exact", "hnsw", "ivf")
MAX_THREADS = 4096  # index build threads (omp_set_num_threads takes a C int)
MAX_SEED = (1 << 31) - 1  # faiss's k-means seed is a C int
EXACT_MAX_NAMES = 20_000  # kind auto: exact search up to this many names
LARGE_MIN_NAMES = 500_000  # kind auto: the ivf index from this many names (hnsw between)
HNSW_EF_SEARCH = 200  # an hnsw index's search depth when none is given
IVF_RESCORE = 512  # umls_scale_sweep ivfpq_*: 512 re-scored rows keep recall@5 >= 0.99 at 1M and 3M


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class IndexSettings:
    """What an index is built with. ``None`` means "the default for the KB's size", resolved when the index is
    built (:func:`choose_kind`, the ivf index's cells and probes)."""

    kind: str = "auto"  # auto (by size: exact, hnsw, ivf), exact, hnsw or ivf
    exact: Optional[bool] = None  # the older form of kind: True exact, False hnsw (kind "auto" only)
    M: int = 32  # hnsw: graph degree
    ef_construction: int = 200  # hnsw: build depth
    hnsw_vectors: str = "float16"  # hnsw: the graph's vectors, float16 (faiss, half the memory) or float32 (hnswlib)
    ef_search: Optional[int] = None  # search depth saved with the index (hnsw: 200; ivf: cells scanned, by size)
    rescore: Optional[int] = None  # ivf: candidates re-scored exactly per query (None: IVF_RESCORE)
    lists: Optional[int] = None  # ivf: cells (None: the power of two nearest 4 x sqrt(names))
    num_threads: int = 1  # build threads; 1 builds the same graph every run
    seed: int = 100  # hnsw graph, ivf training sample
    languages: Optional[Tuple[str, ...]] = None  # names searched by default (all are indexed); None: all
    sparse: bool = False  # also fit the char n-gram tf-idf of the names (hybrid scores)
    sparse_ngrams: Tuple[int, int] = (2, 3)  # its n-gram range (char_wb)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(Errors.E124.format(value=self.kind, choices=", ".join(KINDS)))
        if self.exact is not None and not isinstance(self.exact, bool):
            raise ConfigError(Errors.E834.format(name="exact", expected="true, false or null", value=self.exact))
        for name, minimum in (("M", 2), ("ef_construction", 1), ("num_threads", 1)):
            _check_whole(name, getattr(self, name), minimum)
        for name in ("ef_search", "rescore", "lists"):
            if getattr(self, name) is not None:
                _check_whole(name, getattr(self, name), 1)
        _check_whole("seed", self.seed, 0)
        # what faiss and hnswlib take (C ints: M 10**20 was a TypeError, num_threads an OverflowError) and, for M and
        # ef_construction, what a saved index_meta.json may hold (M 5,000 built an index that its load refused)
        for name, minimum, maximum in (("M", 2, MAX_M), ("ef_construction", 1, MAX_EF_SEARCH),
                                       ("num_threads", 1, MAX_THREADS), ("seed", 0, MAX_SEED)):
            if getattr(self, name) > maximum:
                raise ConfigError(Errors.E559.format(what=name, minimum=minimum, maximum=maximum,
                                                     value=getattr(self, name)))
        if self.ef_search is not None and self.ef_search > MAX_EF_SEARCH:
            raise ConfigError(Errors.E559.format(what="ef_search", minimum=1, maximum=MAX_EF_SEARCH,
                                                 value=self.ef_search))
        if self.rescore is not None and self.rescore > MAX_RESCORE:
            raise ConfigError(Errors.E559.format(what="rescore", minimum=1, maximum=MAX_RESCORE, value=self.rescore))
        if self.hnsw_vectors not in HNSW_VECTORS:
            raise ConfigError(Errors.E834.format(name="hnsw_vectors", expected=" or ".join(HNSW_VECTORS),
                                                 value=self.hnsw_vectors))
        if not isinstance(self.sparse, bool):
            raise ConfigError(Errors.E834.format(name="sparse", expected="true or false", value=self.sparse))
        object.__setattr__(self, "sparse_ngrams", check_sparse_settings("char_wb", self.sparse_ngrams)[1])  # E780
        if self.languages is not None:
            langs = self.languages
            if isinstance(langs, str) or not all(isinstance(x, str) and x for x in langs):
                raise ConfigError(Errors.E834.format(name="languages", expected="a list of language codes or null",
                                                     value=langs))
            object.__setattr__(self, "languages", tuple(langs) or None)

    # ---- building with it -------------------------------------------------------------------
    def chosen_kind(self, n_names: int) -> str:
        """The back-end for ``n_names`` names (see :func:`choose_kind`)."""
        return choose_kind(n_names, self.kind, self.exact)

    def replace(self, **options: Any) -> "IndexSettings":
        """A copy with ``options`` changed (checked again; an unknown name is E833)."""
        _check_names(options, "IndexSettings.replace")
        return dataclasses.replace(self, **options)

    @classmethod
    def of(cls, settings: Optional["IndexSettings"] = None, **options: Any) -> "IndexSettings":
        """``settings`` (default: the defaults) with the keyword ``options`` given to a function that takes
        both, e.g. ``ConceptIndex.from_vectors(kb, vectors, enc, kind="ivf")``; a dict is read with
        :meth:`from_dict`."""
        if isinstance(settings, Mapping):
            settings = cls.from_dict(settings)
        if settings is not None and not isinstance(settings, IndexSettings):
            raise ConfigError(Errors.E834.format(name="index settings", expected="an IndexSettings or a dict",
                                                 value=type(settings).__name__))
        base = settings if settings is not None else cls()
        return base.replace(**options) if options else base

    # ---- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON / spaCy config values (tuples as lists)."""
        out = dataclasses.asdict(self)
        out["sparse_ngrams"] = list(self.sparse_ngrams)
        out["languages"] = None if self.languages is None else list(self.languages)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "the index settings") -> "IndexSettings":
        """From :meth:`to_dict`'s form (a component config, a JSON file); unknown names are E833."""
        if not isinstance(data, Mapping):
            raise ConfigError(Errors.E834.format(name=where, expected="a mapping of setting names to values",
                                                 value=data))
        _check_names(data, where)
        values = dict(data)
        for name in ("sparse_ngrams", "languages"):
            if isinstance(values.get(name), list):
                values[name] = tuple(values[name])
        return cls(**values)


def choose_kind(n_names: int, kind: str = "auto", exact: Optional[bool] = None) -> str:
    """The back-end for ``n_names`` names: ``kind`` unless ``auto``; ``exact`` (legacy flag) picks exact (True)
    or hnsw (False); else by size: exact up to :data:`EXACT_MAX_NAMES`, hnsw below :data:`LARGE_MIN_NAMES`,
    ivf from there."""
    if kind not in KINDS:
        raise ConfigError(Errors.E124.format(value=kind, choices=", ".join(KINDS)))
    if kind != "auto":
        return kind
    if exact is not None:
        return "exact" if exact else "hnsw"
    if n_names <= EXACT_MAX_NAMES:
        return "exact"
    return "hnsw" if n_names < LARGE_MIN_NAMES else "ivf"


def _check_whole(name: str, value: Any, minimum: int) -> None:
    if not _whole(value):
        raise ConfigError(Errors.E834.format(name=name, expected=f"a whole number >= {minimum}", value=value))
    if value < minimum:
        raise ConfigError(Errors.E111.format(what=name, minimum=minimum, value=value))


def _check_names(names: Sequence[str] | Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(names) - set(FIELDS))
    if unknown:
        raise ConfigError(Errors.E833.format(names=", ".join(unknown), where=where, known=", ".join(FIELDS)))


FIELDS: Tuple[str, ...] = tuple(f.name for f in dataclasses.fields(IndexSettings))
DEFAULTS = IndexSettings()

__all__ = ["IndexSettings", "DEFAULTS", "FIELDS", "KINDS", "HNSW_VECTORS", "choose_kind", "EXACT_MAX_NAMES",
           "LARGE_MIN_NAMES", "HNSW_EF_SEARCH", "IVF_RESCORE"]
