"""Dictionary hard negatives: other concepts' names ranked by similarity (ties by concept id), seeded
draws of negative pairs, and the trainer's use of them for task and KB pairs (tables saved per
refresh, for the anchors of the coming steps; resume)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from safetensors.torch import load_file

from spacy_sapbert.errors import ConfigError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.config import load_config
from spacy_sapbert.training.hard_negatives import (HardNegativeSampler, HardNegativeTable, anchor_labels,
                                                   mine_table)
from spacy_sapbert.training.pairs import write_kb_pairs, write_task_pairs
from spacy_sapbert.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# 2-D unit vectors by angle (degrees): the anchor sits at 0°
ANGLES = {"alpha one": 0, "alpha two": 5, "beta": 20, "gamma one": 20, "gamma two": 80, "delta": 40, "eps": 170}


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.from_concepts([
        Concept("A", "alpha one", ("alpha two",)),
        Concept("B", "beta"),
        Concept("C", "gamma one", ("gamma two",)),
        Concept("D", "delta"),
        Concept("E", "eps"),
    ])


def _name_vectors(kb):
    vecs = np.zeros((len(kb.names), 2), dtype=np.float32)
    for name, deg in ANGLES.items():
        rad = np.deg2rad(deg)
        vecs[kb.row_of_name(name)] = (np.cos(rad), np.sin(rad))
    return vecs


def _label(kb, cid):
    return list(kb.concept_ids).index(cid)


def test_mined_negatives_are_other_concepts_names_by_similarity_ties_by_concept_id(kb):
    anchor = np.asarray([[1.0, 0.0]], dtype=np.float32)
    gold = [np.asarray([_label(kb, "A")])]
    table = mine_table(anchor, _name_vectors(kb), np.asarray([100]), gold, kb, k=4, step=7)
    names = [kb.names[r] for r in table.negatives[0]]
    # gold names (alpha one/two) never appear; beta and gamma one tie at 20°: B before C; then delta, eps
    assert names == ["beta", "gamma one", "delta", "gamma two"]
    assert table.step == 7
    # brute-force reference: rank every non-gold row by (-score, concept id, row)
    vecs = _name_vectors(kb)
    ref = sorted((r for r in range(len(kb.names)) if "A" not in kb.concepts_of_row(r)),
                 key=lambda r: (-round(float(vecs[r] @ anchor[0]), 6), kb.concepts_of_row(r)[0], r))
    assert table.negatives[0].tolist() == ref[:4]
    # fewer names than k: padded with -1
    wide = mine_table(anchor, vecs, np.asarray([100]), gold, kb, k=8, step=0)
    assert wide.negatives[0, :5].tolist() == ref and wide.negatives[0, 5:].tolist() == [-1, -1, -1]
    with pytest.raises(ConfigError, match="SB-E217"):
        mine_table(anchor, vecs, np.asarray([100]), gold, kb, k=0, step=0)


def test_anchor_labels_unite_the_gold_labels_of_a_text():
    pairs = np.asarray([[9, 1, 3], [5, 2, 1], [9, 4, 0], [9, 1, 3]])
    anchors, labels = anchor_labels(pairs)
    assert anchors.tolist() == [5, 9]
    assert [x.tolist() for x in labels] == [[1], [0, 3]]


def test_sampler_draws_negative_pairs_of_the_negative_concept_reproducibly(kb):
    rows = {name: kb.row_of_name(name) for name in ANGLES}
    table = HardNegativeTable(anchors=np.asarray([100, 101]),
                              negatives=np.asarray([[rows["gamma one"], rows["beta"], -1],
                                                    [rows["delta"], -1, -1]]), step=0)
    sampler = HardNegativeSampler(kb, per_pair=2, seed=1)
    batch = np.asarray([[100, rows["alpha one"], _label(kb, "A")], [101, rows["eps"], _label(kb, "E")]])
    extra = sampler.extra_pairs(table, batch, step=3)
    assert extra.shape == (3, 3)  # 2 for the first anchor, only 1 exists for the second
    by_first = {int(a): (int(b), int(c)) for a, b, c in extra}
    assert by_first[rows["gamma one"]] == (rows["gamma two"], _label(kb, "C"))  # the other name of C
    assert by_first[rows["beta"]] == (rows["beta"], _label(kb, "B"))  # a one-name concept pairs with itself
    assert by_first[rows["delta"]] == (rows["delta"], _label(kb, "D"))
    assert np.array_equal(extra, HardNegativeSampler(kb, 2, seed=1).extra_pairs(table, batch, step=3))
    one = HardNegativeSampler(kb, per_pair=1, seed=1)
    firsts = {int(one.extra_pairs(table, batch[:1], step=s)[0, 0]) for s in range(20)}
    assert firsts == {rows["gamma one"], rows["beta"]}  # draws vary by step, within the top-k
    with pytest.raises(ConfigError, match="SB-E217"):
        one.extra_pairs(table, np.asarray([[102, 0, 0]]), step=0)


def _ft_config(**extra):
    base = {"training.batch_size": 6, "training.max_steps": 6, "training.lr": 3e-3, "training.device": "cpu",
            "training.checkpoint_every": 3, "training.log_every": 1, "training.eval_every": 0,
            "training.hard_negatives": 1, "training.hard_negative_top_k": 3, "training.hard_negative_every": 2,
            "training.keep_best": False}
    base.update(extra)
    return load_config(None, base, task="finetune")


def test_trainer_mines_per_refresh_and_resumes_identically(tmp_path, tiny_bert_path, kb):
    mentions = [("alpha 1", ("A",)), ("alfa", ("A",)), ("gama", ("C",)), ("delta nos", ("D",)), ("beta x", ("B",))]
    pairs = write_task_pairs(kb, mentions, tmp_path / "pairs")
    full = Trainer(_ft_config(), kb, pairs, str(tiny_bert_path), tmp_path / "full").run()
    mined = sorted(p.name for p in (tmp_path / "full" / "hard_negatives").iterdir())
    assert mined == ["step_00000000.npz", "step_00000002.npz", "step_00000004.npz"]
    table = HardNegativeTable.from_disk(tmp_path / "full" / "hard_negatives" / mined[0])
    for anchor, negs in zip(table.anchors, table.negatives):
        text = pairs.text(kb, int(anchor))
        gold = {ids[0] for t, ids in mentions if t == text}
        assert all(not gold & set(kb.concepts_of_row(int(r))) for r in negs if r >= 0)
    # cut after step 4 (checkpoint at 3), resume: the same weights as the uninterrupted run
    Trainer(_ft_config(**{"training.max_steps": 4}), kb, pairs, str(tiny_bert_path), tmp_path / "cut").run()
    cut = tmp_path / "cut"
    shutil.rmtree(cut / "checkpoints" / "step-000004")
    shutil.rmtree(cut / "model")
    resumed = Trainer(_ft_config(), kb, pairs, str(tiny_bert_path), cut).run(resume=True)
    a, b = load_file(str(full.model_path / "model.safetensors")), load_file(str(resumed.model_path / "model.safetensors"))
    assert all(np.allclose(a[k].numpy(), b[k].numpy(), atol=1e-6) for k in a)


def test_kb_pairs_mine_every_concept_of_the_anchor_name_for_the_coming_steps_only(tmp_path, tiny_bert_path):
    shared = KnowledgeBase.from_concepts([
        Concept("X", "cold", ("common cold", "coryza")),
        Concept("Y", "cold", ("cold temperature", "chill")),
        Concept("Z", "fever", ("pyrexia", "febrile")),
        Concept("W", "flu", ("influenza", "grippe")),
    ])
    pairs = write_kb_pairs(shared, tmp_path / "pairs")
    cfg = load_config(None, {"training.batch_size": 4, "training.max_steps": 4, "training.device": "cpu",
                             "training.hard_negatives": 1, "training.hard_negative_top_k": 3,
                             "training.hard_negative_every": 2, "training.checkpoint_every": 2,
                             "training.log_every": 1})
    trainer = Trainer(cfg, shared, pairs, str(tiny_bert_path), tmp_path / "run")
    trainer.run()
    folder = tmp_path / "run" / "hard_negatives"
    assert sorted(p.name for p in folder.iterdir()) == ["step_00000000.npz", "step_00000002.npz"]
    n_batches = trainer.batches.n_batches()
    cold = shared.row_of_name("cold")
    seen = set()
    for start in (0, 2):
        table = HardNegativeTable.from_disk(folder / f"step_{start:08d}.npz")
        window = np.concatenate([trainer.batches.batch(s // n_batches, s % n_batches) for s in (start, start + 1)])
        assert table.anchors.tolist() == sorted(set(np.asarray(pairs.pairs)[window, 0].tolist()))
        for anchor, negs in zip(table.anchors, table.negatives):
            gold = set(shared.concepts_of_row(int(anchor)))  # "cold": X and Y, whichever pair brought it
            assert (negs >= 0).sum() == 3
            assert all(not gold & set(shared.concepts_of_row(int(r))) for r in negs)
            seen.add(int(anchor))
    assert cold in seen and set(shared.concepts_of_row(cold)) == {"X", "Y"}
