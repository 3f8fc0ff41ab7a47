"""Multilingual evaluation readers on hand-made samples (tests/fixtures/eval/multilingual): brat standoff with ids
in notes (Mantra GSC, CANTEMIST), XL-BEL query files (with and without context), CodiEsp-X TSVs (positional and
by header name); their coded errors; the mention language from ``--language`` in the evaluation report."""
from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from spacy_sapbert.errors import ConfigError, DataFormatError, MissingInputError
from spacy_sapbert.mentions.datasets import detect_format, iter_mentions, read_dataset
from spacy_sapbert.mentions.records import Mention, check_language


@pytest.fixture()
def ml_dir(fixtures_dir):
    return fixtures_dir / "eval" / "multilingual"


def _offsets_hold(docs):
    for doc in docs:
        for m in doc.mentions:
            if m.start is not None and " " not in m.text:
                assert doc.text[m.start:m.end] == m.text


def test_brat_mantra_folder(ml_dir):
    docs = read_dataset(ml_dir / "mantra", language="ES")
    assert [d.doc_id for d in docs] == ["es/medline_es_1", "fr/emea_fr_1"]
    es, fr = docs
    assert es.text.startswith("Infarto agudo de miocardio")
    assert [(m.text, m.ids, m.type) for m in es.mentions] == [
        ("Infarto agudo de miocardio", ("C0155626",), "DISO"),
        ("diabetes mellitus tipo 2", ("C0011860",), "DISO"),
        ("Dolor torácico", ("C0008031", "C2926613"), "DISO"),  # two ids in one note: alternatives
        ("fiebre", (), "DISO"),  # no note: no gold id
    ]
    assert es.mentions[2].composite and not es.mentions[0].composite
    assert {m.language for m in iter_mentions(docs)} == {"es"}
    _offsets_hold(docs)
    heart, kidney, headache = fr.mentions
    assert kidney.text == "Insuffisance rénale" and (kidney.start, kidney.end) == (0, 32)  # discontinuous: outer span
    assert headache.ids == ("C0018681",)  # from the normalisation line N1 (resource prefix dropped)
    assert detect_format(ml_dir / "mantra") == "brat" and detect_format(ml_dir / "mantra/es/medline_es_1.ann") == "brat"
    one = read_dataset(ml_dir / "mantra/fr/emea_fr_1.ann", types={"DISO"})
    assert one[0].doc_id == "emea_fr_1" and len(one[0].mentions) == 3


def test_brat_cantemist_codes(ml_dir):
    docs = read_dataset(ml_dir / "cantemist", format="brat")
    assert [(m.text, m.ids) for m in iter_mentions(docs)] == [("Adenocarcinoma", ("8140/3",)),
                                                              ("metástasis óseas", ("8000/6/H",))]
    assert read_dataset(ml_dir / "cantemist", types={"OTHER"})[0].mentions == []


def _brat(tmp_path, ann, text="Fiebre alta y gripe."):
    (tmp_path / "d.txt").write_text(text, encoding="utf8")
    (tmp_path / "d.ann").write_text(ann, encoding="utf8")
    return tmp_path / "d.ann"


@pytest.mark.parametrize("ann, error, message", [
    ("T1\tDISO 0 6\tGripe\n", DataFormatError, r"SB-E721.*d.ann: line 1: the text at 0-6 is 'Fiebre', not the annotated 'Gripe'"),
    ("T1\tDISO 0 600\tFiebre\n", DataFormatError, r"SB-E721.*line 1.*<out of range>"),
    ("T1\tDISO 0 x\tFiebre\n", DataFormatError, r"SB-E720.*d.ann: line 1: 'DISO 0 x' is not 'TYPE START END'"),
    ("T1\tDISO 6 0\tFiebre\n", DataFormatError, r"SB-E720.*line 1: the span 6-0"),
    ("\nT1\tDISO 0 6\n", DataFormatError, r"SB-E720.*line 2: an entity line needs 3"),
    ("T1\tDISO 0 6\tFiebre\n#1\tAnnotatorNotes\n", DataFormatError, r"SB-E720.*line 2: a note line needs"),
    ("T1\tDISO 0 6\tFiebre\n#1\tAnnotatorNotes T9\tC1\n", DataFormatError, r"SB-E720.*line 2: the note refers to entity T9, which the file does not define"),
])
def test_brat_errors_name_file_and_line(tmp_path, ann, error, message):
    with pytest.raises(error, match=message):
        read_dataset(_brat(tmp_path, ann))


