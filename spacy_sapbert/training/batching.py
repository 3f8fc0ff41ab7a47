"""Which pairs form each batch: the order of an epoch is a pure function of ``(seed, epoch)``, so a
resumed run sees exactly the batches an uninterrupted one would.

``random``: a seeded permutation. ``similar`` (hard-negative batching): pairs are sorted by their
first name with its words sorted, cut into batches, and the batches shuffled; the cut points move
every epoch. Concepts whose names share words then meet in a batch, which gives the miner hard
negatives that random batches of a large KB almost never contain.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

from .pairs import PairSet


class EpochBatches:
    """Batches of pair indices for one epoch: shuffled, or grouped by similar anchor names."""

    def __init__(self, pairs: PairSet, kb: Any, batch_size: int, batching: str, seed: int) -> None:
        self.pairs, self.kb, self.batch_size, self.batching, self.seed = pairs, kb, batch_size, batching, seed
        self._keys: Optional[np.ndarray] = None
        self._cache: Tuple[int, Optional[np.ndarray]] = (-1, None)

    def n_batches(self) -> int:
        return math.ceil(len(self.pairs) / self.batch_size)

    def _sort_keys(self) -> np.ndarray:
        if self._keys is None:
            # word-sorted anchor name: "breast cancer" and "cancer of breast" land together, and
            # names sharing words ("breast cyst") in the same or the next batch: hard negatives.
            texts = [" ".join(sorted(self.pairs.text(self.kb, int(a)).split())) for a in self.pairs.pairs[:, 0]]
            self._keys = np.argsort(np.asarray(texts, dtype=object), kind="stable")
        return self._keys

    def order(self, epoch: int) -> np.ndarray:
        if self._cache[0] == epoch:
            return self._cache[1]  # type: ignore[return-value]
        rng = np.random.default_rng([self.seed, epoch])
        n = len(self.pairs)
        if self.batching == "random":
            order = rng.permutation(n)
        else:
            ranked = self._sort_keys()
            starts = np.arange(0, n, self.batch_size)
            shift = int(rng.integers(0, self.batch_size)) if n > self.batch_size else 0
            rolled = np.roll(ranked, -shift)  # batch borders move every epoch
            blocks = [rolled[s : s + self.batch_size] for s in starts]
            order = np.concatenate([blocks[i] for i in rng.permutation(len(blocks))])
        self._cache = (epoch, order)
        return order

    def batch(self, epoch: int, index: int) -> np.ndarray:
        order = self.order(epoch)
        return order[index * self.batch_size : (index + 1) * self.batch_size]


__all__ = ["EpochBatches"]
