"""Mixed precision on CUDA (marked ``gpu``; needs a CUDA device, skipped without one)."""
from __future__ import annotations

import pytest
import torch

from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.config import load_config
from spacy_sapbert.training.pairs import write_kb_pairs
from spacy_sapbert.training.trainer import Trainer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_amp_training_on_cuda(tmp_path, tiny_bert_path, amp):
    kb = KnowledgeBase.from_concepts([Concept(f"C{i}", f"name {i}", (f"alias {i}", f"other {i}")) for i in range(8)])
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    config = load_config(None, {"training.amp": amp, "training.device": "cuda", "training.batch_size": 8,
                                "training.max_steps": 4, "training.lr": 1e-3, "training.checkpoint_every": 2})
    trainer = Trainer(config, kb, pairs, str(tiny_bert_path), tmp_path / "run")
    assert (trainer.scaler is not None) == (amp == "fp16")
    result = trainer.run()
    assert result.steps == 4 and result.final_loss == result.final_loss  # finite, not NaN
    resumed = Trainer(load_config(None, {**{"training.amp": amp, "training.device": "cuda", "training.batch_size": 8,
                                            "training.lr": 1e-3, "training.checkpoint_every": 2},
                                         "training.max_steps": 6}), kb, pairs, str(tiny_bert_path),
                      tmp_path / "run").run(resume=True)
    assert resumed.steps == 6
