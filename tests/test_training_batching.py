"""Epoch batches: a permutation per epoch, a pure function of (seed, epoch); hard-negative grouping."""
from __future__ import annotations

import numpy as np

from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.batching import EpochBatches
from spacy_sapbert.training.pairs import write_kb_pairs


def _kb():
    concepts = []
    for i, head in enumerate(["breast", "lung", "skin", "liver", "bone", "colon"]):
        for j, tail in enumerate(["cancer", "cyst", "infection", "injury"]):
            concepts.append(Concept(f"C{i}{j}", f"{head} {tail}", (f"{tail} of {head}", f"{head} {tail} nos")))
    return KnowledgeBase.from_concepts(concepts)


def test_random_batches_cover_every_pair_once_and_are_reproducible(tmp_path):
    kb = _kb()
    pairs = write_kb_pairs(kb, tmp_path / "p")
    a = EpochBatches(pairs, kb, 10, "random", seed=3)
    b = EpochBatches(pairs, kb, 10, "random", seed=3)
    assert a.n_batches() == int(np.ceil(len(pairs) / 10))
    for epoch in range(2):
        order = np.concatenate([a.batch(epoch, i) for i in range(a.n_batches())])
        assert sorted(order.tolist()) == list(range(len(pairs)))
        assert np.array_equal(order, b.order(epoch))
    assert not np.array_equal(a.order(0), a.order(1))
    assert not np.array_equal(a.order(0), EpochBatches(pairs, kb, 10, "random", seed=4).order(0))


def test_similar_batching_puts_pairs_sharing_words_together(tmp_path):
    kb = _kb()
    pairs = write_kb_pairs(kb, tmp_path / "p")
    batches = EpochBatches(pairs, kb, 12, "similar", seed=0)
    for epoch in range(2):
        order = batches.order(epoch)
        assert sorted(order.tolist()) == list(range(len(pairs)))
        assert np.array_equal(order, EpochBatches(pairs, kb, 12, "similar", seed=0).order(epoch))

    def shared_words(batch):
        words = [set(pairs.text(kb, int(pairs.pairs[i, 0])).split()) for i in batch]
        return np.mean([len(words[x] & words[y]) > 0 for x in range(len(words)) for y in range(x + 1, len(words))])

    similar = np.mean([shared_words(batches.batch(0, i)) for i in range(batches.n_batches())])
    shuffled = EpochBatches(pairs, kb, 12, "random", seed=0)
    random_ = np.mean([shared_words(shuffled.batch(0, i)) for i in range(shuffled.n_batches())])
    assert similar > random_ + 0.2
