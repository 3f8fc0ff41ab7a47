"""A hub id that cannot be had here fails at once with SB-E512 saying what to do, not after a minute of retries
(issue 30). The hub is never reached: offline mode comes from conftest (HF_HUB_OFFLINE=1), and the one probe
request is replaced by a fake."""
from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.encoding import files
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import MissingInputError


@pytest.fixture
def no_probe(monkeypatch):
    def probe(name, timeout=5.0):
        raise AssertionError("the hub was asked although it is switched off")

    monkeypatch.setattr(files, "_probe_hub", probe)


def test_hub_id_while_offline_fails_fast_and_says_what_to_do(no_probe):
    start = time.perf_counter()
    with pytest.raises(MissingInputError) as err:
        Encoder.load("no-such-org/no-such-model-xyz")
    assert time.perf_counter() - start < 15  # no minute of retries (nor the seconds of importing transformers)
    message = str(err.value)
    assert "SB-E512" in message and "'no-such-org/no-such-model-xyz'" in message
    assert "HF_HUB_OFFLINE" in message and "local Hugging Face model folder" in message
    assert "only if it can" not in message


@pytest.mark.parametrize("answer,words", [
    ("unreachable", "cannot be reached"),
    ("missing", "has no model"),
])
def test_hub_id_that_the_hub_cannot_give_fails_fast(monkeypatch, answer, words):
    asked = []

    def probe(name, timeout=5.0):
        asked.append(name)
        answers = {"unreachable": files.HubAnswer.UNREACHABLE, "missing": files.HubAnswer.NOT_FOUND}
        return answers[answer], "ConnectionError"

    monkeypatch.setattr(files, "_hub_offline", lambda: False)
    monkeypatch.setattr(files, "_probe_hub", probe)
    with pytest.raises(MissingInputError) as err:
        Encoder.load("cambridgeltl/SapBERT-from-PubMedBERT-fulltext")
    assert asked == ["cambridgeltl/SapBERT-from-PubMedBERT-fulltext"]
    message = str(err.value)
    assert "SB-E512" in message and words in message and "local Hugging Face model folder" in message


def test_a_path_that_does_not_exist_is_not_taken_for_a_hub_id(no_probe):
    with pytest.raises(MissingInputError) as err:
        Encoder.load("models/minilm/v2")
    assert "SB-E512" in str(err.value) and "not a local folder" in str(err.value)


def test_build_index_with_an_offline_hub_id_fails_before_encoding(no_probe, tmp_path):
    from spacy_sapbert.kb import Concept, KnowledgeBase

    KnowledgeBase.from_concepts([Concept("D1", "Influenza", ("flu",), ())]).to_disk(tmp_path / "kb")
    result = CliRunner().invoke(app, ["build-index", str(tmp_path / "kb"), "-o", str(tmp_path / "index")])
    assert isinstance(result.exception, MissingInputError) and "SB-E512" in str(result.exception)
    assert "cambridgeltl/SapBERT-from-PubMedBERT-fulltext" in str(result.exception)


def test_pretrain_base_model_while_offline_fails_fast(no_probe):
    from spacy_sapbert.training.base_model import load_base_model

    with pytest.raises(MissingInputError, match="SB-E512"):
        load_base_model("no-such-org/no-such-model-xyz")
