"""Cheap guards of every search: no score outside [-1, 1] leaves an index, no absurd ``k`` or depth reaches numpy.

Scores are inner products of unit vectors. A damaged vector file that the load checks did not see (damage in an
unsampled block of a memory-mapped file, or a norm check on a sample of rows) shows up as a score far outside
[-1, 1] (120.3 for 64 flipped bytes of an exact index): :func:`check_scores` turns that into E556 naming the index
folder, never a link. The check is vectorised over the ``[queries, depth]`` scores a search computed anyway.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy

from ..errors import ConfigError, Errors, IntegrityError
from ..base.integrity import NORM_TOLERANCE
from .meta import MAX_K

SCORE_TOLERANCE = 2 * NORM_TOLERANCE  # a stored vector passes the load checks within 1e-2 of unit length


def is_whole(value: Any, minimum: int, maximum: int) -> bool:
    """Whether ``value`` is a whole number (numpy's too, not a bool) from ``minimum`` to ``maximum``."""
    return isinstance(value, (int, numpy.integer)) and not isinstance(value, bool) and minimum <= value <= maximum


def check_k(k: Any) -> None:
    """E111 below 1 (as before), E559 above :data:`~spacy_sapbert.index.meta.MAX_K` or not a whole number:
    ``numpy.full((n, 10**20))`` is an OverflowError, not a search."""
    if isinstance(k, (int, numpy.integer)) and not isinstance(k, bool) and k < 1:
        raise ConfigError(Errors.E111.format(what="k", minimum=1, value=k))
    if not is_whole(k, 1, MAX_K):
        raise ConfigError(Errors.E559.format(what="k", minimum=1, maximum=MAX_K, value=k))


def damaged(score: float, path: Optional[Any]) -> IntegrityError:
    """E556 for the index at ``path`` (None: built in memory)."""
    return IntegrityError(Errors.E556.format(score=score, what="the index", path=path if path is not None else "<memory>",
                                             fix="`spacy-sapbert build-index`"))


def check_scores(queries: numpy.ndarray, rows: numpy.ndarray, scores: numpy.ndarray, path: Optional[Any]) -> None:
    """Raise E556 when a found row (``rows >= 0``) has a score outside [-1, 1] (NaN included), or E562 when
    that query itself is not unit length (the caller's vectors, not the index, are at fault)."""
    bad = (rows >= 0) & ~(numpy.abs(scores) <= 1.0 + SCORE_TOLERANCE)
    if not bad.any():
        return
    q = int(numpy.flatnonzero(bad.any(axis=1))[0])
    norm = float(numpy.linalg.norm(numpy.asarray(queries[q], dtype=numpy.float64)))
    if not abs(norm - 1.0) <= SCORE_TOLERANCE:
        raise ConfigError(Errors.E562.format(i=q, norm=norm))
    raise damaged(float(scores[q][bad[q]][0]), path)


def check_self_scores(vectors: numpy.ndarray, path: Optional[Any]) -> None:
    """Stored name vectors handed out as queries (a mention that is a KB name): each one's score against itself
    (its squared norm) must be 1; E556 otherwise."""
    self_scores = numpy.einsum("ij,ij->i", vectors, vectors, dtype=numpy.float64)
    bad = ~(numpy.abs(self_scores - 1.0) <= SCORE_TOLERANCE)
    if bad.any():
        raise damaged(float(self_scores[bad][0]), path)


__all__ = ["check_k", "check_scores", "check_self_scores", "is_whole", "damaged", "SCORE_TOLERANCE"]
