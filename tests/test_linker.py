"""The sapbert_linker component: output format, options, abbreviations, serialisation, n_process.

The tiny random BERT gives nearly identical [CLS] vectors for every input, so these tests use mean
pooling, whose similarities differ enough to tell names apart."""
from __future__ import annotations

import pytest
import spacy
from spacy.tokens import Doc, Span

from helpers import linker_nlp

from spacy_sapbert.errors import ConfigError, IncompatibleError, MissingInputError
from spacy_sapbert.index import META_FILE


@pytest.fixture(scope="module")
def nlp(tiny_bert_path, toy_kb_path):
    return linker_nlp(tiny_bert_path, toy_kb_path)


def with_ents(nlp, text, spans, label="DISEASE", key=None):
    """Make a doc and set entities (or a span group) by token offsets."""
    doc = nlp.make_doc(text)
    made = [Span(doc, s, e, label=label) for s, e in spans]
    if key is None:
        doc.ents = made
    else:
        doc.spans[key] = made
    return doc


def link(nlp, doc):
    for _, proc in nlp.pipeline:
        doc = proc(doc)
    return doc


def test_output_format_order_and_kb_id(nlp):
    doc = link(nlp, with_ents(nlp, "He had a heart attack and the flu .", [(3, 5), (7, 8)]))
    heart, flu = doc.ents
    for ent, gold in ((heart, "D001"), (flu, "D003")):
        cands = ent._.kb_ents
        assert isinstance(cands, list) and all(isinstance(c, str) and isinstance(s, float) for c, s in cands)
        assert 1 <= len(cands) <= 5
        scores = [s for _, s in cands]
        assert scores == sorted(scores, reverse=True)
        assert cands[0] == (gold, pytest.approx(1.0, abs=1e-5))  # exact KB name
        assert ent.kb_id_ == gold
        assert len({c for c, _ in cands}) == len(cands)
    assert nlp.get_pipe("sapbert_linker").kb.cui_to_entity["D001"].canonical_name == "Heart attack"
    assert nlp.get_pipe("sapbert_linker").kb.alias_to_cuis["mi"] == {"D001", "D002"}


def test_ties_are_broken_by_concept_id(nlp):
    doc = link(nlp, with_ents(nlp, "MI", [(0, 1)]))
    cands = doc.ents[0]._.kb_ents
    assert [c for c, _ in cands[:2]] == ["D001", "D002"]
    assert cands[0][1] == cands[1][1]


def test_threshold_and_max_entities(tiny_bert_path, toy_kb_path):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, threshold=0.99999, max_entities_per_mention=1)
    doc = link(nlp, with_ents(nlp, "influenza and zzqx", [(0, 1), (2, 3)]))
    assert doc.ents[0]._.kb_ents == [("D003", pytest.approx(1.0, abs=1e-5))]
    assert doc.ents[1]._.kb_ents == [] and doc.ents[1].kb_id_ == ""


def test_semantic_types_filter_and_unknown_type(tiny_bert_path, toy_kb_path):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, semantic_types=["Chemical"], k=3)
    doc = link(nlp, with_ents(nlp, "heart attack", [(0, 2)]))
    cands = doc.ents[0]._.kb_ents
    assert {c for c, _ in cands} == {"C004", "C005"}
    with pytest.raises(ConfigError, match="SB-E113"):
        linker_nlp(tiny_bert_path, toy_kb_path, semantic_types=["Chemical", "Planet"])


def test_filter_for_definitions(tiny_bert_path, toy_kb_path):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, filter_for_definitions=True)
    doc = link(nlp, with_ents(nlp, "aspirin", [(0, 1)]))
    assert {c for c, _ in doc.ents[0]._.kb_ents} == {"D001", "D003"}


TEXT = "Patients with myocardial infarction ( MI ) were seen . The MI was severe ."


def test_abbreviations_resolved_by_internal_detector(tiny_bert_path, toy_kb_path):
    on = linker_nlp(tiny_bert_path, toy_kb_path)
    off = linker_nlp(tiny_bert_path, toy_kb_path, resolve_abbreviations=False)
    doc_on = link(on, with_ents(on, TEXT, [(11, 12)]))
    doc_off = link(off, with_ents(off, TEXT, [(11, 12)]))
    # Unresolved "MI" is a name of both D001 and D002 (tie); resolved it is "myocardial infarction".
    assert doc_off.ents[0]._.kb_ents[1][1] == pytest.approx(doc_off.ents[0]._.kb_ents[0][1])
    resolved = doc_on.ents[0]._.kb_ents
    assert resolved[0] == ("D001", pytest.approx(1.0, abs=1e-5))
    assert dict(resolved)["D002"] < resolved[0][1] - 1e-4
    assert not doc_on._.abbreviations  # the internal detector leaves the doc alone


