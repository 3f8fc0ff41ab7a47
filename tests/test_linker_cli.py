"""build-index, link and create-pipeline through typer's CliRunner."""
from __future__ import annotations

import json

import pytest
import spacy
from typer.testing import CliRunner

from helpers import toy_concepts, write_toy_kb

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, MissingInputError
from spacy_sapbert.index import META_FILE

IDS = ("D003", "C004", "C005")  # the toy KB's influenza, aspirin and ibuprofen: 6 names, none shared


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory):
    return write_toy_kb(tmp_path_factory.mktemp("cli_kb") / "kb", *IDS)


@pytest.fixture(scope="module")
def index_dir(kb_dir, tiny_bert_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli_index") / "index"
    result = CliRunner().invoke(app, ["build-index", str(kb_dir), "--model", str(tiny_bert_path), "--output", str(out),
                                      "--pooling", "mean", "--device", "cpu", "--hnsw"])
    assert result.exit_code == 0, result.output
    assert "Indexed 6 names of 3 concepts (hnsw" in result.output
    return out


def test_build_index_writes_meta_and_refuses_to_overwrite(index_dir, kb_dir, tiny_bert_path):
    meta = json.loads((index_dir / META_FILE).read_text())
    assert meta["kind"] == "hnsw" and meta["pooling"] == "mean"
    assert meta["model"] == str(tiny_bert_path.resolve()) and meta["kb_path"] == str(kb_dir.resolve())
    assert not (index_dir.parent / f".{index_dir.name}.work").exists()  # work chunks removed when done
    again = CliRunner().invoke(app, ["build-index", str(kb_dir), "--model", str(tiny_bert_path),
                                     "--output", str(index_dir)])
    assert isinstance(again.exception, ConfigError) and "SB-E003" in str(again.exception)


def test_link_index_folder_from_stdin(index_dir):
    result = CliRunner().invoke(app, ["link", str(index_dir), "--threshold", "-1", "--device", "cpu"],
                                input="grippe\naspirin\n\n")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in lines] == ["1", "2", "3"]
    assert lines[0]["ents"][0]["kb_id"] == "D003" and lines[0]["ents"][0]["text"] == "grippe"
    assert lines[1]["ents"][0]["kb_ents"][0][0] == "C004"
    assert lines[2]["ents"] == []  # an empty line is a doc without entities


def _ruler_pipeline(path):
    """A pipeline whose entity ruler tags "flu" as DISEASE and "aspirin" as CHEMICAL."""
    base = spacy.blank("en")
    base.add_pipe("entity_ruler").add_patterns([{"label": "DISEASE", "pattern": "flu"},
                                                {"label": "CHEMICAL", "pattern": "aspirin"}])
    base.to_disk(path)


