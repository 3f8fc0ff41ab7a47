"""Adapters (training.adapter = "lora", peft): only the adapters train, the output is a plain
merged model, resume restores the adapters exactly, and a missing peft is a coded error."""
from __future__ import annotations

import shutil
import sys

import pytest
import torch
from safetensors.torch import load_file

from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import ConfigError
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.training.config import load_config
from spacy_sapbert.training.pairs import write_kb_pairs
from spacy_sapbert.training.trainer import Trainer

from test_training_trainer import _concepts  # the same tiny synonym KB

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.from_concepts(_concepts(), source="tiny")


def _config(**overrides):
    base = {"training.batch_size": 36, "training.max_steps": 6, "training.lr": 3e-3, "training.device": "cpu",
            "training.checkpoint_every": 3, "training.log_every": 1, "training.adapter": "lora",
            "training.adapter_rank": 4}
    base.update(overrides)
    return load_config(None, base)


def test_only_adapters_train_and_the_output_is_a_plain_merged_model(tmp_path, tiny_bert_path, kb):
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    trainer = Trainer(_config(**{"training.max_steps": 40, "training.log_every": 10}), kb, pairs,
                      str(tiny_bert_path), tmp_path / "run")
    trainable = {n for n, p in trainer.module.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert not any("pooler" in n for n in trainable)  # the unused pooler gets no adapter
    n_train = sum(p.numel() for p in trainer.module.parameters() if p.requires_grad)
    n_all = sum(p.numel() for p in trainer.module.parameters())
    assert n_train < 0.2 * n_all
    result = trainer.run()
    losses = [r["loss"] for r in result.history if "loss" in r]
    assert losses[-1] < losses[0]
    out, base = load_file(str(result.model_path / "model.safetensors")), load_file(str(tiny_bert_path / "model.safetensors"))
    assert not any("lora" in k for k in out)  # merged: no peft needed to load it
    assert torch.equal(out["embeddings.word_embeddings.weight"], base["embeddings.word_embeddings.weight"])
    assert not torch.equal(out["encoder.layer.0.attention.self.query.weight"],
                           base["encoder.layer.0.attention.self.query.weight"])
    enc = Encoder.from_disk(result.model_path, device="cpu")
    assert enc.encode(["abc"]).shape == (1, 32)


def test_resume_with_adapters_gives_the_same_weights(tmp_path, tiny_bert_path, kb):
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    extra = {"training.batch_size": 8}
    full = Trainer(_config(**{"training.max_steps": 7, **extra}), kb, pairs, str(tiny_bert_path), tmp_path / "full").run()
    Trainer(_config(**{"training.max_steps": 4, **extra}), kb, pairs, str(tiny_bert_path), tmp_path / "cut").run()
    cut = tmp_path / "cut"
    shutil.rmtree(cut / "checkpoints" / "step-000004")
    shutil.rmtree(cut / "model")
    assert (cut / "checkpoints" / "step-000003" / "adapter.safetensors").exists()
    resumed = Trainer(_config(**{"training.max_steps": 7, **extra}), kb, pairs, str(tiny_bert_path), cut).run(resume=True)
    a, b = load_file(str(full.model_path / "model.safetensors")), load_file(str(resumed.model_path / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_a_missing_peft_is_a_coded_error(tmp_path, tiny_bert_path, kb, monkeypatch):
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    monkeypatch.setitem(sys.modules, "peft", None)  # import peft → ImportError
    with pytest.raises(ConfigError, match=r"\[SB-E215\].*spacy-sapbert\[adapters\]"):
        Trainer(_config(), kb, pairs, str(tiny_bert_path), tmp_path / "run")
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*training.adapter"):
        _config(**{"training.adapter": "houlsby"})


def test_a_model_without_bert_style_layers_is_a_coded_error():
    from spacy_sapbert.training.adapters import add_adapters

    with pytest.raises(ConfigError, match=r"\[SB-E216\].*Sequential"):
        add_adapters(torch.nn.Sequential(torch.nn.Linear(4, 4)), 4, 8.0, 0.0)
