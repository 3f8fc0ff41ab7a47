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

from helpers import linker_nlp

from spacy_sapbert.errors import DataFormatError, SapbertError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = ["flu and aspirin .", "grippe 😀 \u200b x"]


def make_nlp(model, kb_path, every_token_ents, **config):
    """The tiny linker pipeline (mean pooling, threshold -1) with every token an entity."""
    nlp = linker_nlp(model, kb_path, **config)
    nlp.add_pipe(every_token_ents, first=True)
    return nlp


@pytest.fixture(scope="module")
def nlp(tiny_bert_path, toy_kb_path, every_token_ents):
    return make_nlp(tiny_bert_path, toy_kb_path, every_token_ents)


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


@pytest.mark.parametrize("crafted", ["newline", "too_many", "too_large"])
def test_from_bytes_refuses_names_with_a_newline_and_oversized_blobs(nlp, monkeypatch, crafted):
    from spacy_sapbert.linker import packing as linker_bytes

    good = srsly.msgpack_loads(nlp.get_pipe("sapbert_linker").to_bytes())
    if crafted == "newline":  # "$" also matched before a final "\n"
        extra, why = {"kb/kb.json\n": b"{}"}, "not one that to_disk writes"
    elif crafted == "too_many":
        extra, why = {f"kb/f{i}": b"" for i in range(linker_bytes.MAX_FILES)}, "files, more than"
    else:
        monkeypatch.setattr(linker_bytes, "MAX_TEXT_BYTES", 1000)
        extra, why = {"kb/big.json": b" " * 1001}, "bytes, more than"
    fresh = spacy.blank("en").add_pipe("sapbert_linker", config={"device": "cpu"})
    with pytest.raises(DataFormatError, match=rf"\[SB-E550\].*{why}"):
        fresh.from_bytes(srsly.msgpack_dumps(dict(good, **extra)))
    assert fresh.index is None


def test_from_bytes_never_keeps_the_previous_kb_and_index(tiny_bert_path, toy_kb_path, every_token_ents):
    """Bytes without index/ used to return silently with the previous KB and index still linking."""
    linker = make_nlp(tiny_bert_path, toy_kb_path, every_token_ents).get_pipe("sapbert_linker")
    good = srsly.msgpack_loads(linker.to_bytes())
    partial = {name: data for name, data in good.items() if not name.startswith("index/")}
    with pytest.raises(DataFormatError, match=r"\[SB-E550\].*no index/"):
        linker.from_bytes(srsly.msgpack_dumps(partial))
    linker.from_bytes(srsly.msgpack_dumps({}))  # the bytes of an uninitialised linker: so is this one now
    assert linker.index is None and linker.encoder is None and linker.kb is None


def test_scores_outside_minus_one_one_never_reach_kb_ents(tiny_bert_path, toy_kb_path, every_token_ents):
    """A damaged index (the issue's "ataxia" linked with 120.3) gives E556, never a link: through the stored
    vector a KB name reuses, through a search, and through the linker's last check of what it writes."""
    from spacy_sapbert.errors import IntegrityError
    from spacy_sapbert.index import ConceptIndex

    nlp = make_nlp(tiny_bert_path, toy_kb_path, every_token_ents)
    linker = nlp.get_pipe("sapbert_linker")
    index = linker.index
    damaged = ConceptIndex.from_vectors(index.kb, index.name_vectors(range(len(index))) * 120, linker.encoder,
                                        kind="exact")
    linker.set_resources(linker.encoder, damaged)
    for text in ("flu", "zzyzx"):  # a KB name (its stored vector reused) and a mention the encoder encodes
        with pytest.raises(IntegrityError, match=r"\[SB-E556\]"):
            nlp(text)
    linker.set_resources(linker.encoder, index)
    index.search = lambda vectors, k, **kw: [[("D003", 5.0)] for _ in vectors]  # whatever a search returns
    with pytest.raises(IntegrityError, match=r"\[SB-E556\].*5.0"):
        nlp("zzyzx")


@pytest.mark.parametrize("option", ["k", "max_entities_per_mention", "context_k"])
def test_linker_refuses_absurd_candidate_counts(option):
    from spacy_sapbert.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"\[SB-E559\].*{option}"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"device": "cpu", option: 10**9})  # (10**20: spaCy E961)


# ---- garbage spans -----------------------------------------------------------------------------
def _links(doc):
    return [(e.text, e.kb_id_, e._.kb_ents) for e in doc.ents]


