"""Context units: word-piece budget, context encoder, prototype store, re-ranking, tuning, priors.

Re-ranking and tuning are checked on hand-built 2-D vectors whose answers are worked out by hand;
the encoder on a tiny random BERT (tests/conftest.py)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from helpers import make_toy_kb

from spacy_sapbert.context import ContextEncoder, ContextWeights, PrototypeStore, TypePriors, build_prototypes
from spacy_sapbert.context.context_encoder import MARKERS, split_budget
from spacy_sapbert.context.priors import search_with_prior
from spacy_sapbert.context.rerank import combine, rerank, tune_weights
from spacy_sapbert.errors import ConfigError, DataFormatError, EmptyResultError, IncompatibleError
from spacy_sapbert.mentions.datasets import Document, Mention

pytestmark = pytest.mark.usefixtures("one_torch_thread")

IDS = ("D001", "D002", "D003", "C004")  # the toy KB without C005: one chemical
T1 = "troponin rose sharply after the MI yesterday ."
T2 = "a loud systolic murmur from the MI was heard ."


def doc(doc_id, text, word, ids, composite=False):
    start = text.index(word)
    return Document(doc_id, text, [Mention(word, ids, start, start + len(word), composite=composite)])


@pytest.fixture(scope="module")
def kb():
    return make_toy_kb(*IDS)


@pytest.fixture(scope="module")
def encoder(tiny_bert_path):
    return ContextEncoder.load(str(tiny_bert_path), pooling="mean", device="cpu")


class _Enc:
    """A stand-in for a context encoder's identity in hand-built stores."""

    dim, pooling, max_length, fingerprint = 2, "mean", 64, "hand"

    def settings(self):
        return {"dim": 2, "pooling": "mean", "max_length": 64, "fingerprint": "hand", "name": "hand"}


def unit(*xy):
    v = np.asarray(xy, dtype=np.float32)
    return v / np.linalg.norm(v)


def hand_store(kinds=None):
    vectors = np.stack([unit(1, 0), unit(0.8, 0.6), unit(0, 1), unit(0.6, 0.8)])
    return PrototypeStore.from_rows(vectors, ["A", "A", "B", "C"], kinds or [0, 0, 0, 1], encoder=_Enc(),
                                    kb_checksum="x")


# ---- budget and encoder -------------------------------------------------------------------
@pytest.mark.parametrize("budget,left,right,expected", [
    (10, 20, 20, (5, 5)), (10, 2, 20, (2, 8)), (10, 20, 3, (7, 3)), (10, 1, 1, (1, 1)), (11, 20, 20, (5, 6)),
])
def test_split_budget_is_even_and_gives_the_unused_part_away(budget, left, right, expected):
    assert split_budget(budget, left, right) == expected


def test_token_rows_mark_the_mention_and_respect_max_length(tiny_bert_path):
    enc = ContextEncoder.load(str(tiny_bert_path), pooling="mean", max_length=16, device="cpu")
    tok = enc.encoder.tokenizer
    text = "abcdefghij MI klmnopqrst"
    (row,) = enc.token_rows([(text, 11, 13)])
    pieces = tok.convert_ids_to_tokens(row)
    assert len(row) == 16
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
    i, j = pieces.index(MARKERS[0]), pieces.index(MARKERS[1])
    assert pieces[i + 1:j] == ["m", "##i"]
    assert i - 1 == len(pieces) - 2 - j  # 10 pieces of context split 5 / 5
    assert "".join(p.lstrip("#") for p in pieces[1:i]) == "fghij"


def test_encoder_is_deterministic_and_its_fingerprint_covers_the_markers(tiny_bert_path, encoder, tmp_path):
    from spacy_sapbert.encoding.torch_encoder import Encoder

    again = ContextEncoder.load(str(tiny_bert_path), pooling="mean", device="cpu")
    assert again.fingerprint == encoder.fingerprint
    assert encoder.fingerprint != Encoder.load(str(tiny_bert_path), device="cpu").fingerprint
    items = [(T1, T1.index("MI"), T1.index("MI") + 2), (T2, T2.index("MI"), T2.index("MI") + 2)]
    vecs = encoder.encode(items, batch_size=1)
    assert vecs.shape == (2, 32) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vecs, again.encode(items, batch_size=2), atol=1e-5)
    encoder.to_disk(tmp_path / "enc")
    loaded = ContextEncoder.from_disk(tmp_path / "enc", device="cpu")
    assert loaded.fingerprint == encoder.fingerprint
    assert np.allclose(loaded.encode(items), vecs, atol=1e-5)


