"""Train a cross-encoder re-ranker (``spacy-sapbert train-reranker``).

Each step takes ``batch_mentions`` groups (:mod:`.examples`), scores every (mention, name) pair of them and
minimises the softmax cross-entropy of the gold name within its group (the listwise loss of ArboEL / xMEN's
re-rankers). AdamW with linear warm-up and decay; one seed decides the groups' order and dropout.

Distillation (``teacher`` and ``settings.distill`` > 0): a trained re-ranker (the teacher, typically a deeper one
for the same KB and name encoder) scores every group's pairs once; the loss becomes
``(1 - distill) * cross-entropy + distill * KL(teacher's softmax over the group || the student's)``, so a shallow
re-ranker (``layers``) learns the teacher's whole ordering of each group, not only its gold name.

A run folder ``OUTPUT``::

    OUTPUT/run.json                  what defines the run (settings, base model, KB checksum, encoder fingerprint)
    OUTPUT/examples.jsonl, .json     the training groups (written once)
    OUTPUT/checkpoints/step-000200/  weights + optimizer.pt + scheduler.pt + state.json (tensors only)
    OUTPUT/teacher_logits.npy        with a teacher: its logit of every group's pairs (written once)
    OUTPUT/metrics.jsonl             loss per logged step
    OUTPUT/model/                    the trained re-ranker (+ its int8 ONNX graph): the linker's ``reranker_path``

``resume=True`` continues from the last checkpoint with the same groups, order and settings (E806 for a run
folder made with other settings; E807 for a finished or existing run without ``resume``).
"""
from __future__ import annotations

import json
import math
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..errors import ConfigError, Errors
from ..base.util import PathLike, atomic_dir, atomic_write, ensure_path, get_logger
from .apply import check_compatible
from .examples import (Group, candidate_recall, gold_mentions, make_groups, pseudo_mentions, read_groups,
                       variant_mentions, write_groups)
from .model import DEFAULT_MAX_LENGTH, CrossEncoder, base_config, export_int8, read_meta

logger = get_logger("rerank.train")

RUN_FILE = "run.json"
TEACHER_FILE = "teacher_logits.npy"
_STEP_DIR = re.compile(r"^step-(\d{6})$")


@dataclass(frozen=True)
class RerankerSettings:
    """What a re-ranker run is made of (``run.json``); every field is checked by :meth:`check`."""
    k: int = 16  # candidates per group: the gold one + k - 1 of the bi-encoder's best others
    pseudo_mentions: int = 0  # KB synonyms used as extra mentions (0: none)
    mention_like: int = 0  # mention-like variants of each mention and pseudo-mention, extra groups (0: none)
    epochs: int = 1
    batch_mentions: int = 8
    lr: float = 3e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    max_length: int = DEFAULT_MAX_LENGTH
    layers: int = 0  # transformer layers kept from the base, its first ones (0: all; fewer: a faster re-ranker)
    seed: int = 0
    checkpoint_every: int = 200
    keep_checkpoints: int = 2
    log_every: int = 20
    max_steps: int = 0  # 0: epochs decide
    distill: float = 0.0  # weight of a teacher re-ranker's soft targets in the loss (0: none; needs train_reranker's teacher)

    def check(self) -> "RerankerSettings":
        bounds = {"k": (2, 1024), "pseudo_mentions": (0, 10_000_000), "mention_like": (0, 100), "epochs": (1, 1000),
                  "batch_mentions": (1, 4096), "max_length": (8, 512), "layers": (0, 1000),
                  "checkpoint_every": (1, 10 ** 9), "keep_checkpoints": (1, 1000),
                  "log_every": (1, 10 ** 9), "max_steps": (0, 10 ** 9), "seed": (0, 2 ** 32 - 1)}
        for name, (low, high) in bounds.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(Errors.E808.format(name=name, value=value, allowed=f"an integer from {low} to {high}"))
        for name, (low, high) in {"lr": (0.0, 1.0), "warmup": (0.0, 1.0), "weight_decay": (0.0, 1.0),
                                  "distill": (0.0, 1.0)}.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low <= value <= high or (name == "lr" and value == 0):
                raise ConfigError(Errors.E808.format(name=name, value=value, allowed=f"a number in ({low}, {high}]"
                                                     if name == "lr" else f"a number in [{low}, {high}]"))
        return self


# settings that may differ between an interrupted run and its resumption
_RESUMABLE = {"checkpoint_every", "keep_checkpoints", "log_every", "max_steps"}


