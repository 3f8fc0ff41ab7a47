"""Readers: UMLS (every filter, layouts), OBO, MEDIC (alternate ids), jsonl (scispaCy round trip), TSV,
and every bad-input path."""
from __future__ import annotations

import shutil

import pytest

from spacy_sapbert.errors import ConfigError, DataFormatError, EmptyResultError, MissingInputError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.kb.readers import (
    get_reader,
    normalize_medic_id,
    read_jsonl,
    read_medic,
    read_obo,
    read_tsv,
    read_umls,
    write_jsonl,
)


@pytest.fixture(scope="module")
def kbdir(fixtures_dir):
    return fixtures_dir / "kb"


def _by_id(concepts):
    return {c.concept_id: c for c in KnowledgeBase.from_concepts(concepts).cui_to_entity.values()}


# ---------------------------------------------------------------- UMLS
def test_umls_defaults(kbdir):
    got = _by_id(read_umls(kbdir / "umls"))
    assert sorted(got) == ["C0000001", "C0000002", "C0000003", "C0000004", "C0000006"]  # C0000005 is German only
    mi = got["C0000001"]
    # TS=P, STT=PF, ISPREF=Y wins although it is not the first row; FRE and suppressed rows dropped
    assert mi.canonical_name == "Myocardial Infarction"
    assert mi.aliases == ("Heart attack", "heart attacks")
    assert mi.types == ("T047",)
    assert mi.definition == "Death of heart muscle."  # the suppressed MSH definition is skipped
    assert got["C0000003"].types == ("T109", "T121")
    # trade names (MRREL has_tradename / tradename_of) become synonyms both ways
    assert "Tylenol" in got["C0000003"].aliases
    assert set(got["C0000004"].aliases) == {"Acetaminophen", "Paracetamol"}
    assert got["C0000002"].aliases == ("Pyrexia",)  # may_cause is not a synonym relation


def test_umls_accepts_mrconso_path(kbdir):
    assert len(_by_id(read_umls(kbdir / "umls" / "MRCONSO.RRF"))) == 5


def test_umls_language_filter(kbdir):
    got = _by_id(read_umls(kbdir / "umls", languages=["ENG", "FRE", "GER"]))
    assert "C0000005" in got and "Infarctus du myocarde" in got["C0000001"].aliases
    assert len(_by_id(read_umls(kbdir / "umls", languages=None))) == 6
    assert _by_id(read_umls(kbdir / "umls", languages="GER", sabs="MSHGER")).keys() == {"C0000005"}  # str = one value


def test_umls_sab_filters(kbdir):
    got = _by_id(read_umls(kbdir / "umls", sabs=["MSH"], tradenames=False))
    assert sorted(got) == ["C0000001", "C0000002", "C0000003"]
    assert got["C0000003"].canonical_name == "Paracetamol"
    got = _by_id(read_umls(kbdir / "umls", exclude_sabs=["MSH", "MDR"]))
    assert got["C0000001"].canonical_name == "Heart attack" and "C0000006" not in got


def test_umls_suppress_filter(kbdir):
    got = _by_id(read_umls(kbdir / "umls", keep_suppressed=True))
    assert "MI - obsolete term" in got["C0000001"].aliases
    assert got["C0000001"].definition == "NECROSIS of the MYOCARDIUM."


def test_umls_semantic_type_filter(kbdir):
    got = _by_id(read_umls(kbdir / "umls", semantic_types=["T121"]))
    assert sorted(got) == ["C0000003", "C0000004"]
    assert got["C0000003"].types == ("T109", "T121")  # all TUIs of a kept concept
    got = _by_id(read_umls(kbdir / "umls", semantic_types=["Sign or Symptom"]))
    assert sorted(got) == ["C0000002", "C0000006"]
    assert got["C0000002"].types == ("T184",)


def test_umls_without_definitions_or_tradenames(kbdir):
    got = _by_id(read_umls(kbdir / "umls", definitions=False, tradenames=False))
    assert all(c.definition is None for c in got.values())
    assert got["C0000004"].aliases == ()


def test_umls_layout_from_mrfiles(kbdir):
    got = _by_id(read_umls(kbdir / "umls_mrfiles"))  # a non-standard column order, read from MRFILES.RRF
    assert got["C0000010"].canonical_name == "Shortness of breath"
    assert got["C0000010"].aliases == ("Dyspnoea",)


