"""Train the context encoder with the project's trainer (``spacy_sapbert.training``).

The pairs (``train_pairs.py``) put a mention in its context on one side and a name of its concept on
the other; both sides go through the same encoder in one batch, and the trainer's loss (multi-similarity
with its miner, or InfoNCE) pulls every context towards its concept's names and the other contexts of
the concept, away from other concepts. The only hook needed is the token source: :class:`ContextTokens`
tokenises KB names as names (``name_max_length``) and packed contexts as
``[CLS] left <ENT> mention </ENT> right [SEP]`` (``model.max_length``, the context encoder's), and
:class:`ContextTrainer` (a :class:`~spacy_sapbert.training.Trainer`) uses it.

A run folder ``OUTPUT`` holds ``base/`` (the starting model with the ``<ENT>``/``</ENT>`` markers
added, see :func:`~spacy_sapbert.context.context_encoder.add_markers`) and ``run/`` (the trainer's folder:
``pairs/``, checkpoints, ``metrics.jsonl``, ``model/``). ``resume=True`` continues ``run/`` from its
last checkpoint. ``OUTPUT/run/model`` loads with :meth:`ContextEncoder.from_disk
<spacy_sapbert.context.context_encoder.ContextEncoder.from_disk>` and ``build-prototypes --model``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..base.defaults import MAX_LENGTH
from ..base.util import PathLike, atomic_dir, atomic_write, ensure_path, get_logger
from ..errors import ConfigError, Errors
from ..kb import KnowledgeBase
from ..training import PairSet, TrainConfig, Trainer, TrainResult, load_config
from .build import build_prototypes
from .context_encoder import DEFAULT_CONTEXT_LENGTH, ContextEncoder, context_token_rows
from .train_pairs import META_FILE, check_context_pairs, make_context_pairs, unpack_context
from .tune import tune_on_documents

logger = get_logger("context.train")

# what differs from the trainer's pretraining defaults (overrides and a config file win)
CONTEXT_DEFAULTS: Dict[str, Any] = {
    "model.pooling": "mean",
    "model.max_length": DEFAULT_CONTEXT_LENGTH,
    "training.batch_size": 64,
    "training.epochs": 1,
    "training.checkpoint_every": 100,
    "training.log_every": 10,
    "training.sub_batch": 64,
}


def context_config(path: Optional[PathLike] = None, overrides: Optional[Mapping[str, Any]] = None) -> TrainConfig:
    """The training config of a context run: a config file, or the built-in defaults with
    :data:`CONTEXT_DEFAULTS` under ``overrides`` (spaCy-style keys, ``{"training.lr": 3e-5}``)."""
    if path is not None:
        return load_config(path, overrides)
    return load_config(None, {**CONTEXT_DEFAULTS, **dict(overrides or {})})


def check_context_config(config: TrainConfig) -> None:
    """Refuse the trainer settings that assume names on both sides (E617)."""
    t = config.training
    bad = [("training.hard_negatives", t.hard_negatives, t.hard_negatives != 0,
            "dictionary hard negatives are mined for name anchors"),
           ("training.pretokenize", t.pretokenize, t.pretokenize, "the token table holds names, not contexts"),
           ("training.loader_workers", t.loader_workers, t.loader_workers != 0,
            "the context token source runs in the training process"),
           ("training.batching", t.batching, t.batching != "random", "'similar' batching sorts by name words"),
           ("model.max_length", config.model.max_length, config.model.max_length < 6,
            "a context needs [CLS], [SEP], the two markers and a word piece")]
    for setting, value, wrong, why in bad:
        if wrong:
            raise ConfigError(Errors.E617.format(setting=setting, value=value, why=why))


class ContextTokens:
    """The trainer's token source for a context pair set (``flat(text_ids)`` as in
    ``training.loader``): names tokenised with ``name_max_length``, packed contexts with markers
    within ``max_length``; context rows are cached (they never change)."""

    def __init__(self, pairs: PairSet, kb: Any, tokenizer: Any, max_length: int, name_max_length: int) -> None:
        check_context_pairs(pairs)
        self.pairs, self.kb, self.tokenizer = pairs, kb, tokenizer
        self.max_length, self.name_max_length = max_length, name_max_length
        self.n_names = int(pairs.meta["n_kb_names"])
        self._contexts: Dict[int, List[int]] = {}

    def rows(self, text_ids: Sequence[int]) -> List[List[int]]:
        """Token ids per text id, special tokens (and markers) included."""
        ids = [int(i) for i in text_ids]
        names = [i for i in ids if i < self.n_names]
        todo = sorted({i for i in ids if i >= self.n_names and i not in self._contexts})
        if todo:
            mentions = [unpack_context(self.pairs.texts[i - self.n_names]) for i in todo]
            self._contexts.update(zip(todo, context_token_rows(self.tokenizer, mentions, self.max_length)))
        named: Dict[int, List[int]] = {}
        if names:
            encoded = self.tokenizer([self.kb.names[i] for i in names], max_length=self.name_max_length,
                                     truncation=True)["input_ids"]
            named = dict(zip(names, encoded))
        return [named[i] if i < self.n_names else self._contexts[i] for i in ids]

    def flat(self, text_ids: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
        rows = self.rows(text_ids)
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        return np.fromiter((t for r in rows for t in r), dtype=np.int32, count=int(lengths.sum())), lengths


class ContextTrainer(Trainer):
    """The project's :class:`~spacy_sapbert.training.Trainer` on a context pair set: the same loop,
    loss, miner, checkpoints and resume; only the token source differs (and no name dev set: the
    context encoder is picked on dev by re-ranking, see :func:`~spacy_sapbert.context.tune`)."""

    def __init__(self, config: TrainConfig, kb: Any, pairs: PairSet, base_model: str, output: PathLike, *,
                 name_max_length: int = MAX_LENGTH) -> None:
        check_context_config(config)
        check_context_pairs(pairs)
        super().__init__(config, kb, pairs, base_model, output, dev=None)
        self.tokens = ContextTokens(pairs, kb, self.tokenizer, config.model.max_length, name_max_length)


def prepare_base(model: str, folder: PathLike, *, pooling: str, max_length: int) -> Path:
    """``folder``: ``model`` with the context markers added (written once, atomically; reused)."""
    folder = ensure_path(folder)
    if not (folder / "config.json").is_file():
        encoder = ContextEncoder.load(model, pooling=pooling, max_length=max_length, device="cpu")
        with atomic_dir(folder, overwrite=True) as tmp:
            encoder.to_disk(tmp)
    return folder


RUN_ENTRIES = ("base", "run", "prototypes", "dev_weights.json")  # what train-context writes into its OUTPUT


def check_run_folder(output: Path, run: Path) -> None:
    """E208 when ``output`` holds no run yet (no ``run/run.json``) but something this command does not write (a
    folder of the user's: its ``base/`` would be taken as the starting model, its ``prototypes/`` replaced);
    what an interrupted start leaves (``base/``, ``run/pairs``, hidden temporary folders) is allowed."""
    if (run / "run.json").is_file() or not output.is_dir():
        return
    foreign = sorted(p.name for p in output.iterdir() if p.name not in RUN_ENTRIES and not p.name.startswith("."))
    if foreign:
        raise ConfigError(Errors.E208.format(path=output, field="content", theirs=f"{foreign[0]} (not a train-context "
                                             "run: no run/run.json)", ours="an empty folder or a train-context run"))


def train_context(docs: Sequence[Any], kb: Any, base_model: str, output: PathLike, *,
                  config: Optional[TrainConfig] = None, source: str = "both", names_per_mention: int = 1,
                  contexts_per_mention: int = 0, mask_probability: float = 0.0, min_chars: int = 3,
                  name_max_length: int = MAX_LENGTH, resume: bool = False, what: str = "the documents") -> TrainResult:
    """Train a context encoder from ``base_model`` (the name encoder, typically) on pairs made from
    ``docs`` (see ``train_pairs.py``; ``source`` supervised, self or both; ``contexts_per_mention``
    other contexts of the same concept as positives besides ``names_per_mention`` names) into
    ``output`` (module doc); the model is ``result.model_path``. ``config`` defaults to
    :func:`context_config`."""
    config = config or context_config()
    check_context_config(config)
    output = ensure_path(output)
    run = output / "run"
    if (run / "run.json").is_file() and not resume:
        raise ConfigError(Errors.E209.format(path=run))
    check_run_folder(output, run)
    base = prepare_base(base_model, output / "base", pooling=config.model.pooling,
                        max_length=config.model.max_length)
    folder = run / "pairs"
    if not (folder / META_FILE).is_file():
        from transformers import AutoTokenizer  # lazy: transformers

        mask_token = AutoTokenizer.from_pretrained(str(base)).mask_token or "[MASK]"
        make_context_pairs(docs, kb, folder, source=source, names_per_mention=names_per_mention,
                           contexts_per_mention=contexts_per_mention, mask_probability=mask_probability,
                           mask_token=mask_token, min_chars=min_chars, seed=config.pairs.seed, what=what)
    pairs = PairSet(folder)
    pairs.check_kb(kb)
    wanted = {"source": source, "names_per_mention": names_per_mention, "contexts_per_mention": contexts_per_mention,
              "mask_probability": mask_probability, "min_chars": min_chars, "seed": config.pairs.seed}
    recorded = {"contexts_per_mention": 0, **pairs.meta}  # pair sets written before the option had none
    for key, value in wanted.items():
        if recorded.get(key) != value:
            raise ConfigError(Errors.E208.format(path=run, field=f"pairs.{key}", theirs=recorded.get(key),
                                                 ours=value))
    logger.info("context pairs: %s", {k: pairs.meta[k] for k in ("n_pairs", "n_mentions", "n_concepts", "masked")})
    trainer = ContextTrainer(config, kb, pairs, str(base), run, name_max_length=name_max_length)
    return trainer.run(resume=resume)


def tune_trained(docs: Sequence[Any], kb_dir: PathLike, model_path: PathLike, name_model: str, output: PathLike,
                 dev_docs: Sequence[Any], *, name_pooling: str = "mean", name_max_length: int = MAX_LENGTH, k: int = 10,
                 step: float = 0.1, device: str = "auto") -> Dict[str, Any]:
    """Dev picks the weights for a trained context encoder: prototypes of ``docs`` (their annotated
    mentions) with the encoder at ``model_path`` go to ``OUTPUT/prototypes``, the weights are tuned on
    ``dev_docs`` against the name encoder ``name_model`` (``tune-context``'s grid), and the summary
    (name-only and best dev strict acc@1, best weights) is written to ``OUTPUT/dev_weights.json``."""
    import json

    output = ensure_path(output)
    kb = KnowledgeBase.from_disk(kb_dir)
    store = build_prototypes(docs, kb, ContextEncoder.from_disk(model_path, device=device))
    store.to_disk(output / "prototypes", overwrite=True)
    best, table, n = tune_on_documents(dev_docs, kb_dir, name_model, output / "prototypes", pooling=name_pooling,
                                       max_length=name_max_length, k=k, step=step, device=device)
    summary = {"dev_mentions": n, "best": best.to_dict(), "best_acc@1": max(r["acc@1"] for r in table),
               "name_only_acc@1": next(r["acc@1"] for r in table
                                       if r["context_weight"] == 0 and r["definition_weight"] == 0),
               "prototypes": str(output / "prototypes"), "grid": table}
    with atomic_write(output / "dev_weights.json") as fh:
        json.dump(summary, fh, indent=2)
    return summary


__all__ = ["CONTEXT_DEFAULTS", "context_config", "check_context_config", "ContextTokens", "ContextTrainer",
           "prepare_base", "train_context", "tune_trained"]
