"""Where an index's recall@1 goes: exact ground truth, concept recall and the miss decomposition.

Used by ``umls_scale.py --diagnose``, ``umls_scale_sweep.py`` and ``umls_scale_real.py``. A top-1 miss
(the index's best concept is not exact search's best concept) is put in one of three classes:

- **tie**: the concept the index returned scores within ``TIE`` (1e-3) of exact search's best score:
  names of different concepts (or one name shared by two concepts) that are equally close; any
  index, exact search over float16 included, could return either (concept vs row);
- **graph**: exact search's best row is not among the rows the graph returned (candidates before
  re-scoring): the ANN graph did not reach it, and a deeper search or a better graph is the fix;
- **other**: neither (e.g. the concept aggregation ran out of rows).

``f16`` is a ceiling, where float32 vectors exist (real embeddings): concept recall@1 of exact search
over the float16-rounded vectors against exact search over the float32 ones.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

TIE = 1e-3


def exact_rows(X: Any, Q: numpy.ndarray, depth: int, chunk: int = 200_000,
               row_mask: Optional[numpy.ndarray] = None) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """The ``depth`` best rows and scores of each query by exact inner product over ``X`` (any dtype,
    may be memory-mapped; read ``chunk`` rows at a time as float32), best first, ties by row."""
    import torch

    Qt = torch.from_numpy(numpy.ascontiguousarray(Q, dtype=numpy.float32))
    best_s = torch.full((len(Q), 0), -float("inf"))
    best_r = torch.zeros((len(Q), 0), dtype=torch.int64)
    for start in range(0, X.shape[0], chunk):
        part = torch.from_numpy(numpy.ascontiguousarray(X[start:start + chunk], dtype=numpy.float32))
        S = Qt @ part.T
        if row_mask is not None:
            S[:, ~torch.from_numpy(row_mask[start:start + len(part)])] = -float("inf")
        s, r = torch.topk(S, min(depth, S.shape[1]), dim=1)
        cat_s, cat_r = torch.cat([best_s, s], 1), torch.cat([best_r, r + start], 1)
        # order by (-score, row): sort by row, then a stable sort by score
        key = torch.argsort(cat_r, dim=1, stable=True)
        cat_s, cat_r = torch.gather(cat_s, 1, key), torch.gather(cat_r, 1, key)
        top = torch.argsort(-cat_s, dim=1, stable=True)[:, :depth]
        best_s, best_r = torch.gather(cat_s, 1, top), torch.gather(cat_r, 1, top)
    return best_r.numpy(), best_s.numpy()


def concepts_of(kb: Any, rows: Sequence[int], scores: Sequence[float], k: int, keep: Any = None) -> List[str]:
    """The ``k`` best concepts of ranked rows (a concept's score is its best row's; ties by id)."""
    best: Dict[str, float] = {}
    for r, s in zip(rows, scores):
        if r < 0 or not numpy.isfinite(s):
            continue
        for cid in kb.concepts_of_row(int(r)):
            if cid not in best and (keep is None or cid in keep):
                best[cid] = float(s)
    return [c for c, _ in sorted(best.items(), key=lambda it: (-it[1], it[0]))[:k]]


def recall(results: List[List[Any]], gt: List[List[str]]) -> Dict[str, float]:
    """Concept recall@1 and @5 of ``results`` (``[(concept, score)]`` per query) against ``gt``."""
    r1 = numpy.mean([bool(r) and bool(g) and r[0][0] == g[0] for r, g in zip(results, gt)])
    r5 = numpy.mean([len({c for c, _ in r} & set(g[:5])) / max(1, min(5, len(g))) for r, g in zip(results, gt)])
    return {"recall1": round(float(r1), 4), "recall5": round(float(r5), 4)}


def candidate_rows(index: Any, Q: numpy.ndarray, k: int = 5, batch: int = 256) -> numpy.ndarray:
    """The rows the index's first search round returns (the graph's candidates after exact re-scoring:
    the best row of the candidates is among them whenever the graph found it)."""
    npc = -(-len(index) // max(1, len(index.kb)))
    depth = max(2 * k, k + 16, k * npc)
    return numpy.concatenate([index.search_names(Q[s:s + batch], depth)[0] for s in range(0, len(Q), batch)])


def diagnose(index: Any, kb: Any, Q: numpy.ndarray, results: List[List[Any]], gt_rows: numpy.ndarray,
             gt_scores: numpy.ndarray, gt: List[List[str]], X: Any) -> Dict[str, float]:
    """Fractions of the queries that are top-1 misses of each class (see the module doc), and the
    graph's recall of exact search's best row."""
    cand = candidate_rows(index, Q)
    top_row = gt_rows[:, 0]
    found = (cand == top_row[:, None]).any(1)
    tie = graph = other = 0
    for i, (r, g) in enumerate(zip(results, gt)):
        if r and g and r[0][0] == g[0]:
            continue
        got = r[0][0] if r else None
        got_score = max((float(numpy.asarray(X[j], dtype=numpy.float32) @ Q[i]) for j in kb.rows_of_concept(got)),
                        default=-1.0) if got else -1.0
        if got_score >= gt_scores[i, 0] - TIE:
            tie += 1
        elif not found[i]:
            graph += 1
        else:
            other += 1
    n = max(1, len(results))
    return {"miss_tie": round(tie / n, 4), "miss_graph": round(graph / n, 4), "miss_other": round(other / n, 4),
            "top_row_found": round(float(found.mean()), 4)}


def shape(X: Any, n_sample: int = 2000, k: int = 20, rows: int = 200_000) -> Dict[str, float]:
    """What the vectors look like to a graph index: PCA participation ratio, dimensions holding 90 % of
    the variance (over the first ``rows`` rows) and the median local intrinsic dimension (Levina-Bickel
    MLE over the ``k`` nearest rows of ``n_sample`` sampled rows)."""
    A = numpy.asarray(X[:rows], dtype=numpy.float64)
    ev = numpy.sort(numpy.linalg.eigvalsh(numpy.cov((A - A.mean(0)).T)))[::-1].clip(min=0)
    sample = numpy.random.default_rng(1).choice(X.shape[0], size=min(n_sample, X.shape[0]), replace=False)
    _, s = exact_rows(X, numpy.asarray(X[numpy.sort(sample)], dtype=numpy.float32), k + 1)
    d = numpy.sqrt(numpy.maximum(2.0 - 2.0 * s[:, 1:], 1e-12))
    lid = (k - 1) / numpy.log(d[:, -1:] / d[:, :-1]).sum(1)
    return {"participation_ratio": round(float(ev.sum() ** 2 / (ev ** 2).sum()), 1),
            "dims_90": int(numpy.searchsorted(numpy.cumsum(ev) / ev.sum(), 0.90) + 1),
            "local_id_median": round(float(numpy.median(lid)), 1),
            "mean_norm": round(float(numpy.linalg.norm(A.mean(0))), 3)}


def f16_ceiling(kb: Any, X32: numpy.ndarray, Q: numpy.ndarray, depth: int) -> Dict[str, float]:
    """Concept recall@1/@5 of exact search over float16-rounded vectors against exact search over float32."""
    r32, s32 = exact_rows(X32, Q, depth)
    X16 = numpy.asarray(X32, dtype=numpy.float16)
    r16, s16 = exact_rows(X16, Q, depth)
    gt32 = [concepts_of(kb, r32[i], s32[i], 5) for i in range(len(Q))]
    res16 = [[(c, 0.0) for c in concepts_of(kb, r16[i], s16[i], 5)] for i in range(len(Q))]
    out = recall(res16, gt32)
    return {"f16_recall1": out["recall1"], "f16_recall5": out["recall5"]}
