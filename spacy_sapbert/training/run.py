"""``pretrain`` and ``finetune``: what the CLI commands call.

Both write their pair set to ``OUTPUT/pairs`` (rank 0 under DDP, the others wait), reuse it on
``resume``, then run the :class:`~spacy_sapbert.training.trainer.Trainer`.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

from ..base.util import PathLike, ensure_path, get_logger, resolve_device
from ..errors import ConfigError, Errors
from ..kb import KnowledgeBase
from . import checkpoint as ckpt
from .config import TrainConfig
from .distributed import barrier, init_distributed
from .mention_like import check_record, finetune_mentions, pretrain_pairs
from .pairs import META_FILE, PairSet, write_kb_pairs, write_task_pairs
from .trainer import DevSet, Trainer, TrainResult, check_precision

logger = get_logger("training.run")

KBLike = Union[Any, PathLike]


def _load_kb(kb: KBLike) -> Any:
    if isinstance(kb, (str, Path)):
        return KnowledgeBase.from_disk(kb)
    return kb


def _precheck(output: Path, resume: bool, config: TrainConfig) -> None:
    """Refuse early (before writing pairs): AMP off CUDA, ``output`` holding a run without resume."""
    check_precision(config.training.amp, resolve_device(config.training.device))
    if (output / ckpt.RUN_FILE).is_file() and not resume:
        raise ConfigError(Errors.E209.format(path=output))


def _pairs(output: Path, config: TrainConfig, kb: Any, write: Any) -> PairSet:
    folder = output / "pairs"
    info = init_distributed(config.training.distributed, resolve_device(config.training.device).type)
    if info.is_main and not (folder / META_FILE).is_file():
        write(folder)
    barrier(info)
    pairs = PairSet(folder)
    pairs.check_kb(kb)
    wanted = {"max_pairs_per_concept": config.pairs.max_pairs_per_concept, "seed": config.pairs.seed}
    if pairs.meta.get("kind") == "kb":
        wanted.update(cross_lingual=config.pairs.cross_lingual, languages=config.pairs.languages)
    for key, value in wanted.items():
        if pairs.meta.get(key, False if key == "cross_lingual" else None) != value:
            raise ConfigError(Errors.E208.format(path=output, field=f"pairs.{key}", theirs=pairs.meta.get(key), ours=value))
    theirs, ours = check_record(pairs.meta, config.pairs.mention_like)
    if theirs != ours:
        raise ConfigError(Errors.E208.format(path=output, field="pairs.mention_like", theirs=theirs, ours=ours))
    return pairs


def _kb_pairs(kb: Any, folder: Path, config: TrainConfig) -> PairSet:
    """The KB's synonym pairs and, with ``[pairs.mention_like]`` on, the mention-like pairs after them."""
    extra, record = pretrain_pairs(kb, config.pairs.mention_like, config.pairs.seed)
    return write_kb_pairs(
        kb, folder, max_pairs_per_concept=config.pairs.max_pairs_per_concept, seed=config.pairs.seed,
        show_progress=True, cross_lingual=config.pairs.cross_lingual, languages=config.pairs.languages,
        extra=extra, mention_like=record,
    )


def _task_pairs(kb: Any, mentions: List[Any], folder: Path, config: TrainConfig) -> PairSet:
    """The task pairs of ``mentions`` and, with ``[pairs.mention_like]`` on, of their variants."""
    mentions, record = finetune_mentions(kb, mentions, config.pairs.mention_like, config.pairs.seed)
    return write_task_pairs(kb, mentions, folder, max_pairs_per_mention=config.pairs.max_pairs_per_concept,
                            seed=config.pairs.seed, mention_like=record)


def pretrain(
    kb: KBLike,
    base_model: str,
    output: PathLike,
    *,
    config: Optional[TrainConfig] = None,
    dev: Optional[DevSet] = None,
    resume: bool = False,
) -> TrainResult:
    """Self-alignment pretraining of ``base_model`` on the synonym pairs of ``kb`` (a
    ``KnowledgeBase`` or its folder). The model lands in ``OUTPUT/model``."""
    config = config or TrainConfig()
    output = ensure_path(output)
    _precheck(output, resume, config)
    kb = _load_kb(kb)
    pairs = _pairs(output, config, kb, lambda folder: _kb_pairs(kb, folder, config))
    return Trainer(config, kb, pairs, base_model, output, dev=dev).run(resume=resume)


def finetune(
    kb: KBLike,
    mentions: Iterable[Any],
    base_model: str,
    output: PathLike,
    *,
    config: Optional[TrainConfig] = None,
    dev: Optional[DevSet] = None,
    resume: bool = False,
) -> TrainResult:
    """Fine-tune ``base_model`` (e.g. a self-aligned model) on task data: each training mention
    (``Mention`` or ``(text, ids)``) paired with the dictionary names of its gold concepts.
    ``pairs.max_pairs_per_concept`` caps the pairs of one mention. The dev figures split strict acc@1
    into seen / unseen mentions: seen = a name of the dev KB or one of ``mentions`` (normalised)."""
    config = config or TrainConfig()
    output = ensure_path(output)
    _precheck(output, resume, config)
    kb = _load_kb(kb)
    mentions = list(mentions)
    if dev is not None and not dev.train_texts:  # the seen / unseen split of the dev figures
        dev = dataclasses.replace(dev, train_texts=[m[0] if isinstance(m, tuple) else m.text for m in mentions])
    pairs = _pairs(output, config, kb, lambda folder: _task_pairs(kb, mentions, folder, config))
    return Trainer(config, kb, pairs, base_model, output, dev=dev).run(resume=resume)


def dev_set(kb: Any, mentions: Sequence[Any], ks: Tuple[int, ...] = (1, 5), *,
            train_texts: Sequence[str] = ()) -> DevSet:
    """A :class:`DevSet` from ``Mention`` objects or ``(text, ids)`` tuples (mentions without ids dropped);
    ``train_texts``: training mentions for the seen / unseen split (``finetune`` fills them in)."""
    items = []
    for m in mentions:
        text, ids = (m if isinstance(m, tuple) else (m.text, m.ids))
        if ids:
            items.append((text, tuple(ids)))
    return DevSet(kb=kb, mentions=items, ks=ks, train_texts=tuple(train_texts))


__all__ = ["pretrain", "finetune", "dev_set"]
