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
_PAIR_CHUNK = 65_536


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
    find = getattr(kb.concept_ids, "find", None) or {c: i for i, c in enumerate(kb.concept_ids)}.get
    dense = index.search(vectors, k, semantic_types=semantic_types, require_definition=require_definition,
                         languages=languages)
    cq = [q for q, ranked in enumerate(dense) for _ in ranked]
    cc = [find(cid) for ranked in dense for cid, _ in ranked]
    q_sparse = sparse.transform(list(texts))
    if sparse_k > 0 and sparse.searchable:  # else the sparse side only re-scores the dense candidates
        s_rows, s_scores = sparse.search(q_sparse, max(4 * sparse_k, sparse_k + 16), row_mask=row_mask)
        _, ptr, idx = index._row_csr()
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
    for start in range(0, len(rows), _PAIR_CHUNK):
        sl = slice(start, start + _PAIR_CHUNK)
        out[sl] = numpy.einsum("ij,ij->i", names[inverse[sl]], vectors[q_of[sl]])
    return numpy.clip(out, -1.0, 1.0)


__all__ = ["HybridScore", "HybridCandidates", "check_weight", "gather", "rank", "hybrid_search", "MAX_WEIGHT"]