def test_brat_missing_files(tmp_path):
    (tmp_path / "only.ann").write_text("T1\tDISO 0 6\tFiebre\n", encoding="utf8")
    with pytest.raises(MissingInputError, match=r"SB-E724.*only.ann.*'only.txt'"):
        read_dataset(tmp_path / "only.ann")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingInputError, match=r"SB-E726.*\.ann files"):
        read_dataset(tmp_path / "empty", format="brat")


def test_xlbel_with_and_without_context(ml_dir):
    plain = read_dataset(ml_dir / "xlbel/es_1k_test_query.txt")
    assert detect_format(ml_dir / "xlbel/es_1k_test_query.txt") == "xlbel"
    assert [(m.text, m.ids, m.composite, m.start) for m in iter_mentions(plain)] == [
        ("gripe", ("C0021400",), False, None), ("fiebre alta", ("C0015967",), False, None),
        ("cefalea", ("C0018681", "C0018682"), True, None)]
    assert plain[0].doc_id == "es_1k_test_query.txt:1"
    ctx = read_dataset(ml_dir / "xlbel/es_1k_test_query_with_context.txt", language="es")
    assert ctx[0].text == "La  gripe  es una enfermedad infecciosa ."  # the markers removed
    first = ctx[0].mentions[0]
    assert (first.start, first.end, first.language) == (4, 9, "es") and ctx[0].text[4:9] == "gripe"
    assert ctx[1].mentions[0].ids == ("C0018681", "C0018682")


