"""Benchmark readers on tiny hand-made fixtures (tests/fixtures/eval)."""
from __future__ import annotations

import re

import pytest

from spacy_sapbert.errors import ConfigError, DataFormatError, MissingInputError
from spacy_sapbert.mentions.datasets import (
    Document,
    Mention,
    detect_format,
    iter_mentions,
    read_biosyn,
    read_dataset,
    read_mentions_jsonl,
    read_mentions_tsv,
    read_pubtator,
    split_ids,
)


@pytest.fixture()
def eval_dir(fixtures_dir):
    return fixtures_dir / "eval"


def test_split_ids():
    assert split_ids("D001") == (("D001",), False)
    assert split_ids("D001|D002") == (("D001", "D002"), True)
    assert split_ids("OMIM:1+OMIM:2") == (("OMIM:1", "OMIM:2"), True)
    assert split_ids("-1") == ((), False)
    assert split_ids(" D1 | D1 ") == (("D1",), False)


def test_read_pubtator(eval_dir):
    docs = read_pubtator(eval_dir / "test.pubtator")
    assert [d.doc_id for d in docs] == ["100", "200"]
    first = docs[0]
    assert first.text.startswith("Breast cancer and ovarian carcinoma in a family. A tumor")
    assert len(first.mentions) == 9  # the CID relation line is skipped
    m = first.mentions[0]
    assert m == Mention(text="Breast cancer", ids=("D001",), start=0, end=13, type="Disease", doc_id="100")
    for mention in first.mentions:
        assert first.text[mention.start:mention.end] == mention.text
    composite = first.mentions[6]
    assert composite.ids == ("D001", "D002") and composite.composite
    assert first.mentions[7].ids == ()  # "-1"
    plus = docs[1].mentions[1]
    assert plus.ids == ("D007", "D008") and plus.composite and plus.type == "CompositeMention"


def test_read_pubtator_types(eval_dir):
    docs = read_pubtator(eval_dir / "test.pubtator", types={"Chemical"})
    assert [m.text for m in iter_mentions(docs)] == ["Aspirin"]
    assert len(docs) == 2  # documents are kept, with their text, even without mentions


def test_pubtator_bad_offsets(eval_dir):
    with pytest.raises(DataFormatError, match=r"SB-E300.*bad_offsets.pubtator: line 3: mention 'Breast cancer'"):
        read_pubtator(eval_dir / "bad_offsets.pubtator")


def test_pubtator_bad_columns(eval_dir):
    with pytest.raises(DataFormatError, match=r"SB-E301.*line 3: a mention line needs 6"):
        read_pubtator(eval_dir / "bad_columns.pubtator")


def test_pubtator_structural_errors(tmp_path):
    cases = {
        "nothing.txt": ("just words\n", "expected 'pmid|t|title'"),
        "orphan.txt": ("1|t|Hi there\n2\t0\t2\tHi\tX\tD1\n", "before its title line"),
        "abstract.txt": ("1|a|no title\n", "without its title line"),
        "ints.txt": ("1|t|Hi there\n1\t0\tx\tHi\tX\tD1\n", "must be integers"),
        "relation.txt": ("1|t|Hi there\n1\tCID\tD1\tD2\n", "relation"),
        "empty.txt": ("\n\n", "no 'pmid|t|title' line"),
    }
    for name, (content, what) in cases.items():
        path = tmp_path / name
        path.write_text(content, encoding="utf8")
        if what == "relation":  # a non-integer start marks a relation line: skipped, not an error
            assert read_pubtator(path)[0].mentions == []
            continue
        with pytest.raises(DataFormatError, match="SB-E301.*" + re.escape(what)):
            read_pubtator(path)


def test_pubtator_whitespace_tolerated_and_duplicate_doc(tmp_path):
    path = tmp_path / "ws.txt"
    path.write_text("1|t|Some disease here\n1\t5\t12\tdisease \tX\tD1\n\n1|t|Some disease here\n"
                    "1\t0\t4\tSome\tX\tD2\n", encoding="utf8")
    docs = read_pubtator(path)
    assert [m.text for m in iter_mentions(docs)] == ["disease", "Some"]
    assert len(docs) == 2 and docs[1].mentions[0].ids == ("D2",)


def test_not_utf8(tmp_path):
    path = tmp_path / "latin.txt"
    path.write_bytes("1|t|caf\xe9\n".encode("latin1"))
    with pytest.raises(DataFormatError, match="SB-E004"):
        read_pubtator(path)


