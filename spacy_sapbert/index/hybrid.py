"""Hybrid (dense + sparse) concept ranking, BioSyn style, over a :class:`ConceptIndex` and its
:class:`~.sparse.SparseIndex`.

Candidates of a query: the dense top ``k`` concepts (``ConceptIndex.search``) united with the sparse top
``sparse_k`` concepts (char n-gram tf-idf, max over names; none with ``sparse_k = 0`` or above
:data:`~.sparse.SEARCH_MAX_NAMES` names, where the sparse side only re-scores the dense candidates). Every name of every candidate concept (that
passes the filters: semantic types, definitions, languages) gets both scores: the dense one from the
stored name vectors (``ConceptIndex.name_vectors``), the sparse one from the name's string. A name scores

    score = (dense + w * sparse) / (1 + w)        dense in [-1, 1] (cosine), sparse in [0, 1]

so a score stays in [-1, 1] and ``w = 0`` is the dense ranking; a concept scores its best name's score,
concepts are ranked by (-score, concept id). :func:`gather` computes the candidates' two scores once and
:func:`rank` applies a weight: tuning tries many weights on one gather.
"""
from __future__ import annotations

from typing import Any, Collection, List, NamedTuple, Optional, Sequence

import numpy

from ..errors import ConfigError, Errors
from .aggregate import aggregate_batch

MAX_WEIGHT = 100.0  # above it the dense part is below 1% of the score: use the sparse index alone
_MATMUL_CELLS = 16_000_000  # query x candidate-name scores one dense block may hold


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


def check_weight(weight: Any, *, name: str = "sapbert_linker") -> float:
    """``weight`` as a float, or E784 (NaN, infinite, negative, above :data:`MAX_WEIGHT`, not a number)."""
    ok = isinstance(weight, (int, float)) and not isinstance(weight, bool)
    if not ok or not numpy.isfinite(float(weight)) or not 0.0 <= float(weight) <= MAX_WEIGHT:
        raise ConfigError(Errors.E784.format(what="sparse_weight", value=weight, name=name,
                                             allowed=f"a finite number from 0 (off) to {MAX_WEIGHT:g}"))
    return float(weight)


def gather(index: Any, sparse: Any, texts: Sequence[str], vectors: numpy.ndarray, *, k: int, sparse_k: int,
           semantic_types: Optional[Collection[str]] = None, require_definition: bool = False,
           languages: Optional[Collection[str]] = None) -> HybridCandidates:
    """The candidates of ``texts`` (normalised mentions) with query ``vectors`` (see the module docstring)."""
    if k < 1 or sparse_k < 0:
        raise ConfigError(Errors.E111.format(what="k (1) and sparse_k (0)", minimum=0, value=min(k, sparse_k)))
    kb = index.kb
    n_q = len(texts)
    empty = HybridCandidates(n_q, *(numpy.zeros(0, numpy.int64) for _ in range(3)),
                             numpy.zeros(0, numpy.float32), numpy.zeros(0, numpy.float32))
    if n_q == 0:
        return empty
    row_mask, allowed = index._filter(semantic_types, require_definition, languages or index.languages)
    if semantic_types:
        index.check_types(semantic_types)
    vectors = index._check_queries(vectors)
    _, ptr, idx = index._row_csr()
    cq: List[int] = []
    cc: List[int] = []
    for q, concepts in enumerate(_dense_top(index, vectors, k, row_mask, allowed, ptr, idx)):
        cq += [q] * len(concepts)
        cc += concepts.tolist()
    q_sparse = sparse.transform(list(texts))
    if sparse_k > 0 and sparse.searchable:  # else the sparse side only re-scores the dense candidates
        s_rows, s_scores = sparse.search(q_sparse, max(4 * sparse_k, sparse_k + 16), row_mask=row_mask)
        ranked, _ = aggregate_batch(s_rows, s_scores, sparse_k, allowed, True, ptr, idx)
        for q, (concepts, _scores) in enumerate(ranked):
            cq += [q] * len(concepts)
            cc += concepts.tolist()
    if not cq:
        return empty
    pairs = numpy.unique(numpy.asarray(cq, numpy.int64) * len(kb) + numpy.asarray(cc, numpy.int64))
    q_of, c_of = pairs // len(kb), pairs % len(kb)
    cptr, crows = _concept_rows(index)
    start = numpy.asarray(cptr[c_of], numpy.int64)
    lengths = numpy.asarray(cptr[c_of + 1], numpy.int64) - start
    offsets = numpy.arange(int(lengths.sum()), dtype=numpy.int64) - numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
    rows = numpy.asarray(crows[numpy.repeat(start, lengths) + offsets], numpy.int64)
    q_rows, c_rows = numpy.repeat(q_of, lengths), numpy.repeat(c_of, lengths)
    if row_mask is not None:
        keep = row_mask[rows]
        rows, q_rows, c_rows = rows[keep], q_rows[keep], c_rows[keep]
    d = _dense_scores(index, numpy.asarray(vectors, numpy.float32), q_rows, rows)
    s = sparse.pair_scores(q_sparse, q_rows, rows, kb.names)
    return HybridCandidates(n_q, q_rows, rows, c_rows, d, s)