@pytest.mark.parametrize("line, message", [
    ("C1|mention", r"SB-E723.*q.txt: line 1: expected 2 or 3 '\|\|'-separated columns.*found 1"),
    ("||gripe", r"SB-E723.*line 1: expected 2 or 3"),
    ("C1||gripe||sin marca", r"SB-E723.*line 1: the sentence marks 0 mentions"),
    ("C1||gripe||<tgt>fiebre</tgt>", r"SB-E721.*q.txt: line 1: the text at 0-6 is 'fiebre', not the annotated 'gripe'"),
])
def test_xlbel_errors(tmp_path, line, message):
    path = tmp_path / "q.txt"
    path.write_text(line + "\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=message):
        read_dataset(path, format="xlbel")


def test_codiesp_x_positional_and_by_header(ml_dir):
    docs = read_dataset(ml_dir / "codiesp/dev/devX.tsv", format="codiesp")
    assert len(docs) == 1 and docs[0].text.startswith("Varón de 60 años")
    diag, proc = docs[0].mentions
    assert (diag.ids, diag.type, diag.text) == (("Q62.11",), "DIAGNOSTICO", "estenosis en la unión pieloureteral derecha")
    assert docs[0].text[diag.start:diag.end] == diag.text
    assert proc.text == "ecografía renal derecha" and proc.start < proc.end and proc.ids == ("BT41ZZZ",)
    assert [m.type for m in iter_mentions(read_dataset(ml_dir / "codiesp/dev/devX.tsv", format="codiesp",
                                                       types={"PROCEDIMIENTO"}))] == ["PROCEDIMIENTO"]
    # another column order, named in a header; auto-detected by its articleID column
    assert detect_format(ml_dir / "codiesp/dev/devX_header.tsv") == "codiesp"
    by_name = read_dataset(ml_dir / "codiesp/dev/devX_header.tsv")
    assert iter_mentions(by_name) == [diag]
    assert detect_format(ml_dir / "codiesp/dev/devX.tsv") == "codiesp"  # no header: the 5th column is a position
    assert detect_format(ml_dir.parent / "mentions.tsv") == "tsv"


def test_codiesp_without_text_files(ml_dir, tmp_path):
    shutil.copy(ml_dir / "codiesp/dev/devX.tsv", tmp_path / "devX.tsv")
    docs = read_dataset(tmp_path / "devX.tsv", format="codiesp")
    assert docs[0].text == "" and [m.start for m in docs[0].mentions] == [None, None]


@pytest.mark.parametrize("content, error", [
    ("S1\tq62.11\n", r"SB-E723.*line 1: two columns \(articleID, code\): a CodiEsp-D/P file.*X file"),
    ("S1\tDIAGNOSTICO\tq62\n", r"SB-E723.*3 columns without a header"),
    ("articleID\tlabel\tcode\nS1\tD\tq62\n", r"SB-E722.*lacks the column\(s\) reference.*found: articleID, label, code"),
    ("S0004-1\tD\tq62\testenosis\t21 x\n", r"SB-E723.*line 1: position '21 x'"),
    ("S0004-1\tD\tq62\testenosis\t30 21\n", r"SB-E723.*line 1: position '30 21'"),
    ("S0004-1\tD\tq62\tgripe\t21 30\n", r"SB-E721.*x.tsv: line 1: the text at 21-30 is 'estenosis', not the annotated 'gripe'"),
    ("articleID\tcode\treference\nS1\tq62\n", r"SB-E723.*line 2: 2 columns, the header has 3"),
])
def test_codiesp_errors(ml_dir, tmp_path, content, error):
    shutil.copytree(ml_dir / "codiesp/dev/text_files", tmp_path / "text_files")
    path = tmp_path / "x.tsv"
    path.write_text(content, encoding="utf8")
    with pytest.raises(DataFormatError, match=error):
        read_dataset(path, format="codiesp")


def test_language_codes():
    assert check_language("ES") == "es" and check_language("spa") == "spa" and check_language("pt-BR") == "pt-br"
    assert check_language(None) is None
    for bad in ("spanish", "e", "es_ES!", "12"):
        with pytest.raises(ConfigError, match=r"SB-E725.*ISO 639"):
            check_language(bad)
    assert Mention("gripe", ("C1",)).language is None


def test_evaluate_reports_the_mention_language(ml_dir, tmp_path):
    from spacy_sapbert.cli import app

    kb = tmp_path / "kb.tsv"
    kb.write_text("C0021400\tgripe\nC0015967\tfiebre\nC0018681\tcefalea\nC0018682\tdolor de cabeza\n", encoding="utf8")
    out = tmp_path / "report"
    res = CliRunner().invoke(app, ["evaluate", str(ml_dir / "xlbel/es_1k_test_query.txt"), "-o", str(out),
                                   "--kb-source", f"{kb}:tsv", "--no-scispacy", "--language", "es",
                                   "--keep-composite"])  # alternatives are composite: kept, any one is right
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf8"))
    assert metrics["setting"]["language"] == "es" and metrics["counts"]["languages"] == {"es": 3}
    assert metrics["setting"]["format"] == "auto"
    assert "mention language: es" in (out / "report.md").read_text(encoding="utf8")
    assert metrics["results"]["mention_only"]["exact match"]["full"]["strict"]["acc@1"] == pytest.approx(2 / 3)
    res = CliRunner().invoke(app, ["evaluate", str(ml_dir / "xlbel/es_1k_test_query.txt"), "-o", str(tmp_path / "r2"),
                                   "--kb-source", f"{kb}:tsv", "--no-scispacy", "--language", "spanish"])
    assert isinstance(res.exception, ConfigError) and "SB-E725" in str(res.exception)
