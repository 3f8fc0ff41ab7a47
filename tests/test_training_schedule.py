"""Schedules in epochs, versioned configs, the cheap dev evaluation with its seen / unseen split (hand
count), best-model selection by a mix, and max_minutes as a wall-clock cap."""
from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest

from spacy_sapbert.errors import ConfigError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.config import CONFIG_VERSION, load_config
from spacy_sapbert.training.dev_eval import DevEvaluator, DevSet, selection_score
from spacy_sapbert.training.run import dev_set, finetune
from spacy_sapbert.training.schedule import Schedule, parse_every, steps_every
from spacy_sapbert.training.summary import summary_lines

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---- schedules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [(200, (200.0, "steps")), ("200", (200.0, "steps")),
                                             ("200 steps", (200.0, "steps")), ("1 epoch", (1.0, "epochs")),
                                             ("0.5 epochs", (0.5, "epochs")), (0, (0.0, "steps"))])
def test_parse_every(value, expected):
    assert parse_every(value, "training.eval_every") == expected


@pytest.mark.parametrize("value", ["1 week", "-1", -3, "1.5 steps", 2.5, True, "epoch"])
def test_bad_schedules_are_coded(value):
    with pytest.raises(ConfigError, match=r"SB-E760.*training.eval_every"):
        parse_every(value, "training.eval_every")
    with pytest.raises(ConfigError, match=r"SB-E760"):
        load_config(None, {"training.eval_every": value})


def test_epochs_become_steps():
    assert steps_every("1 epoch", 48) == 48 and steps_every("0.5 epochs", 47) == 24 and steps_every(30, 48) == 30
    assert steps_every("0.001 epochs", 48) == 1 and steps_every(0, 48) == 0
    config = load_config(None, {"training.eval_every": "0.5 epochs"}, task="finetune")
    sched = Schedule.from_settings(config.training, steps_per_epoch=10, total_steps=50)
    # finetune's defaults: checkpoint every epoch; hard negatives every epoch when 0
    assert (sched.eval_every, sched.checkpoint_every, sched.hard_negative_every) == (5, 10, 10)
    assert "10 steps per epoch" in sched.line()
    with pytest.raises(ConfigError, match=r"SB-E760.*checkpoint_every"):
        load_config(None, {"training.checkpoint_every": "0 epochs"})


# ---- config versions ---------------------------------------------------------------------------
def test_version_1_configs_load_with_a_warning_where_the_meaning_changed(tmp_path):
    from pathlib import Path

    current = (Path(__file__).resolve().parents[1] / "configs" / "finetune.cfg").read_text()
    old = current.replace("[meta]\n", "").replace(f"version = {CONFIG_VERSION}\n", "")
    old = old.replace('pooling = "auto"', 'pooling = "cls"').replace("max_minutes = 0", "max_minutes = 30")
    path = tmp_path / "old.cfg"
    path.write_text(old)
    with pytest.warns(UserWarning, match=r"SB-W761.*version 1.*max_minutes = 30 now caps the run's wall time"):
        config = load_config(path, task="finetune")
    assert config.meta.version == CONFIG_VERSION and config.model.pooling == "cls" and config.training.max_minutes == 30
    # a version-1 file that leaves max_minutes at 0 loads silently; its pooling defaults to version 1's cls
    quiet = tmp_path / "quiet.cfg"
    quiet.write_text("[training]\nepochs = 2\n")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_config(quiet).model.pooling == "cls"
    assert load_config(None).model.pooling == "auto"  # version 2's default
    newer = tmp_path / "newer.cfg"
    newer.write_text(f"[meta]\nversion = {CONFIG_VERSION + 1}\n")
    with pytest.raises(ConfigError, match=rf"SB-E761.*version {CONFIG_VERSION + 1}"):
        load_config(newer)
    with pytest.raises(ConfigError, match=r"SB-E762.*meta.version"):
        load_config(None, {"meta.version": "two"})
    with pytest.raises(ConfigError, match=r"SB-E762.*select_unseen_weight"):
        load_config(None, {"training.select_unseen_weight": 1.5})
    with pytest.raises(ConfigError, match=r"SB-E002.*dev_candidates"):
        load_config(None, {"training.dev_candidates": "some"})


