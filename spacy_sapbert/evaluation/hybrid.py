"""Hybrid (dense + sparse) systems for ``evaluate`` and the weight tuner behind ``tune-hybrid``.

:class:`HybridSetup` holds what one name encoder and one KB need: an exact :class:`ConceptIndex` over
``kb.names`` whose vectors come from the run's :class:`~.cache.VectorCache` (shared with the dense
baseline, so names are encoded once per encoder), and the :class:`~spacy_sapbert.index.sparse.SparseIndex`
of the same names. :meth:`HybridSetup.gather` scores the candidates of a batch of mentions once
(:func:`spacy_sapbert.index.hybrid.gather`, query variants included); :func:`tune_weight` then ranks them
under each weight of a grid and keeps the best strict acc@1 (ties: the smaller weight). The systems rank exactly
what the linker with the same ``sparse_weight`` / ``sparse_k`` / ``candidates`` / ``query_variants`` ranks (its
scores, its candidates), and the tuners tune at those settings: the weight chosen is the best one for the linker
(or system) that will use it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ConfigError, EmptyResultError, Errors
from ..index import ConceptIndex
from ..index.aggregate import aggregate_batch
from ..index.hybrid import (CANDIDATE_MODES, HybridCandidates, HybridScore, check_mode, check_weight, gather,
                            interleaved, rank, top1)
from ..index.meta import MAX_K
from ..index.query_variants import KINDS, check_kinds, query_variants
from ..index.sparse import DEFAULT_NGRAM_RANGE, SparseIndex
from ..kb.concept import normalize_name
from ..linker.settings import DEFAULT_CONFIG
from ..mentions.datasets import iter_mentions, read_dataset
from ..mentions.metrics import Gold, Ranking, resolve_gold
from .baselines import System
from .cache import VectorCache, encoder_key
from .preprocess import InputOptions, make_preprocessor, mention_queries

WEIGHT_GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
# the candidates per mention of a linker at its defaults (it ranks max(k, max_entities_per_mention) concepts)
LINKER_DEPTH = max(DEFAULT_CONFIG["k"], DEFAULT_CONFIG["max_entities_per_mention"])


class HybridSetup:
    """Exact dense index + sparse index over ``kb.names`` for ``encoder`` (see the module docstring)."""

    def __init__(self, encoder: Any, kb: Any, *, cache_dir: Any = None, batch_size: int = 128,
                 ngram_range: Sequence[int] = DEFAULT_NGRAM_RANGE, show_progress: bool = False,
                 sparse: Optional[SparseIndex] = None) -> None:
        self.encoder, self.kb, self.batch_size = encoder, kb, batch_size
        self.cache = VectorCache(cache_dir, encoder_key(encoder), dim=encoder.dim)
        self.show_progress = show_progress
        vectors = self.cache.get(encoder, list(kb.names), batch_size=batch_size, show_progress=show_progress)
        self.index = ConceptIndex.from_vectors(kb, vectors, encoder, kind="exact", show_progress=False)
        self.sparse = sparse if sparse is not None else SparseIndex.from_kb(
            kb, encoder_fingerprint=encoder.fingerprint, ngram_range=ngram_range)

    def vectors(self, queries: Sequence[str]) -> np.ndarray:
        """Vectors of ``queries`` through the run's vector cache (tuning, benchmarks: not timed)."""
        return self.cache.get(self.encoder, list(queries), batch_size=self.batch_size, show_progress=self.show_progress)

    def encode(self, queries: Sequence[str]) -> np.ndarray:
        """Vectors of ``queries`` from the encoder itself, as the linker makes them (a system's timed ranking:
        never read from the disk cache)."""
        if not queries:
            return np.zeros((0, self.encoder.dim), np.float32)
        return np.asarray(self.encoder.encode(list(queries), batch_size=self.batch_size), np.float32)

    def candidates(self, queries: Sequence[str], *, k: int, sparse_k: int, weight: float, mode: str = "score",
                   kinds: Sequence[str] = (), vectors: Optional[np.ndarray] = None) -> List[List[HybridScore]]:
        """The linker's hybrid candidate stage for normalised ``queries``: dense + sparse lists (and one pair
        per query variant of ``kinds``), the ``k`` concepts picked as ``mode`` says, ranked under ``weight``;
        every vector encoded by the encoder (:meth:`encode`), the queries' own unless ``vectors`` are given."""
        queries = list(queries)
        variants = [query_variants(q, kinds) for q in queries] if kinds else []
        flat = [v for vs in variants for v in vs]
        if vectors is None:
            both = self.encode(queries + flat)
            vectors, variant_vectors = both[:len(queries)], both[len(queries):]
        else:
            variant_vectors = self.encode(flat)
        found = gather(self.index, self.sparse, queries, vectors, k=k, sparse_k=sparse_k,
                       variants=variants, variant_vectors=variant_vectors if flat else None)
        return rank(found, weight, k, self.kb.concept_ids, mode=mode)

    def gather(self, queries: Sequence[str], *, k: int, sparse_k: int, variants: Sequence[Sequence[str]] = (),
               variant_vectors: Optional[np.ndarray] = None, kinds: Sequence[str] = ()) -> HybridCandidates:
        """The candidates of normalised ``queries`` (vectors through the cache): the linker's lists, and with
        ``kinds`` (query-variant kinds, as its ``query_variants``) the variants' lists too, their vectors from
        the cache; or the given ``variants`` with their ``variant_vectors``."""
        queries = list(queries)
        if kinds and not variants:
            variants = [query_variants(q, kinds) for q in queries]
            flat = [v for vs in variants for v in vs]
            variant_vectors = self.vectors(flat) if flat else None
        return gather(self.index, self.sparse, queries, self.vectors(queries), k=k, sparse_k=sparse_k,
                      variants=variants, variant_vectors=variant_vectors)

    def rank(self, found: HybridCandidates, weight: float, k: int, mode: str = "score") -> List[Ranking]:
        ids = self.kb.concept_ids
        return [Ranking(concepts=[(x.concept_id, x.score) for x in ranked])
                for ranked in rank(found, weight, k, ids, mode=mode)]

    def sparse_only(self, queries: Sequence[str], k: int) -> List[Ranking]:
        """The sparse index alone: concepts by their best name's tf-idf cosine (ties: the concept whose preferred
        name it is, then by concept id)."""
        rows, scores = self.sparse.search(list(queries), max(4 * k, k + 16))
        _, ptr, idx = self.index._row_csr()
        ranked, _ = aggregate_batch(rows, scores, k, None, True, ptr, idx, self.index.preferred_rows())
        ids = self.kb.concept_ids
        return [Ranking(concepts=[(ids[int(c)], float(s)) for c, s in zip(cs, ss)]) for cs, ss in ranked]


