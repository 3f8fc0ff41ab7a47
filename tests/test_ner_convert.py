"""PubTator → DocBin conversion for the NER stage, and its CLI."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, EmptyResultError, MissingInputError
from spacy_sapbert.mentions.docbin import load_docbin
from spacy_sapbert.ner import convert_pubtator, pubtator_to_docs

PROJECT = Path(__file__).parent / "fixtures" / "project"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf8")
    return path


def test_ncbi_types_become_disease_entities():
    docs, stats = pubtator_to_docs(PROJECT / "ncbi_test.txt")
    assert [d.user_data["doc_id"] for d in docs] == ["3001", "3002"]
    ents = [(e.text, e.label_) for e in docs[0].ents]
    assert ents == [("Dementia", "Disease"), ("dementia", "Disease"), ("Huntington disease", "Disease"),
                    ("cystic fibrosis", "Disease")]
    # the composite mention is one Disease entity spanning its whole text
    assert [(e.text, e.label_) for e in docs[1].ents][-1] == ("breast and ovarian cancer", "Disease")
    assert stats.to_dict()["labels"] == {"Disease": 6}
    assert stats.mentions == stats.entities == 6 and stats.misaligned == 0


def test_bc5cdr_chemicals_and_relation_lines(tmp_path):
    out = tmp_path / "dev.spacy"
    stats = convert_pubtator([PROJECT / "bc5cdr_dev.txt"], out)
    docs = load_docbin(out)
    assert len(docs) == 1 and docs[0].user_data["doc_id"] == "5001"
    assert [(e.text, e.label_) for e in docs[0].ents] == [
        ("Lithium", "Chemical"), ("Lithium", "Chemical"), ("hearing loss", "Disease"),
        ("nephrotoxicity", "Disease"), ("cisplatin", "Chemical")]
    assert stats.labels == {"Chemical": 3, "Disease": 2}


def test_several_files_go_into_one_docbin(tmp_path):
    out = tmp_path / "train.spacy"
    stats = convert_pubtator([PROJECT / "bc5cdr_train.txt", PROJECT / "ncbi_train.txt"], out)
    assert stats.docs == 5 and len(load_docbin(out)) == 5
    assert stats.labels == {"Chemical": 6, "Disease": 16}  # counted by hand in the fixtures


MISALIGNED = "7|t|BRCA1-associated tumours.\n7|a|Seen often.\n7\t0\t4\tBRCA\tDisease\tD1\n7\t17\t24\ttumours\tDisease\tD2\n\n"


def test_misaligned_mentions_are_skipped_with_a_counted_warning(tmp_path):
    path = _write(tmp_path / "m.txt", MISALIGNED)
    with pytest.warns(UserWarning, match=r"SB-W440.*1 of 2 mentions .* skipped \(0 kept\).*7:0-4 'BRCA'"):
        docs, stats = pubtator_to_docs(path)
    assert [e.text for e in docs[0].ents] == ["tumours"]
    assert stats.misaligned == 1 and stats.misaligned_kept == 0


@pytest.mark.parametrize("mode,expected", [("expand", ["BRCA1", "tumours"]), ("contract", ["tumours"])])
def test_misaligned_expand_and_contract(tmp_path, mode, expected):
    path = _write(tmp_path / "m.txt", MISALIGNED)
    with pytest.warns(UserWarning, match="SB-W440"):
        docs, stats = pubtator_to_docs(path, misaligned=mode)
    assert [e.text for e in docs[0].ents] == expected
    assert stats.misaligned_kept == len(expected) - 1


def test_overlapping_mentions_keep_the_longest(tmp_path):
    text = ("8|t|Lung cancer risk.\n8|a|None.\n8\t0\t11\tLung cancer\tDisease\tD1\n"
            "8\t5\t11\tcancer\tDisease\tD2\n\n")
    with pytest.warns(UserWarning, match=r"SB-W441.*1 overlapping"):
        docs, stats = pubtator_to_docs(_write(tmp_path / "o.txt", text))
    assert [e.text for e in docs[0].ents] == ["Lung cancer"] and stats.overlapping == 1


def test_unmapped_types_are_counted_and_custom_label_maps_work(tmp_path):
    path = PROJECT / "bc5cdr_dev.txt"
    with pytest.warns(UserWarning, match=r"SB-W442.*Chemical \(3\)"):
        docs, stats = pubtator_to_docs(path, label_map={"Disease": "DISEASE"})
    assert {e.label_ for e in docs[0].ents} == {"DISEASE"} and stats.unmapped_types == {"Chemical": 3}


def test_bad_arguments_raise_coded_errors(tmp_path):
    with pytest.raises(ConfigError, match="SB-E440"):
        pubtator_to_docs(PROJECT / "ncbi_dev.txt", label_map={})
    with pytest.raises(ConfigError, match="SB-E002.*misaligned mode"):
        pubtator_to_docs(PROJECT / "ncbi_dev.txt", misaligned="guess")
    with pytest.raises(ConfigError, match="SB-E002.*language code 'xx-nope'"):
        convert_pubtator([PROJECT / "ncbi_dev.txt"], tmp_path / "x.spacy", lang="xx-nope")
    with pytest.raises(ConfigError, match="SB-E441"):
        convert_pubtator([], tmp_path / "x.spacy")
    with pytest.raises(EmptyResultError, match="SB-E442"), pytest.warns(UserWarning, match="SB-W442"):
        convert_pubtator([PROJECT / "bc5cdr_dev.txt"], tmp_path / "x.spacy", label_map={"Gene": "GENE"})
    assert not (tmp_path / "x.spacy").exists()
    with pytest.raises(MissingInputError, match="SB-E001.*DocBin file"):
        load_docbin(tmp_path / "missing.spacy")


def test_cli_convert_ner(tmp_path):
    out = tmp_path / "c.spacy"
    result = CliRunner().invoke(app, ["convert-ner", str(PROJECT / "ncbi_dev.txt"), str(PROJECT / "bc5cdr_dev.txt"),
                                      "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 docs, 8 entities (Chemical 3, Disease 5) from 8 mentions" in result.output
    assert len(load_docbin(out)) == 2


def test_cli_convert_ner_label_option(tmp_path):
    out = tmp_path / "c.spacy"
    result = CliRunner().invoke(app, ["convert-ner", str(PROJECT / "ncbi_dev.txt"), "-o", str(out),
                                      "--label", "SpecificDisease=DIS"])
    assert result.exit_code == 0, result.output
    assert {e.label_ for d in load_docbin(out) for e in d.ents} == {"DIS"}
    bad = CliRunner().invoke(app, ["convert-ner", str(PROJECT / "ncbi_dev.txt"), "-o", str(out), "--label", "nolabel"])
    assert bad.exit_code != 0 and "SB-E443" in str(bad.exception)
