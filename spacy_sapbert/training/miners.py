"""Online hard-pair mining over a batch of embeddings (cosine similarity).

A triplet ``(a, p, n)`` has ``labels[a] == labels[p]``, ``a != p`` and ``labels[a] != labels[n]``.
The miner keeps the triplets that violate the margin, ``sim(a, n) > sim(a, p) - margin`` (SapBERT's
condition, margin 0.2 in its released code), and hands the loss the positive pairs ``(a, p)`` and
negative pairs ``(a, n)`` that occur in at least one kept triplet, as boolean masks. The masks are
computed in O(n²) without listing the triplets; ``triplets()`` lists them (for the triplet loss
and for tests).
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

import torch
import torch.nn.functional as F

from ..errors import ConfigError, Errors


class PairMasks(NamedTuple):
    """Boolean ``[n, n]`` masks: ``pos[a, p]`` / ``neg[a, n]`` mark the pairs the loss uses."""

    pos: torch.Tensor
    neg: torch.Tensor


def check_inputs(embeddings: torch.Tensor, labels: torch.Tensor) -> None:
    if embeddings.dim() != 2:
        raise ConfigError(Errors.E002.format(what="embeddings shape", value=tuple(embeddings.shape), choices="[n, d]"))
    if labels.dim() != 1 or labels.shape[0] != embeddings.shape[0]:
        raise ConfigError(
            Errors.E002.format(what="labels shape", value=tuple(labels.shape), choices=f"[{embeddings.shape[0]}]")
        )


def cosine_matrix(embeddings: torch.Tensor) -> torch.Tensor:
    """``[n, n]`` cosine similarities (computed in float32)."""
    x = F.normalize(embeddings.float(), dim=1)
    return x @ x.t()


def all_pairs(labels: torch.Tensor) -> PairMasks:
    """Every positive pair (same label, not the diagonal) and every negative pair."""
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(labels.shape[0], dtype=torch.bool, device=labels.device)
    return PairMasks(pos=same & ~eye, neg=~same)


class TripletMarginMiner:
    """Keep the pairs of triplets with ``sim(a, n) > sim(a, p) - margin``.

    ``kind``: ``"all"`` (the condition above), ``"hard"`` (``sim(a, n) > sim(a, p)``) or
    ``"semihard"`` (``sim(a, p) - margin < sim(a, n) <= sim(a, p)``).
    """

    KINDS = ("all", "hard", "semihard")

    def __init__(self, margin: float = 0.2, kind: str = "all") -> None:
        if kind not in self.KINDS:
            raise ConfigError(Errors.E002.format(what="miner kind", value=kind, choices=", ".join(self.KINDS)))
        if margin < 0:
            raise ConfigError(Errors.E002.format(what="miner margin", value=margin, choices="a number >= 0"))
        self.margin = float(margin)
        self.kind = kind

    def _violates(self, sim_ap: torch.Tensor, sim_an: torch.Tensor) -> torch.Tensor:
        if self.kind == "all":
            return sim_an > sim_ap - self.margin
        if self.kind == "hard":
            return sim_an > sim_ap
        return (sim_an > sim_ap - self.margin) & (sim_an <= sim_ap)

    @torch.no_grad()
    def __call__(self, embeddings: torch.Tensor, labels: torch.Tensor) -> PairMasks:
        check_inputs(embeddings, labels)
        sim = cosine_matrix(embeddings)
        base = all_pairs(labels)
        inf = torch.tensor(float("inf"), device=sim.device)
        if self.kind == "all":
            # (a, n) is in a kept triplet iff sim(a, n) > min_p sim(a, p) - margin;
            # (a, p) iff sim(a, p) - margin < max_n sim(a, n).
            min_pos = torch.where(base.pos, sim, inf).min(dim=1).values
            max_neg = torch.where(base.neg, sim, -inf).max(dim=1).values
            neg = base.neg & (sim > (min_pos - self.margin)[:, None])
            pos = base.pos & ((sim - self.margin) < max_neg[:, None])
            return PairMasks(pos=pos, neg=neg)
        a, p, n = self._triplets_from(sim, base)
        pos = torch.zeros_like(base.pos)
        neg = torch.zeros_like(base.neg)
        pos[a, p] = True
        neg[a, n] = True
        return PairMasks(pos=pos, neg=neg)

    def _triplets_from(self, sim: torch.Tensor, base: PairMasks) -> Tuple[torch.Tensor, ...]:
        a_idx, p_idx = base.pos.nonzero(as_tuple=True)
        sim_ap = sim[a_idx, p_idx][:, None]  # [P, 1]
        sim_an = sim[a_idx]  # [P, n]
        keep = base.neg[a_idx] & self._violates(sim_ap, sim_an)
        t, n_idx = keep.nonzero(as_tuple=True)
        return a_idx[t], p_idx[t], n_idx

    @torch.no_grad()
    def triplets(self, embeddings: torch.Tensor, labels: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """The kept triplets as index tensors ``(anchors, positives, negatives)``."""
        check_inputs(embeddings, labels)
        return self._triplets_from(cosine_matrix(embeddings), all_pairs(labels))


__all__ = ["TripletMarginMiner", "PairMasks", "all_pairs", "cosine_matrix"]
