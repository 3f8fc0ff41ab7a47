"""Name languages in KBs, the UMLS/OBO language tags, the Babelon translation reader and build-kb with
translation sources."""
from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, DataFormatError, EmptyResultError
from spacy_sapbert.kb import Concept, KnowledgeBase, build_kb, read_obo, read_umls
from spacy_sapbert.kb.languages import (LANGUAGES, codes_of_bits, language_bits, language_code, language_codes,
                                        rows_in_languages)
from spacy_sapbert.kb.readers import read_babelon


@pytest.fixture(scope="module")
def kbdir(fixtures_dir):
    return fixtures_dir / "kb"


@pytest.fixture(scope="module")
def babelon(kbdir):
    return kbdir / "babelon"


def _kb():
    return KnowledgeBase.from_concepts([
        Concept("C1", "Heart attack", ("Infarctus", "Infarto"), languages=(("en",), ("fr",), ("es", "pt"))),
        Concept("C2", "Fever", ("Fiebre",), languages=(("en",), ("es",))),
        Concept("C3", "Unknown thing"),
        Concept("C2", "Fever", ("fièvre",), languages=(("en",), ("fr",))),  # merged: languages united
    ])


def test_language_codes_map_umls_lat_and_refuse_unknown():
    assert language_code("ENG") == "en" and language_code("SPA") == "es" and language_code("FRE") == "fr"
    assert language_code("GER") == "de" and language_code("DUT") == "nl" and language_code("Pt") == "pt"
    assert language_code("und") == "und" and language_codes(["ENG", "en", "ITA"]) == ("en", "it")
    assert codes_of_bits(language_bits(["fr", "en"])) == ("en", "fr") and codes_of_bits(0) == ()
    with pytest.raises(ConfigError, match=r"\[SB-E735\] Unknown language code 'klingon'.*ISO 639-1.*UMLS LAT"):
        language_code("klingon")
    bits = np.asarray([0, language_bits(["en"]), language_bits(["es", "fr"])], dtype=np.uint64)
    assert rows_in_languages(bits, ["fr"]).tolist() == [False, False, True]
    assert rows_in_languages(bits, ["und", "en"]).tolist() == [True, True, False]
    assert len(LANGUAGES) <= 64 and len(set(LANGUAGES)) == len(LANGUAGES)


def test_kb_rows_carry_languages_and_survive_disk_and_merge(tmp_path):
    kb = _kb()
    names = list(kb.names)
    assert kb.languages_of_row(names.index("infarto")) == ("es", "pt")
    assert kb.languages_of_row(names.index("fever")) == ("en",)
    assert kb.languages_of_row(names.index("unknown thing")) == ()
    assert kb.language_counts() == {"en": 2, "es": 2, "fr": 2, "pt": 1, "und": 1}
    mask = kb.row_language_mask(["SPA"])
    assert sorted(n for n, m in zip(names, mask) if m) == ["fiebre", "infarto"]
    c2 = kb.cui_to_entity["C2"]
    assert dict(zip(c2.names(), c2.languages)) == {"Fever": ("en",), "Fiebre": ("es",), "fièvre": ("fr",)}
    assert kb.cui_to_entity["C3"].languages == ()
    kb.to_disk(tmp_path / "kb")
    meta = json.loads((tmp_path / "kb" / "kb.json").read_text())
    assert meta["version"] == 2 and meta["name_languages"]["es"] == 2 and meta["languages"][:2] == ["en", "es"]
    back = KnowledgeBase.from_disk(tmp_path / "kb")
    assert back.checksum == kb.checksum and np.array_equal(back.row_languages(), kb.row_languages())
    merged = KnowledgeBase.merge([back, KnowledgeBase.from_concepts([Concept("C9", "Tos", languages=(("es",),))])])
    assert merged.language_counts()["es"] == 3 and merged.cui_to_entity["C1"].languages == kb.cui_to_entity["C1"].languages
    # languages are part of the checksum; a KB without any keeps the checksum it had before languages
    plain = KnowledgeBase.from_concepts([Concept("C1", "Heart attack", ("Infarctus", "Infarto"))])
    assert plain.checksum != KnowledgeBase.from_concepts([kb.cui_to_entity["C1"]]).checksum
    from spacy_sapbert.kb.assemble import ARRAY_NAMES, checksum_arrays

    assert plain.checksum == checksum_arrays({k: plain._a[k] for k in ARRAY_NAMES})
    # add_alias: a new name is of unknown language
    kb.add_alias("C3", "brand new")
    assert kb.row_languages().shape == (len(kb.names),) and kb.languages_of_row(len(kb.names) - 1) == ()


