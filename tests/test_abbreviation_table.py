"""Abbreviation tables: mining from raw text, the file (JSON with a sha256, hand-written TSV) and its checks, the
linker's use of a table for short forms the document does not define, the table travelling with the pipeline,
and ``spacy-sapbert mine-abbreviations`` / ``link --abbreviations``."""
from __future__ import annotations

import json

import pytest
import spacy
from spacy.tokens import Span
from typer.testing import CliRunner

from helpers import linker_nlp

from spacy_sapbert.base.signed_json import digest
from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, DataFormatError, MissingInputError
from spacy_sapbert.mentions.abbreviation_table import (AbbreviationTable, Entry, mine, read_tsv,
                                                       table_from_counts)

pytest.importorskip("scispacy")  # mining and the document's own definitions use scispaCy's detector

TEXTS = [
    "Patients with myotonic dystrophy (DM) were seen. DM is inherited.",
    "We studied myotonic dystrophy (DM) in two families.",
    "Diabetes mellitus (DM) was common in this cohort.",
    "Angelman syndrome (AS) is rare.",
    "Children with Angelman syndrome (AS) were tested.",
    "Ankylosing spondylitis (AS) affects the spine.",
    "Nothing is defined in this text.",
]


def test_mine_keeps_the_most_frequent_long_form_with_its_counts():
    table = mine(TEXTS)
    assert table.long_form("DM") == "myotonic dystrophy"
    assert table.entries["DM"] == Entry("myotonic dystrophy", 2, 3)
    assert table.long_form(" AS ") == "Angelman syndrome"  # stripped, case-sensitive
    assert table.long_form("dm") is None
    assert table.info["documents"] == len(TEXTS) and table.info["short_forms_seen"] == 2


def test_min_share_and_min_count_drop_ambiguous_and_rare_short_forms():
    assert set(mine(TEXTS, min_share=0.7).entries) == set()
    assert set(mine(TEXTS, min_share=0.6).entries) == {"DM", "AS"}  # 2 of 3 each
    assert set(mine(TEXTS, min_count=3).entries) == set()
    ties = table_from_counts({"XY": {"b long": 1, "a long": 1}})
    assert ties.long_form("XY") == "a long"  # a tie goes to the alphabetically first long form


@pytest.mark.parametrize("min_count, min_share", [(0, 0.5), (1, 0.0), (1, 1.5), (1, float("nan")), (True, 0.5)])
def test_bad_mining_options_are_coded(min_count, min_share):
    with pytest.raises(ConfigError, match="SB-E799"):
        mine(TEXTS, min_count=min_count, min_share=min_share)


def test_text_for_replaces_only_a_whole_undefined_short_form():
    table = AbbreviationTable({"DM": Entry("myotonic dystrophy", 2, 3)})
    assert table.text_for("DM", "DM") == "myotonic dystrophy"
    assert table.text_for("DM", "diabetes mellitus") == "diabetes mellitus"  # the document defined it: kept
    assert table.text_for("DM patients", "DM patients") == "DM patients"  # not the whole mention
    assert table.text_for("Dm", "Dm") == "Dm"


def test_round_trip_and_tampering(tmp_path):
    table = mine(TEXTS)
    path = tmp_path / "abbreviations.json"
    table.to_disk(path)
    again = AbbreviationTable.from_disk(path)
    assert again.entries == table.entries and again.info == table.info
    json.loads(path.read_text(encoding="utf8"))  # plain JSON, one entry a line
    assert '\n["DM", "myotonic dystrophy", 2, 3]' in path.read_text(encoding="utf8")
    path.write_text(path.read_text(encoding="utf8").replace("myotonic dystrophy", "muscular dystrophy"), encoding="utf8")
    with pytest.raises(DataFormatError, match="SB-E798.*sha256"):
        AbbreviationTable.from_disk(path)
    table.to_disk(path)
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(DataFormatError, match="SB-E798.*not valid JSON"):
        AbbreviationTable.from_disk(path)
    path.write_text(json.dumps({"format": "something else"}), encoding="utf8")
    with pytest.raises(DataFormatError, match="SB-E798"):
        AbbreviationTable.from_disk(path)
    with pytest.raises(MissingInputError, match="SB-E001"):
        AbbreviationTable.from_disk(tmp_path / "missing.json")


