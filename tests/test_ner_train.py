"""train-ner: a thin wrapper over `spacy train`, plus per-label dev scores."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, MissingInputError, TrainingError
from spacy_sapbert.ner import convert_pubtator, ner_scores, train_ner

ROOT = Path(__file__).resolve().parents[1]
PROJECT = Path(__file__).parent / "fixtures" / "project"
CONFIG = ROOT / "configs" / "ner_tok2vec.cfg"
TINY = ["--set", "training.max_steps=4", "--set", "training.eval_frequency=2",
        "--set", "components.tok2vec.model.encode.width=16", "--set", "components.tok2vec.model.encode.depth=1"]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ner_corpus")
    convert_pubtator([PROJECT / "bc5cdr_train.txt", PROJECT / "ncbi_train.txt"], folder / "train.spacy")
    convert_pubtator([PROJECT / "bc5cdr_dev.txt", PROJECT / "ncbi_dev.txt"], folder / "dev.spacy")
    return folder


def test_cli_train_ner_writes_model_and_per_label_scores(corpora, tmp_path):
    metrics = tmp_path / "ner_dev.json"
    result = CliRunner().invoke(app, ["train-ner", str(CONFIG), "-o", str(tmp_path / "ner"),
                                      "--train", str(corpora / "train.spacy"), "--dev", str(corpora / "dev.spacy"),
                                      "--metrics", str(metrics), *TINY])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ner" / "model-best" / "meta.json").exists()
    scores = json.loads(metrics.read_text())
    assert scores["docs"] == 2 and scores["gold_entities"] == 8
    assert 0.0 <= scores["ents_f"] <= 1.0
    # per-label figures are spaCy's own scorer output, for labels the model predicted
    for label, s in scores["ents_per_type"].items():
        assert label in {"Disease", "Chemical"} and set(s) == {"p", "r", "f"}
    assert "NER on" in result.output and "F1" in result.output
    # scores are recomputed identically from the saved model
    again = ner_scores(tmp_path / "ner" / "model-best", corpora / "dev.spacy")
    assert again["ents_f"] == scores["ents_f"]


def test_train_ner_missing_inputs(corpora, tmp_path):
    with pytest.raises(MissingInputError, match="SB-E001.*NER training config"):
        train_ner(tmp_path / "nope.cfg", tmp_path / "o", train=corpora / "train.spacy", dev=corpora / "dev.spacy")
    with pytest.raises(MissingInputError, match="SB-E001.*NER training corpus.*convert-ner"):
        train_ner(CONFIG, tmp_path / "o", train=tmp_path / "t.spacy", dev=corpora / "dev.spacy")
    with pytest.raises(MissingInputError, match="SB-E001.*NER dev corpus"):
        train_ner(CONFIG, tmp_path / "o", train=corpora / "train.spacy", dev=tmp_path / "d.spacy")
    with pytest.raises(MissingInputError, match="SB-E001.*NER pipeline.*train-ner"):
        ner_scores(tmp_path / "no_model", corpora / "dev.spacy")


def test_train_ner_bad_override_is_reported(corpora, tmp_path):
    with pytest.raises(TrainingError, match="SB-E444.*debug config"):
        train_ner(CONFIG, tmp_path / "o", train=corpora / "train.spacy", dev=corpora / "dev.spacy",
                  overrides={"training.max_steps": "many"})


def test_cli_bad_override_syntax(corpora, tmp_path):
    result = CliRunner().invoke(app, ["train-ner", str(CONFIG), "-o", str(tmp_path / "o"), "--train",
                                      str(corpora / "train.spacy"), "--dev", str(corpora / "dev.spacy"),
                                      "--set", "max_steps"])
    assert result.exit_code != 0 and isinstance(result.exception, ConfigError)
    assert "SB-E002" in str(result.exception)


def test_transformer_config_trains_on_cpu_with_a_tiny_bert(tiny_bert_path, tmp_path):
    """configs/ner_trf.cfg is the GPU config; here it runs two steps on CPU with a tiny random BERT
    (no mixed precision on CPU, short strided windows for the 64-position model)."""
    train = tmp_path / "fx.spacy"
    convert_pubtator([PROJECT / "ncbi_dev.txt", PROJECT / "bc5cdr_dev.txt"], train)
    best = train_ner(ROOT / "configs" / "ner_trf.cfg", tmp_path / "trf", train=train, dev=train, overrides={
        "paths.transformer": str(tiny_bert_path), "training.max_steps": 2, "training.eval_frequency": 1,
        "components.transformer.model.mixed_precision": False,
        "components.transformer.model.get_spans.window": 4, "components.transformer.model.get_spans.stride": 3})
    import spacy

    nlp = spacy.load(best)
    assert nlp.pipe_names == ["transformer", "ner"]
    assert set(nlp.get_pipe("ner").labels) == {"Chemical", "Disease"}


def test_train_ner_without_a_best_model_is_reported(corpora, tmp_path, monkeypatch):
    import spacy.cli.train

    monkeypatch.setattr(spacy.cli.train, "train", lambda *args, **kwargs: None)  # a run that saved nothing
    with pytest.raises(TrainingError, match=r"SB-E445.*model-best"):
        train_ner(CONFIG, tmp_path / "o", train=corpora / "train.spacy", dev=corpora / "dev.spacy")
