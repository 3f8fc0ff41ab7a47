"""Training the context encoder: pair making (supervised, self-supervised, masking), the trainer hook
(a few steps with the tiny BERT of conftest.py), the CLI, and the coded errors of bad input."""
from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import make_toy_kb

from spacy_sapbert.context import ContextEncoder, PrototypeStore
from spacy_sapbert.context.context_encoder import MARKERS, context_token_rows
from spacy_sapbert.context.train import ContextTokens, context_config, train_context
from spacy_sapbert.context.train_pairs import (context_mentions, dictionary_mentions, make_context_pairs,
                                               pack_context, unpack_context, write_context_pairs)
from spacy_sapbert.errors import ConfigError, DataFormatError, EmptyResultError
from spacy_sapbert.mentions.datasets import Document, Mention
from spacy_sapbert.kb import Concept
from spacy_sapbert.training import PairSet

pytestmark = pytest.mark.usefixtures("one_torch_thread")

T1 = "Troponin rose after the MI.\nA heart attack, then influenza and heart disease."
T2 = "A murmur of mitral regurgitation; the MI was heard. No flu."


def mention(text, word, ids, nth=0):
    start = -1
    for _ in range(nth + 1):
        start = text.index(word, start + 1)
    return Mention(word, ids, start, start + len(word))


@pytest.fixture(scope="module")
def kb():
    """The toy KB's diseases and "Heart disease" (T1 names it beside "heart attack")."""
    return make_toy_kb("D001", "D002", "D003", extra=[Concept("D004", "Heart disease", (), ("Disease",))])


@pytest.fixture(scope="module")
def docs():
    return [Document("1", T1, [mention(T1, "MI", ("D001",)), mention(T1, "influenza", ("D003",))]),
            Document("2", T2, [mention(T2, "MI", ("D002",)), mention(T2, "mitral regurgitation", ("D002",))])]


# ---- pair making ----------------------------------------------------------------------------
def test_pack_and_unpack_round_trip_and_fold_line_breaks():
    text = "a\nb MI c\r\nd"
    line = pack_context(text, 4, 6)
    assert "\n" not in line and "\r" not in line
    assert line == "a b " + MARKERS[0] + "MI" + MARKERS[1] + " c  d"
    back, start, end = unpack_context(line)
    assert back[start:end] == "MI" and back == "a b MI c  d"
    masked = pack_context(text, 4, 6, mask_token="[MASK]")
    back, start, end = unpack_context(masked)
    assert back[start:end] == "[MASK]" and "MI" not in back


def test_dictionary_matches_are_unambiguous_longest_and_ignore_annotations(kb, docs):
    mentions, concepts, counts = dictionary_mentions(docs, kb, min_chars=2)
    found = [(t[s:e], c) for (t, s, e), c in zip(mentions, concepts)]
    # "MI" names two concepts: never used (counted ambiguous); longest names first
    assert found == [("heart attack", "D001"), ("influenza", "D003"), ("heart disease", "D004"),
                     ("mitral regurgitation", "D002"), ("flu", "D003")]
    assert counts["ambiguous"] == 2 and counts["matches"] == 5
    assert all(t[s:e].lower() != "mi" for t, s, e in mentions)


def test_min_chars_drops_short_names(kb, docs):
    mentions, _, _ = dictionary_mentions(docs, kb, min_chars=4)
    assert "flu" not in [t[s:e] for t, s, e in mentions]


def test_supervised_pairs_pair_each_context_with_names_of_its_concept(kb, docs, tmp_path):
    pairs = make_context_pairs(docs, kb, tmp_path / "p", source="supervised", names_per_mention=5)
    assert pairs.meta["kind"] == "context" and pairs.meta["n_mentions"] == 4
    by_text = {}
    for a, b, cid in pairs.iter_pairs(kb):
        by_text.setdefault(a, set()).add((b, cid))
    first = next(t for t in by_text if "Troponin" in t)
    assert MARKERS[0] + "MI" + MARKERS[1] in first
    assert by_text[first] == {(n, "D001") for n in kb.names_of_concept("D001")}
    assert {cid for pairs_ in by_text.values() for _, cid in pairs_} == {"D001", "D002", "D003"}


