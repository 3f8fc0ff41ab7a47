"""What the cross-encoder reads for a candidate concept: the concept's name nearest to the mention.

A concept of a large KB has many names; the re-ranker sees one per candidate: the name whose stored vector is
closest to the mention's (the name that put the concept into the bi-encoder's top k). For a KB name used as a
training pseudo-mention, that name itself is left out (``exclude_rows``), so that the pair is not a copy.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy


def nearest_names(index: Any, query_vectors: numpy.ndarray, candidates: Sequence[Sequence[str]], *,
                  exclude_rows: Optional[Sequence[int]] = None) -> List[List[Optional[str]]]:
    """For each query ``q`` and each concept id of ``candidates[q]``: the name (``kb.names[row]``) of the
    concept's row with the highest ``vector . query``, ties to the lower row; ``None`` for a concept left with
    no row (its only name excluded). ``exclude_rows[q]`` (-1: none) is a row never chosen for query ``q``."""
    kb = index.kb
    out: List[List[Optional[str]]] = []
    for q, cids in enumerate(candidates):
        skip = -1 if exclude_rows is None else int(exclude_rows[q])
        row_lists = [[r for r in kb.rows_of_concept(cid) if r != skip] for cid in cids]
        flat = sorted({r for rows in row_lists for r in rows})
        if not flat:
            out.append([None] * len(cids))
            continue
        position = {r: i for i, r in enumerate(flat)}
        sims = index.name_vectors(flat) @ numpy.asarray(query_vectors[q], dtype=numpy.float32)
        names: List[Optional[str]] = []
        for rows in row_lists:
            if not rows:
                names.append(None)
                continue
            best = max(sorted(rows), key=lambda r: (float(sims[position[r]]), -r))
            names.append(kb.names[best])
        out.append(names)
    return out


def split_gold(ranked: Sequence[Tuple[str, float]], gold: str, k: int) -> Tuple[List[str], bool]:
    """The gold concept first, then the best ``k - 1`` other candidates (hard negatives), and whether the
    gold concept was among the first ``k`` candidates."""
    ids = [cid for cid, _ in ranked]
    found = gold in ids[:k]
    return [gold] + [cid for cid in ids if cid != gold][: k - 1], found


__all__ = ["nearest_names", "split_gold"]
