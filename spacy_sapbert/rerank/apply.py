"""Re-order the bi-encoder's candidates of each mention with a cross-encoder.

Only mentions whose two best candidates lie within ``margin`` of each other are re-ranked (``margin >= 1``:
every mention, whatever the scores); of their top ``k`` candidates, those whose score lies within ``window`` of the
best (the best two at least; ``window >= 1``: all ``k``) are scored by the re-ranker and ordered by
``logit + dense_weight * cosine``, the re-ranker's logit combined with the name encoder's score (``dense_weight``
0: the re-ranker alone). Their scores become a softmax over those combined values (the listwise training loss's
probabilities when ``dense_weight`` is 0: in [0, 1], summing to 1; ties keep the candidate stage's order, which
puts the concept whose preferred name a shared name is first, then the smaller id). Ordering by
``logit + w * cosine`` is ordering by ``cosine + (1 / w) * log p``: the dense score with the re-ranker's
log-probability added, the combination that lets a briefly trained re-ranker help without overruling the
encoder where it is sure. The other mentions keep their list as it was.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ..errors import ConfigError, Errors, IncompatibleError
from .candidates import nearest_names

Ranked = List[Tuple[str, float]]
# chosen on held-out data (NCBI dev, the held-out tenth of BC5CDR train) at the default margin and weight: 4 scores as
# well as 16 there (80.3 vs 80.2, 76.3 vs 76.0) at twice the speed; 2 is worse (benchmarks/reranker_unseen.py
# --rerank-k 4 16 8 2, results reranker_unseen, docs/reranker.md)
DEFAULT_RERANK_K = 4


# the linker's defaults: tuned on held-out data (NCBI dev) for a MiniLM re-ranker; re-ranking every mention with
# the re-ranker alone (margin 1, weight 0) lowered NCBI test acc@1 (docs/reranker.md)
DEFAULT_RERANK_MARGIN = 0.05
DEFAULT_DENSE_WEIGHT = 30.0
MAX_DENSE_WEIGHT = 1000.0
# the candidates of a re-ranked mention that are read: those within this of its best score (1.0: all reranker_k). No
# window kept held-out acc@1 at the default margin and weight (NCBI dev 80.2 with all four, 80.1 with windows 0.08
# and 0.1: a smaller int8 batch gives other logits), so the default reads all (benchmarks/reranker_unseen.py,
# results reranker_window, table "which close calls are re-ranked"; docs/reranker.md)
DEFAULT_RERANK_WINDOW = 1.0


def check_dense_weight(value: Any) -> float:
    """``reranker_dense_weight`` as a float: a finite number from 0 to 1000 (E813 otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_DENSE_WEIGHT:
        raise ConfigError(Errors.E813.format(value=value, maximum=f"{MAX_DENSE_WEIGHT:g}"))
    return float(value)


K_ALLOWED = "an integer from 2 to 1024"
MARGIN_ALLOWED = "a finite number >= 0 (1.0: every mention)"
WINDOW_ALLOWED = "a finite number >= 0 (1.0: all reranker_k candidates)"


def _k_ok(k: Any) -> bool:
    return not isinstance(k, bool) and isinstance(k, int) and 2 <= k <= 1024


def _margin_ok(margin: Any) -> bool:
    return not isinstance(margin, bool) and isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 0


def check_rerank_settings(k: Any, margin: Any, dense_weight: Any = DEFAULT_DENSE_WEIGHT, window: Any = 1.0) -> None:
    """``k`` an integer from 2 to 1024, ``margin`` and ``window`` finite numbers >= 0 (E810 otherwise),
    ``dense_weight`` a finite number from 0 to 1000 (E813)."""
    bad = bad_rerank_setting(k, margin, window)
    if bad is not None:
        value = {"reranker_k": k, "reranker_margin": margin, "reranker_window": window}[bad[0]]
        raise ConfigError(Errors.E810.format(name=bad[0], value=value, allowed=bad[1]))
    check_dense_weight(dense_weight)


def bad_rerank_setting(k: Any, margin: Any, window: Any = 1.0) -> Optional[Tuple[str, str]]:
    """``(key, allowed)`` of the first of ``reranker_k`` / ``reranker_margin`` / ``reranker_window`` that
    :func:`check_rerank_settings` would refuse, else None (for callers that report the key in their own error)."""
    if not _k_ok(k):
        return "reranker_k", K_ALLOWED
    if not _margin_ok(margin):
        return "reranker_margin", MARGIN_ALLOWED
    if not _margin_ok(window):
        return "reranker_window", WINDOW_ALLOWED
    return None


def needs_rerank(ranked: Ranked, margin: float) -> bool:
    """Whether a mention's list is re-ranked: two or more candidates whose best two are within ``margin``."""
    return len(ranked) >= 2 and (margin >= 1.0 or ranked[0][1] - ranked[1][1] <= margin)


def window_size(ranked: Ranked, k: int, window: float) -> int:
    """How many of a re-ranked mention's candidates the re-ranker reads: of its top ``k`` (``ranked`` best
    first), those whose score is at least the best one's less ``window``, and the best two whatever their scores
    (``window >= 1``: all ``k``)."""
    top = min(k, len(ranked))
    if window >= 1.0 or top <= 2:
        return top
    bar = ranked[0][1] - window
    n = 2
    while n < top and ranked[n][1] >= bar:
        n += 1
    return n


def candidate_logits(reranker: Any, index: Any, mentions: Sequence[str], query_vectors: numpy.ndarray,
                     ranked: Sequence[Ranked], todo: Sequence[int], *, k: int, window: float = 1.0,
                     batch_size: int = 64) -> Dict[int, Tuple[List[str], List[float], List[float]]]:
    """For each mention ``q`` of ``todo``: the concept ids of its top ``k`` candidates within ``window`` of its
    best score (:func:`window_size`) that have a name to read, their dense scores and the re-ranker's logits of
    (mention, the concept's name nearest to the mention). Each mention's pairs are scored as a batch of their own
    (``score_groups``), so its logits do not depend on the other mentions of ``todo``."""
    tops = [ranked[q][:window_size(ranked[q], k, window)] for q in todo]
    ids = [[cid for cid, _ in top] for top in tops]
    names = nearest_names(index, query_vectors[list(todo)], ids) if todo else []
    out: Dict[int, Tuple[List[str], List[float], List[float]]] = {}
    groups: List[Tuple[str, List[str]]] = []
    for q, top, cnames in zip(todo, tops, names):
        kept = [(cid, float(dense), name) for (cid, dense), name in zip(top, cnames) if name is not None]
        out[q] = ([cid for cid, _, _ in kept], [dense for _, dense, _ in kept], [])
        groups.append((mentions[q], [name for _, _, name in kept]))
    scored = [g for g in groups if g[1]]
    logits = iter(reranker.score_groups(scored, batch_size=batch_size) if scored else [])
    for q, (_, cnames) in zip(todo, groups):
        if cnames:
            out[q][2].extend(next(logits).astype(numpy.float64).tolist())
    return out


def combine(cids: Sequence[str], dense: Sequence[float], logits: Sequence[float], dense_weight: float) -> Ranked:
    """``cids`` ordered by ``logit + dense_weight * dense``, scored by the softmax of those values. Ties keep the
    order of ``cids`` (the candidate stage's: two concepts sharing the mention's name get the same logit and the
    same dense score, and the one whose preferred name it is stays first)."""
    values = numpy.asarray(logits, dtype=numpy.float64) + dense_weight * numpy.asarray(dense, dtype=numpy.float64)
    probs = numpy.exp(values - values.max())
    probs /= probs.sum()
    order = sorted(range(len(cids)), key=lambda i: (-values[i], i))
    return [(cids[i], float(probs[i])) for i in order]


def rerank(reranker: Any, index: Any, mentions: Sequence[str], query_vectors: numpy.ndarray,
           ranked: Sequence[Ranked], *, k: int = DEFAULT_RERANK_K, margin: float = DEFAULT_RERANK_MARGIN,
           dense_weight: float = DEFAULT_DENSE_WEIGHT, window: float = 1.0, batch_size: int = 64,
           keep: Optional[Sequence[bool]] = None) -> List[Ranked]:
    """``ranked`` with the lists of the mentions that need it (:func:`needs_rerank`) replaced by their top ``k``
    candidates within ``window`` of the best (:func:`window_size`; 1.0: all ``k``, the linker's default is
    :data:`DEFAULT_RERANK_WINDOW`) ordered by the re-ranker's logit + ``dense_weight`` x their dense score
    (:func:`combine`).
    ``mentions`` are the normalised texts the vectors were encoded from; ``ranked``'s scores the dense ones;
    ``keep[q]`` True: mention ``q`` is never re-ranked (the linker's ``reranker_skip_names``: a KB name)."""
    check_rerank_settings(k, margin, dense_weight, window)
    out = [list(r) for r in ranked]
    todo = [i for i, r in enumerate(ranked) if needs_rerank(r, margin) and not (keep is not None and keep[i])]
    for q, (cids, dense, logits) in candidate_logits(reranker, index, mentions, query_vectors, ranked, todo, k=k,
                                                     window=window, batch_size=batch_size).items():
        if cids:  # else no candidate with a name to read: the list stays as it was
            out[q] = combine(cids, dense, logits, dense_weight)
    return out


def check_compatible(meta: dict, *, kb_checksum: str, encoder_fingerprint: str, path: Optional[Any] = None,
                     owner: str = "the linker's") -> None:
    """Refuse a re-ranker trained for another KB or another name encoder (E811, naming both and ``owner``, whose
    KB and encoder they are: ``"the linker's"``, or e.g. an evaluate system's)."""
    for what, theirs, ours in (("KB", meta.get("kb_checksum"), kb_checksum),
                               ("name encoder", meta.get("encoder_fingerprint"), encoder_fingerprint)):
        if theirs != ours:
            raise IncompatibleError(Errors.E811.format(path=path or "<memory>", what=what, theirs=theirs, ours=ours,
                                                       owner=owner))


__all__ = ["DEFAULT_RERANK_K", "DEFAULT_RERANK_MARGIN", "DEFAULT_DENSE_WEIGHT", "DEFAULT_RERANK_WINDOW", "rerank",
           "needs_rerank", "window_size", "candidate_logits", "combine", "check_rerank_settings", "bad_rerank_setting",
           "check_dense_weight", "check_compatible"]
