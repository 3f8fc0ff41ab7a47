"""A newcomer's first mistakes on the command line (issue 30): each gets a coded message that says what was given,
what is expected and what to do, and it comes at once, before any model or KB is loaded."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, SapbertError


def _error(result) -> str:
    assert isinstance(result.exception, SapbertError), (result.output, result.exception)
    return str(result.exception)


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


def test_link_with_a_folder_as_input_says_it_is_a_folder(tmp_path):
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


# ------------------------------------------------------------------ option values checked before anything is loaded
# Every input path below does not exist: a command that loaded anything before checking its options would say so.
BAD_OPTIONS = [
    (["build-index", "KB", "-o", "OUT"], "--pooling", "max", "auto, cls, mean"),
    (["build-index", "KB", "-o", "OUT"], "--kind", "annoy", "auto, exact, hnsw, ivf"),
    (["build-index", "KB", "-o", "OUT"], "--device", "gpu", "cuda:N"),
    (["build-index", "KB", "-o", "OUT"], "--precision", "half", "fp16"),
    (["link", "PIPE"], "--device", "gpu", "cuda:N"),
    (["create-pipeline", "OUT", "--kb", "KB"], "--pooling", "max", "auto, cls, mean"),
    (["create-pipeline", "OUT", "--kb", "KB"], "--index-kind", "annoy", "auto, exact, hnsw, ivf"),
    (["create-pipeline", "OUT", "--kb", "KB"], "--device", "gpu", "cuda:N"),
    (["create-pipeline", "OUT", "--kb", "KB"], "--runtime", "tensorrt", "auto, torch, onnx"),
    (["evaluate", "DATA", "-o", "OUT"], "--pooling", "max", "auto, cls, mean"),
    (["evaluate", "DATA", "-o", "OUT"], "--model-pooling", "max", "auto, cls, mean"),
    (["evaluate", "DATA", "-o", "OUT"], "--base-pooling", "max", "auto, cls, mean"),
    (["evaluate", "DATA", "-o", "OUT"], "--format", "pubtatr", "auto, pubtator, biosyn"),
    (["evaluate", "DATA", "-o", "OUT"], "--mode", "e2e", "mention_only, end_to_end"),
    (["build-prototypes", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--pooling", "max", "cls, mean"),
    (["build-prototypes", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--name-pooling", "max", "auto, cls, mean"),
    (["build-prototypes", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--device", "gpu", "cuda:N"),
    (["build-prototypes", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--format", "brat",
     "auto, pubtator, jsonl, docbin"),
    (["build-prototypes", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--definitions", "some", "none, missing, all"),
    (["tune-context", "DEV", "--kb", "KB", "-m", "M", "-p", "P"], "--pooling", "max", "auto, cls, mean"),
    (["tune-context", "DEV", "--kb", "KB", "-m", "M", "-p", "P"], "--device", "gpu", "cuda:N"),
    (["train-context", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--pooling", "max", "cls, mean"),
    (["train-context", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--name-pooling", "max", "cls, mean"),
    (["train-context", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--source", "raw", "supervised, self, both"),
    (["train-context", "DOCS", "--kb", "KB", "-m", "M", "-o", "OUT"], "--device", "gpu", "cuda:N"),
    (["pretrain", "KB", "-m", "M", "-o", "OUT"], "--device", "gpu", "cuda:N"),
    (["finetune", "KB", "TRAIN", "-m", "M", "-o", "OUT"], "--device", "gpu", "cuda:N"),
    (["convert-ner", "IN", "-o", "OUT.spacy"], "--misaligned", "drop", "skip, expand, contract"),
]


@pytest.mark.parametrize("args,option,value,choices", BAD_OPTIONS,
                         ids=[f"{a[0]} {o}" for a, o, _, _ in BAD_OPTIONS])
def test_a_bad_option_value_fails_first_naming_option_value_and_choices(tmp_path, args, option, value, choices):
    args = [str(tmp_path / a) if a.isupper() else a for a in args]
    result = CliRunner().invoke(app, args + [option, value])
    message = _error(result)
    assert isinstance(result.exception, ConfigError)
    assert "SB-E012" in message and option in message and repr(value) in message and choices in message, message


def test_cuda_without_a_gpu_fails_before_loading(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(app, ["build-index", str(tmp_path / "KB"), "-o", str(tmp_path / "OUT"),
                                      "--device", "cuda:0"])
    message = _error(result)
    assert "cuda:0" in message and "no CUDA GPU" in message and "SB-E001" not in message


def test_evaluate_config_with_an_unknown_format_names_the_key_and_the_value(tmp_path):
    from thinc.api import Config

    from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

    base = {"evaluate": {"dataset": {"path": "x.txt"}, "kb": {"path": "kb"}}}
    for key in ("format", "train_format"):
        config = merge_config(default_config(), Config(base), {f"evaluate.dataset.{key}": "pubtatr"})
        with pytest.raises(ConfigError) as err:
            settings_from_config(config, "my.cfg")
        message = str(err.value)
        assert f"[evaluate.dataset] {key}" in message and "'pubtatr'" in message and "/auto" not in message
        assert "auto, pubtator, biosyn, tsv, jsonl, brat, xlbel, codiesp, docbin" in message