@pytest.mark.parametrize("serializable", [False, True])
def test_abbreviations_from_scispacy_pipeline_component(tiny_bert_path, toy_kb_path, serializable):
    import scispacy.abbreviation  # noqa: F401  (registers abbreviation_detector)

    nlp = spacy.blank("en")
    nlp.add_pipe("abbreviation_detector", config={"make_serializable": serializable})
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu", "threshold": -1.0, "pooling": "mean"})
    nlp.get_pipe("sapbert_linker").initialize(kb_path=str(toy_kb_path), show_progress=False)
    doc = link(nlp, with_ents(nlp, TEXT, [(11, 12)]))
    assert len(doc._.abbreviations) == 2
    cands = doc.ents[0]._.kb_ents
    assert cands[0][0] == "D001" and dict(cands)["D002"] < cands[0][1] - 1e-4


def test_abbreviation_inside_a_longer_mention(nlp):
    doc = link(nlp, with_ents(nlp, "Heart attack ( HA ) is common . Acute HA kills .", [(8, 10)]))
    from spacy_sapbert.mentions.abbreviations import mention_text as _mention_text

    long_forms = nlp.get_pipe("sapbert_linker")._long_forms(doc)
    assert _mention_text(doc.ents[0], long_forms) == "Acute Heart attack"


def test_spans_key_links_a_span_group(tiny_bert_path, toy_kb_path):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, spans_key="sc")
    doc = with_ents(nlp, "flu and aspirin", [(0, 1), (2, 3)], key="sc")
    doc.spans["sc"].attrs["source"] = "test"
    doc = link(nlp, doc)
    assert [s.kb_id_ for s in doc.spans["sc"]] == ["D003", "C004"]
    assert doc.spans["sc"][0]._.kb_ents[0][0] == "D003"
    assert doc.spans["sc"].attrs["source"] == "test"
    assert doc.ents == ()
    assert link(nlp, nlp.make_doc("no group here")).spans.get("sc") is None  # documented no-op


def test_labels_restrict_which_spans_are_linked(tiny_bert_path, toy_kb_path):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, labels=["DISEASE"])
    doc = nlp.make_doc("flu and aspirin")
    doc.ents = [Span(doc, 0, 1, label="DISEASE"), Span(doc, 2, 3, label="CHEMICAL", kb_id="preset")]
    doc = link(nlp, doc)
    flu, aspirin = doc.ents
    assert (flu.label_, flu.kb_id_, flu._.kb_ents[0][0]) == ("DISEASE", "D003", "D003")
    assert (aspirin.label_, aspirin.kb_id_) == ("CHEMICAL", "preset")
    assert not aspirin._.kb_ents  # never linked: the extension's default (None; [] once scispaCy re-registered it)


def test_two_linkers_side_by_side(tiny_bert_path, toy_kb_path):
    nlp = spacy.blank("en")
    base = {"model": str(tiny_bert_path), "device": "cpu", "threshold": -1.0, "pooling": "mean"}
    nlp.add_pipe("sapbert_linker", name="dis", config=dict(base, semantic_types=["Disease"], extension_name="dis_ents",
                                                             set_kb_id=False))
    nlp.add_pipe("sapbert_linker", name="chem", config=dict(base, semantic_types=["Chemical"],
                                                              extension_name="chem_ents"))
    for name in ("dis", "chem"):
        nlp.get_pipe(name).initialize(kb_path=str(toy_kb_path), show_progress=False)
    doc = link(nlp, with_ents(nlp, "aspirin", [(0, 1)]))
    assert {c for c, _ in doc.ents[0]._.dis_ents} == {"D001", "D002", "D003"}
    assert doc.ents[0]._.chem_ents[0][0] == "C004" and doc.ents[0].kb_id_ == "C004"