def test_format_1_kb_loads_with_unknown_languages_and_no_warning(tmp_path):
    from spacy_sapbert.base.integrity import file_records

    path = tmp_path / "old"
    KnowledgeBase.from_concepts([Concept("C1", "Fever", ("Pyrexia",))]).to_disk(path)
    (path / "name_lang.npy").unlink()
    meta = json.loads((path / "kb.json").read_text())
    meta["version"] = 1
    for key in ("languages", "name_languages"):
        meta.pop(key)
    meta["files"] = file_records(path, [f for f in meta["files"] if f != "name_lang.npy"])
    (path / "kb.json").write_text(json.dumps(meta))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kb = KnowledgeBase.from_disk(path)
    assert kb.language_counts() == {"und": 2} and kb.cui_to_entity["C1"].languages == ()
    assert kb.row_language_mask(["und"]).all() and not kb.row_language_mask(["en"]).any()
    meta["version"], meta["languages"] = 2, ["xx"]
    (path / "kb.json").write_text(json.dumps(meta))
    with pytest.raises(DataFormatError, match=r"\[SB-E010\].*name_lang.npy is missing"):
        KnowledgeBase.from_disk(path)
    np.save(path / "name_lang.npy", np.zeros(2, dtype=np.uint64))
    with pytest.raises(DataFormatError, match=r"\[SB-E736\].*language table \['xx'\]"):
        KnowledgeBase.from_disk(path)


def test_umls_names_keep_their_language(kbdir, tmp_path):
    got = {c.concept_id: c for c in read_umls(kbdir / "umls", languages=None)}
    c1 = got["C0000001"]
    assert dict(zip(c1.names(), c1.languages))["Infarctus du myocarde"] == ("fr",)
    assert set(c1.languages) == {("en",), ("fr",)} and got["C0000005"].languages == (("de",),)
    assert {c.concept_id for c in read_umls(kbdir / "umls", languages=["de", "FRE"])} == {"C0000001", "C0000005"}
    with pytest.raises(ConfigError, match=r"\[SB-E735\].*'XYZ'"):
        list(read_umls(kbdir / "umls", languages=["XYZ"]))
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "MRCONSO.RRF").write_text("C1|ZZZ|P|L1|PF|S1|Y|A1||||MSH|MH|D1|Fever|0|N|256|\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E740\].*MRCONSO.RRF: line 1: UMLS language 'ZZZ'"):
        list(read_umls(odd, languages=None))


def test_obo_names_get_the_given_language(kbdir):
    concepts = list(read_obo(kbdir / "tiny.obo"))
    assert all(set(c.languages) == {("en",)} and len(c.languages) == len(c.names()) for c in concepts)
    assert all(c.languages == () for c in read_obo(kbdir / "tiny.obo", language=None))
    assert {c.languages[0] for c in read_obo(kbdir / "tiny.obo", language="GER")} == {("de",)}
    with pytest.raises(ConfigError, match=r"\[SB-E735\]"):
        list(read_obo(kbdir / "tiny.obo", language="english"))


@pytest.mark.parametrize("name,expected", [
    ("tiny-es.babelon.tsv", {"TINY:0000001": ["Anomalía del corazón"], "TINY:0000002": ["Convulsión"],
                             "TINY:0009999": ["Cardiopatía"], "TINY:0000077": ["Desconocido"]}),
    ("tiny-fr.babelon.tsv", {"TINY:0000001": ["Anomalie du cœur"], "TINY:0000002": ["Crise convulsive"]}),
    ("tiny-de.babelon.tsv", {"TINY:0000002": ["Krampfanfall"]}),
    ("tiny-fr.synonyms.tsv", {"TINY:0000001": ["Cardiopathie"]}),
    ("tiny-de.synonyms.tsv", {"TINY:0000001": ["Herzfehler", "Herzanomalie"]}),
])
def test_babelon_reads_every_column_order(babelon, name, expected):
    lang = name.split("-")[1].split(".")[0]
    got = list(read_babelon(babelon / name))
    assert {c.concept_id: list(c.names()) for c in got} == expected
    assert all(c.languages == ((lang,),) * len(c.names()) for c in got)