def test_missing_file(tmp_path):
    with pytest.raises(MissingInputError, match="SB-E001"):
        read_pubtator(tmp_path / "nope.txt")


def test_read_biosyn(eval_dir):
    docs = read_biosyn(eval_dir / "biosyn")
    by_id = {d.doc_id: d for d in docs}
    assert set(by_id) == {"100", "300"}
    assert by_id["100"].text.startswith("Breast cancer")  # 100.txt is read
    assert [m.text for m in by_id["100"].mentions] == ["Breast cancer", "ovarian carcinoma", "tumor",
                                                      "breast and ovarian cancer"]
    assert by_id["100"].mentions[3].composite
    assert by_id["300"].text == "" and by_id["300"].mentions[0].start is None
    assert read_biosyn(eval_dir / "biosyn", types={"CompositeMention"})[0].mentions[0].ids == ("D001", "D002")


def test_biosyn_errors(tmp_path):
    (tmp_path / "1.concept").write_text("1||0|4||X||abc\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"SB-E301.*1.concept: line 1"):
        read_biosyn(tmp_path)
    (tmp_path / "1.concept").write_text("1||a|b||X||abc||D1\n", encoding="utf8")
    with pytest.raises(DataFormatError, match="two integers"):
        read_biosyn(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MissingInputError, match="SB-E001"):
        read_biosyn(empty)


def test_read_tsv(eval_dir):
    docs = read_mentions_tsv(eval_dir / "mentions.tsv")
    ms = iter_mentions(docs)
    assert [m.text for m in ms] == ["breast carcinoma", "tumor", "ataxias 1 and 2"]
    assert ms[1].start == 51 and ms[1].doc_id == "100" and docs[1].text.startswith("Breast cancer")
    assert ms[2].ids == ("D007", "D008") and ms[2].composite
    positional = iter_mentions(read_mentions_tsv(eval_dir / "mentions_positional.tsv"))
    assert [(m.text, m.ids) for m in positional] == [("growth", ("D005",)), ("Wilson disease", ())]


def test_tsv_errors(tmp_path):
    cases = {
        "header.tsv": "mention\tcolour\n",
        "cols.tsv": "only-one-column\n",
        "offsets.tsv": "mention\tids\tcontext\tdoc_id\tstart\tend\nabc\tD1\txx abc\t1\t0\t3\n",
        "nocontext.tsv": "mention\tids\tcontext\tdoc_id\tstart\tend\nabc\tD1\t\t1\t0\t3\n",
        "ints.tsv": "mention\tids\tcontext\tdoc_id\tstart\tend\nabc\tD1\tabc\t1\tx\t3\n",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_text(content, encoding="utf8")
        with pytest.raises(DataFormatError, match=r"SB-E30[01]"):
            read_mentions_tsv(path)


def test_read_jsonl(eval_dir, tmp_path):
    ms = iter_mentions(read_mentions_jsonl(eval_dir / "mentions.jsonl"))
    assert ms[0].ids == ("OMIM:114480",) and ms[0].start is None
    assert ms[1].type == "Disease" and ms[1].start == 51
    bad = tmp_path / "bad.jsonl"
    for content, what in (("{nope\n", "invalid JSON"), ("[1]\n", "JSON object"), ('{"mention": "x"}\n', "'ids'")):
        bad.write_text(content, encoding="utf8")
        with pytest.raises(DataFormatError, match=what):
            read_mentions_jsonl(bad)


def test_read_dataset_detects_format(eval_dir, tmp_path):
    assert detect_format(eval_dir / "test.pubtator") == "pubtator"
    assert detect_format(eval_dir / "biosyn") == "biosyn"
    assert detect_format(eval_dir / "mentions.tsv") == "tsv"
    assert detect_format(eval_dir / "mentions.jsonl") == "jsonl"
    assert len(iter_mentions(read_dataset(eval_dir / "test.pubtator"))) == 12
    blank_first = tmp_path / "corpus.txt"
    blank_first.write_text("\n" + (eval_dir / "test.pubtator").read_text(encoding="utf8"), encoding="utf8")
    assert detect_format(blank_first) == "pubtator"
    odd = tmp_path / "data.xyz"
    odd.write_text("hello\n", encoding="utf8")
    with pytest.raises(ConfigError, match="SB-E002.*could not detect"):
        read_dataset(odd)
    with pytest.raises(ConfigError, match="SB-E002.*dataset format"):
        read_dataset(eval_dir / "test.pubtator", format="bioc")


def test_document_is_plain_record():
    d = Document(doc_id="x", text="t")
    assert d.mentions == []