def test_empty_whitespace_long_and_no_entities(nlp):
    doc = nlp.make_doc("flu  and  aspirin")  # double spaces give whitespace tokens
    assert doc[1].is_space
    doc.ents = [Span(doc, 0, 1, "D"), Span(doc, 1, 2, "D")]
    doc = link(nlp, doc)
    assert doc.ents[1]._.kb_ents == [] and doc.ents[1].kb_id_ == ""
    assert doc.ents[0].kb_id_ == "D003"
    long_text = " ".join(["influenza"] * 60)
    doc = link(nlp, with_ents(nlp, long_text, [(0, 60)]))
    assert doc.ents[0]._.kb_ents  # truncated to max_length word pieces, still linked
    doc = nlp.make_doc("nothing to link here")
    doc.ents = []  # an NER ran and found nothing: no warning
    assert link(nlp, doc).ents == ()


def test_pipe_encodes_a_batch_of_docs_at_once(tiny_bert_path, toy_kb_path, monkeypatch):
    nlp = linker_nlp(tiny_bert_path, toy_kb_path, reuse_name_vectors=False)
    linker = nlp.get_pipe("sapbert_linker")
    calls = []
    original = linker.encoder.encode
    monkeypatch.setattr(linker.encoder, "encode", lambda texts, **kw: calls.append(list(texts)) or original(texts, **kw))
    docs = [with_ents(nlp, t, [(0, 1)]) for t in ("flu", "aspirin", "grippe", "flu")]
    out = list(linker.pipe(docs, batch_size=10))
    assert len(calls) == 1 and sorted(calls[0]) == ["aspirin", "flu", "grippe"]
    assert [d.ents[0].kb_id_ for d in out] == ["D003", "C004", "D003", "D003"]