# ---- dev evaluation: the seen / unseen split by hand -------------------------------------------
KB_CONCEPTS = [Concept("C1", "heart attack", ("myocardial infarction",)), Concept("C2", "fever", ("pyrexia",)),
               Concept("C3", "common cold", ("coryza",))]


class TableEncoder:
    """Encodes a string as the one-hot vector of the concept the table says (a stand-in model)."""

    def __init__(self, table):
        self.table, self.calls = table, []

    def encode(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, int(self.table[t][1]) - 1] = 1.0
        return out


def test_dev_split_matches_a_hand_count():
    kb = KnowledgeBase.from_concepts(KB_CONCEPTS)
    # 1 "Heart Attack" -> "heart attack", a KB name: seen, right   2 "heart attacks": a train mention: seen, right
    # 3 "high fever": neither: unseen, WRONG (encoded as C3)        4 "the cold": unseen, right
    # 5 "pyrexia": a KB name: seen, right
    mentions = [("Heart Attack", ("C1",)), ("heart attacks", ("C1",)), ("high fever", ("C2",)),
                ("the cold", ("C3",)), ("pyrexia", ("C2",))]
    table = {n: c for c in ("C1", "C2", "C3") for n in kb.names_of_concept(c)}
    table.update({"heart attack": "C1", "heart attacks": "C1", "high fever": "C3", "the cold": "C3", "pyrexia": "C2"})
    dev = DevSet(kb=kb, mentions=mentions, ks=(1, 2), train_texts=["Heart attacks"])
    figures, _ = DevEvaluator(dev, sample_names=0, shortlist_k=0).evaluate(TableEncoder(table))
    assert figures["dev_n_seen"] == 3 and figures["dev_n_unseen"] == 2
    assert figures["dev_acc@1"] == pytest.approx(4 / 5)
    assert figures["dev_seen_acc@1"] == 1.0 and figures["dev_unseen_acc@1"] == 0.5
    assert figures["dev_acc@2"] == 1.0  # C2 is second for "high fever"
    assert selection_score(figures, 0.0) == pytest.approx(0.8)
    assert selection_score(figures, 0.5) == pytest.approx(0.5 * 0.8 + 0.5 * 0.5)


def test_the_candidate_set_is_fixed_and_small():
    kb = KnowledgeBase.from_concepts(KB_CONCEPTS + [Concept(f"X{i}", f"other thing {i}") for i in range(20)])
    dev = DevSet(kb=kb, mentions=[("the cold", ("C3",))])
    gold_only = DevEvaluator(dev, sample_names=0, shortlist_k=0)
    assert sorted(kb.names[r] for r in gold_only.rows) == ["common cold", "coryza"]
    shortlist = DevEvaluator(dev, sample_names=0, shortlist_k=3)
    assert set(gold_only.rows) < set(shortlist.rows) and len(shortlist.rows) <= 2 + 3
    sampled = DevEvaluator(dev, sample_names=5, shortlist_k=0, seed=1)
    assert len(sampled.rows) <= 7 and set(sampled.rows) == set(DevEvaluator(dev, sample_names=5, shortlist_k=0, seed=1).rows)
    assert len(DevEvaluator(dev, candidates="all").rows) == len(kb.names)
    enc = TableEncoder({**{n: "C1" for n in kb.names}, "common cold": "C3", "coryza": "C3", "the cold": "C3"})
    gold_only.evaluate(enc)
    assert sorted(enc.calls[0]) == ["common cold", "coryza"] and enc.calls[1] == ["the cold"]  # no KB pass


# ---- a real run: dev rows, selection, summary, the wall-clock cap ----------------------------------
def _words(n, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5)) for _ in range(n)]


