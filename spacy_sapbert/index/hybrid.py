"""Hybrid (dense + sparse) concept ranking, BioSyn style, over a :class:`ConceptIndex` and its
:class:`~.sparse.SparseIndex`.

Candidates of a query: the dense top ``k`` concepts (``ConceptIndex.search``) united with the sparse top
``sparse_k`` concepts (char n-gram tf-idf, max over names; none with ``sparse_k = 0`` or above
:data:`~.sparse.SEARCH_MAX_NAMES` names, where the sparse side only re-scores the dense candidates). Every name of every candidate concept (that
passes the filters: semantic types, definitions, languages) gets both scores: the dense one from the
stored name vectors (``ConceptIndex.name_vectors``), the sparse one from the name's string. A name scores

    score = (dense + w * sparse) / (1 + w)        dense in [-1, 1] (cosine), sparse in [0, 1]

so a score stays in [-1, 1] and ``w = 0`` is the dense ranking; a concept scores its best name's score,
concepts are ranked by (-score, preferred, concept id): at equal scores a concept whose best name is its own
preferred (canonical) name comes first (as :mod:`.aggregate` ranks the dense search). :func:`gather` computes
the candidates' two scores once and
:func:`rank` applies a weight: tuning tries many weights on one gather.

Which candidates reach the ranked list (``candidates``, :data:`CANDIDATE_MODES`):

- ``"score"``: the top ``k`` of the union by the final score. With a small ``w`` the sparse part barely
  moves the order, so a concept only the sparse search found sits below the dense ones and is cut: the
  list of ``k`` is then nearly the dense top ``k`` (measured: benchmarks/candidate_recall.py).
- ``"interleave"``: the ``k`` concepts are picked from the lists by round robin first (the dense list's
  first concept, the sparse list's first, each variant's lists' first, then every list's second, ...:
  a concept's *slot* is ``rank * n_lists + list``, its best over the lists), then ordered by the final
  score. Every list keeps its top ``k / n_lists``, so the candidate recall at ``k`` is at least each
  list's recall at ``k / n_lists``; the top concept is the union's best-scored one unless it lies below
  every list's share.

Query variants (``variants``, :mod:`.query_variants`) add one dense and one sparse list per variant
(after the mention's own lists in the round robin); every candidate is still scored against the mention
itself.
"""
from __future__ import annotations

from typing import Any, Collection, List, NamedTuple, Optional, Sequence

import numpy

from ..errors import ConfigError, Errors
from .aggregate import aggregate_batch
from .meta import MAX_K

CANDIDATE_MODES = ("score", "interleave")
MAX_WEIGHT = 100.0  # above it the dense part is below 1% of the score: use the sparse index alone
_PAIRS_PER_BLOCK = 16_384  # (query, candidate name) pairs whose dense scores one block computes


class HybridScore(NamedTuple):
    """One ranked concept of a hybrid search: ``score`` = ``(dense + w * sparse) / (1 + w)`` of its best
    name (row ``row``), with that name's ``dense`` (cosine) and ``sparse`` (tf-idf cosine) parts."""

    concept_id: str
    score: float
    dense: float
    sparse: float
    row: int


class HybridCandidates(NamedTuple):
    """Candidate names of a batch of queries with both scores, weight not applied yet (parallel arrays)."""

    n_queries: int
    query: numpy.ndarray  # int64, the query of each candidate name
    row: numpy.ndarray  # int64, the name row
    concept: numpy.ndarray  # int64, the concept index (kb.concept_ids order)
    dense: numpy.ndarray  # float32 in [-1, 1]
    sparse: numpy.ndarray  # float32 in [0, 1]
    slot: Optional[numpy.ndarray] = None  # int64, the concept's round-robin slot (see the module docstring)
    preferred: Optional[numpy.ndarray] = None  # bool, the row is the concept's preferred (canonical) name


def check_weight(weight: Any, *, name: str = "sapbert_linker") -> float:
    """``weight`` as a float, or E784 (NaN, infinite, negative, above :data:`MAX_WEIGHT`, not a number)."""
    ok = isinstance(weight, (int, float)) and not isinstance(weight, bool)
    if not ok or not numpy.isfinite(float(weight)) or not 0.0 <= float(weight) <= MAX_WEIGHT:
        raise ConfigError(Errors.E784.format(what="sparse_weight", value=weight, name=name,
                                             allowed=f"a finite number from 0 (off) to {MAX_WEIGHT:g}"))
    return float(weight)