def tune_weight(setup: HybridSetup, found: HybridCandidates, golds: Sequence[Gold],
                grid: Sequence[float] = WEIGHT_GRID, *, candidates: str = "score",
                k: int = 10) -> Tuple[float, List[Dict[str, float]]]:
    """``(best weight, [{"weight", "acc@1"}, ...])``: strict acc@1 of ``found`` under each weight, its top concept
    picked as the linker with ``candidates`` and ``k`` picks it (``"interleave"``: among the ``k`` concepts of the
    smallest round-robin slots, which no weight changes; ``"score"``: the best of all)."""
    weights = [check_weight(w) for w in grid]
    if check_mode(candidates) == "interleave":
        found = interleaved(found, k)
    ids = setup.kb.concept_ids
    table = []
    for weight, best in zip(weights, top1(found, weights)):
        hits = sum(c >= 0 and ids[int(c)] in g.ids for c, g in zip(best.tolist(), golds))
        table.append({"weight": float(weight), "acc@1": hits / max(1, len(golds))})
    best = max(table, key=lambda row: (row["acc@1"], -row["weight"]))
    return best["weight"], table


class HybridSystem(System):
    """A name encoder's dense scores + the sparse index, ``(dense + w * sparse) / (1 + w)`` (strict only), its
    candidates picked as the linker's ``candidates`` and widened by its ``query_variants`` (``kinds``)."""

    def __init__(self, setup: HybridSetup, *, weight: float, sparse_k: int = 20, name: str = "hybrid",
                 candidates: str = "score", kinds: Sequence[str] = ()) -> None:
        self.setup, self.weight, self.sparse_k, self.name = setup, check_weight(weight), int(sparse_k), name
        self.mode, self.kinds = check_mode(candidates), check_kinds(list(kinds))
        self.tuned: Optional[Dict[str, Any]] = None

    @property
    def encoder(self) -> Any:  # emptied before the timed call (protocol.cold)
        return self.setup.encoder

    def scored(self, queries: Sequence[str], k: int, vectors: Optional[np.ndarray] = None) -> List[List[HybridScore]]:
        """The top ``k`` concepts of each query with their scores (:meth:`HybridSetup.candidates`)."""
        return self.setup.candidates(queries, k=k, sparse_k=self.sparse_k, weight=self.weight, mode=self.mode,
                                     kinds=self.kinds, vectors=vectors)

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:
        """Each distinct query ranked once, as the linker ranks the distinct texts of a batch."""
        unique = sorted(set(queries))
        by_text = {q: Ranking(concepts=[(x.concept_id, x.score) for x in found])
                   for q, found in zip(unique, self.scored(unique, k))}
        return [by_text[q] for q in queries]

    def describe(self) -> Dict[str, object]:
        sp = self.setup.sparse.meta
        return {**super().describe(), "sparse_weight": self.weight, "sparse_k": self.sparse_k,
                "candidates": self.mode, "query_variants": list(self.kinds),
                "analyzer": sp["analyzer"], "ngram_range": sp["ngram_range"], "score": "(dense + w*sparse)/(1+w)",
                "model": str(getattr(self.setup.encoder, "name", "")), "search": "exact", "tuned": self.tuned}


