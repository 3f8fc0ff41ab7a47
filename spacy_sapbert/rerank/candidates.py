"""What the cross-encoder reads for a candidate concept: the concept's name nearest to the mention.

A concept of a large KB has many names; the re-ranker sees one per candidate: the name whose stored vector is
closest to the mention's (the name that put the concept into the bi-encoder's top k). For a KB name used as a
training pseudo-mention, that name itself is left out (``exclude_rows``), so that the pair is not a copy.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

# distinct name rows whose stored vectors one read fetches (384-d float32: 25 MB)
ROWS_PER_READ = 16_384


def nearest_names(index: Any, query_vectors: numpy.ndarray, candidates: Sequence[Sequence[str]], *,
                  exclude_rows: Optional[Sequence[int]] = None,
                  rows_per_read: int = ROWS_PER_READ) -> List[List[Optional[str]]]:
    """For each query ``q`` and each concept id of ``candidates[q]``: the name (``kb.names[row]``) of the
    concept's row with the highest ``vector . query``, ties to the lower row; ``None`` for a concept left with
    no row (its only name excluded). ``exclude_rows[q]`` (-1: none) is a row never chosen for query ``q``.
    The stored vectors are read once per group of queries (up to ``rows_per_read`` distinct rows, one query's at
    least); each query's scores are the same product as read alone (its rows in the same order)."""
    kb = index.kb
    row_lists: List[List[List[int]]] = []
    flats: List[List[int]] = []
    for q, cids in enumerate(candidates):
        skip = -1 if exclude_rows is None else int(exclude_rows[q])
        rows_of = [[r for r in kb.rows_of_concept(cid) if r != skip] for cid in cids]
        row_lists.append(rows_of)
        flats.append(sorted({r for rows in rows_of for r in rows}))
    out: List[List[Optional[str]]] = []
    start = 0
    while start < len(flats):
        stop, group = start, set()
        while stop < len(flats):
            new = [r for r in flats[stop] if r not in group]
            if stop > start and len(group) + len(new) > rows_per_read:
                break
            group.update(new)
            stop += 1
        read = sorted(group)
        stored = index.name_vectors(read) if read else None
        position = {r: i for i, r in enumerate(read)}
        for q in range(start, stop):
            out.append(_nearest(kb, row_lists[q], flats[q], stored, position, query_vectors[q]))
        start = stop
    return out


def _nearest(kb: Any, row_lists: List[List[int]], flat: List[int], stored: Optional[numpy.ndarray],
             position: Dict[int, int], query: numpy.ndarray) -> List[Optional[str]]:
    """One query's names (see :func:`nearest_names`); ``stored[position[r]]``: row ``r``'s vector."""
    if not flat or stored is None:
        return [None] * len(row_lists)
    sims = stored[[position[r] for r in flat]] @ numpy.asarray(query, dtype=numpy.float32)
    at = {r: i for i, r in enumerate(flat)}
    names: List[Optional[str]] = []
    for rows in row_lists:
        if not rows:
            names.append(None)
            continue
        best = max(sorted(rows), key=lambda r: (float(sims[at[r]]), -r))
        names.append(kb.names[best])
    return names


def split_gold(ranked: Sequence[Tuple[str, float]], gold: str, k: int) -> Tuple[List[str], bool]:
    """The gold concept first, then the best ``k - 1`` other candidates (hard negatives), and whether the
    gold concept was among the first ``k`` candidates."""
    ids = [cid for cid, _ in ranked]
    found = gold in ids[:k]
    return [gold] + [cid for cid in ids if cid != gold][: k - 1], found


__all__ = ["nearest_names", "split_gold"]
