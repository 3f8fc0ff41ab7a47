"""`spacy-sapbert pretrain` / `finetune`, the config files and spaCy-style overrides."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, MissingInputError, TrainingError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.config import TrainConfig, load_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory):
    kb = KnowledgeBase.from_concepts(
        [Concept("D1", "heart attack", ("myocardial infarction", "mi")), Concept("D2", "fever", ("pyrexia",)),
         Concept("D3", "common cold", ("coryza",))],
        source="tiny",
    )
    path = tmp_path_factory.mktemp("kb") / "kb"
    kb.to_disk(path)
    return path


def test_config_files_match_the_built_in_defaults():
    assert load_config(CONFIGS / "pretrain.cfg").to_dict() == TrainConfig().to_dict()
    assert load_config(CONFIGS / "finetune.cfg").to_dict() == load_config(None, task="finetune").to_dict()
    cfg = load_config(CONFIGS / "pretrain.cfg", {"training.batch_size": 64, "loss.name": "infonce"})
    assert cfg.training.batch_size == 64 and cfg.loss.name == "infonce" and cfg.training.lr == 2e-5


def test_config_errors_are_coded():
    with pytest.raises(ConfigError, match=r"\[SB-E212\].*training.bogus"):
        load_config(None, {"training.bogus": 1})
    with pytest.raises(ConfigError, match=r"\[SB-E212\].*cannot override 'nosection'"):
        load_config(None, {"nosection": 1})
    with pytest.raises(ConfigError, match=r"\[SB-E212\].*batch_size must be > 0"):
        load_config(CONFIGS / "pretrain.cfg", {"training.batch_size": 0})
    with pytest.raises(ConfigError, match=r"\[SB-E212\].*training.lr must be >= 0"):
        load_config(None, {"training.lr": -1.0})
    with pytest.raises(ConfigError, match=r"\[SB-E212\].*epochs or training.max_steps"):
        load_config(None, {"training.epochs": 0})
    with pytest.raises(ConfigError, match=r"\[SB-E212\].*max_pairs_per_concept"):
        load_config(None, {"pairs.max_pairs_per_concept": 0})
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*model.pooling"):
        load_config(None, {"model.pooling": "max"})
    with pytest.raises(ConfigError, match=r"\[SB-E212\].*unknown section \[extra\]"):
        TrainConfig.from_dict({"extra": {}})
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*task"):
        load_config(None, task="distill")
    with pytest.raises(MissingInputError, match=r"\[SB-E001\].*Config file"):
        load_config("/nonexistent/pretrain.cfg")


def test_config_file_syntax_error(tmp_path):
    bad = tmp_path / "bad.cfg"
    bad.write_text("[training\nbatch_size = 3\n", encoding="utf8")
    with pytest.raises(ConfigError, match=r"\[SB-E212\].*bad.cfg"):
        load_config(bad)


def test_pretrain_and_finetune_commands(tmp_path, kb_dir, tiny_bert_path):
    runner = CliRunner()
    out = tmp_path / "pre"
    res = runner.invoke(app, ["pretrain", str(kb_dir), "--base-model", str(tiny_bert_path), "--output", str(out),
                              "--config", str(CONFIGS / "pretrain.cfg"), "--device", "cpu",
                              "--training.batch_size", "4", "--training.max_steps", "2", "--training.lr", "0.001"])
    assert res.exit_code == 0, res.output
    assert "Trained 2 steps (2 per epoch), 5 pairs" in res.output and str(out / "model") in res.output
    assert "training pairs/s (training time only" in res.output and "Wall time" in res.output
    assert f"Model: {out / 'model'} holds the last step (2)" in res.output
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["training"]["batch_size"] == 4 and run["config"]["training"]["lr"] == 0.001
    res = runner.invoke(app, ["pretrain", str(kb_dir), "-m", str(tiny_bert_path), "-o", str(out), "--resume",
                              "--device", "cpu", "--training.batch_size", "4", "--training.max_steps", "3",
                              "--training.lr", "0.001"])
    assert res.exit_code == 0, res.output
    assert "Trained 3 steps" in res.output

    train = tmp_path / "train.tsv"
    train.write_text("mention\tids\nheart attacks\tD1\nhigh fever\tD2\nthe cold\tD3\n", encoding="utf8")
    ft = tmp_path / "ft"
    res = runner.invoke(app, ["finetune", str(kb_dir), str(train), "-m", str(out / "model"), "-o", str(ft),
                              "--dev", str(train), "--device", "cpu", "--training.batch_size", "4",
                              "--training.max_steps", "4", "--training.eval_every", "1 epoch"])
    assert res.exit_code == 0, res.output
    assert (ft / "model" / "sapbert_encoder.json").is_file()
    # 3 mentions x up to 3 names -> 1 epoch = 2 steps of 4 pairs: dev at steps 2 and 4
    summary = json.loads((ft / "summary.json").read_text())
    assert summary["steps_per_epoch"] == 2 and summary["model_from"] == "best"
    assert f"holds the best dev step ({summary['model_step']}); dev strict acc@1" in res.output
    assert "unseen –, n = 0)" in res.output  # the dev file is the training file: every mention is seen


def test_cli_errors_are_one_line(tmp_path, kb_dir, tiny_bert_path, capsys, monkeypatch):
    from spacy_sapbert.cli import main

    monkeypatch.setattr("sys.argv", ["spacy-sapbert", "pretrain", str(kb_dir), "-m", str(tiny_bert_path),
                                     "-o", str(tmp_path / "x"), "--amp", "fp16", "--device", "cpu"])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: [SB-E204]") and "\n" not in err


def test_distributed_flag_without_torchrun_env(tmp_path, kb_dir, tiny_bert_path, monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()
    res = runner.invoke(app, ["pretrain", str(kb_dir), "-m", str(tiny_bert_path), "-o", str(tmp_path / "d"),
                              "--distributed", "--device", "cpu"])
    assert isinstance(res.exception, TrainingError) and "[SB-E213]" in str(res.exception)