def test_umls_mrcols_confirms_standard_layout(kbdir, tmp_path):
    # MRCOLS.RRF (sorted by column name, like a release) with the standard columns: standard order used
    got = _by_id(read_umls(kbdir / "umls_mrcols", tradenames=False))
    assert got["C0000001"].canonical_name == "Myocardial Infarction"
    odd = tmp_path / "odd"
    odd.mkdir()
    shutil.copy(kbdir / "umls_mrfiles" / "MRCONSO.RRF", odd / "MRCONSO.RRF")
    lines = [line for line in (kbdir / "umls_mrcols" / "MRCOLS.RRF").read_text(encoding="utf8").splitlines()
             if line.split("|")[0] in {"CUI", "STR", "LAT", "SAB", "TS", "STT", "ISPREF", "SUPPRESS"}]
    (odd / "MRCOLS.RRF").write_text("\n".join(lines) + "\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E013\].*MRCONSO.RRF.*add the release's MRFILES.RRF"):
        list(read_umls(odd))


def test_umls_bad_inputs(kbdir, tmp_path):
    with pytest.raises(MissingInputError, match=r"\[SB-E001\].*MRCONSO.RRF"):
        list(read_umls(tmp_path))
    bad = tmp_path / "cols"
    bad.mkdir()
    (bad / "MRCONSO.RRF").write_text("C1|ENG|P|L1|PF|S1|Y|A1||||MSH|MH|D1|Fever|0|N|256|\nC2|ENG|P|Fever|\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E005\].*MRCONSO.RRF: line 2: expected 18 .*found 4"):
        list(read_umls(bad))
    enc = tmp_path / "enc"
    enc.mkdir()
    (enc / "MRCONSO.RRF").write_bytes("C1|ENG|P|L1|PF|S1|Y|A1||||MSH|MH|D1|Fi\xe8vre|0|N|256|\n".encode("latin1"))
    with pytest.raises(DataFormatError, match=r"\[SB-E004\].*line 1"):
        list(read_umls(enc))
    with pytest.raises(EmptyResultError, match=r"\[SB-E007\].*sabs=\['NOPE'\]"):
        list(read_umls(kbdir / "umls", sabs=["NOPE"]))
    nosty = tmp_path / "nosty"
    nosty.mkdir()
    shutil.copy(kbdir / "umls" / "MRCONSO.RRF", nosty / "MRCONSO.RRF")
    with pytest.raises(MissingInputError, match=r"\[SB-E001\].*MRSTY.RRF"):
        list(read_umls(nosty, semantic_types=["T047"]))
    layout = tmp_path / "layout"
    layout.mkdir()
    shutil.copy(kbdir / "umls" / "MRCONSO.RRF", layout / "MRCONSO.RRF")
    (layout / "MRFILES.RRF").write_text("MRCONSO.RRF|names|CUI,LAT,STR|3|1|1|\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E013\].*TS, STT, ISPREF, SAB, SUPPRESS"):
        list(read_umls(layout))
    (layout / "MRFILES.RRF").write_text("MRCONSO.RRF\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E005\].*MRFILES.RRF: line 1"):
        list(read_umls(layout))
    (layout / "MRFILES.RRF").unlink()
    (layout / "MRCOLS.RRF").write_text("CUI|id|\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E005\].*MRCOLS.RRF: line 1"):
        list(read_umls(layout))


# ---------------------------------------------------------------- OBO
def test_obo_default_scopes(kbdir):
    got = _by_id(read_obo(kbdir / "tiny.obo"))
    assert sorted(got) == ["TINY:0000001", "TINY:0000002", "TINY:0000003"]  # obsolete + Typedef skipped
    heart = got["TINY:0000001"]
    assert heart.canonical_name == "Abnormality of the heart"
    assert heart.aliases == ("Cardiac abnormality", "Heart defect", "Cardiac anomalies")
    assert heart.definition == 'A structural "anomaly" of the heart.'
    assert heart.alt_ids == ("TINY:0009999",)
    assert got["TINY:0000002"].canonical_name == "Seizure"  # trailing "! comment" removed


def test_obo_all_scopes_and_unknown_scope(kbdir):
    heart = _by_id(read_obo(kbdir / "tiny.obo", synonym_scopes=["EXACT", "RELATED", "NARROW", "BROAD"]))["TINY:0000001"]
    assert "Congenital heart disease" in heart.aliases and "Abnormal body part" in heart.aliases
    exact = _by_id(read_obo(kbdir / "tiny.obo", synonym_scopes=["exact"]))["TINY:0000001"]
    assert exact.aliases == ("Cardiac abnormality", "Heart defect")
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*synonym scope 'WIDE'"):
        list(read_obo(kbdir / "tiny.obo", synonym_scopes=["WIDE"]))