def gather(index: Any, sparse: Any, texts: Sequence[str], vectors: numpy.ndarray, *, k: int, sparse_k: int,
           semantic_types: Optional[Collection[str]] = None, require_definition: bool = False,
           languages: Optional[Collection[str]] = None, variants: Sequence[Sequence[str]] = (),
           variant_vectors: Optional[numpy.ndarray] = None) -> HybridCandidates:
    """The candidates of ``texts`` (normalised mentions) with query ``vectors`` (see the module docstring).
    ``variants[q]``: query ``q``'s variant texts, ``variant_vectors`` their vectors (rows in that order,
    flattened over the queries); each adds its dense top ``k`` and sparse top ``sparse_k``."""
    if k < 1 or sparse_k < 0:
        raise ConfigError(Errors.E111.format(what="k (1) and sparse_k (0)", minimum=0, value=min(k, sparse_k)))
    if sparse_k > MAX_K:  # 10**20: numpy's "Maximum allowed dimension exceeded" in the sparse search
        raise ConfigError(Errors.E559.format(what="sparse_k", minimum=0, maximum=MAX_K, value=sparse_k))
    kb = index.kb
    n_q = len(texts)
    empty = HybridCandidates(n_q, *(numpy.zeros(0, numpy.int64) for _ in range(3)),
                             numpy.zeros(0, numpy.float32), numpy.zeros(0, numpy.float32), numpy.zeros(0, numpy.int64))
    if n_q == 0:
        return empty
    row_mask, allowed = index._filter(semantic_types, require_definition, languages or index.languages)
    if semantic_types:
        index.check_types(semantic_types)
    vectors = index._check_queries(vectors)
    _, ptr, idx = index._row_csr()
    preferred = index.preferred_rows()
    owner = numpy.asarray([q for q, vs in enumerate(variants) for _ in vs], numpy.int64)
    turn = numpy.asarray([t for vs in variants for t in range(len(vs))], numpy.int64)
    n_lists = 2 * (1 + (int(turn.max()) + 1 if len(turn) else 0))
    cq: List[numpy.ndarray] = []
    cc: List[numpy.ndarray] = []
    cs: List[numpy.ndarray] = []

    def add(queries: Sequence[int], lists: Sequence[numpy.ndarray], list_no: Sequence[int]) -> None:
        for q, concepts, j in zip(queries, lists, list_no):
            cq.append(numpy.full(len(concepts), q, numpy.int64))
            cc.append(numpy.asarray(concepts, numpy.int64))
            cs.append(numpy.arange(len(concepts), dtype=numpy.int64) * n_lists + j)

    q_sparse = sparse.transform(list(texts))
    add(range(n_q), _dense_top(index, vectors, k, row_mask, allowed, ptr, idx), [0] * n_q)
    searchable = sparse_k > 0 and sparse.searchable  # else the sparse side only re-scores the dense candidates
    if searchable:
        add(range(n_q), _sparse_top(sparse, q_sparse, sparse_k, row_mask, allowed, ptr, idx, preferred), [1] * n_q)
    if len(owner):
        flat = [v for vs in variants for v in vs]
        if variant_vectors is None or len(variant_vectors) != len(flat):
            raise ConfigError(Errors.E787.format(rows=None if variant_vectors is None else len(variant_vectors),
                                                 n=len(flat)))
        v_vectors = index._check_queries(variant_vectors)
        add(owner.tolist(), _dense_top(index, v_vectors, k, row_mask, allowed, ptr, idx), (2 + 2 * turn).tolist())
        if searchable:
            add(owner.tolist(), _sparse_top(sparse, sparse.transform(flat), sparse_k, row_mask, allowed, ptr, idx,
                                            preferred), (3 + 2 * turn).tolist())
    q_all, c_all, s_all = numpy.concatenate(cq), numpy.concatenate(cc), numpy.concatenate(cs)
    if not len(q_all):
        return empty
    keys = q_all * len(kb) + c_all
    order = numpy.lexsort((s_all, keys))  # per (query, concept): the best slot first
    first = order[numpy.r_[True, keys[order][1:] != keys[order][:-1]]]
    q_of, c_of, slot_of = q_all[first], c_all[first], s_all[first]
    cptr, crows = index.concept_rows()
    start = numpy.asarray(cptr[c_of], numpy.int64)
    lengths = numpy.asarray(cptr[c_of + 1], numpy.int64) - start
    offsets = numpy.arange(int(lengths.sum()), dtype=numpy.int64) - numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
    rows = numpy.asarray(crows[numpy.repeat(start, lengths) + offsets], numpy.int64)
    q_rows, c_rows, s_rows = numpy.repeat(q_of, lengths), numpy.repeat(c_of, lengths), numpy.repeat(slot_of, lengths)
    if row_mask is not None:
        keep = row_mask[rows]
        rows, q_rows, c_rows, s_rows = rows[keep], q_rows[keep], c_rows[keep], s_rows[keep]
    d = _dense_scores(index, numpy.asarray(vectors, numpy.float32), q_rows, rows)
    s = sparse.pair_scores(q_sparse, q_rows, rows, kb.names)
    return HybridCandidates(n_q, q_rows, rows, c_rows, d, s, s_rows, rows == preferred[c_rows])