def test_entries_are_checked_even_with_a_matching_digest():
    data = AbbreviationTable({"DM": Entry("myotonic dystrophy", 2, 3)}).to_dict()
    data["table"]["entries"].append(["DM", "other", 1, 1])
    data["sha256"] = digest(data["table"])  # a forger's recomputed digest: the entries' own checks must hold
    with pytest.raises(DataFormatError, match="given twice"):
        AbbreviationTable.from_dict(data)
    data["table"]["entries"] = [["D\tM", "x", 1, 1]]
    data["sha256"] = digest(data["table"])
    with pytest.raises(DataFormatError, match="short form"):
        AbbreviationTable.from_dict(data)
    data["table"]["entries"] = [["DM", "x", 3, 1]]  # count above total
    data["sha256"] = digest(data["table"])
    with pytest.raises(DataFormatError, match="entry 1"):
        AbbreviationTable.from_dict(data)


def test_hand_written_tsv(tmp_path):
    path = tmp_path / "clinical.tsv"
    path.write_text("# short\tlong\nHTN\thypertension\n\nDM\tdiabetes mellitus\n", encoding="utf8")
    table = AbbreviationTable.from_disk(path)
    assert table.long_form("HTN") == "hypertension" and table.long_form("DM") == "diabetes mellitus"
    for text, why in (("HTN hypertension\n", "line 1 has 0 tabs"), ("A\tb\tc\n", "line 1 has 2 tabs"),
                      ("A\tb\nA\tc\n", "line 2.*given twice"), ("\tb\n", "line 1: the short form")):
        with pytest.raises(DataFormatError, match=f"SB-E798.*{why}"):
            read_tsv(text, path="x.tsv")


# ---- the linker ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nlp(tiny_bert_path, toy_kb_path):
    return linker_nlp(tiny_bert_path, toy_kb_path)


def _linked(nlp, text, mention):
    """The linked entity of ``mention``'s last occurrence in ``text`` (its only entity)."""
    doc = nlp.make_doc(text)
    start = text.rindex(mention)
    doc.ents = [doc.char_span(start, start + len(mention), label="Disease")]
    return nlp.get_pipe("sapbert_linker")(doc).ents[0]


TABLE = AbbreviationTable({"XQ": Entry("influenza", 3, 3), "AA": Entry("influenza", 1, 1)})


def test_linker_uses_the_table_for_an_undefined_short_form(nlp):
    linker = nlp.get_pipe("sapbert_linker")
    linker.set_abbreviations(None)
    before = _linked(nlp, "A case of XQ was seen.", "XQ")._.kb_ents
    linker.set_abbreviations(TABLE)
    try:
        ent = _linked(nlp, "A case of XQ was seen.", "XQ")
        assert ent.kb_id_ == "D003" and ent._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-5)  # "influenza" itself
        assert before[0][1] < 0.999  # as written, "XQ" is no KB name
        # the document's own definition wins over the table
        defined = _linked(nlp, "We gave acetylsalicylic acid (AA) daily. AA helped.", "AA")
        assert defined.kb_id_ == "C004" and defined._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-5)
        assert _linked(nlp, "AA helped.", "AA").kb_id_ == "D003"  # undefined there: the table's
        # a document that defines other short forms: the undefined one still gets the table's long form
        assert _linked(nlp, "Signs of mitral regurgitation (MR) were found. XQ was seen.", "XQ").kb_id_ == "D003"
        # only a whole mention is replaced
        longer = _linked(nlp, "A case of XQ fever was seen.", "XQ fever")
        assert longer._.kb_ents[0][1] < 0.999
        # the setting turns the table's use off without dropping it
        linker.cfg["abbreviation_table"] = False
        assert _linked(nlp, "A case of XQ was seen.", "XQ")._.kb_ents == before
        assert linker.abbreviations is TABLE
    finally:
        linker.cfg["abbreviation_table"] = True
        linker.set_abbreviations(None)


def test_the_document_definition_is_used_without_a_table(nlp):
    """The contrast the table is for: a short form the document defines resolves without any table."""
    ent = _linked(nlp, "Signs of mitral regurgitation (MR) were found. MR was mild.", "MR")
    assert ent.kb_id_ == "D002" and ent._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-5)


def test_set_abbreviations_refuses_another_type(nlp):
    with pytest.raises(ConfigError, match="SB-E002"):
        nlp.get_pipe("sapbert_linker").set_abbreviations({"XQ": "influenza"})