def test_context_pairs_pair_mentions_of_one_concept_only(kb, docs, tmp_path):
    pairs = make_context_pairs(docs, kb, tmp_path / "p", source="supervised", contexts_per_mention=3)
    assert pairs.meta["contexts_per_mention"] == 3
    n_names = pairs.meta["n_kb_names"]
    rows = np.asarray(pairs.pairs)
    both = rows[(rows[:, 0] >= n_names) & (rows[:, 1] >= n_names)]
    # D002 has two mentions (MI, mitral regurgitation): each is the other's positive; D001 and D003 have one
    assert len(both) == 2 and len(rows) == len(both) + pairs.meta["n_mentions"]
    assert {(int(a), int(b)) for a, b, _ in both} == {(n_names + 2, n_names + 3), (n_names + 3, n_names + 2)}
    assert len({int(label) for _, _, label in both}) == 1
    texts = {pairs.texts[int(a) - n_names] for a, _, _ in both}
    assert all("MI" in t or "mitral regurgitation" in t for t in texts)
    again = make_context_pairs(docs, kb, tmp_path / "q", source="supervised", contexts_per_mention=3)
    assert np.array_equal(np.asarray(again.pairs), rows)
    none = make_context_pairs(docs, kb, tmp_path / "r", source="supervised")
    assert none.meta["contexts_per_mention"] == 0 and len(np.asarray(none.pairs)) == none.meta["n_mentions"]
    with pytest.raises(ConfigError, match="SB-E616"):
        make_context_pairs(docs, kb, tmp_path / "s", contexts_per_mention=-1)


def test_both_sources_masking_and_seeded_sampling(kb, docs, tmp_path):
    def build(name, seed):
        return make_context_pairs(docs, kb, tmp_path / name, source="both", names_per_mention=1,
                                  mask_probability=0.5, seed=seed)

    a, b, c = build("a", 0), build("b", 0), build("c", 3)
    assert a.meta["n_mentions"] == 4 + 5
    assert np.array_equal(np.asarray(a.pairs), np.asarray(b.pairs)) and a.texts == b.texts
    assert a.texts != c.texts or not np.array_equal(np.asarray(a.pairs), np.asarray(c.pairs))
    masked = [t for t in a.texts if MARKERS[0] + "[MASK]" + MARKERS[1] in t]
    assert len(masked) == a.meta["masked"] and 0 < len(masked) < len(a.texts)
    always = make_context_pairs(docs, kb, tmp_path / "m", source="self", mask_probability=1.0)
    assert all("[MASK]" in t for t in always.texts)


def test_bad_input_is_coded(kb, docs, tmp_path):
    no_ids = [Document("1", T1, [Mention("MI", (), 24, 26)])]
    with pytest.raises(EmptyResultError, match="SB-E603"):
        make_context_pairs(no_ids, kb, tmp_path / "a", source="supervised")
    unknown = [Document("1", T1, [Mention("MI", ("X999",), 24, 26)])]
    with pytest.raises(EmptyResultError, match="SB-E604"):
        make_context_pairs(unknown, kb, tmp_path / "b", source="supervised")
    with pytest.raises(EmptyResultError, match="SB-E615"):
        with pytest.warns(UserWarning, match="SB-W615"):
            dictionary_mentions([Document("1", "", []), Document("2", "nothing to see", [])], kb)
    with pytest.raises(ConfigError, match="SB-E002"):
        context_mentions(docs, kb, "weak")
    with pytest.raises(ConfigError, match="SB-E616"):
        make_context_pairs(docs, kb, tmp_path / "c", mask_probability=1.5)
    with pytest.raises(ConfigError, match="SB-E616"):
        write_context_pairs(kb, [(T1, 24, 26)], ["NOT-IN-KB"], tmp_path / "d")
    with pytest.raises(DataFormatError, match="SB-E618"):
        unpack_context("no markers here")


# ---- training -------------------------------------------------------------------------------
def test_context_tokens_match_the_context_encoder(kb, docs, tmp_path, tiny_bert_path):
    from spacy_sapbert.context.train import prepare_base

    base = prepare_base(str(tiny_bert_path), tmp_path / "base", pooling="mean", max_length=24)
    enc = ContextEncoder.load(str(base), pooling="mean", max_length=24, device="cpu")
    pairs = make_context_pairs(docs, kb, tmp_path / "p", source="supervised", names_per_mention=2)
    tokens = ContextTokens(pairs, kb, enc.encoder.tokenizer, 24, name_max_length=8)
    n = pairs.meta["n_kb_names"]
    rows = tokens.rows([n, 0, n + 1])
    contexts = [unpack_context(pairs.texts[0]), unpack_context(pairs.texts[1])]
    assert rows[0] == enc.token_rows([contexts[0]])[0] and rows[2] == context_token_rows(
        enc.encoder.tokenizer, [contexts[1]], 24)[0]
    assert rows[1] == enc.encoder.tokenizer(kb.names[0], max_length=8, truncation=True)["input_ids"]
    flat, lengths = tokens.flat([n, 0])
    assert lengths.tolist() == [len(rows[0]), len(rows[1])] and flat.tolist() == rows[0] + rows[1]