def _identity(settings: RerankerSettings, base: str, kb: Any, encoder: Any,
              teacher: Optional[str] = None) -> Dict[str, Any]:
    return {"settings": asdict(settings), "base": str(base), "kb_checksum": kb.checksum,
            "encoder_fingerprint": encoder.fingerprint, "teacher": teacher}


def teacher_checksum(meta: Dict[str, Any]) -> str:
    """What identifies a teacher re-ranker: the sha256 of its recorded model files' records (sizes and hashes),
    the same wherever its folder lies."""
    import hashlib

    return hashlib.sha256(json.dumps(meta["files"], sort_keys=True).encode("utf8")).hexdigest()


def _check_teacher(teacher: Optional[PathLike], settings: RerankerSettings, kb: Any, encoder: Any) -> Optional[str]:
    """The teacher's checksum (None without one). E816 for a teacher without a distill weight or the reverse;
    E801 / E802 for a folder that is not a re-ranker or is damaged; E811 for one of another KB or name encoder."""
    if (teacher is None) != (settings.distill == 0):
        what = (f"distill = {settings.distill:g} but no teacher was given" if teacher is None
                else f"a teacher ('{teacher}') but distill = 0")
        raise ConfigError(Errors.E816.format(what=what))
    if teacher is None:
        return None
    meta = read_meta(teacher)
    check_compatible(meta, kb_checksum=kb.checksum, encoder_fingerprint=encoder.fingerprint, path=teacher,
                     owner="this run's")
    return teacher_checksum(meta)


def _check_run(output: Path, identity: Dict[str, Any], resume: bool) -> None:
    path = output / RUN_FILE
    if not path.is_file():
        # someone's folder: its model/ would be replaced (what a kill during the first write of run.json leaves,
        # atomic_write's hidden temporary file, is not someone's)
        if output.is_dir() and any(not (p.name.startswith(f".{RUN_FILE}.") and p.name.endswith(".tmp"))
                                   for p in output.iterdir()):
            raise ConfigError(Errors.E806.format(path=output, field=RUN_FILE, theirs="missing (the folder is not empty)",
                                                 ours=RUN_FILE))
        return
    if not resume:
        raise ConfigError(Errors.E807.format(path=output))
    try:
        recorded = json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError) as err:
        raise ConfigError(Errors.E806.format(path=output, field=RUN_FILE, theirs=f"unreadable ({err})", ours="")) from None
    for key in ("base", "kb_checksum", "encoder_fingerprint", "teacher"):  # no "teacher": a run of before, none
        if recorded.get(key) != identity[key]:
            raise ConfigError(Errors.E806.format(path=output, field=key, theirs=recorded.get(key), ours=identity[key]))
    # a setting added since the run started reads as its default (a run of before mention_like resumes)
    theirs = {**asdict(RerankerSettings()), **dict(recorded.get("settings") or {})}
    for key, ours in identity["settings"].items():
        if key not in _RESUMABLE and theirs.get(key) != ours:
            raise ConfigError(Errors.E806.format(path=output, field=f"settings.{key}", theirs=theirs.get(key), ours=ours))


def _checkpoints(output: Path) -> List[Path]:
    folder = output / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and _STEP_DIR.match(p.name))


def _save_checkpoint(output: Path, step: int, model: CrossEncoder, optimizer: Any, scheduler: Any,
                     settings: RerankerSettings) -> None:
    import torch  # lazy: torch

    with atomic_dir(output / "checkpoints" / f"step-{step:06d}", overwrite=True) as tmp:
        model.model.save_pretrained(tmp, safe_serialization=True)
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        (tmp / "state.json").write_text(json.dumps({"step": step}), encoding="utf8")
    for old in _checkpoints(output)[: -settings.keep_checkpoints]:
        shutil.rmtree(old, ignore_errors=True)


def _restore(checkpoint: Path, model: CrossEncoder, optimizer: Any, scheduler: Any) -> int:
    import torch  # lazy: torch
    from safetensors.torch import load_file  # lazy: safetensors

    model.model.load_state_dict(load_file(str(checkpoint / "model.safetensors"), device=str(model.device)))
    optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=True))
    return int(json.loads((checkpoint / "state.json").read_text(encoding="utf8"))["step"])