def test_table_travels_with_the_pipeline(nlp, tmp_path):
    linker = nlp.get_pipe("sapbert_linker")
    linker.set_abbreviations(TABLE)
    try:
        nlp.to_disk(tmp_path / "pipe")
        data = nlp.to_bytes()
    finally:
        linker.set_abbreviations(None)
    assert (tmp_path / "pipe" / "sapbert_linker" / "abbreviations.json").is_file()
    loaded = spacy.load(tmp_path / "pipe")
    assert loaded.get_pipe("sapbert_linker").abbreviations.entries == TABLE.entries
    assert _linked(loaded, "A case of XQ was seen.", "XQ").kb_id_ == "D003"
    from_bytes = spacy.blank("en")
    from_bytes.add_pipe("sapbert_linker", config=dict(nlp.get_pipe("sapbert_linker").cfg))
    from_bytes.from_bytes(data)
    assert from_bytes.get_pipe("sapbert_linker").abbreviations.entries == TABLE.entries
    # saving without a table over the folder removes the old file; a damaged one stops the load
    nlp.to_disk(tmp_path / "pipe")
    assert not (tmp_path / "pipe" / "sapbert_linker" / "abbreviations.json").exists()
    assert spacy.load(tmp_path / "pipe").get_pipe("sapbert_linker").abbreviations is None
    TABLE.to_disk(tmp_path / "pipe" / "sapbert_linker" / "abbreviations.json")
    target = tmp_path / "pipe" / "sapbert_linker" / "abbreviations.json"
    target.write_text(target.read_text(encoding="utf8").replace("influenza", "grippe"), encoding="utf8")
    with pytest.raises(DataFormatError, match="SB-E798"):
        spacy.load(tmp_path / "pipe")


def test_initialize_reads_a_table(tiny_bert_path, toy_kb_path, tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("XQ\tinfluenza\n", encoding="utf8")
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu",
                                                    "threshold": -1.0, "pooling": "mean"})
    linker.initialize(kb_path=str(toy_kb_path), show_progress=False, abbreviations_path=str(path))
    assert _linked(nlp, "A case of XQ was seen.", "XQ").kb_id_ == "D003"


# ---- the command line -------------------------------------------------------------------------------------------
def test_mine_abbreviations_command(tmp_path):
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(TEXTS)), encoding="utf8")
    out = tmp_path / "abbreviations.json"
    result = CliRunner().invoke(app, ["mine-abbreviations", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "7 documents, 2 short forms defined, 2 kept" in result.output
    assert AbbreviationTable.from_disk(out).long_form("DM") == "myotonic dystrophy"
    result = CliRunner().invoke(app, ["mine-abbreviations", str(source), "-o", str(out), "--min-share", "2"])
    assert result.exit_code != 0 and "SB-E799" in str(result.exception)
    result = CliRunner().invoke(app, ["mine-abbreviations", str(source), "-o", str(source)])
    assert result.exit_code != 0 and "SB-E503" in str(result.exception)  # never over its own input


def _kb_ids(output):
    return [ent["kb_id"] for line in output.splitlines() if line.startswith("{") for ent in json.loads(line)["ents"]]


def test_link_command_with_a_table(corpus_pipeline, tmp_path):
    """The pipeline's entity ruler marks "flu"; a table that spells it "ibuprofen" (a mechanism test, not
    medicine) moves its link from Influenza (D003) to Ibuprofen (C005)."""
    table = tmp_path / "t.tsv"
    table.write_text("flu\tibuprofen\n", encoding="utf8")
    text = tmp_path / "doc.txt"
    text.write_text("She had flu.", encoding="utf8")
    plain = CliRunner().invoke(app, ["link", str(corpus_pipeline), str(text)])
    assert plain.exit_code == 0 and _kb_ids(plain.output) == ["D003"], plain.output
    result = CliRunner().invoke(app, ["link", str(corpus_pipeline), str(text), "--abbreviations", str(table)])
    assert result.exit_code == 0 and _kb_ids(result.output) == ["C005"], result.output
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab here\n", encoding="utf8")
    result = CliRunner().invoke(app, ["link", str(corpus_pipeline), str(text), "--abbreviations", str(bad)])
    assert result.exit_code != 0 and "SB-E798" in str(result.exception)