def test_encoder_errors(tiny_bert_path, encoder):
    with pytest.raises(ConfigError, match="SB-E600"):
        ContextEncoder(object())
    with pytest.raises(ConfigError, match="SB-E601"):
        ContextEncoder.load(str(tiny_bert_path), max_length=4, device="cpu")
    with pytest.raises(ConfigError, match=r"SB-E602.*5-3"):
        encoder.encode([("some text", 5, 3)])
    with pytest.raises(ConfigError, match="SB-E602"):
        encoder.encode([("short", 2, 40)])


# ---- building and the store ---------------------------------------------------------------
def test_build_counts_warnings_and_definitions(kb, encoder):
    docs = [doc("1", T1, "MI", ("D001",)), doc("2", T2, "MI", ("D002",)),
            doc("3", "the flu and more", "flu", ("D999",)), doc("4", "MI or flu here", "MI", ("D001", "D003"), True)]
    with pytest.warns(UserWarning) as record:
        store = build_prototypes(docs, kb, encoder, definitions="missing", show_progress=False)
    messages = " ".join(str(w.message) for w in record)
    assert "SB-W600" in messages and "1 of 4" in messages and "D999" in messages and "SB-W601" in messages
    # examples of D001 and D002; definition prototype of D003 only (D001 has examples, C004 no definition)
    assert store.meta["n_examples"] == 2 and store.meta["n_definitions"] == 1
    assert list(store.concept_ids) == ["D001", "D002", "D003"]
    assert store.has_examples("D001") and not store.has_examples("D003") and "C004" not in store
    with pytest.warns(UserWarning):
        everything = build_prototypes(docs, kb, encoder, definitions="all", show_progress=False)
    assert everything.meta["n_definitions"] == 2  # D001 and D003 have definitions


def test_build_refuses_documents_without_usable_ids(kb, encoder):
    with pytest.raises(EmptyResultError, match="SB-E603"):
        build_prototypes([doc("1", T1, "MI", ())], kb, encoder, show_progress=False)
    with pytest.raises(EmptyResultError, match=r"SB-E604.*D998"):
        build_prototypes([doc("1", T1, "MI", ("D998",))], kb, encoder, show_progress=False)
    with pytest.raises(ConfigError, match="SB-E002"):
        build_prototypes([doc("1", T1, "MI", ("D001",))], kb, encoder, definitions="some", show_progress=False)