class SparseSystem(System):
    """The hybrid system's sparse index alone (the char n-gram tf-idf the linker reads)."""

    def __init__(self, setup: HybridSetup, name: str = "sparse index") -> None:
        self.setup, self.name = setup, name

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:
        return self.setup.sparse_only(queries, k)

    def describe(self) -> Dict[str, object]:
        sp = self.setup.sparse.meta
        return {**super().describe(), "analyzer": sp["analyzer"], "ngram_range": sp["ngram_range"], "search": "exact"}




def hybrid_systems(settings: Dict[str, Any], kb: Any, dense: Any, train: Sequence[Any]) -> List[System]:
    """The ``[evaluate.systems] hybrid`` systems of a run: the sparse index alone and ``dense`` (a
    :class:`~.baselines.DenseEncoder`) + sparse, its weight ``sparse_weight`` or, with ``hybrid_tune``,
    tuned on the run's ``train`` mentions (never on the evaluated ones) at the system's own ``candidates``,
    ``query_variants`` and depth (the run's largest k, which the system ranks at)."""
    sy = settings["systems"]
    setup = HybridSetup(dense.encoder, kb, cache_dir=settings["cache_dir"], batch_size=settings["batch_size"],
                        ngram_range=tuple(sy["sparse_ngrams"]), show_progress=settings["show_progress"])
    system = HybridSystem(setup, weight=sy["sparse_weight"], sparse_k=int(sy["sparse_k"]),
                          name=f"{dense.name} + {sy['hybrid_name']}", candidates=sy["candidates"],
                          kinds=sy["query_variants"])
    if sy["hybrid_tune"]:
        opts = settings["input"]
        prep = make_preprocessor(lowercase=opts["lowercase"], fold_punctuation=opts["fold_punctuation"])
        pairs = [(prep(m.text), resolve_gold(kb, m.ids)) for m in train]
        pairs = [(q, g) for q, g in pairs if q and g.in_kb]
        if not pairs:
            raise ConfigError(Errors.E785.format(what="hybrid_tune is on but [evaluate.dataset] train has no "
                                                      "mention with a gold id in the KB",
                                                 fix="Give training files, or set hybrid_tune = false and a sparse_weight."))
        depth = max(settings["ks"])
        found = setup.gather([q for q, _ in pairs], k=depth, sparse_k=system.sparse_k, kinds=system.kinds)
        system.weight, table = tune_weight(setup, found, [g for _, g in pairs], candidates=system.mode, k=depth)
        system.tuned = {"on": "train mentions", "mentions": len(pairs), "candidates": system.mode,
                        "query_variants": list(system.kinds), "k": depth, "grid": table}
    return [SparseSystem(setup, name=f"{sy['hybrid_name']}: sparse only"), system]