def test_babelon_statuses_and_errors(babelon, tmp_path):
    both = {c.concept_id: c.names() for c in read_babelon(babelon / "tiny-de.babelon.tsv",
                                                             statuses=["OFFICIAL", "candidate"])}
    assert both == {"TINY:0000003": ("Großwuchs",), "TINY:0000002": ("Krampfanfall",)}
    fr_syn = {c.concept_id for c in read_babelon(babelon / "tiny-fr.synonyms.tsv", statuses=("OFFICIAL", "CANDIDATE"))}
    assert fr_syn == {"TINY:0000001", "TINY:0000003"}  # NOT_TRANSLATED is never kept
    with pytest.raises(ConfigError, match=r"\[SB-E742\].*'MAYBE'"):
        list(read_babelon(babelon / "tiny-de.babelon.tsv", statuses=["MAYBE"]))
    bad = tmp_path / "no-status.tsv"
    bad.write_text("subject_id\tpredicate_id\ttranslation_language\ttranslation_value\nHP:1\trdfs:label\tfr\tx\n",
                   encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E737\].*no-status.tsv.*no column 'translation_status' "
                                              r"\(columns found: subject_id, predicate_id, translation_language, "
                                              r"translation_value\)"):
        list(read_babelon(bad))
    lang = tmp_path / "bad-lang.tsv"
    lang.write_text("subject_id\tpredicate_id\ttranslation_language\ttranslation_value\ttranslation_status\n"
                    "HP:1\trdfs:label\tfrench\tx\tOFFICIAL\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E738\].*bad-lang.tsv: line 2: unknown language code 'french'"):
        list(read_babelon(lang))
    nolang = tmp_path / "nolang.tsv"
    nolang.write_text("subject_id\tpredicate_id\ttranslation_value\ttranslation_status\nHP:1\trdfs:label\tx\tOFFICIAL\n",
                      encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E737\].*translation_language"):
        list(read_babelon(nolang))
    assert [c.languages for c in read_babelon(nolang, language="it")] == [(("it",),)]
    template = tmp_path / "template.tsv"
    template.write_text("subject_id\ttranslation_value\nID\tAL oboInOwl:hasExactSynonym\nHP:1\tx\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E741\].*template.tsv"):
        list(read_babelon(template))
    wide = tmp_path / "wide.tsv"
    wide.write_text("subject_id\ttranslation_value\nID\tA @fr\nHP:1\tx\ty\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E738\].*wide.tsv: line 3: 3 tab-separated columns"):
        list(read_babelon(wide))


def test_build_kb_adds_translations_to_the_ontology(kbdir, babelon):
    sources = [(babelon / "tiny-es.babelon.tsv", "babelon"), (kbdir / "tiny.obo", "obo"),
               (babelon / "tiny-de.synonyms.tsv", "babelon")]
    with pytest.warns(UserWarning, match=r"\[SB-W735\].*tiny-es.babelon.tsv: 1 translated names of 1 ids.*TINY:0000077"):
        kb = build_kb(sources)
    heart = kb.cui_to_entity["TINY:0000001"]
    assert heart.canonical_name == "Abnormality of the heart"  # the ontology's name stays canonical
    langs = dict(zip(heart.names(), heart.languages))
    assert langs["Anomalía del corazón"] == ("es",) and langs["Cardiopatía"] == ("es",)  # alt id resolved
    assert langs["Herzanomalie"] == ("de",) and langs["Cardiac abnormality"] == ("en",)
    assert "TINY:0000077" not in kb and kb.language_counts()["es"] == 3


def test_build_kb_cli_with_translations(kbdir, babelon, tmp_path):
    out = tmp_path / "kb"
    result = CliRunner().invoke(app, ["build-kb", str(kbdir / "tiny.obo"), str(babelon / "tiny-de.babelon.tsv"),
                                      "-f", "obo,babelon", "--translation-status", "OFFICIAL,CANDIDATE",
                                      "--obo-language", "ENG", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "names per language: en" in result.output and "de 2" in result.output
    kb = KnowledgeBase.from_disk(out)
    assert kb.languages_of_row(kb.row_of_name("großwuchs")) == ("de",)
    result = CliRunner().invoke(app, ["build-kb", str(kbdir / "tiny.obo"), "-f", "obo", "--translation-status",
                                      "CANDIDATE", "-o", str(tmp_path / "kb2")])
    assert result.exit_code != 0 and "SB-E012" in str(result.exception or result.output)
    result = CliRunner().invoke(app, ["build-kb", str(kbdir / "tiny.obo"), "-f", "obo", "--obo-language", "xx",
                                      "-o", str(tmp_path / "kb3")])
    assert result.exit_code != 0 and "SB-E735" in str(result.exception or result.output)
    assert not (tmp_path / "kb3").exists()
    shutil.rmtree(out)
