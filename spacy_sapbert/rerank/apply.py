"""Re-order the bi-encoder's candidates of each mention with a cross-encoder.

Only mentions whose two best candidates lie within ``margin`` of each other are re-ranked (``margin >= 1``:
every mention, whatever the scores); their top ``k`` candidates are scored by the re-ranker and ordered by its
probability that each is the right one among them (a softmax over their logits, as the listwise training
loss: scores in [0, 1] summing to 1; ties by concept id); the others keep their list as it was.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy

from ..errors import ConfigError, Errors
from .candidates import nearest_names

Ranked = List[Tuple[str, float]]
DEFAULT_RERANK_K = 16


def check_rerank_settings(k: Any, margin: Any) -> None:
    """``k`` an integer from 2 to 1024, ``margin`` a finite number >= 0 (E810 otherwise)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= 1024:
        raise ConfigError(Errors.E810.format(name="reranker_k", value=k, allowed="an integer from 2 to 1024"))
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) or margin < 0:
        raise ConfigError(Errors.E810.format(name="reranker_margin", value=margin,
                                             allowed="a finite number >= 0 (1.0: every mention)"))


def needs_rerank(ranked: Ranked, margin: float) -> bool:
    """Whether a mention's list is re-ranked: two or more candidates whose best two are within ``margin``."""
    return len(ranked) >= 2 and (margin >= 1.0 or ranked[0][1] - ranked[1][1] <= margin)


def rerank(reranker: Any, index: Any, mentions: Sequence[str], query_vectors: numpy.ndarray,
           ranked: Sequence[Ranked], *, k: int = DEFAULT_RERANK_K, margin: float = 1.0,
           batch_size: int = 64) -> List[Ranked]:
    """``ranked`` with the lists of the mentions that need it (:func:`needs_rerank`) replaced by their top ``k``
    candidates ordered by the re-ranker's probability. ``mentions`` are the normalised texts the vectors were
    encoded from."""
    check_rerank_settings(k, margin)
    out = [list(r) for r in ranked]
    todo = [i for i, r in enumerate(ranked) if needs_rerank(r, margin)]
    if not todo:
        return out
    ids = [[cid for cid, _ in ranked[i][:k]] for i in todo]
    names = nearest_names(index, query_vectors[todo], ids)
    pair_m: List[str] = []
    pair_n: List[str] = []
    owners: List[Tuple[int, str]] = []
    for q, (cids, cnames) in zip(todo, zip(ids, names)):
        for cid, name in zip(cids, cnames):
            if name is not None:
                pair_m.append(mentions[q])
                pair_n.append(name)
                owners.append((q, cid))
    logits = reranker.score(pair_m, pair_n, batch_size=batch_size) if pair_m else numpy.zeros(0, numpy.float32)
    by_query: dict = {q: ([], []) for q in todo}
    for (q, cid), logit in zip(owners, logits.astype(numpy.float64).tolist()):
        by_query[q][0].append(cid)
        by_query[q][1].append(logit)
    for q in todo:
        cids, values = by_query[q]
        if not cids:
            continue  # no candidate with a name to read: the list stays as it was
        values = numpy.asarray(values)
        probs = numpy.exp(values - values.max())
        probs /= probs.sum()
        out[q] = sorted(zip(cids, probs.tolist()), key=lambda item: (-item[1], item[0]))
    return out


def check_compatible(meta: dict, *, kb_checksum: str, encoder_fingerprint: str, path: Optional[Any] = None) -> None:
    """Refuse a re-ranker trained for another KB or another name encoder (E811, naming both)."""
    from ..errors import IncompatibleError

    for what, theirs, ours in (("KB", meta.get("kb_checksum"), kb_checksum),
                               ("name encoder", meta.get("encoder_fingerprint"), encoder_fingerprint)):
        if theirs != ours:
            raise IncompatibleError(Errors.E811.format(path=path or "<memory>", what=what, theirs=theirs, ours=ours))


__all__ = ["DEFAULT_RERANK_K", "rerank", "needs_rerank", "check_rerank_settings", "check_compatible"]