def test_uninitialised_and_bad_config(tiny_bert_path, toy_kb_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu"})
    with pytest.raises(MissingInputError, match="SB-E114"):
        nlp("text")
    with pytest.raises(ConfigError, match="SB-E115"):
        nlp.get_pipe("sapbert_linker").initialize()
    for bad, code in (({"threshold": 2.0}, "E116"), ({"k": 0}, "E111"), ({"extension_name": "kb ents"}, "E002"),
                      ({"max_entities_per_mention": 0}, "E111")):
        with pytest.raises(ConfigError, match=code):
            spacy.blank("en").add_pipe("sapbert_linker", config=bad)


def test_initialize_from_config_with_index_path(tiny_bert_path, other_tiny_bert_path, toy_kb_path, tmp_path):
    index_path = tmp_path / "index"
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu", "threshold": -1.0, "pooling": "mean"})
    nlp.config["initialize"]["components"]["sapbert_linker"] = {
        "kb_path": str(toy_kb_path), "index_path": str(index_path), "show_progress": False}
    nlp.initialize()
    assert (index_path / META_FILE).exists()  # built and saved
    mtime = (index_path / META_FILE).stat().st_mtime_ns
    nlp.initialize()
    assert (index_path / META_FILE).stat().st_mtime_ns == mtime  # reused, not rebuilt
    assert link(nlp, with_ents(nlp, "grippe", [(0, 1)])).ents[0].kb_id_ == "D003"
    other = spacy.blank("en")
    other.add_pipe("sapbert_linker", config={"model": str(other_tiny_bert_path), "device": "cpu"})
    with pytest.raises(IncompatibleError, match="SB-E108"):
        other.get_pipe("sapbert_linker").initialize(kb_path=str(toy_kb_path), index_path=str(index_path))


TEXTS = ["He had a heart attack and the flu .", "Aspirin helps .", "MI again", "nothing here"]
SPANS = [[(3, 5), (7, 8)], [(0, 1)], [(0, 1)], []]


def _ents(doc):
    return [(e.text, e.kb_id_, [(c, round(s, 5)) for c, s in e._.kb_ents]) for e in doc.ents]


def test_to_disk_load_and_bytes_round_trip(nlp, tmp_path):
    nlp.to_disk(tmp_path / "pipeline")
    assert (tmp_path / "pipeline" / "sapbert_linker" / "encoder" / "model.safetensors").exists()
    # runtime torch: bit-identical scores (the ONNX runtime's are compared in test_encoding_onnx.py)
    loaded = spacy.load(tmp_path / "pipeline", config={"components": {"sapbert_linker": {"runtime": "torch"}}})
    linker = nlp.get_pipe("sapbert_linker")
    for text, spans in zip(TEXTS, SPANS):
        assert _ents(link(loaded, with_ents(loaded, text, spans))) == _ents(link(nlp, with_ents(nlp, text, spans)))
    assert loaded.get_pipe("sapbert_linker").encoder.fingerprint == linker.encoder.fingerprint
    again = spacy.blank("en")
    again.add_pipe("sapbert_linker", config={"device": "cpu", "threshold": -1.0}).from_bytes(linker.to_bytes())
    doc = link(again, with_ents(again, TEXTS[0], SPANS[0]))
    assert _ents(doc) == _ents(link(nlp, with_ents(nlp, TEXTS[0], SPANS[0])))


class _SetEnts:
    """Stands in for NER: entities from a fixed table by text (module level so it can be pickled)."""

    def __call__(self, doc: Doc) -> Doc:
        doc.ents = [Span(doc, s, e, label="E") for s, e in dict(zip(TEXTS, SPANS))[doc.text]]
        return doc


@spacy.Language.factory("_test_set_ents")
def _make_set_ents(nlp, name):
    return _SetEnts()


def test_nlp_pipe_with_two_processes(tiny_bert_path, toy_kb_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("_test_set_ents")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu", "threshold": -1.0, "pooling": "mean"})
    nlp.get_pipe("sapbert_linker").initialize(kb_path=str(toy_kb_path), show_progress=False)
    single = [_ents(d) for d in nlp.pipe(TEXTS * 2, batch_size=2)]
    multi = [_ents(d) for d in nlp.pipe(TEXTS * 2, batch_size=2, n_process=2)]
    assert multi == single
    assert single[0][0][1] == "D001"


def test_kb_names_reuse_their_stored_vectors(tiny_bert_path, toy_kb_path, monkeypatch):
    on = linker_nlp(tiny_bert_path, toy_kb_path)
    off = linker_nlp(tiny_bert_path, toy_kb_path, reuse_name_vectors=False)
    encoded = []
    linker = on.get_pipe("sapbert_linker")
    original = linker.encoder.encode
    monkeypatch.setattr(linker.encoder, "encode", lambda texts, **kw: encoded.extend(texts) or original(texts, **kw))
    text, spans = "Flu and zzqx and Heart Attack", [(0, 1), (2, 3), (4, 6)]
    got = link(on, with_ents(on, text, spans))
    assert encoded == ["zzqx"]  # "flu" and "heart attack" are KB names
    want = link(off, with_ents(off, text, spans))
    for a, b in zip(got.ents, want.ents):
        assert [c for c, _ in a._.kb_ents] == [c for c, _ in b._.kb_ents]
        assert [s for _, s in a._.kb_ents] == pytest.approx([s for _, s in b._.kb_ents], abs=1e-4)


def test_kb_lookups_grow_with_distinct_texts_not_with_mentions(nlp, monkeypatch):
    """The linker looks a normalised text up in the KB once per batch, however often it is mentioned;
    repeated mentions get the same kb_ents as one."""
    kb = nlp.get_pipe("sapbert_linker").kb
    looked_up = []
    original = kb.row_of_name
    monkeypatch.setattr(kb, "row_of_name", lambda name: looked_up.append(name) or original(name))
    once = link(nlp, with_ents(nlp, "flu and zzqx", [(0, 1), (2, 3)]))
    n_once, looked_up[:] = len(looked_up), []
    many = link(nlp, with_ents(nlp, " and ".join(["flu", "zzqx"] * 10), [(i, i + 1) for i in range(0, 40, 2)]))
    assert len(looked_up) == n_once <= 4
    assert [e._.kb_ents for e in many.ents] == [e._.kb_ents for e in once.ents] * 10


@pytest.mark.filterwarnings("ignore:.*SB-W814")  # bf16 on a CI CPU without bf16 instructions: emulated, still runs
@pytest.mark.parametrize("precision,batch_size,expected", [("fp32", 64, 64), ("fp32", 128, 128), ("bf16", 64, 256),
                                                           ("bf16", 512, 512)])
def test_an_index_built_on_initialize_uses_build_indexs_batch_where_larger(tiny_bert_path, toy_kb_path, monkeypatch,
                                                                           precision, batch_size, expected):
    from spacy_sapbert.index import ConceptIndex

    seen = []
    original = ConceptIndex.build.__func__

    def spy(cls, kb, enc, settings=None, *, batch_size, **kwargs):
        seen.append(batch_size)
        return original(cls, kb, enc, settings, batch_size=batch_size, **kwargs)

    monkeypatch.setattr(ConceptIndex, "build", classmethod(spy))
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu", "precision": precision,
                                           "batch_size": batch_size})
    nlp.get_pipe("sapbert_linker").initialize(kb_path=str(toy_kb_path), show_progress=False)
    assert seen == [expected]