def _schedule(groups: int, settings: RerankerSettings) -> List[List[int]]:
    """Group indices of every step, in order: a seeded permutation per epoch, cut into batches."""
    import numpy

    steps: List[List[int]] = []
    for epoch in range(settings.epochs):
        order = numpy.random.default_rng(settings.seed + epoch).permutation(groups).tolist()
        steps += [order[i: i + settings.batch_mentions] for i in range(0, groups, settings.batch_mentions)]
    return steps[: settings.max_steps] if settings.max_steps else steps


def group_loss(model: CrossEncoder, groups: Sequence[Group], targets: Optional[Sequence[Any]] = None,
               distill: float = 0.0) -> Any:
    """Mean over ``groups`` of the cross-entropy of the gold name (index 0) among the group's names; with a
    teacher's logits of each group's pairs (``targets``) and ``distill`` > 0, ``(1 - distill)`` x that plus
    ``distill`` x the KL divergence of the student's softmax over the group from the teacher's."""
    import torch  # lazy: torch

    mentions = [g.mention for g in groups for _ in g.names]
    names = [n for g in groups for n in g.names]
    logits = model.logits(mentions, names)
    parts = torch.split(logits, [len(g.names) for g in groups])
    losses = []
    for i, p in enumerate(parts):
        log_p = torch.log_softmax(p.float(), dim=0)
        loss = -log_p[0]
        if distill and targets is not None:
            log_q = torch.log_softmax(torch.as_tensor(targets[i], dtype=torch.float32, device=log_p.device), dim=0)
            loss = (1 - distill) * loss + distill * torch.sum(log_q.exp() * (log_q - log_p))
        losses.append(loss)
    return torch.stack(losses).mean()


def teacher_logits(output: Path, groups: Sequence[Group], teacher: PathLike, *, device: str = "cpu",
                   show_progress: bool = True) -> List[Any]:
    """The teacher's logits of each group's pairs (float32, one array per group): read from the run folder's
    ``teacher_logits.npy`` when it holds one finite value per pair of ``groups``, else scored (PyTorch, one
    batch per group, the teacher's files fully checked) and written there atomically."""
    import numpy
    from tqdm import tqdm

    sizes = [len(g.names) for g in groups]
    path = output / TEACHER_FILE
    flat = None
    if path.is_file():
        try:
            flat = numpy.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            logger.warning("%s is unreadable (%s): scoring the groups with the teacher again", path, err)
        if flat is not None and (flat.dtype != numpy.float32 or flat.shape != (sum(sizes),)
                                 or not numpy.isfinite(flat).all()):
            logger.warning("%s does not hold one logit per pair of these groups: scoring them again", path)
            flat = None
    if flat is None:
        model = CrossEncoder.from_disk(teacher, device=device, full_check=True)
        pairs = [(g.mention, list(g.names)) for g in groups]
        chunks: List[Any] = []
        with tqdm(total=len(pairs), desc="teacher", unit="group", disable=not show_progress) as bar:
            for start in range(0, len(pairs), 256):
                chunk = pairs[start:start + 256]
                chunks += model.score_groups(chunk, batch_size=max(sizes, default=1))
                bar.update(len(chunk))
        flat = numpy.concatenate(chunks).astype(numpy.float32) if chunks else numpy.zeros(0, numpy.float32)
        with atomic_write(path, "wb") as fh:
            numpy.save(fh, flat, allow_pickle=False)
    return numpy.split(flat, numpy.cumsum(sizes)[:-1]) if sizes else []