def test_a_few_steps_change_the_weights_and_save_a_loadable_context_encoder(kb, docs, tmp_path, tiny_bert_path):
    config = context_config(overrides={"model.max_length": 24, "training.max_steps": 3, "training.batch_size": 4,
                                       "training.lr": 1e-3, "training.device": "cpu", "miner.enabled": False})
    result = train_context(docs, kb, str(tiny_bert_path), tmp_path / "out", config=config, source="both",
                           mask_probability=0.5, name_max_length=8, contexts_per_mention=1)
    assert result.steps == 3 and result.final_loss is not None and np.isfinite(result.final_loss)
    trained = ContextEncoder.from_disk(result.model_path, device="cpu")
    base = ContextEncoder.load(str(tmp_path / "out" / "base"), pooling="mean", max_length=24, device="cpu")
    assert trained.max_length == 24 and trained.pooling == "mean"
    assert trained.fingerprint != base.fingerprint
    probe = [(T1, T1.index("MI"), T1.index("MI") + 2)]
    assert not np.allclose(trained.encode(probe), base.encode(probe))
    assert trained.encoder.tokenizer.convert_tokens_to_ids(MARKERS[0]) == base.encoder.tokenizer.convert_tokens_to_ids(MARKERS[0])
    with pytest.raises(ConfigError, match="SB-E209"):  # the run exists: resume or a new folder
        train_context(docs, kb, str(tiny_bert_path), tmp_path / "out", config=config)
    with pytest.raises(ConfigError, match="SB-E208"):  # resuming with other pairs is refused
        train_context(docs, kb, str(tiny_bert_path), tmp_path / "out", config=config, source="both",
                      mask_probability=0.5, name_max_length=8, resume=True)


def test_a_folder_of_the_users_is_never_a_run_folder(kb, docs, tmp_path, tiny_bert_path):
    mine = tmp_path / "mine"  # a project folder: its prototypes/ would be replaced, its base/ taken as the model
    (mine / "prototypes").mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    config = context_config(overrides={"training.device": "cpu"})
    with pytest.raises(ConfigError, match="SB-E208.*notes.txt"):
        train_context(docs, kb, str(tiny_bert_path), mine, config=config)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "prototypes"]  # nothing written
    (mine / "notes.txt").unlink()
    (mine / "prototypes").rmdir()
    (mine / "base").mkdir()  # what an interrupted start leaves is not someone else's
    (mine / ".base.abcd1234.tmp").mkdir()
    from spacy_sapbert.context.train import check_run_folder

    check_run_folder(mine, mine / "run")


@pytest.mark.parametrize("override,value", [("training.hard_negatives", 2), ("training.pretokenize", True),
                                            ("training.batching", "similar")])
def test_name_only_trainer_settings_are_refused(kb, docs, tmp_path, tiny_bert_path, override, value):
    config = context_config(overrides={override: value, "training.device": "cpu"})
    with pytest.raises(ConfigError, match="SB-E617"):
        train_context(docs, kb, str(tiny_bert_path), tmp_path / "out", config=config)


def test_a_name_pair_set_is_not_a_context_pair_set(kb, tmp_path):
    from spacy_sapbert.training import write_kb_pairs

    pairs = write_kb_pairs(kb, tmp_path / "kbpairs")
    with pytest.raises(DataFormatError, match="SB-E618"):
        ContextTokens(pairs, kb, None, 24, 8)
    assert isinstance(PairSet(tmp_path / "kbpairs"), PairSet)


def test_cli_train_context(kb, docs, tmp_path, tiny_bert_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    kb_dir = tmp_path / "kb"
    kb.to_disk(kb_dir)
    pubtator = tmp_path / "train.txt"
    lines = []
    for d in docs:
        title, _, abstract = d.text.partition("\n")
        lines += [f"{d.doc_id}|t|{title}", f"{d.doc_id}|a|{abstract}"]
        lines += [f"{d.doc_id}\t{m.start}\t{m.end}\t{m.text}\tDisease\t{m.ids[0]}" for m in d.mentions]
        lines.append("")
    pubtator.write_text("\n".join(lines) + "\n", encoding="utf8")
    out = tmp_path / "ctx"
    result = CliRunner().invoke(app, ["train-context", str(pubtator), "--kb", str(kb_dir), "--model",
                                      str(tiny_bert_path), "--output", str(out), "--source", "both",
                                      "--contexts-per-mention", "1", "--max-length", "24", "--name-max-length", "8", "--training.max_steps", "2",
                                      "--training.batch_size", "4", "--training.device", "cpu", "--dev", str(pubtator)])
    assert result.exit_code == 0, result.output
    assert "Context encoder:" in result.output and (out / "run" / "model").is_dir()
    meta = json.loads((out / "run" / "pairs" / "meta.json").read_text())
    assert meta["contexts_per_mention"] == 1
    assert meta["source"] == "both" and meta["counts"]["supervised"]["used"] == 4
    # --dev: prototypes built with the trained encoder, weights tuned on the dev set
    dev = json.loads((out / "dev_weights.json").read_text())
    assert dev["dev_mentions"] == 4 and 0 <= dev["name_only_acc@1"] <= dev["best_acc@1"] <= 1
    store = PrototypeStore.from_disk(out / "prototypes", device="cpu")
    assert store.meta["encoder"]["fingerprint"] == ContextEncoder.from_disk(out / "run" / "model").fingerprint
    assert "dev mentions: name-only strict acc@1" in result.output
