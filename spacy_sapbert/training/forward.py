"""One training forward pass over a batch of names, run as length-sorted sub-batches.

A random batch of names holds a few long ones; padding every name to them costs ~40% of the compute
on short biomedical names (``benchmarks/studies/train_speed.py``). :func:`sub_batches` sorts the names by length and cuts them
into parts padded to their own longest name; :class:`SubBatchEncoder` runs the parts and returns the
pooled vectors in the input order. It is one ``nn.Module`` call, so DistributedDataParallel wraps it
like the bare model (DDP allows one forward per backward). The result equals one pass over the whole
batch up to float rounding: padded positions are masked out of attention and pooling.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import torch

from ..encoding.torch_encoder import length_order, pad_token_rows, pool

Part = Tuple[torch.Tensor, torch.Tensor]


def sub_batches(ids: Sequence[Sequence[int]], size: int, pad_id: int, device: torch.device) -> Tuple[List[Part], torch.Tensor]:
    """``(parts, inverse)``: ``(input_ids, attention_mask)`` of at most ``size`` rows each (0: one part),
    names sorted by length; row ``i`` of the concatenated output is ``inverse``'s ``i``-th source row."""
    order = length_order(ids)
    size = size or len(ids)
    parts = [pad_token_rows([ids[i] for i in order[start : start + size]], pad_id, device)
             for start in range(0, len(order), size)]
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
    return parts, inverse.to(device)


class SubBatchEncoder(torch.nn.Module):
    """Wraps a Hugging Face encoder: parts → pooled vectors ``[names, dim]`` in the input order."""

    def __init__(self, model: torch.nn.Module, pooling: str) -> None:
        super().__init__()
        self.model = model
        self.pooling = pooling

    def forward(self, parts: List[Part], inverse: torch.Tensor) -> torch.Tensor:
        pooled = []
        for input_ids, mask in parts:
            out = self.model(input_ids=input_ids, attention_mask=mask)
            pooled.append(pool(out.last_hidden_state, mask, self.pooling))
        return torch.cat(pooled)[inverse]


__all__ = ["SubBatchEncoder", "sub_batches"]
