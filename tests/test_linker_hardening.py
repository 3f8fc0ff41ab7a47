"""The linker against hostile or odd input: crafted bytes, garbage spans, kb_ents' type on every path,
a pipeline without an NER."""
from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.tokens import DocBin

from test_linker import kb_path  # noqa: F401  (fixture: a KB with D003 Influenza/flu/grippe, C004 Aspirin)
from test_linker import make_nlp as make_linker_nlp

from spacy_sapbert.errors import DataFormatError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = ["flu and aspirin .", "grippe 😀 \u200b x"]


def make_nlp(model, kb_path, every_token_ents, **config):
    """test_linker's pipeline (mean pooling, threshold -1) with every token an entity."""
    nlp = make_linker_nlp(model, kb_path, **config)
    nlp.add_pipe(every_token_ents, first=True)
    return nlp


@pytest.fixture(scope="module")
def nlp(tiny_bert_path, kb_path, every_token_ents):
    return make_nlp(tiny_bert_path, kb_path, every_token_ents)


# ---- from_bytes: only the names to_disk writes ------------------------------------------------
@pytest.mark.parametrize("bad_name", ["../x", "/tmp/sapbert_escape_x", "encoder/../../x", "other/x", "kb/sub/x",
                                      "kb/.hidden", "x"])
def test_from_bytes_refuses_names_outside_the_allow_list(nlp, tmp_path, bad_name):
    good = srsly.msgpack_loads(nlp.get_pipe("sapbert_linker").to_bytes())
    assert set(name.split("/")[0] for name in good) == {"encoder", "kb", "index"}
    crafted = srsly.msgpack_dumps(dict(good, **{bad_name: b"pwned"}))
    before = set(Path(tmp_path.parent).iterdir())
    fresh = spacy.blank("en").add_pipe("sapbert_linker", config={"device": "cpu"})
    with pytest.raises(DataFormatError, match=r"\[SB-E550\].*not one that to_disk writes"):
        fresh.from_bytes(crafted)
    assert not Path("/tmp/sapbert_escape_x").exists()
    assert not (Path(tempfile.gettempdir()) / "x").exists()
    assert set(Path(tmp_path.parent).iterdir()) == before
    assert fresh.index is None


@pytest.mark.parametrize("blob", [b"\xc1garbage", srsly.msgpack_dumps([1, 2]), srsly.msgpack_dumps({"kb/kb.json": 3})])
def test_from_bytes_refuses_malformed_blobs(blob):
    fresh = spacy.blank("en").add_pipe("sapbert_linker", config={"device": "cpu"})
    with pytest.raises(DataFormatError, match=r"\[SB-E550\]"):
        fresh.from_bytes(blob)


def test_from_bytes_round_trip_still_works(nlp, every_token_ents):
    data = nlp.get_pipe("sapbert_linker").to_bytes()
    again = spacy.blank("en")
    again.add_pipe(every_token_ents)
    again.add_pipe("sapbert_linker", config={"device": "cpu", "threshold": -1.0, "pooling": "mean"}).from_bytes(data)
    assert _links(again(TEXTS[0])) == _links(nlp(TEXTS[0]))


# ---- garbage spans -----------------------------------------------------------------------------
def _links(doc):
    return [(e.text, e.kb_id_, e._.kb_ents) for e in doc.ents]


def test_spans_without_letter_or_digit_get_no_links(nlp, tiny_bert_path, kb_path, every_token_ents):
    got = {text: (kb_id, ents) for text, kb_id, ents in _links(nlp(TEXTS[0])) + _links(nlp(TEXTS[1]))}
    for garbage in (".", "😀", "\u200b"):
        if garbage in got:  # the tokenizer may fold the zero-width space into whitespace
            assert got[garbage] == ("", []), garbage
    assert "." in got and "😀" in got
    assert got["flu"][0] == "D003" and got["x"][1]  # a one-letter span is still linked
    off = make_nlp(tiny_bert_path, kb_path, every_token_ents, skip_non_alnum=False)
    linked = {text: ents for text, _, ents in _links(off(TEXTS[0]))}
    assert linked["."]  # without the option "." links to something (the bug this option fixes)


# ---- kb_ents is a list of (str, float) tuples on every path -----------------------------------
def _assert_tuples(docs):
    seen = 0
    for doc in docs:
        for ent in doc.ents:
            value = ent._.kb_ents
            assert isinstance(value, list)
            for item in value:
                assert type(item) is tuple and isinstance(item[0], str) and isinstance(item[1], float)
                seen += 1
    assert seen


@pytest.fixture()
def scispacy_style_extension():
    """scispaCy's EntityLinker registers ``kb_ents`` with ``default=[]`` (force=True), also after us."""
    from spacy.tokens import Span

    before = Span.get_extension("kb_ents")
    Span.set_extension("kb_ents", default=[], force=True)
    yield
    Span.set_extension("kb_ents", getter=before[2], setter=before[3], force=True)  # ours, from the nlp fixture


def test_kb_ents_are_tuples_after_call_pipe_n_process_and_docbin(nlp, scispacy_style_extension):
    from spacy.tokens import Span

    unlinked = nlp.make_doc("flu")
    assert Span(unlinked, 0, 1)._.kb_ents == []  # scispaCy's default
    _assert_tuples([nlp(text) for text in TEXTS])
    assert Span(unlinked, 0, 1)._.kb_ents == []  # the default was kept when our getter took over
    single = [_links(doc) for doc in nlp.pipe(TEXTS * 2, batch_size=2)]
    multi_docs = list(nlp.pipe(TEXTS * 2, batch_size=2, n_process=2))
    _assert_tuples(multi_docs)
    assert [_links(doc) for doc in multi_docs] == single
    store = DocBin(store_user_data=True, docs=[nlp(text) for text in TEXTS])
    restored = list(DocBin().from_bytes(store.to_bytes()).get_docs(nlp.vocab))
    _assert_tuples(restored)
    assert [_links(doc) for doc in restored] == single[:2]
    ent = restored[0].ents[0]
    ent._.kb_ents = [["X1", 1]]  # set as lists: read back as tuples
    assert ent._.kb_ents == [("X1", 1.0)] and type(ent._.kb_ents[0]) is tuple


# ---- a pipeline without NER --------------------------------------------------------------------
def test_pipeline_without_ner_warns_once(tiny_bert_path, kb_path):
    nlp = spacy.blank("en")
    cfg = {"model": str(tiny_bert_path), "device": "cpu", "pooling": "mean"}
    nlp.add_pipe("sapbert_linker", config=cfg).initialize(kb_path=str(kb_path), show_progress=False)
    with pytest.warns(UserWarning, match=r"\[SB-W551\].*--base") as caught:
        nlp("flu and aspirin")
        list(nlp.pipe(["more flu", "and more"]))
    assert len([w for w in caught if "SB-W551" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp("")  # an empty text: nothing to say
        doc = nlp.make_doc("flu")
        doc.ents = []
        nlp.get_pipe("sapbert_linker")(doc)  # NER ran, found nothing: no warning