def tune_on_file(path: Any, kb: Any, encoder: Any, *, types: Optional[Sequence[str]] = None,
                 ngram_ranges: Sequence[Sequence[int]] = (DEFAULT_NGRAM_RANGE,),
                 sparse_k: int = DEFAULT_CONFIG["sparse_k"], k: int = LINKER_DEPTH,
                 candidates: str = DEFAULT_CONFIG["candidates"],
                 query_variants: Sequence[str] = tuple(DEFAULT_CONFIG["query_variants"]),
                 resolve_abbreviations: bool = DEFAULT_CONFIG["resolve_abbreviations"],
                 abbreviation_table: Any = None, cache_dir: Any = None, batch_size: int = 128) -> Dict[str, Any]:
    """``tune-hybrid``: the ``sparse_weight`` (and n-gram range) with the best strict acc@1 on the annotated
    mentions of ``path`` (normalised as the linker does), for ``encoder`` over ``kb``, ranked as the linker with
    these ``sparse_k``, ``k`` (its candidate depth), ``candidates`` and ``query_variants`` ranks (defaults: the
    linker's). ``resolve_abbreviations`` (the linker's default: on): a short form in a mention is read as the long
    form its document defines, as ``evaluate`` resolves them (:func:`~.preprocess.mention_queries`);
    ``abbreviation_table`` (a path): the linker's abbreviation table, read as the linker reads it. Returns
    ``{"best": {"sparse_weight", "ngram_range", "acc@1"}, "name_only_acc@1", "mentions", "sparse_k", "k",
    "candidates", "query_variants", "resolve_abbreviations", "abbreviations_resolved", "grid"}``
    (``abbreviations_resolved``: the tuned mentions whose text a definition changed)."""
    kinds = check_tuner_settings(k, candidates, query_variants, sparse_k)
    table_path = None if abbreviation_table is None else str(abbreviation_table)
    docs = list(read_dataset(path, types=types))
    queries_written = mention_queries(docs, InputOptions(resolve_abbreviations=bool(resolve_abbreviations),
                                                         abbreviation_table=table_path))
    mentions = iter_mentions(docs)
    pairs = [(q, resolve_gold(kb, m.ids), q != normalize_name(m.text))
             for (q, _), m in zip(queries_written, mentions) if m.ids]
    resolved = sum(changed for q, g, changed in pairs if q and g.in_kb)
    pairs = [(q, g) for q, g, _ in pairs if q and g.in_kb]
    if not pairs:
        raise EmptyResultError(Errors.E785.format(what=f"no mention of {path} has a gold id in the KB",
                                                  fix="Check --type and that the file's ids are the KB's."))
    queries, golds = [q for q, _ in pairs], [g for _, g in pairs]
    grid: List[Dict[str, Any]] = []
    best: Dict[str, Any] = {}
    name_only = 0.0
    for ngrams in ngram_ranges:
        setup = HybridSetup(encoder, kb, cache_dir=cache_dir, batch_size=batch_size, ngram_range=tuple(ngrams))
        found = setup.gather(queries, k=k, sparse_k=sparse_k, kinds=kinds)
        weight, table = tune_weight(setup, found, golds, candidates=candidates, k=k)
        name_only = table[0]["acc@1"] if table[0]["weight"] == 0 else name_only
        grid += [{**row, "ngram_range": list(ngrams)} for row in table]
        acc = max(row["acc@1"] for row in table)
        if not best or acc > best["acc@1"]:
            best = {"sparse_weight": weight, "ngram_range": list(ngrams), "acc@1": acc}
    return {"best": best, "name_only_acc@1": name_only, "mentions": len(pairs), "sparse_k": sparse_k, "k": k,
            "candidates": candidates, "query_variants": kinds, "resolve_abbreviations": bool(resolve_abbreviations),
            "abbreviation_table": table_path, "abbreviations_resolved": resolved, "grid": grid}


def check_tuner_settings(k: Any, candidates: Any, kinds: Any, sparse_k: Any = 0) -> List[str]:
    """The query-variant ``kinds`` as a list when ``k``, ``candidates``, ``kinds`` and ``sparse_k`` are values the
    linker takes, else E785 naming tune-hybrid's option."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ConfigError(Errors.E785.format(what=f"--k {k!r} is not a whole number from 1 to {MAX_K:,}",
                                             fix="Give the linker's candidate depth: max(k, max_entities_per_mention)."))
    if isinstance(sparse_k, bool) or not isinstance(sparse_k, int) or not 0 <= sparse_k <= MAX_K:
        raise ConfigError(Errors.E785.format(what=f"--sparse-k {sparse_k!r} is not a whole number from 0 to {MAX_K:,}",
                                             fix="Give the linker's sparse_k."))
    if candidates not in CANDIDATE_MODES:
        raise ConfigError(Errors.E785.format(what=f"--candidates {candidates!r} is not one of "
                                                  f"{', '.join(CANDIDATE_MODES)}",
                                             fix="Give the linker's candidates setting."))
    kinds = list(kinds)
    if any(kind not in KINDS for kind in kinds) or len(set(kinds)) != len(kinds):
        raise ConfigError(Errors.E785.format(what=f"--query-variants {kinds!r} are not distinct kinds of "
                                                  f"{', '.join(KINDS)}",
                                             fix="Give the linker's query_variants, each kind once."))
    return kinds


__all__ = ["HybridSetup", "HybridSystem", "SparseSystem", "tune_weight", "hybrid_systems", "tune_on_file",
           "check_tuner_settings", "WEIGHT_GRID", "LINKER_DEPTH"]
