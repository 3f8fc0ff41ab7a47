"""DocBin files read once (spacy_sapbert.mentions.docbin): as spaCy Docs for NER, as annotated Documents for
context prototypes; the same coded errors for both."""
from __future__ import annotations

import pytest
import spacy
from spacy.tokens import DocBin, Span

from spacy_sapbert.context import read_documents
from spacy_sapbert.errors import DataFormatError, MissingInputError
from spacy_sapbert.mentions.docbin import load_docbin, read_docbin

TEXT = "Aspirin may cause fever and rash."


@pytest.fixture()
def docbin(tmp_path):
    nlp = spacy.blank("en")
    doc = nlp.make_doc(TEXT)
    doc.ents = [Span(doc, 0, 1, label="Chemical", kb_id="D001"), Span(doc, 3, 4, label="Disease", kb_id="D002|D003"),
                Span(doc, 5, 6, label="Disease")]
    doc.spans["gold"] = [Span(doc, 5, 6, label="Disease", kb_id="D004")]
    path = tmp_path / "d.spacy"
    DocBin(docs=[doc, nlp.make_doc("nothing here")], store_user_data=True).to_disk(path)
    return path


def test_load_docbin_gives_the_spacy_docs(docbin):
    docs = load_docbin(docbin)
    assert [d.text for d in docs] == [TEXT, "nothing here"]
    assert [(e.text, e.label_, e.kb_id_) for e in docs[0].ents] == [
        ("Aspirin", "Chemical", "D001"), ("fever", "Disease", "D002|D003"), ("rash", "Disease", "")]
    vocab = spacy.blank("en").vocab
    assert load_docbin(docbin, vocab)[0].vocab is vocab


def test_read_docbin_gives_documents_with_gold_ids(docbin):
    doc, empty = read_docbin(docbin)
    assert (doc.doc_id, doc.text, empty.mentions) == ("0", TEXT, [])
    got = [(m.text, m.ids, m.composite, m.type, TEXT[m.start:m.end]) for m in doc.mentions]
    assert got == [("Aspirin", ("D001",), False, "Chemical", "Aspirin"),
                   ("fever", ("D002", "D003"), True, "Disease", "fever"),
                   ("rash", (), False, "Disease", "rash")]
    assert [m.text for m in read_docbin(docbin, types=["Chemical"])[0].mentions] == ["Aspirin"]
    assert [(m.text, m.ids) for m in read_docbin(docbin, spans_key="gold")[0].mentions] == [("rash", ("D004",))]
    assert read_docbin(docbin, spans_key="absent")[0].mentions == []
    # the context prototypes read DocBins through the same function
    assert [m.ids for m in read_documents(docbin)[0].mentions] == [m.ids for m in doc.mentions]


def test_docbin_errors_are_coded_the_same_for_every_user(tmp_path):
    for read in (load_docbin, read_docbin, read_documents):
        with pytest.raises(MissingInputError, match="SB-E001.*DocBin file not found.*convert-ner"):
            read(tmp_path / "missing.spacy")
        with pytest.raises(MissingInputError, match="SB-E511"):
            read(tmp_path) if read is not read_documents else read(tmp_path, format="docbin")
    bad = tmp_path / "bad.spacy"
    bad.write_bytes(b"not a docbin")
    for read in (load_docbin, read_docbin, read_documents):
        with pytest.raises(DataFormatError, match="SB-E613.*bad.spacy: not a spaCy DocBin"):
            read(bad)


def test_read_dataset_reads_docbin_by_name_and_by_suffix(docbin):
    from spacy_sapbert.mentions import read_dataset
    from spacy_sapbert.mentions.datasets import detect_format

    assert detect_format(docbin) == "docbin"
    for fmt in ("auto", "docbin"):
        docs = read_dataset(docbin, format=fmt, types=["Disease"], language="en")
        assert [(m.text, m.ids, m.language) for m in docs[0].mentions] == [
            ("fever", ("D002", "D003"), "en"), ("rash", (), "en")]