def test_store_round_trip_is_memory_mapped_and_checked(kb, encoder, tiny_bert_path, other_tiny_bert_path, tmp_path):
    store = build_prototypes([doc("1", T1, "MI", ("D001",)), doc("2", T2, "MI", ("D002",))], kb, encoder,
                             show_progress=False)
    store.to_disk(tmp_path / "p")
    loaded = PrototypeStore.from_disk(tmp_path / "p", kb=kb, device="cpu")
    assert isinstance(loaded.vectors, np.memmap)
    assert np.allclose(np.asarray(loaded.vectors), store.vectors)
    q = encoder.encode([(T1, T1.index("MI"), T1.index("MI") + 2)])[0]
    assert loaded.similarities(q, ["D001", "D002", "C004"]) == store.similarities(q, ["D001", "D002", "C004"])
    assert loaded.similarities(q, ["D001"])[0]["D001"] == pytest.approx(1.0, abs=1e-5)
    other_kb = make_toy_kb(*IDS[:3])
    with pytest.raises(IncompatibleError, match="SB-E606"):
        PrototypeStore.from_disk(tmp_path / "p", kb=other_kb, device="cpu")
    other = ContextEncoder.load(str(other_tiny_bert_path), pooling="mean", device="cpu")
    with pytest.raises(IncompatibleError, match=r"SB-E605.*fingerprint"):
        loaded.check_encoder(other, path=tmp_path / "p")
    # the saved encoder replaced by another one: refused at load
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "p", broken)
    shutil.rmtree(broken / "encoder")
    other.to_disk(broken / "encoder")
    with pytest.raises(IncompatibleError, match="SB-E605"):
        PrototypeStore.from_disk(broken, device="cpu")
    meta = json.loads((broken / "prototypes_meta.json").read_text())
    (broken / "prototypes_meta.json").write_text(json.dumps({**meta, "n_prototypes": 5}))
    with pytest.raises(DataFormatError, match="SB-E607"):
        PrototypeStore.from_disk(broken, load_encoder=False)
    with pytest.raises(DataFormatError, match="SB-E607"):
        PrototypeStore.from_disk(tmp_path / "nothing")
    # crafted offsets (a concept without rows, rows out of order): refused, not a wrong similarity
    (broken / "prototypes_meta.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "files"}))
    offsets = np.load(broken / "offsets.npy")  # (records dropped: with them, E551 sees any rewritten file first)
    empty, backwards = offsets.copy(), offsets.copy()
    empty[1] = 0  # the first concept has no rows, the second takes them
    backwards[1] = offsets[-1] + 1  # past the last row, then back: the ends right, the rows out of order
    for bad in (empty, backwards):
        np.save(broken / "offsets.npy", bad)
        with pytest.warns(UserWarning, match="SB-W554"), pytest.raises(DataFormatError, match="SB-E607.*offsets"):
            PrototypeStore.from_disk(broken, load_encoder=False)


# ---- re-ranking and tuning on hand-built vectors ------------------------------------------
def test_similarities_take_the_best_prototype_per_kind():
    store = hand_store()
    ex, de = store.similarities(unit(1, 0), ["A", "B", "C", "Z"])
    assert ex == pytest.approx({"A": 1.0, "B": 0.0})
    assert de == pytest.approx({"C": 0.6})


def test_rerank_by_hand_fallback_and_ties():
    store = hand_store()
    cands = [("A", 0.9), ("B", 0.9), ("Z", 0.5)]
    w = ContextWeights(context=0.5)
    # query (0, 1): A best proto 0.6, B 1.0, Z none -> name fallback 0.5
    assert rerank(cands, unit(0, 1), store, w) == [("B", 0.95), ("A", 0.75), ("Z", 0.5)]
    const = ContextWeights(context=0.5, fallback=0.0)
    assert rerank(cands, unit(0, 1), store, const)[-1] == ("Z", 0.25)
    # equal scores: concept id order
    assert rerank([("B", 0.5), ("A", 0.5)], unit(1, 1), store, ContextWeights(context=0.0)) == [("A", 0.5), ("B", 0.5)]
    # definition weight: C's definition 0.8 against query (0, 1)
    assert combine(0.4, None, 0.8, ContextWeights(context=0.0, definition=0.5)) == pytest.approx(0.6)
    assert rerank([], unit(1, 0), store, w) == []


@pytest.mark.parametrize("kwargs,code", [
    ({"context": -0.1}, "E608"), ({"context": 0.7, "definition": 0.4}, "E608"), ({"context": True}, "E608"),
    ({"fallback": "zero"}, "E609"), ({"fallback": 2.0}, "E609"),
])
def test_weights_are_checked(kwargs, code):
    with pytest.raises(ConfigError, match=f"SB-{code}"):
        ContextWeights(**kwargs)


def test_tune_weights_finds_the_context_weight_that_disambiguates():
    store = hand_store()
    # two mentions of a name shared by A and B (name score tie); the context says which
    cands = [[("A", 1.0), ("B", 1.0)], [("A", 1.0), ("B", 1.0)], [("B", 0.9), ("A", 0.3)]]
    queries = np.stack([unit(1, 0), unit(0, 1), unit(1, 0.2)])
    golds = [frozenset({"A"}), frozenset({"B"}), frozenset({"B"})]
    best, table = tune_weights(cands, queries, store, golds, step=0.25, fallbacks=("name",))
    by_weight = {row["context_weight"]: row["acc@1"] for row in table}
    assert by_weight[0.0] == pytest.approx(2 / 3)  # ties go to A
    assert by_weight[0.25] == pytest.approx(1.0)
    assert by_weight[1.0] == pytest.approx(2 / 3)  # context alone loses the third one
    assert best == ContextWeights(context=0.25, fallback="name")
    with pytest.raises(ConfigError, match="SB-E614"):
        tune_weights([], np.zeros((0, 2)), store, [])


def test_tuning_at_the_linker_settings_re_ranks_what_the_linker_re_ranks():
    from spacy_sapbert.context.tune import LINKER_MARGIN, LINKER_ONE_SENSE, tune_at_linker_settings
    from spacy_sapbert.linker import DEFAULT_CONFIG

    assert (LINKER_MARGIN, LINKER_ONE_SENSE) == (DEFAULT_CONFIG["context_margin"],
                                                 DEFAULT_CONFIG["one_sense_per_document"])
    store = hand_store()
    # m0, m1: one document, written alike, names tie A/B, gold B; m0's context says B, m1's says A.
    # m2: no tie (A 0.9, B 0.6), gold A, a context close to B: the linker (margin 0) leaves it alone
    cands = [[("A", 1.0), ("B", 1.0)], [("A", 1.0), ("B", 1.0)], [("A", 0.9), ("B", 0.6)]]
    queries = np.stack([unit(0, 1), unit(1, 0), unit(0, 1)])
    golds = [frozenset({"B"}), frozenset({"B"}), frozenset({"A"})]
    keys = [(0, "x"), (0, "x"), (0, "y")]
    best, table = tune_at_linker_settings(cands, queries, store, golds, keys=keys, step=0.5, fallbacks=("name",))
    acc = {row["context_weight"]: row["acc@1"] for row in table}
    assert acc == {0.0: pytest.approx(1 / 3), 0.5: 1.0, 1.0: 1.0}
    assert best == ContextWeights(context=0.5, fallback="name", margin=0.0, one_sense_per_document=True)
    assert all(row["context_margin"] == 0.0 and row["one_sense_per_document"] for row in table)
    # every mention with its own context (the old tuning) finds no weight that helps at all
    _, plain = tune_weights(cands, queries, store, golds, step=0.5, fallbacks=("name",))
    assert max(row["acc@1"] for row in plain) == pytest.approx(1 / 3)
    own = tune_at_linker_settings(cands, queries, store, golds, one_sense_per_document=False, step=0.5,
                                  fallbacks=("name",))[1]
    assert max(row["acc@1"] for row in own) == pytest.approx(2 / 3)  # m1 decides by its own context
    with pytest.raises(ConfigError, match="SB-E614"):
        tune_at_linker_settings(cands, queries, store, golds, step=0.5)  # one sense needs the keys
    with pytest.raises(ConfigError, match="SB-E619"):
        tune_at_linker_settings(cands, queries, store, golds, keys=keys, margin=-1.0)


# ---- type priors --------------------------------------------------------------------------
@pytest.mark.parametrize("config", [["T1"], {"Chem": "T1"}, {"Chem": []}, {"Chem": ["*"]}, {"Chem": [3]}])
def test_type_priors_are_checked(config):
    with pytest.raises(ConfigError, match="SB-E610"):
        TypePriors(config)


def test_search_with_prior_types_and_prefixes(kb, tiny_bert_path):
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.index import ConceptIndex

    enc = Encoder.load(str(tiny_bert_path), pooling="mean", device="cpu")
    index = ConceptIndex.build(kb, enc, exact=True, show_progress=False)
    priors = TypePriors({"Chemical": ["Chemical"], "Heart": ["D00*"], "Flu": ["Disease", "D003*"]})
    priors.check(index)
    with pytest.raises(ConfigError, match=r"SB-E611.*Drug"):
        TypePriors({"X": ["Drug"]}).check(index)
    q = enc.encode(["mi"])
    assert [c for c, _ in search_with_prior(index, q, 4, priors.for_label("Chemical"))[0]] == ["C004"]
    heart = search_with_prior(index, q, 2, priors.for_label("Heart"))[0]
    assert [c for c, _ in heart] == ["D001", "D002"]  # the two concepts named "mi", C004 filtered
    assert [c for c, _ in search_with_prior(index, q, 3, priors.for_label("Flu"))[0]] == ["D003"]
    assert search_with_prior(index, q, 4, None) == index.search(q, 4)


# ---- evaluation helpers -------------------------------------------------------------------
def test_ambiguity_mask_and_context_rankings_by_hand():
    from spacy_sapbert.evaluation.baselines import Dictionary
    from spacy_sapbert.evaluation.context import ambiguity_mask, context_rankings, prototype_masks
    from spacy_sapbert.mentions.metrics import Gold, Ranking

    dictionary = Dictionary(["mi", "flu"], [("A", "B"), ("C",)])
    tie = Ranking(concepts=[("A", 0.7), ("C", 0.7)])
    clear = Ranking(concepts=[("C", 0.9), ("A", 0.7)])
    assert ambiguity_mask(["mi", "flu", "x", "y"], dictionary) == [True, False, False, False]
    assert ambiguity_mask(["mi", "flu", "x", "y"], dictionary, [clear, clear, tie, clear]) == [True, False, True, False]
    store = hand_store()
    golds = [Gold(frozenset({"A"}), ("A",)), Gold(frozenset({"C", "Z"}), ("C", "Z")), Gold(frozenset(), ("Q",))]
    # C has only a definition prototype: not "seen"
    assert prototype_masks(golds, store) == {"seen_in_prototypes": [True, False, False],
                                             "unseen_in_prototypes": [False, True, True]}
    two = [Ranking(concepts=[("A", 0.9), ("B", 0.9)])] * 2
    out = context_rankings(two, np.stack([unit(0, 1), unit(0, 1)]), [True, False], store, ContextWeights(context=0.5))
    assert [c for c, _ in out[0].concepts] == ["B", "A"] and out[1].concepts == two[1].concepts
    assert out[0].names is None
