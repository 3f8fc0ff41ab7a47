"""A newcomer's first mistakes on the command line (issue 30): each gets a coded message that says what was given,
what is expected and what to do, and it comes at once, before any model or KB is loaded."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, SapbertError
from spacy_sapbert.kb import Concept, KnowledgeBase


def _error(result) -> str:
    assert isinstance(result.exception, SapbertError), (result.output, result.exception)
    return str(result.exception)


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs_kb") / "kb"
    KnowledgeBase.from_concepts([Concept("D1", "Influenza", ("flu",), ())]).to_disk(path)
    return path


# ------------------------------------------------------------------ a folder where a file is expected
@pytest.mark.parametrize("fmt", ["medic", "obo", "tsv", "jsonl", "babelon"])
def test_build_kb_from_a_folder_says_it_is_a_folder_and_what_it_holds(tmp_path, fmt):
    data = tmp_path / "data"
    data.mkdir()
    (data / "medic.txt").write_text("x\n", encoding="utf8")
    (data / "hp.obo").write_text("x\n", encoding="utf8")
    args = ["build-kb", str(data), "--format", fmt, "-o", str(tmp_path / "kb")]
    if fmt == "babelon":
        args[2:2] = [str(data / "hp.obo")]
        args[args.index("--format") + 1] = "obo,babelon"
    message = _error(CliRunner().invoke(app, args))
    assert "SB-E511" in message and "not found" not in message
    assert f"'{data}' is a folder" in message and "hp.obo, medic.txt" in message


def test_link_with_a_folder_as_input_says_it_is_a_folder(tmp_path, kb_dir):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("flu", encoding="utf8")
    message = _error(CliRunner().invoke(app, ["link", str(tmp_path / "no_such_pipeline"), str(folder)]))
    assert "SB-E511" in message and f"'{folder}' is a folder" in message and "a.txt" in message
    assert "not found" not in message


def test_a_folder_given_to_a_line_reader_is_a_coded_error_not_a_traceback(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("x\n", encoding="utf8")
    for args in (["convert-ner", str(data), "-o", str(tmp_path / "x.spacy")],
                 ["evaluate", str(data), "--format", "pubtator", "--kb-source", f"{data / 'a.txt'}:medic",
                  "-o", str(tmp_path / "report")]):
        message = _error(CliRunner().invoke(app, args))
        assert "SB-E511" in message and f"'{data}' is a folder" in message and "a.txt" in message, args
