"""Training settings: one dataclass per config section, read from a confection (spaCy-style) file.

``configs/pretrain.cfg`` and ``configs/finetune.cfg`` hold the defaults; command-line overrides use
spaCy's syntax (``--training.batch_size 64``, ``--loss.name infonce``).

Configs are versioned (``[meta] version``; a file without it is version 1). Version 2 changed:
``training.max_minutes`` caps the run's wall time (version 1: training time only; a version-1 file
that sets it loads with warning W761), ``model.pooling = "auto"`` (the base model folder's pooling,
else cls), schedules in epochs (``eval_every = "1 epoch"``), the dev-evaluation settings
(``dev_candidates``, ``dev_sample_names``, ``dev_gold_names``, ``dev_shortlist_k``) and ``select_unseen_weight``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from ..base.defaults import MAX_LENGTH
from ..base.util import PathLike
from ..errors import ConfigError, Errors, MissingInputError, Warnings
from ..kb.languages import language_codes
from ..kb.variants import DEFAULT_GENERIC_HEADS, GENERATORS
from .dev_eval import DEV_CANDIDATES
from .schedule import parse_every

AMP_CHOICES = ("none", "bf16", "fp16")
POOLING_CHOICES = ("auto", "cls", "mean")
CONFIG_VERSION = 2
BATCHING_CHOICES = ("random", "similar")
ADAPTER_CHOICES = ("none", "lora")


@dataclass
class MetaSettings:
    version: int = CONFIG_VERSION  # a file without [meta] is version 1


@dataclass
class ModelSettings:
    pooling: str = "auto"  # auto: what the base model folder declares (sentence-transformers, sapbert_encoder.json), else cls
    max_length: int = MAX_LENGTH


MENTION_LIKE_GENERATORS = tuple(GENERATORS)  # "word_order", "number", "generic_head", "punctuation", "typo"


@dataclass
class MentionLikeSettings:
    """``[pairs.mention_like]``: pairs of a name (or training mention) and a variant of it that looks like
    running text (:mod:`~spacy_sapbert.kb.variants`), and of abbreviations mined from raw text."""

    enabled: bool = False
    generators: List[str] = field(default_factory=lambda: list(MENTION_LIKE_GENERATORS))
    max_per_name: int = 2  # variants kept per name (seeded sample)
    typo_rate: float = 0.1  # share of the names that get a typo variant
    generic_heads: List[str] = field(default_factory=lambda: list(DEFAULT_GENERIC_HEADS))
    raw_text: List[str] = field(default_factory=list)  # PubTator files: short/long forms (training text only)


@dataclass
class PairSettings:
    max_pairs_per_concept: Optional[int] = 50
    seed: int = 0
    cross_lingual: bool = False  # only pairs of a concept's names in two languages (translation pairs)
    languages: Optional[List[str]] = None  # only names in these languages (ISO 639-1); null: all
    mention_like: MentionLikeSettings = field(default_factory=MentionLikeSettings)



def _mention_like(given: Any, source: str) -> MentionLikeSettings:
    """``[pairs.mention_like]`` from a mapping (E221 for an unknown setting or a non-section)."""
    if isinstance(given, MentionLikeSettings):
        return given
    if not isinstance(given, Mapping):
        raise ConfigError(Errors.E212.format(path=source, what=f"pairs.mention_like must be a section, not {given!r}"))
    known = {f.name for f in dataclasses.fields(MentionLikeSettings)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ConfigError(Errors.E221.format(path=source, what=(
            f"{unknown[0]} is not a setting (known: {', '.join(sorted(known))})")))
    return MentionLikeSettings(**dict(given))


@dataclass
class TrainingSettings:
    batch_size: int = 256  # pairs per optimizer step, over all processes (2 names each)
    epochs: int = 1
    max_steps: int = 0  # > 0: stop after this many steps (overrides epochs)
    max_minutes: float = 0.0  # > 0: stop (with a checkpoint) after this much wall time (the whole run)
    lr: float = 2e-5
    weight_decay: float = 0.01
    warmup_steps: int = 0
    grad_clip: float = 1.0  # 0: off
    seed: int = 42
    amp: str = "none"  # none | bf16 (CUDA, or CPU autocast) | fp16 (CUDA only)
    sub_batch: int = 32  # names per forward pass, the batch's names sorted by length (0: all at once)
    adapter: str = "none"  # none | lora: train small adapters only, the base frozen (needs peft)
    adapter_rank: int = 8
    adapter_alpha: float = 16.0
    adapter_dropout: float = 0.1
    device: str = "auto"
    distributed: bool = False  # also switched on by torchrun's WORLD_SIZE > 1
    batching: str = "random"  # random | similar (pairs with similar names share a batch)
    hard_negatives: int = 0  # > 0: per pair of a batch, add this many dictionary hard-negative pairs
    hard_negative_top_k: int = 10  # each anchor's negatives: its k most similar names of other concepts
    # schedules: steps (200) or epochs ("1 epoch", "0.5 epochs")
    hard_negative_every: Union[int, str] = 0  # between re-minings with the current model; 0: every epoch
    checkpoint_every: Union[int, str] = 1000  # a checkpoint is also written at the end
    keep_checkpoints: int = 2
    eval_every: Union[int, str] = 0  # 0: evaluate on the dev set only at the end (if one is given)
    patience: int = 0  # > 0: stop after this many dev evaluations without improvement
    keep_best: bool = False  # the output model is the best on the dev set (fine-tuning)
    select_unseen_weight: float = 0.0  # best model by (1 - w) * overall + w * unseen dev acc@1 (0: overall)
    dev_candidates: str = "shortlist"  # shortlist: a fixed candidate set per run (seconds); all: every KB name
    dev_sample_names: int = 500  # shortlist: a seeded sample of KB names (distractors)
    dev_gold_names: int = 5  # shortlist: names per gold concept (canonical + seeded sample of synonyms; 0 = all)
    dev_shortlist_k: int = 5  # shortlist: each dev mention's k nearest names by char-3gram tf-idf
    log_every: int = 20
    pretokenize: bool = False  # tokenise the pair set's names once into PAIRS/tokens/ (memory-mapped); same batches
    loader_workers: int = 0  # > 0: DataLoader processes prepare the steps' inputs ahead (not with hard negatives)


#: The names ``loss.name`` accepts: the keys of :data:`~spacy_sapbert.training.losses.LOSSES` (that module imports
#: torch, this one must not; a test keeps the two equal).
LOSS_NAMES = ("multi_similarity", "infonce", "triplet")


@dataclass
class LossSettings:
    name: str = "multi_similarity"  # one of LOSS_NAMES
    alpha: float = 2.0
    beta: float = 50.0
    base: float = 0.5
    temperature: float = 0.07
    triplet_margin: float = 0.2


@dataclass
class MinerSettings:
    enabled: bool = True
    margin: float = 0.2
    kind: str = "all"  # all | hard | semihard


@dataclass
class TrainConfig:
    meta: MetaSettings = field(default_factory=MetaSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    pairs: PairSettings = field(default_factory=PairSettings)
    training: TrainingSettings = field(default_factory=TrainingSettings)
    loss: LossSettings = field(default_factory=LossSettings)
    miner: MinerSettings = field(default_factory=MinerSettings)

    SECTIONS = ("meta", "model", "pairs", "training", "loss", "miner")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<config>", task: str = "pretrain") -> "TrainConfig":
        """Settings from ``data`` (sections as mappings); a dict without ``meta`` is a version-1 config."""
        values: Dict[str, Any] = {}
        for name in data:
            if name not in cls.SECTIONS and name not in ("paths",):
                raise ConfigError(Errors.E212.format(path=source, what=f"unknown section [{name}]"))
        data = _upgrade(data, source, task)
        for section in cls.SECTIONS:
            klass = type(getattr(cls(), section))
            given = dict(data.get(section, {}) or {})
            known = {f.name for f in dataclasses.fields(klass)}
            unknown = sorted(set(given) - known)
            if unknown:
                raise ConfigError(
                    Errors.E212.format(
                        path=source, what=f"unknown setting {section}.{unknown[0]} (known: {', '.join(sorted(known))})"
                    )
                )
            if section == "pairs" and "mention_like" in given:
                given["mention_like"] = _mention_like(given["mention_like"], source)
            values[section] = klass(**given)
        config = cls(**values)
        config.validate(source)
        return config

    def to_dict(self) -> Dict[str, Dict[str, Any]]:
        return {s: dataclasses.asdict(getattr(self, s)) for s in self.SECTIONS}

    def validate(self, source: str = "<config>") -> None:
        t = self.training
        checks = [
            ("model.pooling", self.model.pooling, POOLING_CHOICES),
            ("training.dev_candidates", t.dev_candidates, DEV_CANDIDATES),
            ("training.amp", t.amp, AMP_CHOICES),
            ("training.batching", t.batching, BATCHING_CHOICES),
            ("training.adapter", t.adapter, ADAPTER_CHOICES),
            ("loss.name", self.loss.name, LOSS_NAMES),
            ("miner.kind", self.miner.kind, ("all", "hard", "semihard")),
        ]
        for what, value, choices in checks:
            if value not in choices:
                raise ConfigError(Errors.E002.format(what=what, value=value, choices=", ".join(choices)))
        positive = [
            ("training.batch_size", t.batch_size),
            ("model.max_length", self.model.max_length),
            ("training.log_every", t.log_every),
            ("training.keep_checkpoints", t.keep_checkpoints),
            ("training.adapter_rank", t.adapter_rank),
            ("training.hard_negative_top_k", t.hard_negative_top_k),
        ]
        for what, value in (("training.eval_every", t.eval_every), ("training.checkpoint_every", t.checkpoint_every),
                            ("training.hard_negative_every", t.hard_negative_every)):
            amount, _unit = parse_every(value, what, source)
            if what == "training.checkpoint_every" and amount <= 0:
                raise ConfigError(Errors.E760.format(path=source, what=what, value=value))
        non_negative = [
            ("training.epochs", t.epochs),
            ("training.max_steps", t.max_steps),
            ("training.max_minutes", t.max_minutes),
            ("training.sub_batch", t.sub_batch),
            ("training.warmup_steps", t.warmup_steps),
            ("training.grad_clip", t.grad_clip),
            ("training.patience", t.patience),
            ("training.hard_negatives", t.hard_negatives),
            ("training.dev_sample_names", t.dev_sample_names),
            ("training.dev_gold_names", t.dev_gold_names),
            ("training.dev_shortlist_k", t.dev_shortlist_k),
            ("training.loader_workers", t.loader_workers),
            ("training.lr", t.lr),
            ("training.weight_decay", t.weight_decay),
        ]
        for what, value in positive:
            if not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(Errors.E212.format(path=source, what=f"{what} must be > 0, not {value!r}"))
        for what, value in non_negative:
            if not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(Errors.E212.format(path=source, what=f"{what} must be >= 0, not {value!r}"))
        if not isinstance(t.select_unseen_weight, (int, float)) or not 0 <= t.select_unseen_weight <= 1:
            raise ConfigError(Errors.E762.format(path=source, what="training.select_unseen_weight must be in [0, 1] "
                                                 f"(0: keep the best overall dev acc@1), not {t.select_unseen_weight!r}"))
        if t.epochs == 0 and t.max_steps == 0:
            raise ConfigError(Errors.E212.format(path=source, what="set training.epochs or training.max_steps"))
        if self.pairs.languages is not None:
            self.pairs.languages = list(language_codes(self.pairs.languages))  # E735 for an unknown code
        _validate_mention_like(self.pairs.mention_like, source)
        cap = self.pairs.max_pairs_per_concept
        if cap is not None and (not isinstance(cap, int) or cap < 1):
            raise ConfigError(Errors.E212.format(path=source, what=f"pairs.max_pairs_per_concept must be >= 1 or null, not {cap!r}"))


def _validate_mention_like(m: MentionLikeSettings, source: str) -> None:
    """E221 for a bad ``[pairs.mention_like]`` value; E222 for a raw text file that is not there."""
    def bad(what: str) -> ConfigError:
        return ConfigError(Errors.E221.format(path=source, what=what))

    if not isinstance(m.enabled, bool):
        raise bad(f"enabled must be true or false, not {m.enabled!r}")
    if not isinstance(m.generators, (list, tuple)) or any(g not in MENTION_LIKE_GENERATORS for g in m.generators):
        raise bad(f"generators must be a list of {', '.join(MENTION_LIKE_GENERATORS)}, not {m.generators!r}")
    if isinstance(m.max_per_name, bool) or not isinstance(m.max_per_name, int) or m.max_per_name < 1:
        raise bad(f"max_per_name must be a whole number >= 1, not {m.max_per_name!r}")
    if isinstance(m.typo_rate, bool) or not isinstance(m.typo_rate, (int, float)) or not 0 <= m.typo_rate <= 1:
        raise bad(f"typo_rate must be in [0, 1] (the share of names given a typo variant), not {m.typo_rate!r}")
    for what, value in (("generic_heads", m.generic_heads), ("raw_text", m.raw_text)):
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
            raise bad(f"{what} must be a list of non-empty strings, not {value!r}")
    if m.enabled and not m.generators and not m.raw_text:
        raise bad("enabled is true but there are no generators and no raw_text: nothing to make pairs from")
    for path in m.raw_text:
        if m.enabled and not Path(path).is_file():
            raise ConfigError(Errors.E222.format(path=path, what="no such file"))
    m.generators, m.generic_heads, m.raw_text = list(m.generators), list(m.generic_heads), list(m.raw_text)


def _upgrade(data: Mapping[str, Any], source: str, task: str) -> Dict[str, Any]:
    """``data`` as a version-:data:`CONFIG_VERSION` config: E761 for a newer version; a version-1
    config (no ``[meta]``) keeps its explicit settings (``model.pooling`` had no ``auto``) and warns
    (W761) when it sets ``training.max_minutes``, whose meaning changed (training time → wall time)."""
    import warnings

    out = {name: dict(section or {}) for name, section in data.items() if name != "paths"}
    version = out.get("meta", {}).get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(Errors.E762.format(path=source, what=f"meta.version must be a whole number >= 1, not {version!r}"))
    if version > CONFIG_VERSION:
        raise ConfigError(Errors.E761.format(path=source, version=version, current=CONFIG_VERSION, task=task))
    if version == 1:
        out["meta"] = {"version": CONFIG_VERSION}
        out.setdefault("model", {}).setdefault("pooling", "cls")  # version 1's default
        minutes = out.get("training", {}).get("max_minutes", 0)
        if isinstance(minutes, (int, float)) and minutes > 0:
            warnings.warn(Warnings.W761.format(path=source, version=1, current=CONFIG_VERSION, task=task, what=(
                f"training.max_minutes = {minutes} now caps the run's wall time (mining, dev evaluation and "
                "checkpoints included), not its training time only")))
    return out


# configs/finetune.cfg: what differs from the pretraining defaults
FINETUNE_DEFAULTS: Dict[str, Any] = {
    "pairs.max_pairs_per_concept": 20,
    "training.batch_size": 128,
    "training.epochs": 5,
    "training.checkpoint_every": "1 epoch",
    "training.eval_every": "1 epoch",
    "training.patience": 3,
    "training.keep_best": True,
}


def load_config(
    path: Optional[PathLike] = None, overrides: Optional[Mapping[str, Any]] = None, *, task: str = "pretrain"
) -> TrainConfig:
    """Read a confection config file (or start from the built-in defaults of ``task``, ``pretrain``
    or ``finetune``, the same as ``configs/<task>.cfg``) and apply ``overrides``
    (``{"training.batch_size": 64}``, as spaCy's ``parse_config_overrides`` returns them)."""
    from confection import Config

    overrides = dict(overrides or {})
    source = str(path) if path is not None else f"<{task} defaults>"
    if path is None:
        if task not in ("pretrain", "finetune"):
            raise ConfigError(Errors.E002.format(what="task", value=task, choices="pretrain, finetune"))
        data: Dict[str, Any] = TrainConfig().to_dict()
        base = dict(FINETUNE_DEFAULTS) if task == "finetune" else {}
        for key, value in {**base, **overrides}.items():
            section, _, name = key.partition(".")
            if not name or section not in data:
                raise ConfigError(Errors.E212.format(path=source, what=f"cannot override '{key}'"))
            target = data[section]
            sub, _, leaf = name.partition(".")  # a nested section: pairs.mention_like.enabled
            if leaf and isinstance(target.get(sub), dict):
                target, name = target[sub], leaf
            target[name] = value
        return TrainConfig.from_dict(data, source=source, task=task)
    if not Path(path).is_file():
        raise MissingInputError(Errors.E001.format(what="Config file", path=path, hint="see configs/pretrain.cfg."))
    try:
        cfg = Config().from_disk(path, overrides=overrides, interpolate=True)
    except Exception as err:  # confection raises several error types for bad files/overrides
        raise ConfigError(Errors.E212.format(path=source, what=str(err).strip().splitlines()[0])) from None
    return TrainConfig.from_dict(cfg, source=source, task=task)


__all__ = [
    "TrainConfig",
    "CONFIG_VERSION",
    "MetaSettings",
    "ModelSettings",
    "PairSettings",
    "MentionLikeSettings",
    "MENTION_LIKE_GENERATORS",
    "TrainingSettings",
    "LossSettings",
    "MinerSettings",
    "load_config",
    "FINETUNE_DEFAULTS",
]