def train_reranker(docs: Sequence[Any], kb: Any, index: Any, encoder: Any, output: PathLike, *,
                   base: Optional[str] = None, settings: Optional[RerankerSettings] = None, resume: bool = False,
                   device: str = "auto", onnx: bool = True, show_progress: bool = True,
                   teacher: Optional[PathLike] = None) -> Dict[str, Any]:
    """Train a re-ranker for the bi-encoder (``encoder`` + ``index`` over ``kb``) on the annotated mentions of
    ``docs`` (never a test set), ``settings.pseudo_mentions`` KB synonyms and up to ``settings.mention_like``
    mention-like variants of each (:func:`~.examples.variant_mentions`); starts from ``base`` (default: the
    encoder's own folder; only its first ``settings.layers`` transformer layers when that is not 0); with a
    ``teacher`` re-ranker folder (same KB and name encoder) and ``settings.distill`` > 0, distilled from it
    (:func:`group_loss`). Returns a summary (groups, steps, final loss, candidate recall, model folder)."""
    import torch  # lazy: torch
    from transformers import get_linear_schedule_with_warmup  # lazy: transformers

    settings = (settings or RerankerSettings()).check()
    output = ensure_path(output)
    base = str(base or getattr(encoder, "name", "") or "")
    identity = _identity(settings, base, kb, encoder, _check_teacher(teacher, settings, kb, encoder))
    _check_run(output, identity, resume)
    index.check_compatible(encoder)
    base_config(base, settings.layers)  # a base it cannot start from: refused before the groups are made
    output.mkdir(parents=True, exist_ok=True)
    with atomic_write(output / RUN_FILE) as fh:
        json.dump(identity, fh, indent=2, sort_keys=True)
    if (output / "examples.json").is_file():
        groups, _ = read_groups(output)
    else:
        annotated, counts = gold_mentions(docs, kb)
        logger.info("annotated mentions: %s", counts)
        pseudo = pseudo_mentions(kb, settings.pseudo_mentions, settings.seed)
        variants = variant_mentions(annotated + [(n, c) for n, c, _ in pseudo], kb, settings.mention_like,
                                    settings.seed)
        groups = make_groups(annotated, pseudo, kb, index, encoder, k=settings.k, variants=variants,
                             show_progress=show_progress)
        write_groups(output, groups, {"k": settings.k, "pseudo_mentions": settings.pseudo_mentions,
                                      "mention_like": settings.mention_like, "annotated": len(annotated),
                                      "variants": len(variants), "counts": counts})
    targets = teacher_logits(output, groups, teacher, device=device, show_progress=show_progress) \
        if teacher is not None else None
    torch.manual_seed(settings.seed)
    model = CrossEncoder.start(base, max_length=settings.max_length, layers=settings.layers, device=device)
    steps = _schedule(len(groups), settings)
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    params = [{"params": [p for n, p in model.model.named_parameters() if not any(s in n for s in no_decay)],
               "weight_decay": settings.weight_decay},
              {"params": [p for n, p in model.model.named_parameters() if any(s in n for s in no_decay)],
               "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(params, lr=settings.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(settings.warmup * len(steps)), len(steps))
    done = 0
    if resume and _checkpoints(output):
        done = _restore(_checkpoints(output)[-1], model, optimizer, scheduler)
        logger.info("resumed at step %d of %d", done, len(steps))
    from tqdm import tqdm

    model.model.train()
    last_loss: Optional[float] = None
    started = time.perf_counter()
    bar = tqdm(total=len(steps), initial=done, desc="re-ranker", unit="step", disable=not show_progress)
    with open(output / "metrics.jsonl", "a", encoding="utf8") as log:
        for step in range(done, len(steps)):
            torch.manual_seed(settings.seed * 1_000_003 + step)  # dropout: the same after a resume
            loss = group_loss(model, [groups[i] for i in steps[step]],
                              [targets[i] for i in steps[step]] if targets is not None else None, settings.distill)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            last_loss = float(loss.detach())
            bar.update(1)
            if (step + 1) % settings.log_every == 0 or step + 1 == len(steps):
                log.write(json.dumps({"step": step + 1, "loss": round(last_loss, 5),
                                      "seconds": round(time.perf_counter() - started, 1)}) + "\n")
                log.flush()
            if (step + 1) % settings.checkpoint_every == 0 and step + 1 < len(steps):
                _save_checkpoint(output, step + 1, model, optimizer, scheduler, settings)
    bar.close()
    model.model.eval()
    meta = {"base": base, "kb_checksum": kb.checksum, "encoder_fingerprint": encoder.fingerprint, "k": settings.k,
            "trained": {**asdict(settings), "steps": len(steps), "groups": len(groups),
                        **({"teacher": identity["teacher"]} if teacher is not None else {})}}
    with atomic_dir(output / "model", overwrite=True) as tmp:
        model.to_disk(tmp, meta)
        if onnx:
            export_int8(model, tmp)
    shutil.rmtree(output / "checkpoints", ignore_errors=True)
    return {"groups": len(groups), "pseudo_groups": sum(g.pseudo for g in groups),
            "variant_groups": sum(g.variant for g in groups), "steps": len(steps),
            "final_loss": last_loss, "candidate_recall": candidate_recall(groups), "model": str(output / "model"),
            "seconds": round(time.perf_counter() - started, 1)}


__all__ = ["RerankerSettings", "train_reranker", "group_loss", "teacher_logits", "teacher_checksum", "RUN_FILE",
           "TEACHER_FILE"]
