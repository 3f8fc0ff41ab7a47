"""Dictionary hard negatives for fine-tuning (BioSyn-style).

Every ``training.hard_negative_every`` steps (or once per epoch) the current model encodes the anchor
texts of the pair set (the training mentions, column 0) and the KB's names; each anchor keeps its
``hard_negative_top_k`` most similar names that belong to *no* gold concept of that anchor (a
:class:`HardNegativeTable`). Each step then adds, for every pair of the batch, ``hard_negatives``
pairs ``(negative name, another name of its concept, its concept)`` drawn from the anchor's list, so
the miner and the loss see the dictionary names the model confuses with the mention, not only the
random in-batch names.

Pure numpy and deterministic: ranks by score, ties broken by concept id (the position of the name's
first concept in ``kb.concept_ids``), then by name row; the draws of a step come from
``numpy.random.default_rng([seed, step])``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ..errors import ConfigError, DataFormatError, Errors

TABLE_FILE = "hard_negatives.npz"
_CHUNK = 256


@dataclass
class HardNegativeTable:
    """``negatives[i]``: KB name rows for anchor text ``anchors[i]`` (sorted ids), best first,
    ``-1`` where fewer than ``k`` negatives exist; ``step``: when it was mined."""

    anchors: np.ndarray
    negatives: np.ndarray
    step: int

    def rows_for(self, text_ids: np.ndarray) -> np.ndarray:
        """The negative lists ``[n, k]`` of ``text_ids`` (each must be an anchor of the table)."""
        pos = np.searchsorted(self.anchors, text_ids)
        pos = np.minimum(pos, len(self.anchors) - 1)
        if len(self.anchors) == 0 or not np.array_equal(self.anchors[pos], text_ids):
            raise ConfigError(Errors.E217.format(what="a batch holds an anchor text the table does not know"))
        return self.negatives[pos]

    def to_disk(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, anchors=self.anchors, negatives=self.negatives, step=np.int64(self.step))
        tmp.replace(path)

    @classmethod
    def from_disk(cls, path: Path) -> "HardNegativeTable":
        try:
            with np.load(path) as data:
                return cls(data["anchors"], data["negatives"], int(data["step"]))
        except (OSError, ValueError, KeyError) as err:
            raise DataFormatError(Errors.E202.format(path=path, what=str(err))) from None


def anchor_labels(pairs: np.ndarray) -> Tuple[np.ndarray, List[np.ndarray]]:
    """The distinct anchor text ids (column 0, sorted) and, for each, all its gold labels."""
    pairs = np.asarray(pairs)
    order = np.lexsort((pairs[:, 2], pairs[:, 0]))
    texts, labels = pairs[order, 0], pairs[order, 2]
    anchors, starts = np.unique(texts, return_index=True)
    groups = np.split(labels, starts[1:])
    return anchors.astype(np.int64), [np.unique(g) for g in groups]


def first_concept_of_rows(kb: Any) -> np.ndarray:
    """For every name row, the index (in ``kb.concept_ids``) of its first concept (concepts sorted)."""
    ptr, idx = kb.row_concept_csr()
    ptr = np.asarray(ptr)
    out = np.full(len(ptr) - 1, -1, dtype=np.int64)
    has = ptr[1:] > ptr[:-1]
    out[has] = np.asarray(idx)[ptr[:-1][has]]
    return out


def mine_table(anchor_vectors: np.ndarray, name_vectors: np.ndarray, anchors: np.ndarray,
               gold: Sequence[np.ndarray], kb: Any, k: int, step: int) -> HardNegativeTable:
    """Top-``k`` names of other concepts for each anchor (vectors L2-normalised, same order as
    ``anchors``/``gold``): a name is excluded when any of its concepts is a gold label."""
    if k < 1:
        raise ConfigError(Errors.E217.format(what=f"training.hard_negative_top_k must be >= 1, not {k}"))
    if anchor_vectors.shape[0] != len(anchors) or name_vectors.shape[0] != len(kb.names):
        raise ConfigError(Errors.E217.format(
            what=f"{anchor_vectors.shape[0]} anchor vectors for {len(anchors)} anchors, "
                 f"{name_vectors.shape[0]} name vectors for {len(kb.names)} names"))
    cptr, crows = (np.asarray(a) for a in kb.concept_row_csr())
    tie = first_concept_of_rows(kb)
    n_rows = name_vectors.shape[0]
    kk = min(k, n_rows)
    out = np.full((len(anchors), k), -1, dtype=np.int64)
    names = np.asarray(name_vectors, dtype=np.float32)
    for start in range(0, len(anchors), _CHUNK):
        scores = np.asarray(anchor_vectors[start:start + _CHUNK], dtype=np.float32) @ names.T
        for i, row_scores in enumerate(scores):
            labels = gold[start + i]
            banned = np.concatenate([crows[cptr[c]:cptr[c + 1]] for c in labels]) if len(labels) else []
            row_scores[np.asarray(banned, dtype=np.int64)] = -np.inf
            out[start + i, :kk] = _top_rows(row_scores, kk, tie)
    return HardNegativeTable(anchors=np.asarray(anchors, dtype=np.int64), negatives=out, step=step)


def _top_rows(scores: np.ndarray, k: int, tie: np.ndarray) -> np.ndarray:
    """Rows of the ``k`` best finite scores: score desc, then first concept, then row; -1 padded."""
    n = len(scores)
    cand = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    if k < n:  # widen to every row tied with the k-th score, so that the tie-break decides
        cand = np.flatnonzero(scores >= scores[cand].min())
    cand = cand[np.isfinite(scores[cand])]
    order = np.lexsort((cand, tie[cand], -scores[cand]))
    top = cand[order][:k]
    return np.concatenate([top, np.full(k - len(top), -1, dtype=np.int64)])


class HardNegativeSampler:
    """Turns a table into the extra pairs of one step: ``per_pair`` negatives for every pair."""

    def __init__(self, kb: Any, per_pair: int, seed: int) -> None:
        if per_pair < 1:
            raise ConfigError(Errors.E217.format(what=f"training.hard_negatives must be >= 1 here, not {per_pair}"))
        self.kb, self.per_pair, self.seed = kb, per_pair, seed
        self._tie = first_concept_of_rows(kb)
        self._cptr, self._crows = (np.asarray(a) for a in kb.concept_row_csr())

    def extra_pairs(self, table: HardNegativeTable, rows: np.ndarray, step: int) -> np.ndarray:
        """``[len(rows) * per_pair, 3]`` rows ``(neg name, partner name, neg label)``; anchors
        whose list is empty add nothing."""
        rng = np.random.default_rng([self.seed, step])
        lists = table.rows_for(np.asarray(rows)[:, 0].astype(np.int64))
        out: List[Tuple[int, int, int]] = []
        for negs in lists:
            negs = negs[negs >= 0]
            if len(negs) == 0:
                continue
            picked = rng.choice(negs, size=min(self.per_pair, len(negs)), replace=False)
            for row in picked:
                out.append(self._pair_of(int(row), rng))
        return np.asarray(out, dtype=np.int64).reshape(-1, 3)

    def _pair_of(self, row: int, rng: np.random.Generator) -> Tuple[int, int, int]:
        label = int(self._tie[row])
        names = self._crows[self._cptr[label]:self._cptr[label + 1]]
        others = names[names != row]
        partner = int(others[rng.integers(len(others))]) if len(others) else row
        return row, partner, label


def table_summary(table: HardNegativeTable) -> Dict[str, Any]:
    """Counts for the log."""
    return {"step": table.step, "anchors": int(len(table.anchors)),
            "filled": float(np.mean(table.negatives >= 0)) if table.negatives.size else 0.0}


__all__ = ["HardNegativeTable", "HardNegativeSampler", "anchor_labels", "mine_table", "first_concept_of_rows",
           "TABLE_FILE"]
