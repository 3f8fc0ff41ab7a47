"""The training loop: pairs → (global) batch → embeddings → miner → loss → AdamW.

Deterministic: the order of pairs in epoch ``e`` comes from ``numpy.random.default_rng([seed, e])``
and torch's RNG (dropout) is re-seeded from ``(seed, step, rank)`` before every step, so a resumed run
continues exactly like an uninterrupted one. Mixed precision is explicit: ``training.amp`` (bf16
autocast on CUDA or CPU, fp16 with a GradScaler on CUDA only); so is DDP (torchrun's env vars or
``training.distributed``). Training can add dictionary hard negatives to every batch (``mining.py``).

Schedules (``eval_every``, ``checkpoint_every``, ``hard_negative_every``) are in steps or epochs
(``schedule.py``); the run logs its steps per epoch. Time is kept in three parts: training (the
optimizer steps: what pairs/s counts), mining and dev evaluation (``dev_eval.py``: a fixed candidate
set, seconds per evaluation), beside the wall time that ``training.max_minutes`` caps. The summary
(``summary.py``) says which step ``OUTPUT/model`` holds.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..base.util import PathLike, ensure_path, get_logger, resolve_device
from ..encoding.pooling import resolve_pooling
from ..encoding.torch_encoder import Encoder, weights_fingerprint
from ..errors import ConfigError, Errors, TrainingError
from . import checkpoint as ckpt
from .adapters import add_adapters, exportable
from .base_model import check_precision, load_base_model
from .batching import EpochBatches
from .config import TrainConfig
from .dev_eval import DevEvaluator, DevSet, selection_score
from .distributed import barrier, broadcast_flag, gather_with_grad, init_distributed, shutdown
from .forward import SubBatchEncoder
from .loader import Part, StepInputs, cut_parts, padded_parts, rank_share, token_source
from .losses import make_loss
from .miners import TripletMarginMiner
from .pairs import PairSet
from .refresh_negatives import HardNegativeMining
from .schedule import Schedule
from .summary import TrainResult, dev_line, write_summary

if TYPE_CHECKING:  # for annotations only
    import torch

logger = get_logger("training.trainer")

METRICS_FILE = "metrics.jsonl"


class Trainer(HardNegativeMining):
    """One training run into ``output``. Use :func:`train` unless you need the pieces."""

    def __init__(self, config: TrainConfig, kb: Any, pairs: PairSet, base_model: str, output: PathLike,
                 *, dev: Optional[DevSet] = None) -> None:
        import torch  # lazy: torch

        self._created = time.perf_counter()
        self.config, self.kb, self.pairs, self.base_model = config, kb, pairs, str(base_model)
        self.output = ensure_path(output)
        self.dev = dev
        self.dev_evaluator: Optional[DevEvaluator] = None
        self.mine_seconds = self.dev_seconds = 0.0  # of this session (the state keeps the run's totals)
        self.pooling, self.pooling_source = resolve_pooling(config.model.pooling, base_model, what="base model")
        t = config.training
        self.device = resolve_device(t.device)
        self.dist = init_distributed(t.distributed, self.device.type)
        if self.dist.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        check_precision(t.amp, self.device)
        if t.batch_size % self.dist.world_size:
            raise ConfigError(Errors.E211.format(batch_size=t.batch_size, world_size=self.dist.world_size))
        pairs.check_kb(kb)
        self.tokenizer, model = load_base_model(self.base_model)
        if t.adapter != "none":
            torch.manual_seed(t.seed)  # the adapters' random init: the same in every run of this config
            model = add_adapters(model, t.adapter_rank, t.adapter_alpha, t.adapter_dropout)
        self.module = model.to(self.device)  # the Hugging Face model: saved, evaluated, clipped
        self.model = SubBatchEncoder(self.module, self.pooling)  # what a step calls
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel  # lazy: torch

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DistributedDataParallel(self.model, device_ids=ids)
        self.optimizer = self._make_optimizer()
        self.scaler = torch.amp.GradScaler("cuda") if t.amp == "fp16" else None
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(t.amp)
        self.loss_fn = make_loss(config.loss.name, **self._loss_kwargs())
        self.miner = TripletMarginMiner(config.miner.margin, config.miner.kind) if config.miner.enabled else None
        self.batches = EpochBatches(pairs, kb, t.batch_size, t.batching, t.seed)
        self.schedule = Schedule.from_settings(t, self.batches.n_batches(), self.total_steps())
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.tokens = token_source(self.pairs, kb, self.tokenizer, config.model.max_length,
                                   pretokenize=t.pretokenize, is_main=self.dist.is_main,
                                   wait=lambda: barrier(self.dist))
        self._init_hard_negatives()
        self.identity = ckpt.run_identity(config.to_dict(), self.base_model, kb.checksum, pairs.meta)

    # ---- setup -------------------------------------------------------------------------------
    def _step_loader(self, first_step: int, total: int) -> Optional[Any]:
        """The inputs of steps ``first_step..total-1`` made ahead by ``training.loader_workers`` processes;
        None (made in this process) without workers and always with hard negatives."""
        t = self.config.training
        if t.loader_workers <= 0 or self.hn_sampler is not None or first_step >= total:
            return None
        dataset = StepInputs(self.pairs, self.batches, self.tokens, first_step=first_step,
                             n_steps=total - first_step, pad_id=self.pad_id,
                             world=self.dist.world_size, rank=self.dist.rank)
        return dataset.iterate(t.loader_workers, pin_memory=self.device.type == "cuda")

    def _loss_kwargs(self) -> Dict[str, float]:
        loss = self.config.loss
        if loss.name == "multi_similarity":
            return {"alpha": loss.alpha, "beta": loss.beta, "base": loss.base}
        if loss.name == "infonce":
            return {"temperature": loss.temperature}
        return {"margin": loss.triplet_margin}

    def _make_optimizer(self) -> Any:
        import torch  # lazy: torch

        decay, no_decay = [], []
        for name, param in self.module.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if param.ndim < 2 or "LayerNorm" in name else decay).append(param)
        groups = [
            {"params": decay, "weight_decay": self.config.training.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=self.config.training.lr)

    def total_steps(self) -> int:
        t = self.config.training
        return t.max_steps if t.max_steps > 0 else t.epochs * self.batches.n_batches()

    def settings(self) -> Dict[str, Any]:
        return {
            "name": f"sapbert-trained:{self.base_model}",
            "pooling": self.pooling,
            "max_length": self.config.model.max_length,
            "dim": int(self.module.config.hidden_size),
            "fingerprint": weights_fingerprint(exportable(self.module)),  # of what is saved
        }

    # ---- one step ----------------------------------------------------------------------------
    def _inputs(self, rows: np.ndarray) -> Tuple[List[Part], "torch.Tensor", "torch.Tensor"]:  # noqa: F821
        """``(parts, inverse, labels)`` on the CPU for the pair ``rows``: this process's share, tokenised
        (or read from the pre-tokenised table), length-sorted and padded (see ``loader.py``)."""
        import torch  # lazy: torch

        text_ids, labels = rank_share(rows, self.dist.world_size, self.dist.rank)
        parts, inverse = padded_parts(*self.tokens.flat(text_ids), self.config.training.sub_batch, self.pad_id)
        return parts, inverse, torch.from_numpy(labels)

    def _embed(self, inputs: Tuple[List[Part], "torch.Tensor"]) -> "torch.Tensor":  # noqa: F821
        """Pooled vectors of the names of ``inputs`` (CPU ``(parts, inverse)``), in their order."""
        parts, inverse = inputs
        on_device = [(ids.to(self.device), mask.to(self.device)) for ids, mask in parts]
        return self.model(on_device, inverse.to(self.device))

    def _lr(self, step: int) -> float:
        t = self.config.training
        if t.warmup_steps and step < t.warmup_steps:
            return t.lr * (step + 1) / t.warmup_steps
        return t.lr

    def step(self, batch: np.ndarray, global_step: int,
             inputs: Optional[Tuple[List[Part], "torch.Tensor", "torch.Tensor"]] = None) -> float:  # noqa: F821
        """One optimizer step on the pairs ``batch``; ``inputs``: their model inputs made ahead (by the
        loader's workers; only without hard negatives, which depend on the current weights)."""
        import torch  # lazy: torch

        t = self.config.training
        torch.manual_seed((t.seed * 1_000_003 + global_step * 7_919 + self.dist.rank) % (2**62))
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr(global_step)
        if inputs is None:
            rows = np.asarray(self.pairs.pairs[batch])
            if self.hn_sampler is not None:
                rows = np.concatenate([rows, self._hard_negative_pairs(rows, global_step)])
            inputs = self._inputs(rows)
        parts, inverse, labels = inputs
        labels = labels.to(self.device)
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=self.device.type, dtype=self.amp_dtype or torch.float32,
                            enabled=self.amp_dtype is not None):
            local = self._embed((parts, inverse))
        emb = gather_with_grad(local.float(), self.dist)
        pairs = self.miner(emb, labels) if self.miner is not None else None
        loss = self.loss_fn(emb, labels, pairs)
        if not torch.isfinite(loss):
            raise TrainingError(Errors.E214.format(value=loss.item(), step=global_step))
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            loss.backward()
        if t.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.module.parameters(), t.grad_clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        return float(loss.detach())

    def _first_step(self, batch: np.ndarray, global_step: int, inputs: Any = None) -> float:
        import torch  # lazy: torch

        oom_types: Tuple[type, ...] = (MemoryError, torch.cuda.OutOfMemoryError)
        try:
            return self.step(batch, global_step, inputs)
        except oom_types:
            pass
        except RuntimeError as err:
            if "out of memory" not in str(err).lower():
                raise
        t = self.config.training
        suggest = max(self.dist.world_size, (t.batch_size // 2) // self.dist.world_size * self.dist.world_size)
        hint = "" if t.amp != "none" or self.device.type != "cuda" else ", or --training.amp bf16"
        raise TrainingError(Errors.E206.format(batch_size=t.batch_size, names=2 * t.batch_size,
                                               max_length=self.config.model.max_length, device=self.device,
                                               suggest=suggest, amp_hint=hint))

    # ---- evaluation ----------------------------------------------------------------------------
    def evaluate(self, step: int = -1) -> Dict[str, Any]:
        """Strict acc@k of the current weights on the dev set, overall and seen / unseen (see
        ``dev_eval.py``: a fixed candidate set, exact search); ``step``: the weights' step, under which
        the KB's name vectors are kept for the next hard-negative mining (``dev_candidates = "all"``)."""
        if self.dev is None:
            return {}
        started = time.perf_counter()
        t = self.config.training
        if self.dev_evaluator is None:
            self.dev_evaluator = DevEvaluator(self.dev, candidates=t.dev_candidates, sample_names=t.dev_sample_names,
                                              shortlist_k=t.dev_shortlist_k, gold_names=t.dev_gold_names, seed=t.seed)
        was_training = self.module.training
        enc = Encoder(self.module, self.tokenizer, pooling=self.pooling, max_length=self.config.model.max_length,
                      device=str(self.device), precision="fp32", cache_size=0)
        try:
            figures, names = self.dev_evaluator.evaluate(enc)
        finally:
            self.module.train(was_training)
        if self.hn_sampler is not None and self.dev.kb is self.kb and t.dev_candidates == "all":
            self._dev_name_vectors = (step, names)  # the next mining can reuse them
        self.dev_seconds += time.perf_counter() - started
        return figures

    # ---- the loop ------------------------------------------------------------------------------
    def _log(self, row: Dict[str, Any]) -> None:
        if self.dist.is_main:
            with open(self.output / METRICS_FILE, "a", encoding="utf8") as fh:
                fh.write(json.dumps(row) + "\n")

    def run(self, *, resume: bool = False, callback: Optional[Callable[[Dict[str, Any]], None]] = None) -> TrainResult:
        from tqdm import tqdm

        t = self.config.training
        if self.dist.is_main:
            ckpt.prepare_output(self.output, self.identity, resume=resume)
        barrier(self.dist)
        state = {"global_step": 0, "epoch": 0, "step_in_epoch": 0, "pairs_seen": 0, "train_seconds": 0.0,
                 "best_dev": None, "evals_without_gain": 0, "wall_seconds": 0.0, "mine_seconds": 0.0,
                 "dev_seconds": 0.0, "best_step": None, "best_figures": None, "last_figures": None}
        if resume:
            found = ckpt.list_checkpoints(self.output)
            if not found:
                raise TrainingError(Errors.E210.format(path=self.output))
            state.update(ckpt.load_checkpoint(found[-1][1], self.module, self.optimizer, self.scaler))
            logger.info("resumed from %s (step %d)", found[-1][1], state["global_step"])
            if self.dist.is_main:
                self._truncate_metrics(int(state["global_step"]))
        self._base = {k: float(state[k]) for k in ("wall_seconds", "mine_seconds", "dev_seconds")}
        total = self.total_steps()
        n_batches = self.batches.n_batches()
        sched = self.schedule
        if self.dist.is_main:
            logger.info("%d pairs, batch %d: %s", len(self.pairs.pairs), t.batch_size, sched.line())
        self.model.train()
        bar = tqdm(total=total, initial=min(state["global_step"], total), unit="step", desc="train",
                   disable=not self.dist.is_main, dynamic_ncols=True)
        history: List[Dict[str, Any]] = []
        last_loss: Optional[float] = None
        window: List[float] = []
        window_pairs, window_train = 0, 0.0
        first = True
        stop = False
        loader = self._step_loader(int(state["global_step"]), total)
        try:
            while state["global_step"] < total and not stop:
                if state["step_in_epoch"] >= n_batches:
                    state["epoch"] += 1
                    state["step_in_epoch"] = 0
                batch = self.batches.batch(state["epoch"], state["step_in_epoch"])
                started, mined_before = time.perf_counter(), self.mine_seconds
                inputs = None
                if loader is not None:
                    ids, lengths, inverse, labels = next(loader)
                    inputs = (cut_parts(ids, lengths, t.sub_batch), inverse, labels)
                if first:
                    loss = self._first_step(batch, state["global_step"], inputs)
                    first = False
                else:
                    loss = self.step(batch, state["global_step"], inputs)
                spent = time.perf_counter() - started - (self.mine_seconds - mined_before)  # training only
                state["train_seconds"] += spent
                state["global_step"] += 1
                state["step_in_epoch"] += 1
                state["pairs_seen"] += len(batch)
                last_loss = loss
                window.append(loss)
                window_pairs += len(batch)
                window_train += spent
                step = state["global_step"]
                if step % t.log_every == 0 or step == total:
                    self._clock(state)
                    row = {"step": step, "epoch": state["epoch"], "pairs_seen": state["pairs_seen"],
                           "loss": sum(window) / len(window), "lr": self._lr(step - 1),
                           "pairs_per_s": window_pairs / max(window_train, 1e-9),  # training time only
                           "train_seconds": state["train_seconds"], "mine_seconds": state["mine_seconds"],
                           "dev_seconds": state["dev_seconds"], "wall_seconds": state["wall_seconds"]}
                    self._log(row)
                    history.append(row)
                    bar.set_postfix(loss=f"{row['loss']:.4f}", train_pairs_s=f"{row['pairs_per_s']:.0f}")
                    window, window_pairs, window_train = [], 0, 0.0
                bar.update(1)
                final = step >= total or broadcast_flag(self._out_of_time(state), self.dist, self.device)
                if self.dev is not None and ((sched.eval_every and step % sched.eval_every == 0) or final):
                    stop = self._dev_eval(state, history, callback)  # the same on every rank
                stop = final = final or stop
                if step % sched.checkpoint_every == 0 or final:
                    self._save(state)
        finally:
            loader = None  # stops the loader's worker processes
            bar.close()
        model_path = self._finish(state)
        shutdown(self.dist)
        best = t.keep_best and (self.output / "best").is_dir() and state["best_step"] is not None
        result = TrainResult(
            output=self.output, model_path=model_path, steps=state["global_step"], pairs_seen=state["pairs_seen"],
            train_seconds=state["train_seconds"], final_loss=last_loss, history=history,
            best_dev=state.get("best_dev"), steps_per_epoch=sched.steps_per_epoch,
            wall_seconds=self._clock(state), mine_seconds=state["mine_seconds"], dev_seconds=state["dev_seconds"],
            model_from="best" if best else "last", model_step=int(state["best_step"] if best else state["global_step"]),
            model_dev=state["best_figures"] if best else state["last_figures"])
        if self.dist.is_main:
            write_summary(result, self.output)  # the CLI prints summary_lines(result)
        return result

    def _clock(self, state: Dict[str, Any]) -> float:
        """Bring the state's wall / mining / dev seconds up to now (earlier sessions included); the wall seconds."""
        state["wall_seconds"] = self._base["wall_seconds"] + time.perf_counter() - self._created
        state["mine_seconds"] = self._base["mine_seconds"] + self.mine_seconds
        state["dev_seconds"] = self._base["dev_seconds"] + self.dev_seconds
        return float(state["wall_seconds"])

    def _out_of_time(self, state: Dict[str, Any]) -> bool:
        """``training.max_minutes``: a cap on the run's wall time (every phase, earlier sessions included)."""
        minutes = self.config.training.max_minutes
        return bool(minutes > 0 and self._clock(state) >= minutes * 60)

    def _dev_eval(self, state: Dict[str, Any], history: List[Dict[str, Any]],
                  callback: Optional[Callable[[Dict[str, Any]], None]]) -> bool:
        """Evaluate (rank 0), log, keep the best model by ``selection_score``; True when patience ran out."""
        t = self.config.training
        stop = False
        if self.dist.is_main:
            figures = self.evaluate(step=int(state["global_step"]))
            self._clock(state)
            row = {"step": state["global_step"], "pairs_seen": state["pairs_seen"],
                   "train_seconds": state["train_seconds"], "dev_seconds": state["dev_seconds"],
                   "wall_seconds": state["wall_seconds"], **figures}
            self._log(row)
            history.append(row)
            logger.info("dev at step %d: %s (%.1f s)", state["global_step"], dev_line(figures), figures["dev_eval_seconds"])
            if callback is not None:
                callback(row)
            state["last_figures"] = figures
            score = selection_score(figures, t.select_unseen_weight, self.dev.ks[0])  # type: ignore[union-attr]
            if state["best_dev"] is None or score > state["best_dev"]:
                state["best_dev"], state["best_step"], state["best_figures"] = score, int(state["global_step"]), figures
                state["evals_without_gain"] = 0
                if t.keep_best:
                    ckpt.write_final_model(self.output, self.module, self.tokenizer, self.settings(),
                                           name="best")
            else:
                state["evals_without_gain"] += 1
                stop = t.patience > 0 and state["evals_without_gain"] >= t.patience
        return broadcast_flag(stop, self.dist, self.device)

    def _save(self, state: Dict[str, Any]) -> None:
        if self.dist.is_main:
            self._clock(state)
            ckpt.save_checkpoint(self.output, state["global_step"], self.module, self.tokenizer, self.optimizer,
                                 self.scaler, dict(state), self.settings(), keep=self.config.training.keep_checkpoints)
        barrier(self.dist)

    def _finish(self, state: Dict[str, Any]) -> Path:
        target = self.output / "model"
        if self.dist.is_main:
            best = self.output / "best"
            if self.config.training.keep_best and best.is_dir():
                ckpt.write_final_model(self.output, None, None, {}, source=best)
            else:
                ckpt.write_final_model(self.output, self.module, self.tokenizer, self.settings())
        barrier(self.dist)
        return target

    def _truncate_metrics(self, step: int) -> None:
        path = self.output / METRICS_FILE
        if not path.is_file():
            return
        rows = [line for line in path.read_text(encoding="utf8").splitlines() if line.strip()]
        kept = [line for line in rows if json.loads(line).get("step", 0) <= step]
        path.write_text("".join(line + "\n" for line in kept), encoding="utf8")


def train(config: TrainConfig, kb: Any, pairs: PairSet, base_model: str, output: PathLike, *,
          dev: Optional[DevSet] = None, resume: bool = False,
          callback: Optional[Callable[[Dict[str, Any]], None]] = None) -> TrainResult:
    """Train ``base_model`` on ``pairs`` (from ``kb``) into ``output``; see the module docstring."""
    return Trainer(config, kb, pairs, base_model, output, dev=dev).run(resume=resume, callback=callback)


__all__ = ["Trainer", "TrainResult", "DevSet", "train", "load_base_model"]
