"""DDP with two CPU processes (gloo) launched by torchrun: the same update as one process."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from spacy_sapbert.errors import ConfigError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training import trainer as trainer_module
from spacy_sapbert.training.config import load_config
from spacy_sapbert.training.distributed import DistInfo
from spacy_sapbert.training.pairs import write_kb_pairs
from spacy_sapbert.training.run import pretrain

OVERRIDES = {"training.batch_size": 8, "training.max_steps": 3, "training.lr": 0.001, "training.device": "cpu",
             "training.checkpoint_every": 2, "training.log_every": 1}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _no_dropout_copy(src, dst):
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["hidden_dropout_prob"] = 0.0
    cfg["attention_probs_dropout_prob"] = 0.0
    (dst / "config.json").write_text(json.dumps(cfg), encoding="utf8")
    return dst


def _kb():
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    return KnowledgeBase.from_concepts(
        [Concept(f"C{i}", w, (w[::-1], f"{w} x", f"the {w}")) for i, w in enumerate(words)], source="ddp"
    )


@pytest.mark.parametrize("adapter", ["none", "lora"])
def test_torchrun_two_gloo_processes_match_one_process(tmp_path, tiny_bert_path, adapter):
    """Also with LoRA adapters (only they train; dropout off so both runs see the same network)."""
    model = _no_dropout_copy(tiny_bert_path, tmp_path / "bert")
    kb = _kb()
    kb_dir = tmp_path / "kb"
    kb.to_disk(kb_dir)
    overrides = dict(OVERRIDES, **{"training.adapter": adapter, "training.adapter_dropout": 0.0})
    if adapter == "lora":
        overrides["training.lr"] = 0.02  # adapters start at zero: a larger step to move measurably
    single = pretrain(kb, str(model), tmp_path / "single", config=load_config(None, overrides))

    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
            "-m", "spacy_sapbert", "pretrain", str(kb_dir), "-m", str(model), "-o", str(tmp_path / "ddp")]
    for key, value in overrides.items():
        args += [f"--{key}", str(value)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Trained 3 steps (6 per epoch), 24 pairs" in proc.stdout

    a = load_file(str(single.model_path / "model.safetensors"))
    b = load_file(str(tmp_path / "ddp" / "model" / "model.safetensors"))
    start = load_file(str(model / "model.safetensors"))
    # Adam turns float noise in near-zero gradients into lr-sized steps, so compare the whole
    # update: the two runs differ by far less than either moved from the start
    moved = torch.cat([(a[k] - start[k]).flatten() for k in a]).norm()
    apart = torch.cat([(a[k] - b[k]).flatten() for k in a]).norm()
    assert moved > 0.05 and apart < 0.005 * moved, (float(moved), float(apart))
    losses_single = [json.loads(x)["loss"] for x in (tmp_path / "single" / "metrics.jsonl").read_text().splitlines()]
    losses_ddp = [json.loads(x)["loss"] for x in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert losses_ddp == pytest.approx(losses_single, rel=1e-4)


def test_batch_must_split_over_processes(tmp_path, tiny_bert_path, monkeypatch):
    kb = _kb()
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    monkeypatch.setattr(trainer_module, "init_distributed",
                        lambda requested, device_type: DistInfo(enabled=True, rank=0, local_rank=0, world_size=2))
    config = load_config(None, {**OVERRIDES, "training.batch_size": 7})
    with pytest.raises(ConfigError, match=r"\[SB-E211\].*7.*2 processes"):
        trainer_module.Trainer(config, kb, pairs, str(tiny_bert_path), tmp_path / "run")