@pytest.fixture(scope="module")
def concepts():
    w = _words(36)
    return [Concept(f"C{i:02d}", w[3 * i], (w[3 * i + 1], w[3 * i + 2])) for i in range(12)]


def test_finetune_logs_seen_unseen_and_selects_by_the_mix(tmp_path, tiny_bert_path, concepts):
    kb = KnowledgeBase.from_concepts(concepts)
    dev_kb = KnowledgeBase.from_concepts([Concept(c.concept_id, c.canonical_name) for c in concepts])
    train = [(a, (c.concept_id,)) for c in concepts[:6] for a in c.aliases]  # 12 train mentions
    dev = dev_set(dev_kb, [(a, (c.concept_id,)) for c in concepts for a in c.aliases])  # 24: 12 seen, 12 unseen
    config = load_config(None, {"training.batch_size": 8, "training.max_steps": 10, "training.lr": 3e-3,
                                "training.device": "cpu", "training.eval_every": "1 epoch", "training.log_every": 1,
                                "training.select_unseen_weight": 1.0, "training.patience": 0}, task="finetune")
    result = finetune(kb, train, str(tiny_bert_path), tmp_path / "ft", config=config, dev=dev)
    assert result.steps_per_epoch == 5  # 12 mentions x 3 names of their concept = 36 pairs / 8
    rows = [r for r in result.history if "dev_acc@1" in r]
    assert [r["step"] for r in rows] == [5, 10]
    assert all(r["dev_n_seen"] == 12 and r["dev_n_unseen"] == 12 for r in rows)
    assert rows[1]["dev_seconds"] >= rows[0]["dev_eval_seconds"] + rows[1]["dev_eval_seconds"]  # the run's total
    best = max(rows, key=lambda r: r["dev_unseen_acc@1"])  # the first of equals
    assert result.best_dev == best["dev_unseen_acc@1"] and result.model_step == best["step"]
    assert result.model_from == "best" and result.model_dev["dev_unseen_acc@1"] == best["dev_unseen_acc@1"]
    summary = json.loads((tmp_path / "ft" / "summary.json").read_text())
    assert summary["model_step"] == best["step"] and summary["steps"] == 10
    assert summary["train_seconds"] <= summary["wall_seconds"] and summary["dev_seconds"] > 0
    lines = summary_lines(result)
    assert "training pairs/s (training time only" in lines[1] and "dev" in lines[2]
    assert f"holds the best dev step ({best['step']})" in lines[3] and "n = 12; unseen" in lines[3]
    log = [json.loads(line) for line in (tmp_path / "ft" / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in log if "loss" in r]
    assert all(r["pairs_per_s"] > 0 and r["wall_seconds"] >= r["train_seconds"] for r in train_rows)


def test_max_minutes_caps_wall_time_not_training_time(tmp_path, tiny_bert_path, concepts, monkeypatch):
    kb = KnowledgeBase.from_concepts(concepts)
    slow = DevEvaluator.evaluate

    def slow_evaluate(self, encoder, **kw):
        time.sleep(1.5)  # dev evaluation, not training, uses up the time
        return slow(self, encoder, **kw)

    monkeypatch.setattr(DevEvaluator, "evaluate", slow_evaluate)
    train = [(a, (c.concept_id,)) for c in concepts for a in c.aliases]
    config = load_config(None, {"training.batch_size": 4, "training.max_steps": 200, "training.device": "cpu",
                                "training.eval_every": 1, "training.max_minutes": 2.0 / 60,
                                "training.log_every": 1}, task="finetune")
    result = finetune(kb, train, str(tiny_bert_path), tmp_path / "cap", config=config, dev=dev_set(kb, train))
    assert result.steps < 200 and result.wall_seconds >= 2.0
    assert result.dev_seconds >= 1.5 and result.train_seconds < 2.0  # a training-time cap would not have stopped