def test_obo_map_xrefs(kbdir):
    kb = KnowledgeBase.from_concepts(read_obo(kbdir / "tiny.obo", map_xrefs=["UMLS"]))
    assert list(kb.concept_ids) == ["C0000101", "C0000102", "C0000103", "TINY:0000003"]
    assert kb.resolve_id("TINY:0000001") == "C0000101"
    assert kb.resolve_id("TINY:0009999") == "C0000101"
    assert kb.alias_to_cuis["epileptic fit"] == {"C0000102", "C0000103"}
    kb = KnowledgeBase.from_concepts(read_obo(kbdir / "tiny.obo", map_xrefs=["MSH"], keep_unmapped=False))
    assert list(kb.concept_ids) == ["D006330"]


def test_obo_bad_inputs(tmp_path):
    with pytest.raises(MissingInputError, match=r"\[SB-E001\]"):
        list(read_obo(tmp_path / "missing.obo"))
    f = tmp_path / "noid.obo"
    f.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nname: one\n\n[Term]\nname: no id here\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E006\].*noid.obo: line 7"):
        list(read_obo(f))
    f.write_text("[Term]\nid: X:1\nname: one\nsynonym: unquoted EXACT []\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E011\].*line 4: synonym without a quoted text"):
        list(read_obo(f))
    f.write_text("[Term]\nid: X:1\nthis line has no colon\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E011\].*line 3"):
        list(read_obo(f))
    f.write_text("[Term]\nid: X:1\nname: old\nis_obsolete: true\n", encoding="utf8")
    with pytest.raises(EmptyResultError, match=r"\[SB-E007\]"):
        list(read_obo(f))
    f.write_bytes(b"[Term]\nid: X:1\nname: caf\xe9\n")
    with pytest.raises(DataFormatError, match=r"\[SB-E004\].*line 3"):
        list(read_obo(f))


def test_obo_synonym_without_scope_is_related(tmp_path):
    f = tmp_path / "noscope.obo"
    f.write_text('[Term]\nid: X:1\nname: one\nsynonym: "uno" []\nsynonym: "eins"\n', encoding="utf8")
    assert next(read_obo(f)).aliases == ("uno", "eins")
    assert next(read_obo(f, synonym_scopes="EXACT")).aliases == ()


def test_obo_term_without_name_is_skipped_with_warning(tmp_path, caplog):
    f = tmp_path / "noname.obo"
    f.write_text("[Term]\nid: X:1\n\n[Term]\nid: X:2\nname: two\n", encoding="utf8")
    assert [c.concept_id for c in read_obo(f)] == ["X:2"]
    assert "[SB-W001]" in caplog.text and "X:1 has no name" in caplog.text


# ---------------------------------------------------------------- MEDIC
def test_medic_ids_and_alternates(kbdir):
    kb = KnowledgeBase.from_concepts(read_medic(kbdir / "tiny_medic.txt"))
    assert list(kb.concept_ids) == ["C565588", "D003924", "D008107", "D010190", "OMIM:215600", "OMIM:260350"]
    # NCBI-disease style gold ids and the other spellings resolve
    assert kb.resolve_id("D008107") == "D008107"
    assert kb.resolve_id("MESH:D008107") == "D008107"
    assert kb.resolve_id("OMIM:215600") == "OMIM:215600" and kb.resolve_id("215600") == "OMIM:215600"
    assert kb.resolve_id("MESH:C000001") == "C565588" and kb.resolve_id("C000001") == "C565588"
    assert kb.resolve_id("OMIM:125853") == "D003924" and kb.resolve_id("125853") == "D003924"
    # an id that is a concept of its own stays that concept, even when another line lists it
    assert kb.resolve_id("OMIM:260350") == "OMIM:260350"
    assert kb.cui_to_entity["D008107"].aliases == ("Disease, Liver", "Hepatic Disease")
    assert kb.names_of_concept("D003924") == ("diabetes mellitus, type 2", "niddm")


@pytest.mark.parametrize("raw,norm", [("D001", "D001"), ("MESH:D001", "D001"), ("mesh:C1", "C1"),
                                      ("123", "OMIM:123"), ("OMIM:123", "OMIM:123"), (" D9 ", "D9")])
