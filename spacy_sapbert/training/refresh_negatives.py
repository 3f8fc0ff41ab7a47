"""The trainer's dictionary hard negatives (``training.hard_negatives``; see ``hard_negatives.py``):
re-mined with the current weights every ``training.hard_negative_every`` steps (or epochs), for the
anchors of the steps until the next refresh only, and saved beside the checkpoints, so that a
resumed run and the other DDP ranks reuse them. Mining time is counted apart from training time
(``mine_seconds``). A mixin of :class:`~spacy_sapbert.training.trainer.Trainer`.
"""
from __future__ import annotations

import time
from typing import Any, Optional, Tuple

import numpy as np

from ..base.util import get_logger
from ..encoding.torch_encoder import Encoder
from . import hard_negatives as hn
from .distributed import barrier

logger = get_logger("training.mining")


class HardNegativeMining:
    """Needs from the trainer: ``config``, ``kb``, ``pairs``, ``batches``, ``schedule``, ``module``,
    ``tokenizer``, ``device``, ``amp_dtype``, ``dist``, ``output`` and ``total_steps()``."""

    config: Any
    kb: Any
    pairs: Any
    batches: Any
    schedule: Any
    module: Any
    tokenizer: Any
    device: Any
    amp_dtype: Any
    dist: Any
    output: Any
    mine_seconds: float

    def _init_hard_negatives(self) -> None:
        t = self.config.training
        self.hn_sampler: Optional[hn.HardNegativeSampler] = None
        self.hn_table: Optional[hn.HardNegativeTable] = None
        self._dev_name_vectors: Optional[Tuple[int, np.ndarray]] = None  # (step, vectors) of self.kb's names
        if t.hard_negatives <= 0:
            return
        self.hn_sampler = hn.HardNegativeSampler(self.kb, t.hard_negatives, t.seed)
        # task pairs: a mention's gold = every label it is paired with; KB pairs: every concept of the name
        self.hn_from_kb = self.pairs.meta.get("kind") == "kb"
        self.hn_anchors, self.hn_gold = ((np.zeros(0, dtype=np.int64), []) if self.hn_from_kb
                                         else hn.anchor_labels(self.pairs.pairs))

    def total_steps(self) -> int:  # pragma: no cover - the trainer's
        raise NotImplementedError

    def _hard_negative_pairs(self, rows: np.ndarray, global_step: int) -> np.ndarray:
        """The extra pairs of this step, from the table of the latest refresh point (mined now if
        needed: by rank 0, saved under ``OUTPUT/hard_negatives/``)."""
        every = self.schedule.hard_negative_every
        refresh = (global_step // every) * every
        if self.hn_table is None or self.hn_table.step != refresh:
            path = self.output / "hard_negatives" / f"step_{refresh:08d}.npz"
            if self.dist.is_main and not path.is_file():
                path.parent.mkdir(parents=True, exist_ok=True)
                self._mine(refresh).to_disk(path)
            barrier(self.dist)
            self.hn_table = hn.HardNegativeTable.from_disk(path)
        return self.hn_sampler.extra_pairs(self.hn_table, rows, global_step)  # type: ignore[union-attr]

    def _window_anchors(self, step: int) -> np.ndarray:
        """The distinct anchor text ids of the steps ``[step, step + every)``: what the next table serves."""
        n_batches = self.batches.n_batches()
        stop = min(step + self.schedule.hard_negative_every, self.total_steps())
        batches = [self.batches.batch(s // n_batches, s % n_batches) for s in range(step, max(stop, step + 1))]
        return np.unique(np.asarray(self.pairs.pairs[np.concatenate(batches)])[:, 0]).astype(np.int64)

    def _mine(self, step: int) -> hn.HardNegativeTable:
        import torch  # lazy: torch

        started = time.perf_counter()
        was_training = self.module.training
        # ranking negatives tolerates bf16: CPU autocast when training uses it (on CUDA the Encoder would
        # cast the weights themselves, so fp32 there)
        cpu_bf16 = self.amp_dtype is torch.bfloat16 and self.device.type == "cpu"
        enc = Encoder(self.module, self.tokenizer, pooling=self.pooling,  # type: ignore[attr-defined]
                      max_length=self.config.model.max_length, device=str(self.device),
                      precision="bf16" if cpu_bf16 else "fp32", cache_size=0)
        anchors = self._window_anchors(step)
        if self.hn_from_kb:  # the anchors are KB names: every concept of the name is gold
            cptr, cidx = (np.asarray(a) for a in self.kb.row_concept_csr())
            gold = [cidx[cptr[a]:cptr[a + 1]] for a in anchors]
        else:
            gold = [self.hn_gold[i] for i in np.searchsorted(self.hn_anchors, anchors)]
        try:
            cached = self._dev_name_vectors
            names = cached[1] if cached is not None and cached[0] == step else enc.encode(
                list(self.kb.names), show_progress=self.dist.is_main)
            vectors = names[anchors] if self.hn_from_kb else enc.encode(
                [self.pairs.text(self.kb, int(a)) for a in anchors])
        finally:
            self.module.train(was_training)
        table = hn.mine_table(vectors, names, anchors, gold, self.kb, self.config.training.hard_negative_top_k, step)
        seconds = time.perf_counter() - started
        self.mine_seconds += seconds
        logger.info("hard negatives mined at step %d in %.0f s: %s", step, seconds, hn.table_summary(table))
        return table


__all__ = ["HardNegativeMining"]
