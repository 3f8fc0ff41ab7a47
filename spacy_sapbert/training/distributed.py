"""Distributed data parallel helpers: explicit (torchrun's env vars or ``distributed = true``).

Each process embeds its share of the global batch; ``gather_with_grad`` concatenates the shares of
all processes so the miner and the loss see the whole global batch, and routes gradients back to the
process that produced each row. Every process computes the same loss on the global batch; with the
all-reduce in ``backward`` (sum) and DDP's gradient averaging, the update equals that of one process
running the whole batch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..errors import Errors, TrainingError


@dataclass(frozen=True)
class DistInfo:
    enabled: bool = False
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def env_requests_distributed() -> bool:
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def init_distributed(requested: bool, device_type: str) -> DistInfo:
    """Join the process group torchrun set up (``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``);
    NCCL on CUDA, gloo on CPU. Without the request and without torchrun: a single process."""
    if not (requested or env_requests_distributed()):
        return DistInfo()
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise TrainingError(Errors.E213.format(what=f"the environment lacks {', '.join(missing)}"))
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if device_type == "cuda":
        torch.cuda.set_device(local)  # before NCCL starts, so each process talks from its own GPU
    if not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    return DistInfo(enabled=True, rank=rank, local_rank=local, world_size=world)


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor) -> torch.Tensor:
        world = dist.get_world_size()
        ctx.rank = dist.get_rank()
        ctx.rows = tensor.shape[0]
        parts = [torch.empty_like(tensor) for _ in range(world)]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        start = ctx.rank * ctx.rows
        return grad[start : start + ctx.rows]


def gather_with_grad(tensor: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """All processes' rows (same shape on every process), rank order; identity without DDP."""
    if not info.enabled or info.world_size == 1:
        return tensor
    return _GatherWithGrad.apply(tensor)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def broadcast_flag(value: bool, info: DistInfo, device: "torch.device | str" = "cpu") -> bool:
    """Rank 0's decision (stop now, ...) on every process."""
    if not info.enabled:
        return value
    t = torch.tensor([1 if value else 0], dtype=torch.int64, device=device)
    dist.broadcast(t, src=0)
    return bool(t.item())


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()


__all__ = ["DistInfo", "init_distributed", "gather_with_grad", "barrier", "broadcast_flag", "shutdown"]
