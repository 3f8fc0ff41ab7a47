"""Metric-learning losses over a batch's cosine-similarity matrix.

Every loss takes ``(embeddings [n, d], labels [n], pairs=None)`` and never the model. ``pairs`` are
the boolean masks a miner returns; without them every positive and negative pair of the batch is used.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import ConfigError, Errors
from .miners import PairMasks, all_pairs, check_inputs, cosine_matrix


def _zero(embeddings: torch.Tensor) -> torch.Tensor:
    # a zero that keeps the graph (DDP needs every parameter to receive a gradient)
    return embeddings.sum() * 0.0


def _masked_logsumexp_plus_one(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-wise ``log(1 + sum(exp(values[mask])))`` (0 for an empty row), numerically stable."""
    neg_inf = torch.tensor(float("-inf"), dtype=values.dtype, device=values.device)
    masked = torch.where(mask, values, neg_inf)
    zeros = torch.zeros(values.shape[0], 1, dtype=values.dtype, device=values.device)
    return torch.logsumexp(torch.cat([masked, zeros], dim=1), dim=1)


class BaseLoss:
    name = "base"

    def _prepare(self, embeddings: torch.Tensor, labels: torch.Tensor, pairs: Optional[PairMasks]):
        check_inputs(embeddings, labels)
        masks = pairs if pairs is not None else all_pairs(labels)
        return cosine_matrix(embeddings), masks

    def __call__(
        self, embeddings: torch.Tensor, labels: torch.Tensor, pairs: Optional[PairMasks] = None
    ) -> torch.Tensor:
        sim, masks = self._prepare(embeddings, labels, pairs)
        return self.compute(sim, masks, embeddings)

    def compute(self, sim: torch.Tensor, masks: PairMasks, embeddings: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class MultiSimilarityLoss(BaseLoss):
    """Wang et al. 2019, as used by SapBERT: mean over anchors ``i`` of
    ``1/alpha * log(1 + sum_p exp(-alpha (S_ip - base))) + 1/beta * log(1 + sum_n exp(beta (S_in - base)))``.
    An anchor without pairs contributes 0 to the mean."""

    name = "multi_similarity"

    def __init__(self, alpha: float = 2.0, beta: float = 50.0, base: float = 0.5) -> None:
        if alpha <= 0 or beta <= 0:
            raise ConfigError(
                Errors.E002.format(what="multi-similarity alpha/beta", value=(alpha, beta), choices="positive numbers")
            )
        self.alpha, self.beta, self.base = float(alpha), float(beta), float(base)

    def compute(self, sim: torch.Tensor, masks: PairMasks, embeddings: torch.Tensor) -> torch.Tensor:
        if not bool(masks.pos.any()) and not bool(masks.neg.any()):
            return _zero(embeddings)
        pos = _masked_logsumexp_plus_one(-self.alpha * (sim - self.base), masks.pos) / self.alpha
        neg = _masked_logsumexp_plus_one(self.beta * (sim - self.base), masks.neg) / self.beta
        return (pos + neg).mean()


class InfoNCELoss(BaseLoss):
    """For every positive pair ``(a, p)``: ``-log(e^{S_ap/t} / (e^{S_ap/t} + sum_n e^{S_an/t}))``,
    averaged over positive pairs (NT-Xent)."""

    name = "infonce"

    def __init__(self, temperature: float = 0.07) -> None:
        if temperature <= 0:
            raise ConfigError(Errors.E002.format(what="temperature", value=temperature, choices="a number > 0"))
        self.temperature = float(temperature)

    def compute(self, sim: torch.Tensor, masks: PairMasks, embeddings: torch.Tensor) -> torch.Tensor:
        a, p = masks.pos.nonzero(as_tuple=True)
        if a.numel() == 0:
            return _zero(embeddings)
        logits = sim / self.temperature
        neg_inf = torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device)
        neg_logits = torch.where(masks.neg, logits, neg_inf)[a]  # [P, n]
        pos_logits = logits[a, p][:, None]
        denom = torch.logsumexp(torch.cat([pos_logits, neg_logits], dim=1), dim=1)
        return (denom - pos_logits[:, 0]).mean()


class TripletMarginLoss(BaseLoss):
    """``relu(S_an - S_ap + margin)`` over triplets whose ``(a, p)`` and ``(a, n)`` are both in the
    masks, averaged over the triplets with a non-zero loss."""

    name = "triplet"

    def __init__(self, margin: float = 0.2) -> None:
        self.margin = float(margin)

    def compute(self, sim: torch.Tensor, masks: PairMasks, embeddings: torch.Tensor) -> torch.Tensor:
        a, p = masks.pos.nonzero(as_tuple=True)
        if a.numel() == 0:
            return _zero(embeddings)
        values = torch.relu(sim[a] - sim[a, p][:, None] + self.margin)  # [P, n]
        values = values * masks.neg[a]
        nonzero = values > 0
        if not bool(nonzero.any()):
            return _zero(embeddings)
        return values.sum() / nonzero.sum()


LOSSES = {"multi_similarity": MultiSimilarityLoss, "infonce": InfoNCELoss, "triplet": TripletMarginLoss}


def make_loss(name: str, **kwargs: float) -> BaseLoss:
    """``multi_similarity`` (alpha, beta, base), ``infonce`` (temperature), ``triplet`` (margin)."""
    if name not in LOSSES:
        raise ConfigError(Errors.E002.format(what="loss", value=name, choices=", ".join(LOSSES)))
    return LOSSES[name](**kwargs)


__all__ = ["MultiSimilarityLoss", "InfoNCELoss", "TripletMarginLoss", "make_loss", "LOSSES"]