def _same_links(got, want):
    """The same entities, ids and candidate order, scores within 1e-6: what docs/scale-out.md promises between
    other batch compositions (a mention's vector and its products move in their last float bits)."""
    assert len(got) == len(want)
    for (text, kb_id, ents), (text2, kb_id2, ents2) in zip(got, want):
        assert (text, kb_id, [c for c, _ in ents]) == (text2, kb_id2, [c for c, _ in ents2])
        assert all(abs(a - b) <= 1.01e-6 for (_, a), (_, b) in zip(ents, ents2))


def test_spans_without_letter_or_digit_get_no_links(nlp, tiny_bert_path, toy_kb_path, every_token_ents):
    got = {text: (kb_id, ents) for text, kb_id, ents in _links(nlp(TEXTS[0])) + _links(nlp(TEXTS[1]))}
    for garbage in (".", "😀", "\u200b"):
        if garbage in got:  # the tokenizer may fold the zero-width space into whitespace
            assert got[garbage] == ("", []), garbage
    assert "." in got and "😀" in got
    assert got["flu"][0] == "D003" and got["x"][1]  # a one-letter span is still linked
    off = make_nlp(tiny_bert_path, toy_kb_path, every_token_ents, skip_non_alnum=False)
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
    for doc, want in zip(restored, single[:2]):  # linked one doc at a time, not in pipe's batches of two
        _same_links(_links(doc), want)
    ent = restored[0].ents[0]
    ent._.kb_ents = [["X1", 1]]  # set as lists: read back as tuples
    assert ent._.kb_ents == [("X1", 1.0)] and type(ent._.kb_ents[0]) is tuple


# ---- a pipeline without NER --------------------------------------------------------------------
def test_pipeline_without_ner_warns_once(tiny_bert_path, toy_kb_path):
    nlp = spacy.blank("en")
    cfg = {"model": str(tiny_bert_path), "device": "cpu", "pooling": "mean"}
    nlp.add_pipe("sapbert_linker", config=cfg).initialize(kb_path=str(toy_kb_path), show_progress=False)
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



# ---- the command line: absurd options, memory --------------------------------------------------------
def test_link_refuses_an_absurd_k_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.errors import ConfigError

    for k in ("100000000000000000000", "0"):  # 10**20 was an OverflowError deep in numpy
        result = CliRunner().invoke(app, ["link", str(tmp_path), "--k", k])
        assert isinstance(result.exception, ConfigError) and "SB-E507" in str(result.exception), result.output


def test_out_of_memory_is_a_coded_error_at_the_top_level(monkeypatch, capsys):
    """A low `ulimit -v` ends in a MemoryError somewhere: the console entry point prints E561 and exits 1."""
    import spacy_sapbert.cli as cli

    def exhausted(**kwargs):
        raise MemoryError("Unable to allocate 7.45 GiB for an array")

    monkeypatch.setattr(cli, "app", exhausted)
    monkeypatch.setattr("sys.argv", ["spacy-sapbert", "link", "x"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "[SB-E561]" in err and "7.45 GiB" in err and "Traceback" not in err


# ---- from_disk: the KB and index open beside the encoder ---------------------------------------
def _saved(nlp, tmp_path) -> Path:
    folder = tmp_path / "pipeline"
    nlp.to_disk(folder)
    return folder


def test_a_load_leaves_no_thread_behind_and_links_as_before(nlp, tmp_path):
    import threading

    loaded = spacy.load(_saved(nlp, tmp_path))
    assert not [t for t in threading.enumerate() if t.name.startswith("sapbert_linker_load")]
    assert _links(loaded(TEXTS[0])) == _links(nlp(TEXTS[0]))


def test_a_damaged_index_fails_the_load_with_its_coded_error(nlp, tmp_path):
    folder = _saved(nlp, tmp_path)
    index_files = sorted(p for p in (folder / "sapbert_linker" / "index").iterdir() if p.suffix != ".json")
    index_files[0].write_bytes(index_files[0].read_bytes()[:40])
    with pytest.raises(SapbertError) as err:
        spacy.load(folder)
    assert index_files[0].name in str(err.value) and str(err.value).startswith("[SB-E551]")


def test_with_encoder_and_index_both_damaged_the_encoder_error_comes_first(nlp, tmp_path):
    folder = _saved(nlp, tmp_path)
    index_files = sorted(p for p in (folder / "sapbert_linker" / "index").iterdir() if p.suffix != ".json")
    index_files[0].write_bytes(index_files[0].read_bytes()[:40])
    weights = folder / "sapbert_linker" / "encoder" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(SapbertError) as err:
        spacy.load(folder)
    assert "model.safetensors" in str(err.value) and index_files[0].name not in str(err.value)