def test_create_pipeline_with_base_ner_then_link_files(kb_dir, tiny_bert_path, tmp_path):
    _ruler_pipeline(tmp_path / "base")
    out = tmp_path / "pipeline"
    result = CliRunner().invoke(app, ["create-pipeline", str(out), "--kb", str(kb_dir), "--model", str(tiny_bert_path),
                                      "--base", str(tmp_path / "base"), "--pooling", "mean", "--device", "cpu",
                                      "--threshold", "-1", "--index", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    assert "['entity_ruler', 'sapbert_linker']" in result.output
    assert (tmp_path / "idx" / META_FILE).exists()
    (tmp_path / "a.txt").write_text("She took aspirin for the flu.", encoding="utf8")
    result = CliRunner().invoke(app, ["link", str(out), str(tmp_path / "a.txt"), "-o", str(tmp_path / "out.jsonl"),
                                      "--max-entities", "2"])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out.jsonl").read_text().strip())
    assert [(e["text"], e["label"], e["kb_id"]) for e in record["ents"]] == [
        ("aspirin", "CHEMICAL", "C004"), ("flu", "DISEASE", "D003")]
    assert all(len(e["kb_ents"]) == 2 for e in record["ents"])
    assert record["ents"][0]["start"] == 9 and record["ents"][0]["end"] == 16


def test_create_pipeline_links_only_the_given_labels(kb_dir, tiny_bert_path, tmp_path):
    _ruler_pipeline(tmp_path / "base")
    out = tmp_path / "pipeline"
    result = CliRunner().invoke(app, ["create-pipeline", str(out), "--kb", str(kb_dir), "--model", str(tiny_bert_path),
                                      "--base", str(tmp_path / "base"), "--pooling", "mean", "--device", "cpu",
                                      "--threshold", "-1", "--label", "DISEASE"])
    assert result.exit_code == 0, result.output
    doc = spacy.load(out)("She took aspirin for the flu.")
    assert [(e.text, e.kb_id_, bool(e._.kb_ents)) for e in doc.ents] == [("aspirin", "", False), ("flu", "D003", True)]


def test_link_errors(tmp_path, index_dir):
    result = CliRunner().invoke(app, ["link", str(tmp_path)], input="x\n")
    assert isinstance(result.exception, MissingInputError) and "SB-E117" in str(result.exception)
    broken = tmp_path / "broken"
    broken.mkdir()
    meta = json.loads((index_dir / META_FILE).read_text())
    for key, code in (("kb_path", "SB-E118"), ("model", "SB-E118")):
        bad = dict(meta)
        bad.pop(key)
        if key == "model":
            bad.pop("encoder_name")
        (broken / META_FILE).write_text(json.dumps(bad))
        result = CliRunner().invoke(app, ["link", str(broken)], input="x\n")
        assert isinstance(result.exception, MissingInputError) and code in str(result.exception)


def test_link_input_that_is_not_utf8_is_a_coded_error_naming_file_and_line(tmp_path, index_dir):
    from spacy_sapbert.errors import DataFormatError

    result = CliRunner().invoke(app, ["link", str(index_dir)], input=b"flu\nfl\xffu\n")
    assert isinstance(result.exception, DataFormatError)
    assert "SB-E506" in str(result.exception) and "<stdin>: line 2" in str(result.exception)
    bad = tmp_path / "bad.txt"
    bad.write_bytes("fièvre\nline two\n".encode("latin-1"))
    result = CliRunner().invoke(app, ["link", str(index_dir), str(bad)])
    assert isinstance(result.exception, DataFormatError) and f"{bad}: line 1" in str(result.exception)
    result = CliRunner().invoke(app, ["link", str(index_dir), str(tmp_path / "missing.txt")])
    assert isinstance(result.exception, MissingInputError) and "SB-E001" in str(result.exception)


@pytest.mark.parametrize("option,value", [("--threshold", "nan"), ("--threshold", "inf"), ("--threshold", "-1.5"),
                                          ("--k", "0"), ("--max-entities", "-1")])
def test_link_rejects_options_out_of_range(index_dir, option, value):
    result = CliRunner().invoke(app, ["link", str(index_dir), f"{option}={value}"], input="flu\n")
    assert isinstance(result.exception, ConfigError)
    assert "SB-E507" in str(result.exception) and option in str(result.exception)


def test_link_pipeline_refuses_index_only_options_and_applies_device(kb_dir, index_dir, tiny_bert_path, tmp_path):
    pipe = tmp_path / "pipe"
    result = CliRunner().invoke(app, ["create-pipeline", str(pipe), "--kb", str(kb_dir), "--model", str(tiny_bert_path),
                                      "--index", str(index_dir), "--pooling", "mean", "--device", "cpu",
                                      "--runtime", "torch"])
    assert result.exit_code == 0, result.output
    for extra in (["--model", str(tiny_bert_path)], ["--kb", str(kb_dir)]):
        result = CliRunner().invoke(app, ["link", str(pipe), *extra], input="flu\n")
        assert isinstance(result.exception, ConfigError) and "SB-E508" in str(result.exception)
        assert extra[0] in str(result.exception)
    result = CliRunner().invoke(app, ["link", str(pipe), "--device", "tpu"], input="flu\n")
    # checked before the pipeline is loaded (issue 30), not ignored
    assert isinstance(result.exception, ConfigError) and "SB-E012" in str(result.exception)
    with pytest.warns(UserWarning, match="SB-W551"):  # a pipeline without NER links nothing, and says so
        result = CliRunner().invoke(app, ["link", str(pipe), "--device", "cpu"], input="flu\n")
    assert result.exit_code == 0, result.output


def test_every_writing_command_refuses_an_output_under_a_regular_file(tmp_path, kb_dir, index_dir):
    somefile = tmp_path / "somefile"
    somefile.write_text("x")
    out = str(somefile / "sub")
    commands = [
        ["build-kb", str(tmp_path / "in.obo"), "-f", "obo", "-o", out],
        ["build-index", str(kb_dir), "-m", "model", "-o", out],
        ["build-index", str(kb_dir), "-m", "model", "-o", str(tmp_path / "idx"), "--work-dir", out],
        ["create-pipeline", out, "--kb", str(kb_dir)],
        ["link", str(index_dir), "-o", out],
        ["pretrain", str(kb_dir), "-m", "model", "-o", out],
        ["finetune", str(kb_dir), str(tmp_path / "train.tsv"), "-m", "model", "-o", out],
        ["evaluate", str(tmp_path / "test.tsv"), "--kb", str(kb_dir), "-o", out],
        ["convert-ner", str(tmp_path / "a.pubtator"), "-o", out],
        ["train-ner", "ner.cfg", "-o", out, "--train", "t.spacy", "--dev", "d.spacy"],
        ["download-umls", "--release", "2024AB", "-o", out],
    ]
    for argv in commands:
        result = CliRunner().invoke(app, argv, input="flu\n")
        assert isinstance(result.exception, ConfigError), (argv, result.output, result.exception)
        assert "SB-E505" in str(result.exception) and str(somefile) in str(result.exception), argv
    assert somefile.read_text() == "x"


def test_build_kb_overwrite_refuses_a_folder_holding_its_input_or_other_files(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    source = precious / "in.tsv"
    source.write_text("C1\tfever\n")
    result = CliRunner().invoke(app, ["build-kb", str(source), "-f", "tsv", "-o", str(precious), "--overwrite"])
    assert isinstance(result.exception, ConfigError) and "SB-E503" in str(result.exception)
    (tmp_path / "other.tsv").write_text("C1\tfever\n")
    result = CliRunner().invoke(app, ["build-kb", str(tmp_path / "other.tsv"), "-f", "tsv", "-o", str(precious),
                                      "--overwrite"])
    assert isinstance(result.exception, ConfigError) and "SB-E501" in str(result.exception)
    assert source.read_text() == "C1\tfever\n"
    result = CliRunner().invoke(app, ["build-kb", str(tmp_path / "other.tsv"), "-f", "tsv", "-o", str(tmp_path / "kb")])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["build-kb", str(tmp_path / "other.tsv"), "-f", "tsv", "-o", str(tmp_path / "kb"),
                                      "--overwrite"])
    assert result.exit_code == 0, result.output  # our own output (marker) is replaced


def test_link_output_names_each_candidate_concept(index_dir, kb_dir, tiny_bert_path, tmp_path):
    """Issue 30: a newcomer should not have to grep the KB to learn what "grippe" was linked to."""
    canonical = {c.concept_id: c.canonical_name for c in toy_concepts(*IDS)}
    result = CliRunner().invoke(app, ["link", str(index_dir), "--threshold", "-1", "--device", "cpu"],
                                input="grippe\n")
    assert result.exit_code == 0, result.output
    kb_ents = json.loads(result.stdout.splitlines()[0])["ents"][0]["kb_ents"]
    assert kb_ents[0][:1] == ["D003"] and kb_ents[0][2] == "Influenza"
    assert all(len(entry) == 3 and entry[2] == canonical[entry[0]] for entry in kb_ents)
    result = CliRunner().invoke(app, ["link", str(index_dir), "--threshold", "-1", "--device", "cpu", "--no-names"],
                                input="grippe\n")
    assert all(len(entry) == 2 for entry in json.loads(result.stdout.splitlines()[0])["ents"][0]["kb_ents"])
    # a pipeline folder too: the names come from its linker's KB
    _ruler_pipeline(tmp_path / "base")
    out = tmp_path / "pipeline"
    result = CliRunner().invoke(app, ["create-pipeline", str(out), "--kb", str(kb_dir), "--model", str(tiny_bert_path),
                                      "--base", str(tmp_path / "base"), "--pooling", "mean", "--device", "cpu",
                                      "--threshold", "-1", "--index", str(index_dir), "--runtime", "torch"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["link", str(out)], input="She took aspirin for the flu.\n")
    assert result.exit_code == 0, result.output
    ents = json.loads(result.stdout.splitlines()[0])["ents"]
    assert [(e["text"], e["kb_ents"][0][0], e["kb_ents"][0][2]) for e in ents] == [
        ("aspirin", "C004", "Aspirin"), ("flu", "D003", "Influenza")]