def rank(candidates: HybridCandidates, weight: float, k: int, concept_ids: Sequence[str]) -> List[List[HybridScore]]:
    """The top ``k`` concepts per query under ``weight`` (see the module docstring)."""
    c = candidates
    out: List[List[HybridScore]] = [[] for _ in range(c.n_queries)]
    if len(c.row) == 0:
        return out
    w = float(weight)
    score = numpy.clip((c.dense.astype(numpy.float64) + w * c.sparse) / (1.0 + w), -1.0, 1.0)
    # the best name of each (query, concept) first: ties to the smaller row
    order = numpy.lexsort((c.row, -score, c.concept, c.query))
    q, con = c.query[order], c.concept[order]
    first = numpy.ones(len(order), dtype=bool)
    first[1:] = (q[1:] != q[:-1]) | (con[1:] != con[:-1])
    best = order[first]
    by_rank = best[numpy.lexsort((c.concept[best], -score[best], c.query[best]))]
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
                  languages: Optional[Collection[str]] = None) -> List[List[HybridScore]]:
    """:func:`gather` then :func:`rank`: the top ``k`` concepts of each query under ``weight``."""
    weight = check_weight(weight)
    found = gather(index, sparse, texts, vectors, k=k, sparse_k=sparse_k, semantic_types=semantic_types,
                   require_definition=require_definition, languages=languages)
    return rank(found, weight, k, index.kb.concept_ids)


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
        ranked, complete = aggregate_batch(rows, scores, k, allowed, depth >= n_allowed, ptr, idx)
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
    order = numpy.lexsort((c.concept, c.query))  # per query, concepts ascending: the first best is the tie winner
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


def _concept_rows(index: Any) -> Any:
    """The KB's concept → rows CSR, cached on the index per KB checksum (rebuilt after kb.add_alias)."""
    cached = getattr(index, "_concept_rows_csr", None)
    if cached is None or cached[0] != index.kb.checksum:
        cached = (index.kb.checksum, *index.kb.concept_row_csr())
        index._concept_rows_csr = cached
    return cached[1], cached[2]


def _dense_scores(index: Any, vectors: numpy.ndarray, q_of: numpy.ndarray, rows: numpy.ndarray) -> numpy.ndarray:
    """Cosine of query ``q_of[j]`` and stored name vector ``rows[j]``, float32 in [-1, 1]."""
    out = numpy.empty(len(rows), dtype=numpy.float32)
    if len(rows) == 0:
        return out
    unique, inverse = numpy.unique(rows, return_inverse=True)
    names = index.name_vectors(unique.tolist())
    # one matrix product per block of queries (BLAS), then the pairs picked out of it
    block = max(1, _MATMUL_CELLS // max(1, len(unique)))
    for start in range(0, vectors.shape[0], block):
        sel = numpy.flatnonzero((q_of >= start) & (q_of < start + block))
        if len(sel):
            sims = vectors[start:start + block] @ names.T
            out[sel] = sims[q_of[sel] - start, inverse[sel]]
    return numpy.clip(out, -1.0, 1.0)


__all__ = ["HybridScore", "HybridCandidates", "check_weight", "gather", "rank", "top1", "hybrid_search", "MAX_WEIGHT"]