def interleaved(candidates: HybridCandidates, k: int) -> HybridCandidates:
    """The candidates of the ``k`` concepts per query with the smallest slots (ties: smaller concept index):
    the ``"interleave"`` selection of the module docstring, before any weight is applied."""
    c = candidates
    if c.slot is None or len(c.row) == 0:
        return c
    keys = c.query * (int(c.concept.max()) + 1) + c.concept
    pair_keys, first = numpy.unique(keys, return_index=True)
    pq, pc, ps = c.query[first], c.concept[first], c.slot[first]
    order = numpy.lexsort((pc, ps, pq))
    counts = numpy.bincount(pq, minlength=c.n_queries)
    starts = numpy.concatenate([[0], numpy.cumsum(counts)[:-1]])
    chosen = pair_keys[order[(numpy.arange(len(order)) - numpy.repeat(starts, counts)) < k]]
    keep = numpy.isin(keys, chosen)
    return HybridCandidates(c.n_queries, c.query[keep], c.row[keep], c.concept[keep], c.dense[keep], c.sparse[keep],
                            c.slot[keep], None if c.preferred is None else c.preferred[keep])


def rank(candidates: HybridCandidates, weight: float, k: int, concept_ids: Sequence[str], *,
         mode: str = "score") -> List[List[HybridScore]]:
    """The top ``k`` concepts per query under ``weight``, picked as ``mode`` says (see the module docstring)."""
    c = interleaved(candidates, k) if check_mode(mode) == "interleave" else candidates
    out: List[List[HybridScore]] = [[] for _ in range(c.n_queries)]
    if len(c.row) == 0:
        return out
    w = float(weight)
    score = numpy.clip((c.dense.astype(numpy.float64) + w * c.sparse) / (1.0 + w), -1.0, 1.0)
    # the best name of each (query, concept) first: ties to the preferred name, then the smaller row
    other = _not_preferred(c)
    order = numpy.lexsort((c.row, other, -score, c.concept, c.query))
    q, con = c.query[order], c.concept[order]
    first = numpy.ones(len(order), dtype=bool)
    first[1:] = (q[1:] != q[:-1]) | (con[1:] != con[:-1])
    best = order[first]
    by_rank = best[numpy.lexsort((c.concept[best], other[best], -score[best], c.query[best]))]
    qs = c.query[by_rank]
    counts = numpy.bincount(qs, minlength=c.n_queries)
    starts = numpy.concatenate([[0], numpy.cumsum(counts)[:-1]])
    keep = (numpy.arange(len(by_rank)) - numpy.repeat(starts, counts)) < k
    for j in by_rank[keep].tolist():
        out[int(c.query[j])].append(HybridScore(concept_ids[int(c.concept[j])], float(score[j]), float(c.dense[j]),
                                                float(c.sparse[j]), int(c.row[j])))
    return out


def hybrid_search(index: Any, sparse: Any, texts: Sequence[str], vectors: numpy.ndarray, *, k: int, sparse_k: int,
                  weight: float, semantic_types: Optional[Collection[str]] = None, require_definition: bool = False,
                  languages: Optional[Collection[str]] = None, mode: str = "score",
                  variants: Sequence[Sequence[str]] = (),
                  variant_vectors: Optional[numpy.ndarray] = None) -> List[List[HybridScore]]:
    """:func:`gather` then :func:`rank`: the top ``k`` concepts of each query under ``weight`` and ``mode``."""
    weight = check_weight(weight)
    mode = check_mode(mode)
    found = gather(index, sparse, texts, vectors, k=k, sparse_k=sparse_k, semantic_types=semantic_types,
                   require_definition=require_definition, languages=languages, variants=variants,
                   variant_vectors=variant_vectors)
    return rank(found, weight, k, index.kb.concept_ids, mode=mode)


def check_mode(mode: Any, *, name: str = "sapbert_linker") -> str:
    """``mode`` if it is one of :data:`CANDIDATE_MODES`, else E786."""
    if not isinstance(mode, str) or mode not in CANDIDATE_MODES:
        raise ConfigError(Errors.E786.format(what="candidates", value=mode,
                                             allowed=f"one of {', '.join(CANDIDATE_MODES)} ([components.{name}])"))
    return mode