def test_normalize_medic_id(raw, norm):
    assert normalize_medic_id(raw) == norm


def test_medic_bad_inputs(tmp_path):
    f = tmp_path / "medic.txt"
    f.write_text("D1||One\nD2|Two\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E011\].*line 2: no '\|\|'"):
        list(read_medic(f))
    f.write_text("D1||\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E011\].*line 1: no name"):
        list(read_medic(f))
    f.write_text("||name\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E011\].*line 1: no id"):
        list(read_medic(f))
    f.write_text("\n# a comment\n", encoding="utf8")
    with pytest.raises(EmptyResultError, match=r"\[SB-E007\]"):
        list(read_medic(f))
    with pytest.raises(MissingInputError, match=r"\[SB-E001\]"):
        list(read_medic(tmp_path / "missing.txt"))


# ---------------------------------------------------------------- jsonl
def test_jsonl_read(kbdir):
    got = _by_id(read_jsonl(kbdir / "tiny.jsonl"))
    assert got["C1"] == Concept("C1", "Fever", ("Pyrexia", "fever"), ("T184",), "Raised body temperature.")
    assert got["C3"].alt_ids == ("MESH:D008881",)


def test_jsonl_round_trip_opens_in_scispacy(kbdir, tmp_path):
    from scispacy.linking_utils import KnowledgeBase as SciKB

    ours = KnowledgeBase.from_concepts(read_obo(kbdir / "tiny.obo"))
    ours.add_alias("TINY:0000003", "Gigantism-like stature")
    out = tmp_path / "kb.jsonl"
    assert write_jsonl(ours, out) == 3
    sci = SciKB(str(out))
    assert set(sci.cui_to_entity) == set(ours.concept_ids)
    for cid in ours.concept_ids:
        mine, theirs = ours.cui_to_entity[cid], sci.cui_to_entity[cid]
        assert (theirs.canonical_name, tuple(theirs.aliases), tuple(theirs.types), theirs.definition) == (
            mine.canonical_name, mine.aliases, mine.types, mine.definition)
    assert sci.alias_to_cuis["Gigantism-like stature"] == {"TINY:0000003"}
    back = KnowledgeBase.from_concepts(read_jsonl(out))
    assert list(back.names) == sorted(ours.names)  # a rebuilt KB sorts the added name into place


def test_jsonl_bad_inputs(tmp_path):
    f = tmp_path / "kb.jsonl"
    cases = [
        ('{"concept_id": "C1", "canonical_name": "x"}\n{"concept_id": \n', r"line 2: invalid JSON"),
        ('["C1", "x"]\n', r"line 1: not a JSON object"),
        ('{"concept_id": "C1"}\n', r"line 1: 'concept_id' or 'canonical_name' missing"),
        ('{"concept_id": "C1", "canonical_name": "x", "aliases": "y"}\n', r"line 1: 'aliases' is not a list of strings"),
    ]
    for text, message in cases:
        f.write_text(text, encoding="utf8")
        with pytest.raises(DataFormatError, match=r"\[SB-E011\].*" + message):
            list(read_jsonl(f))
    f.write_text("\n", encoding="utf8")
    with pytest.raises(EmptyResultError, match=r"\[SB-E007\]"):
        list(read_jsonl(f))


# ---------------------------------------------------------------- TSV
def test_tsv(kbdir):
    got = _by_id(read_tsv(kbdir / "tiny.tsv"))
    assert got["X1"] == Concept("X1", "Aspirin", ("Acetylsalicylic acid", "aspirin"))
    assert got["X2"].canonical_name == "Ibuprofen"


def test_tsv_header_and_bad_inputs(tmp_path):
    f = tmp_path / "names.tsv"
    f.write_text("id\tname\nA\tAlpha\n", encoding="utf8")
    assert [c.concept_id for c in read_tsv(f, header=True)] == ["A"]
    f.write_text("A\tAlpha\nB\tBeta\textra\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E011\].*line 2: expected 2 .*found 3"):
        list(read_tsv(f))
    f.write_text("# only a comment\n", encoding="utf8")
    with pytest.raises(EmptyResultError, match=r"\[SB-E007\]"):
        list(read_tsv(f))


def test_unknown_format():
    assert get_reader(" OBO ") is read_obo
    with pytest.raises(ConfigError, match=r"\[SB-E002\] Unknown KB format 'owl'. Choose one of: umls, obo, medic, jsonl, tsv"):
        get_reader("owl")
