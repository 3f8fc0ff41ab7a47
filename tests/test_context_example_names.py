"""Example names: a prototype store's example mentions count as names of their concept.

The tiny random BERT gives arbitrary name similarities, but a text's similarity to itself is 1: a mention
written exactly as an example mention of D002 (and as no KB name) must go to D002 once example names are
on, with score 1, and to whatever the names say without them."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import spacy
from spacy.tokens import Span

from helpers import linker_nlp

from spacy_sapbert.context import ContextEncoder, ContextWeights, PrototypeStore, build_prototypes
from spacy_sapbert.context.rerank import tune_weights, with_example_names
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import ConfigError, DataFormatError, IncompatibleError, IntegrityError
from spacy_sapbert.evaluation.context import context_rankings
from spacy_sapbert.mentions.datasets import Document, Mention
from spacy_sapbert.mentions.metrics import Ranking
from spacy_sapbert.kb import Concept, KnowledgeBase

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONCEPTS = [
    Concept("D001", "Heart attack", ("myocardial infarction",), ("Disease",)),
    Concept("D002", "Mitral insufficiency", ("mitral regurgitation",), ("Disease",)),
    Concept("D003", "Influenza", ("flu",), ("Disease",)),
    Concept("D004", "Aspirin poisoning", ("salicylate toxicity",), ("Disease",)),
]
WORDS = "leaky valve"  # an example mention of D002, not a KB name
TEXT = f"echo showed a {WORDS} last week ."


def _doc(text, words, cid):
    start = text.index(words)
    return Document("1", text, [Mention(words, (cid,), start, start + len(words))])


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_bert_path):
    root = tmp_path_factory.mktemp("exnames")
    KnowledgeBase.from_concepts(CONCEPTS).to_disk(root / "kb")
    kb = KnowledgeBase.from_disk(root / "kb")
    ctx = ContextEncoder.load(str(tiny_bert_path), pooling="mean", device="cpu")
    names = Encoder.load(str(tiny_bert_path), pooling="mean", max_length=25, device="cpu")
    docs = [_doc(TEXT, WORDS, "D002"), _doc("no fever but flu like aches .", "flu like aches", "D003")]
    build_prototypes(docs, kb, ctx, show_progress=False, name_encoder=names).to_disk(root / "protos")
    build_prototypes(docs, kb, ctx, show_progress=False).to_disk(root / "protos_plain")
    cls_names = Encoder.load(str(tiny_bert_path), pooling="cls", max_length=25, device="cpu")
    build_prototypes(docs, kb, ctx, show_progress=False, name_encoder=cls_names).to_disk(root / "protos_cls")
    return root


def _nlp(model, files, protos="protos", **config):
    return linker_nlp(model, files / "kb", prototypes_path=files / protos, **{"context_weight": 0.0, **config})


def _link(nlp, text=TEXT, words=WORDS):
    doc = nlp.make_doc(text)
    toks = [t.text for t in doc]
    first = toks.index(words.split()[0])
    doc.ents = [Span(doc, first, first + len(words.split()), label="Disease")]
    for _, proc in nlp.pipeline:
        doc = proc(doc)
    return doc.ents[0]


def test_store_keeps_example_names_memory_mapped(files, tiny_bert_path):
    store = PrototypeStore.from_disk(files / "protos", device="cpu")
    assert store.has_names and isinstance(store.names, np.memmap)
    assert store.names.shape == (2, store.meta["name_encoder"]["dim"])
    assert store.meta["name_encoder"]["pooling"] == "mean" and store.meta["name_encoder"]["max_length"] == 25
    names = Encoder.load(str(tiny_bert_path), pooling="mean", max_length=25, device="cpu")
    query = names.encode([WORDS])[0]
    sims = store.example_name_similarities(query, ["D001", "D002", "D003"])
    assert set(sims) == {"D002", "D003"}  # D001 has no example
    assert sims["D002"] == pytest.approx(1.0, abs=1e-5)
    assert sims["D003"] == pytest.approx(float(names.encode(["flu like aches"])[0] @ query), abs=1e-5)
    plain = PrototypeStore.from_disk(files / "protos_plain", device="cpu")
    assert not plain.has_names and plain.example_name_similarities(query, ["D002"]) == {}


def test_damaged_example_names_are_coded_errors(files, tmp_path):
    shutil.copytree(files / "protos", tmp_path / "p")
    (tmp_path / "p" / "names.npy").unlink()
    with pytest.raises(IntegrityError, match="SB-E551.*names.npy"):  # the store's file records see it first
        PrototypeStore.from_disk(tmp_path / "p", device="cpu")
    meta = json.loads((tmp_path / "p" / "prototypes_meta.json").read_text())
    del meta["files"]  # a store written before the records: the shape checks still hold
    (tmp_path / "p" / "prototypes_meta.json").write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="SB-W554"), pytest.raises(DataFormatError, match="SB-E607"):
        PrototypeStore.from_disk(tmp_path / "p", device="cpu")
    np.save(tmp_path / "p" / "names.npy", np.zeros((2, 3), dtype=np.float32))
    with pytest.warns(UserWarning, match="SB-W554"), pytest.raises(DataFormatError, match="SB-E607.*expected"):
        PrototypeStore.from_disk(tmp_path / "p", device="cpu")


def test_with_example_names_raises_and_resorts(files, tiny_bert_path):
    store = PrototypeStore.from_disk(files / "protos", device="cpu")
    names = Encoder.load(str(tiny_bert_path), pooling="mean", max_length=25, device="cpu")
    query = names.encode([WORDS])[0]
    cands = [("D001", 0.9), ("D004", 0.8), ("D002", 0.3)]
    out = with_example_names(cands, query, store)
    assert out[0] == ("D002", 1.0)
    assert out[1:] == [("D001", 0.9), ("D004", 0.8)]  # no examples: their name scores stay
    # an example less similar than the KB name never lowers a score
    assert with_example_names([("D003", 0.999999)], query, store) == [("D003", 0.999999)]
    plain = PrototypeStore.from_disk(files / "protos_plain", device="cpu")
    assert with_example_names(cands, query, plain) == cands


def test_linker_links_an_example_mention_to_its_concept(files, tiny_bert_path):
    on = _link(_nlp(tiny_bert_path, files))
    assert on.kb_id_ == "D002" and on._.kb_ents[0] == ("D002", 1.0)
    off = _link(_nlp(tiny_bert_path, files, example_names=False))
    assert off._.kb_ents[0][1] < 0.9999  # WORDS is no KB name: no name scores 1
    # context_k bounds the candidates re-ranked: with 1, D002 only wins if names alone put it first
    one = _link(_nlp(tiny_bert_path, files, context_k=1, k=1, max_entities_per_mention=1))
    assert one.kb_id_ == off.kb_id_ != "D002"


def test_linker_round_trip_keeps_example_names(files, tiny_bert_path, tmp_path):
    nlp = _nlp(tiny_bert_path, files)
    nlp.to_disk(tmp_path / "nlp")
    assert (tmp_path / "nlp" / "sapbert_linker" / "prototypes" / "names.npy").exists()
    loaded = spacy.load(tmp_path / "nlp")
    assert _link(loaded)._.kb_ents == _link(nlp)._.kb_ents
    again = spacy.blank("en")
    again.add_pipe("sapbert_linker", config={"device": "cpu", "threshold": -1.0, "pooling": "mean",
                                             "context_weight": 0.0})
    again.get_pipe("sapbert_linker").from_bytes(nlp.get_pipe("sapbert_linker").to_bytes())
    assert again.get_pipe("sapbert_linker").prototypes.has_names
    assert _link(again)._.kb_ents == _link(nlp)._.kb_ents


def test_example_names_of_another_encoder_are_refused(files, tiny_bert_path):
    with pytest.raises(IncompatibleError, match="SB-E635.*pooling"):
        _nlp(tiny_bert_path, files, protos="protos_cls")
    _nlp(tiny_bert_path, files, protos="protos_cls", example_names=False)  # off: not checked


def test_store_without_names_warns_once_loaded(files, tiny_bert_path):
    with pytest.warns(UserWarning, match="SB-W602"):
        nlp = _nlp(tiny_bert_path, files, protos="protos_plain")
    assert _link(nlp)._.kb_ents == _link(_nlp(tiny_bert_path, files, example_names=False))._.kb_ents


def test_bad_example_name_settings_are_coded_errors():
    nlp = spacy.blank("en")
    with pytest.raises(ConfigError, match="SB-E111.*context_k"):
        nlp.add_pipe("sapbert_linker", config={"device": "cpu", "context_k": 0})
    with pytest.raises(ConfigError, match="SB-E002.*example_names"):
        ContextWeights(example_names="yes")


def test_tuning_and_evaluation_use_example_names(files, tiny_bert_path):
    store = PrototypeStore.from_disk(files / "protos", device="cpu")
    names = Encoder.load(str(tiny_bert_path), pooling="mean", max_length=25, device="cpu")
    query = names.encode([WORDS])
    cands = [[("D001", 0.9), ("D002", 0.3)]]
    context = store.encoder.encode([(TEXT, TEXT.index(WORDS), TEXT.index(WORDS) + len(WORDS))])
    best, table = tune_weights(cands, context, store, [frozenset({"D002"})], step=0.5, name_vectors=query)
    # context alone (weight 1: the query's context is the D002 prototype's) or example names alone are right;
    # ties go to the grid point without example names
    assert not best.example_names and best.context == 1.0
    assert {row["example_names"] for row in table} == {False, True}
    assert any(row["example_names"] and row["context_weight"] == 0 and row["acc@1"] == 1.0 for row in table)
    assert all(row["acc@1"] == 0.0 for row in table if not row["example_names"] and row["context_weight"] == 0)
    with pytest.raises(ConfigError, match="SB-E614"):
        tune_weights(cands, context, store, [frozenset({"D002"})], name_vectors=np.vstack([query, query]))
    weights = ContextWeights(context=0.0, fallback=0.0, example_names=True)
    ranked = context_rankings([Ranking(concepts=cands[0])], context, [True], store, weights, name_vectors=query)
    assert ranked[0].concepts[0] == ("D002", 1.0)
    off = context_rankings([Ranking(concepts=cands[0])], context, [True], store,
                           ContextWeights(context=0.0, fallback=0.0), name_vectors=query)
    assert off[0].concepts[0][0] == "D001"
    assert json.loads(json.dumps(weights.to_dict()))["example_names"] is True
