"""Miner and losses against brute-force references on hand-built 2-D embeddings."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from spacy_sapbert.errors import ConfigError
from spacy_sapbert.training.losses import InfoNCELoss, MultiSimilarityLoss, TripletMarginLoss, make_loss
from spacy_sapbert.training.miners import PairMasks, TripletMarginMiner, all_pairs


def _points(angles_deg):
    a = torch.tensor([math.radians(x) for x in angles_deg], dtype=torch.float64)
    return torch.stack([torch.cos(a), torch.sin(a)], dim=1)


# Three concepts; angles chosen so that some triplets violate the 0.2 margin and some do not.
ANGLES = [0, 10, 35, 40, 90, 100, 170, 200]
LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])


def _cos(x, i, j):
    return float((x[i] @ x[j]) / (x[i].norm() * x[j].norm()))


def _brute_triplets(x, labels, cond):
    out = []
    n = len(labels)
    for a, p, q in itertools.product(range(n), repeat=3):
        if a != p and labels[a] == labels[p] and labels[a] != labels[q]:
            if cond(_cos(x, a, p), _cos(x, a, q)):
                out.append((a, p, q))
    return sorted(out)


@pytest.mark.parametrize(
    "kind,cond",
    [
        ("all", lambda ap, an: an > ap - 0.2),
        ("hard", lambda ap, an: an > ap),
        ("semihard", lambda ap, an: ap - 0.2 < an <= ap),
    ],
)
def test_miner_matches_brute_force(kind, cond):
    x = _points(ANGLES) * torch.tensor([1.0, 1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 1.0], dtype=torch.float64)[:, None]
    miner = TripletMarginMiner(margin=0.2, kind=kind)
    expected = _brute_triplets(x, LABELS.tolist(), cond)
    a, p, n = miner.triplets(x, LABELS)
    got = sorted(zip(a.tolist(), p.tolist(), n.tolist()))
    assert got == expected
    assert 0 < len(expected) < len(_brute_triplets(x, LABELS.tolist(), lambda ap, an: True))
    masks = miner(x, LABELS)
    pos = {(t[0], t[1]) for t in expected}
    neg = {(t[0], t[2]) for t in expected}
    assert {tuple(ix) for ix in masks.pos.nonzero().tolist()} == pos
    assert {tuple(ix) for ix in masks.neg.nonzero().tolist()} == neg


def test_miner_with_large_margin_keeps_every_pair():
    x = _points(ANGLES)
    masks = TripletMarginMiner(margin=3.0)(x, LABELS)
    ref = all_pairs(LABELS)
    assert torch.equal(masks.pos, ref.pos) and torch.equal(masks.neg, ref.neg)


def test_miner_zero_margin_on_separated_clusters_keeps_nothing():
    x = _points([0, 1, 120, 121, 240, 241])
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    masks = TripletMarginMiner(margin=0.0)(x, labels)
    assert not masks.pos.any() and not masks.neg.any()


def test_miner_rejects_bad_options_and_shapes():
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*miner kind"):
        TripletMarginMiner(kind="easy")
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*margin"):
        TripletMarginMiner(margin=-1)
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*labels shape"):
        TripletMarginMiner()(torch.zeros(3, 2), torch.zeros(2))
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*embeddings shape"):
        TripletMarginMiner()(torch.zeros(3), torch.zeros(3))


def _brute_ms(x, labels, masks: PairMasks, alpha, beta, base):
    n = len(labels)
    total = 0.0
    for i in range(n):
        pos = [_cos(x, i, j) for j in range(n) if masks.pos[i, j]]
        neg = [_cos(x, i, j) for j in range(n) if masks.neg[i, j]]
        total += math.log(1 + sum(math.exp(-alpha * (s - base)) for s in pos)) / alpha
        total += math.log(1 + sum(math.exp(beta * (s - base)) for s in neg)) / beta
    return total / n


@pytest.mark.parametrize("alpha,beta,base", [(2.0, 50.0, 0.5), (1.0, 60.0, 0.5), (3.0, 10.0, 0.0)])
def test_multi_similarity_matches_brute_force(alpha, beta, base):
    x = _points(ANGLES)
    loss = MultiSimilarityLoss(alpha=alpha, beta=beta, base=base)
    full = all_pairs(LABELS)
    assert float(loss(x, LABELS)) == pytest.approx(_brute_ms(x, LABELS, full, alpha, beta, base), rel=1e-6)
    mined = TripletMarginMiner(0.2)(x, LABELS)
    assert float(loss(x, LABELS, mined)) == pytest.approx(_brute_ms(x, LABELS, mined, alpha, beta, base), rel=1e-6)
    assert float(loss(x, LABELS, mined)) != pytest.approx(float(loss(x, LABELS)))


def test_infonce_matches_brute_force():
    x = _points(ANGLES)
    t = 0.1
    full = all_pairs(LABELS)
    terms = []
    for a, p in full.pos.nonzero().tolist():
        num = math.exp(_cos(x, a, p) / t)
        den = num + sum(math.exp(_cos(x, a, j) / t) for j in range(len(LABELS)) if full.neg[a, j])
        terms.append(-math.log(num / den))
    assert float(InfoNCELoss(temperature=t)(x, LABELS)) == pytest.approx(sum(terms) / len(terms), rel=1e-6)


def test_triplet_matches_brute_force_and_mining_does_not_change_it():
    x = _points(ANGLES)
    m = 0.2
    values = [max(0.0, _cos(x, a, n) - _cos(x, a, p) + m) for a, p, n in _brute_triplets(x, LABELS.tolist(), lambda ap, an: True)]
    nonzero = [v for v in values if v > 0]
    loss = TripletMarginLoss(margin=m)
    assert float(loss(x, LABELS)) == pytest.approx(sum(nonzero) / len(nonzero), rel=1e-6)
    mined = TripletMarginMiner(m)(x, LABELS)
    assert float(loss(x, LABELS, mined)) == pytest.approx(sum(nonzero) / len(nonzero), rel=1e-6)


@pytest.mark.parametrize("name", ["multi_similarity", "infonce", "triplet"])
def test_losses_without_pairs_are_zero_with_gradient(name):
    x = _points([0, 1, 120, 121]).float().requires_grad_(True)
    labels = torch.tensor([0, 1, 2, 3])  # no positives
    empty = PairMasks(pos=torch.zeros(4, 4, dtype=torch.bool), neg=torch.zeros(4, 4, dtype=torch.bool))
    loss = make_loss(name)(x, labels, empty)
    assert loss.item() == 0.0
    loss.backward()
    assert x.grad is not None and float(x.grad.abs().sum()) == 0.0


def test_ms_gradient_pulls_positives_together():
    x = _points([0, 60, 90, 150]).float().requires_grad_(True)
    labels = torch.tensor([0, 0, 1, 1])
    loss = MultiSimilarityLoss()(x, labels)
    loss.backward()
    with torch.no_grad():
        moved = x - 0.1 * x.grad
        assert MultiSimilarityLoss()(moved, labels).item() < loss.item()


def test_make_loss_rejects_unknown_and_bad_settings():
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*loss"):
        make_loss("arcface")
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*alpha/beta"):
        MultiSimilarityLoss(alpha=0)
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*temperature"):
        InfoNCELoss(temperature=0)


def test_config_accepts_exactly_the_registered_losses():
    from spacy_sapbert.training.config import LOSS_NAMES
    from spacy_sapbert.training.losses import LOSSES

    assert tuple(LOSSES) == LOSS_NAMES