def _sparse_top(sparse: Any, q_sparse: Any, sparse_k: int, row_mask: Any, allowed: Any, ptr: numpy.ndarray,
                idx: numpy.ndarray, preferred: Optional[numpy.ndarray] = None) -> List[numpy.ndarray]:
    """The sparse top ``sparse_k`` concept indices per query (transformed queries ``q_sparse``)."""
    s_rows, s_scores = sparse.search(q_sparse, max(4 * sparse_k, sparse_k + 16), row_mask=row_mask)
    ranked, _ = aggregate_batch(s_rows, s_scores, sparse_k, allowed, True, ptr, idx, preferred)
    return [concepts for concepts, _scores in ranked]


def _dense_top(index: Any, vectors: numpy.ndarray, k: int, row_mask: Any, allowed: Any, ptr: numpy.ndarray,
               idx: numpy.ndarray) -> List[numpy.ndarray]:
    """The dense top ``k`` concept indices per query: ``ConceptIndex.search``'s deepening search, by index."""
    n_q = vectors.shape[0]
    out: List[numpy.ndarray] = [numpy.zeros(0, numpy.int64)] * n_q
    n_allowed = len(index) if row_mask is None else int(row_mask.sum())
    per_concept = -(-len(index) // max(1, len(index.kb)))
    depth = min(n_allowed, max(2 * k, k + 16, k * per_concept))
    pending = list(range(n_q))
    while pending and depth > 0:
        rows, scores = index.search_names(vectors[pending], depth, row_mask=row_mask)
        ranked, complete = aggregate_batch(rows, scores, k, allowed, depth >= n_allowed, ptr, idx,
                                           index.preferred_rows())
        for q, (concepts, _scores) in zip(pending, ranked):
            out[q] = concepts
        if depth >= n_allowed:
            break
        pending, depth = [q for q, done in zip(pending, complete.tolist()) if not done], min(n_allowed, depth * 4)
    return out


def top1(candidates: HybridCandidates, weights: Sequence[float]) -> numpy.ndarray:
    """The best concept index per query (-1: no candidate) under each of ``weights``, ``[len(weights), n_q]``:
    what :func:`rank` puts first, in one pass over the candidates per weight (for tuning)."""
    c = candidates
    out = numpy.full((len(weights), c.n_queries), -1, dtype=numpy.int64)
    if len(c.row) == 0:
        return out
    # per query, the concepts' preferred names first, then concepts ascending: the first best is the tie winner
    other = _not_preferred(c)
    order = numpy.lexsort((c.concept, other, c.query))
    q, con = c.query[order], c.concept[order]
    d, s = c.dense[order].astype(numpy.float64), c.sparse[order].astype(numpy.float64)
    starts = numpy.flatnonzero(numpy.r_[True, q[1:] != q[:-1]])
    for i, w in enumerate(weights):
        score = numpy.clip((d + float(w) * s) / (1.0 + float(w)), -1.0, 1.0)
        best = numpy.maximum.reduceat(score, starts)
        hit = numpy.flatnonzero(score == numpy.repeat(best, numpy.diff(numpy.r_[starts, len(q)])))
        first = hit[numpy.r_[True, q[hit][1:] != q[hit][:-1]]]
        out[i, q[first]] = con[first]
    return out


def _not_preferred(c: HybridCandidates) -> numpy.ndarray:
    """True where a candidate row is not its concept's preferred name (all False without the flags: ties by id)."""
    return numpy.zeros(len(c.row), dtype=bool) if c.preferred is None else ~c.preferred


def _dense_scores(index: Any, vectors: numpy.ndarray, q_of: numpy.ndarray, rows: numpy.ndarray) -> numpy.ndarray:
    """Cosine of query ``q_of[j]`` and stored name vector ``rows[j]``, float32 in [-1, 1]."""
    out = numpy.empty(len(rows), dtype=numpy.float32)
    if len(rows) == 0:
        return out
    unique, inverse = numpy.unique(rows, return_inverse=True)
    names = index.name_vectors(unique)
    for start in range(0, len(rows), _PAIRS_PER_BLOCK):  # each pair's two vectors, multiplied and summed
        part = slice(start, start + _PAIRS_PER_BLOCK)
        out[part] = numpy.einsum("ij,ij->i", vectors[q_of[part]], names[inverse[part]])
    return numpy.clip(out, -1.0, 1.0)


__all__ = ["HybridScore", "HybridCandidates", "check_weight", "check_mode", "gather", "interleaved", "rank", "top1",
           "hybrid_search", "MAX_WEIGHT", "CANDIDATE_MODES"]
