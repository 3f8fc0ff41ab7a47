"""`spacy-sapbert build-kb`: merge of several sources, filters, summary, atomic output, error paths."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, DataFormatError, EmptyResultError
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.kb.build import build_kb
from spacy_sapbert.kb.readers import read_jsonl

runner = CliRunner()


@pytest.fixture(scope="module")
def kbdir(fixtures_dir):
    return fixtures_dir / "kb"


def test_build_kb_merges_sources_and_prints_summary(kbdir, tmp_path):
    out = tmp_path / "kb"
    jsonl = tmp_path / "kb.jsonl"
    result = runner.invoke(app, [
        "build-kb", str(kbdir / "umls"), str(kbdir / "tiny_medic.txt"), str(kbdir / "tiny.obo"),
        "-f", "umls", "-f", "medic", "-f", "obo", "--output", str(out), "--sab", "MSH,RXNORM",
        "--obo-scopes", "all", "--map-xrefs", "UMLS", "--jsonl", str(jsonl)])
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_disk(out)
    assert "C0000101" in kb and "D008107" in kb and "C0000004" in kb and "C0000006" not in kb  # MDR dropped
    assert "congenital heart disease" in kb.names_of_concept("C0000101")  # NARROW kept with --obo-scopes all
    stats = kb.stats()
    assert f"{stats['concepts']:,} concepts, {stats['names']:,} names" in result.output
    assert "umls:umls: 4 concepts" in result.output
    assert "medic:tiny_medic.txt: 6 concepts" in result.output
    assert "obo:tiny.obo: 4 concepts" in result.output
    assert [s["source"] for s in kb.sources] == ["umls:umls", "medic:tiny_medic.txt", "obo:tiny.obo"]
    assert len(list(read_jsonl(jsonl))) == len(kb)


def test_build_kb_one_format_for_all_sources_and_language_option(kbdir, tmp_path):
    out = tmp_path / "kb"
    result = runner.invoke(app, ["build-kb", str(kbdir / "umls"), "-f", "umls", "-o", str(out), "-l", "all",
                                 "--keep-suppressed", "-t", "T047", "-t", "Sign or Symptom", "--no-tradenames", "--no-definitions"])
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_disk(out)
    assert list(kb.concept_ids) == ["C0000001", "C0000002", "C0000005", "C0000006"]
    assert kb.cui_to_entity["C0000001"].definition is None
    assert "infarctus du myocarde" in kb.names_of_concept("C0000001")


def test_build_kb_errors_leave_nothing_behind(kbdir, tmp_path):
    out = tmp_path / "kb"
    cases = [
        (["build-kb", str(kbdir / "tiny.obo"), "-f", "owl", "-o", str(out)], ConfigError, r"\[SB-E002\].*'owl'"),
        (["build-kb", str(kbdir / "tiny.obo"), str(kbdir / "tiny.tsv"), "-f", "obo,tsv,medic", "-o", str(out)],
         ConfigError, r"\[SB-E012\].*--format"),
        (["build-kb", str(kbdir / "tiny.obo"), "-f", "obo", "-o", str(out), "--sab", "MSH"],
         ConfigError, r"\[SB-E012\].*umls options \(sabs\)"),
        (["build-kb", str(kbdir / "tiny.obo"), "-f", "obo", "-o", str(out), "--tsv-header"],
         ConfigError, r"\[SB-E012\].*tsv options"),
        (["build-kb", str(kbdir / "umls"), "-f", "umls", "-o", str(out), "--sab", "NOPE"],
         EmptyResultError, r"\[SB-E007\]"),
        (["build-kb", str(kbdir / "tiny.obo"), "-f", "medic", "-o", str(out)],
         DataFormatError, r"\[SB-E011\].*tiny.obo: line 1"),
    ]
    for args, error, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code != 0
        assert isinstance(result.exception, error), result.output
        assert result.exception is not None and __import__("re").search(message, str(result.exception))
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".kb")]  # no temporary leftovers


def test_build_kb_refuses_existing_output_unless_overwrite(kbdir, tmp_path):
    out = tmp_path / "kb"
    out.mkdir()
    result = runner.invoke(app, ["build-kb", str(kbdir / "tiny.tsv"), "-f", "tsv", "-o", str(out)])
    assert isinstance(result.exception, ConfigError) and "[SB-E003]" in str(result.exception)
    result = runner.invoke(app, ["build-kb", str(kbdir / "tiny.tsv"), "-f", "tsv", "-o", str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert list(KnowledgeBase.from_disk(out).concept_ids) == ["X1", "X2"]


def test_build_kb_library_function_without_output(kbdir):
    kb = build_kb([(kbdir / "tiny.jsonl", "jsonl")])
    assert list(kb.concept_ids) == ["C1", "C2", "C3"] and kb.sources[0]["source"] == "jsonl:tiny.jsonl"
    with pytest.raises(ConfigError, match=r"\[SB-E012\]"):
        build_kb([])


def test_main_prints_coded_error_on_one_line(kbdir, tmp_path, monkeypatch, capsys):
    from spacy_sapbert.cli import main

    monkeypatch.setattr("sys.argv", ["spacy-sapbert", "build-kb", str(kbdir / "tiny.obo"), "-f", "owl", "-o", str(tmp_path / "kb")])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: [SB-E002]") and "\n" not in err
