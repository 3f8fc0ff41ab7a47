"""The evaluation config: defaults, loading (``.cfg`` + dotted overrides), validation.

A config has one ``[evaluate]`` block with sub-blocks ``dataset``, ``kb``, ``input`` and
``systems``; ``DEFAULT_CONFIG`` lists every key with its default (and is what
``configs/evaluate.cfg`` spells out). Unknown keys are errors, not silently ignored.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from ..base.defaults import MAX_LENGTH
from ..base.util import PathLike, ensure_path
from ..calibration.metrics import MAX_BINS
from ..errors import ConfigError, Errors, MissingInputError
from ..index.hybrid import CANDIDATE_MODES, check_mode, check_weight
from ..index.query_variants import KINDS, check_kinds
from ..index.sparse import check_settings
from ..mentions.abbreviation_table import AbbreviationTable
from ..mentions.datasets import FORMATS
from ..mentions.metrics import check_ks
from ..mentions.records import check_language
from ..rerank.apply import (DEFAULT_DENSE_WEIGHT, DEFAULT_RERANK_K, DEFAULT_RERANK_MARGIN, DEFAULT_RERANK_WINDOW,
                            MAX_DENSE_WEIGHT, bad_rerank_setting, check_dense_weight)
from ..rerank.model import DEFAULT_RERANK_PRECISION, PRECISION_FILES, check_precision

MODES = ("mention_only", "end_to_end")

DEFAULT_CONFIG = f"""
[evaluate]
name = "evaluation"
seed = 0
ks = [1,5,10,20]
candidate_ks = [1,5,16,64]
modes = ["mention_only"]
exclude_composite = true
levenshtein_threshold = 0.2
error_sample = 50
cache_dir = null
batch_size = 128
show_progress = true
calibration = false
calibration_bins = 10

[evaluate.dataset]
path = null
format = "auto"
types = null
train = []
train_format = "auto"
# the mentions' language (ISO 639 code, e.g. "es"), reported with the results; null = not stated
language = null

[evaluate.kb]
path = null
sources = []

[evaluate.input]
lowercase = true
fold_punctuation = false
resolve_abbreviations = false
abbreviation_table = null
backoff = false

[evaluate.systems]
model = null
model_name = "model"
base_encoder = null
base_encoder_name = "base encoder"
pooling = "auto"
model_pooling = null
base_pooling = null
max_length = {MAX_LENGTH}
device = "auto"
exact_match = true
tfidf = true
scispacy = true
scispacy_k = 30
scispacy_threshold = 0.0
pipeline = null
pipeline_name = "pipeline"
context = false
context_name = "context"
prototypes = null
context_dev = null
context_weight = 0.05
definition_weight = 0.0
context_fallback = 0.0
example_names = true
context_k = 30
context_margin = 0.0
one_sense_per_document = true
context_definitions = "none"
context_pooling = "mean"
context_max_length = 64
hybrid = false
hybrid_name = "hybrid"
sparse_weight = 0.5
sparse_k = 20
sparse_ngrams = [2,3]
hybrid_tune = false
candidates = "score"
query_variants = []
reranker = null
reranker_name = "re-ranker"
reranker_k = {DEFAULT_RERANK_K}
reranker_margin = {DEFAULT_RERANK_MARGIN}
reranker_dense_weight = {DEFAULT_DENSE_WEIGHT}
reranker_skip_names = true
reranker_window = {DEFAULT_RERANK_WINDOW}
reranker_precision = "{DEFAULT_RERANK_PRECISION}"
"""


def _config_cls():
    from thinc.api import Config

    return Config


def default_config():
    return _config_cls()().from_str(DEFAULT_CONFIG)


def load_evaluate_config(path: PathLike, overrides: Optional[Mapping[str, Any]] = None):
    """An evaluation config (``configs/evaluate.cfg``) as a thinc ``Config``: the defaults, then the file, then
    ``overrides`` (``{"evaluate.dataset.path": ...}``). Training configs are read by
    :func:`spacy_sapbert.training.config.load_config` instead (a typed ``TrainConfig``)."""
    path = ensure_path(path)
    if not path.is_file():
        raise MissingInputError(Errors.E001.format(what="Evaluation config", path=path,
                                                   hint="see configs/evaluate.cfg for an example."))
    Config = _config_cls()
    try:
        user = Config().from_disk(path, interpolate=True)
    except Exception as err:  # thinc raises several types for syntax errors
        raise ConfigError(Errors.E303.format(path=path, what=f"cannot parse it ({' '.join(str(err).split())})")) from None
    return merge_config(default_config(), user, overrides or {}, path)


def merge_config(base, user, overrides: Mapping[str, Any], path: Any = "<arguments>"):
    if "evaluate" not in user:
        raise ConfigError(Errors.E303.format(path=path, what="no [evaluate] block"))
    _check_keys(base["evaluate"], user["evaluate"], "evaluate", path)
    merged = base.merge(user)
    for dotted, value in overrides.items():
        keys = dotted.split(".")
        node = merged
        for key in keys[:-1]:
            if key not in node or not isinstance(node[key], dict):
                raise ConfigError(Errors.E303.format(path=path, what=f"unknown override '{dotted}'"))
            node = node[key]
        if keys[-1] not in node:
            raise ConfigError(Errors.E303.format(path=path, what=f"unknown override '{dotted}'"))
        node[keys[-1]] = value
    return merged


def _check_keys(defaults: Mapping[str, Any], given: Mapping[str, Any], where: str, path: Any) -> None:
    for key, value in given.items():
        if key not in defaults:
            raise ConfigError(Errors.E303.format(path=path, what=f"unknown key '{where}.{key}' (known: {', '.join(defaults)})"))
        if isinstance(defaults[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(Errors.E303.format(path=path, what=f"'{where}.{key}' must be a block"))
            _check_keys(defaults[key], value, f"{where}.{key}", path)


def _resolve(base: Path, value: Optional[str]) -> Optional[Path]:
    if value in (None, ""):
        return None
    p = Path(str(value)).expanduser()
    return p if p.is_absolute() else (Path.cwd() / p)


def _input_options(given: Mapping[str, Any], base: Path) -> Dict[str, Any]:
    """``[evaluate.input]``: the switches as booleans, ``abbreviation_table`` as a path (or None)."""
    out: Dict[str, Any] = {k: bool(v) for k, v in dict(given).items() if k != "abbreviation_table"}
    table = _resolve(base, given.get("abbreviation_table"))
    if table is not None:
        AbbreviationTable.from_disk(table)  # E001 / E798 now, before the KB and the encoders are loaded
    out["abbreviation_table"] = None if table is None else str(table)
    return out


def settings_from_config(config, config_path: Any = "<arguments>") -> Dict[str, Any]:
    """Validate a merged config and return a plain settings dict (paths as ``Path``)."""
    ev = dict(config["evaluate"])
    where = config_path
    base = Path.cwd()
    ds = dict(ev["dataset"])
    if not ds.get("path"):
        raise ConfigError(Errors.E303.format(path=where, what="[evaluate.dataset] path is not set"))
    for key, where_set in (("format", "[evaluate.dataset] format, --format"),
                           ("train_format", "[evaluate.dataset] train_format")):
        if ds[key] not in FORMATS:
            raise ConfigError(Errors.E002.format(what=f"dataset format ({where_set})", value=ds[key],
                                                 choices=", ".join(FORMATS)))
    ds["language"] = check_language(ds.get("language"))
    if isinstance(ds.get("types"), str):
        ds["types"] = [ds["types"]]
    train = ds.get("train") or []
    if isinstance(train, str):
        train = [train]
    ds["path"] = _resolve(base, ds["path"])
    ds["train"] = [_resolve(base, t) for t in train]
    kb = dict(ev["kb"])
    if bool(kb.get("path")) == bool(kb.get("sources")):
        raise ConfigError(Errors.E303.format(path=where, what="set exactly one of [evaluate.kb] path (a KB folder) "
                                             "or sources ([[path, format], ...])"))
    if kb.get("sources"):
        try:
            kb["sources"] = [(str(_resolve(base, p)), str(f)) for p, f in kb["sources"]]
        except (TypeError, ValueError):
            raise ConfigError(Errors.E303.format(path=where, what="[evaluate.kb] sources must be [[path, format], ...]")) from None
    modes = ev["modes"] if isinstance(ev["modes"], (list, tuple)) else [ev["modes"]]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ConfigError(Errors.E002.format(what="evaluation mode", value=bad or modes, choices=", ".join(MODES)))
    thr = ev["levenshtein_threshold"]
    if not isinstance(thr, (int, float)) or not 0 <= thr < 1:
        raise ConfigError(Errors.E303.format(path=where, what=f"levenshtein_threshold must be in [0, 1), got {thr!r}"))
    if ev["input"]["backoff"] and not ds["train"]:
        raise ConfigError(Errors.E303.format(path=where, what="input.backoff needs training files in "
                                             "[evaluate.dataset] train (their mentions become KB aliases)"))
    systems = dict(ev["systems"])
    for key in ("model", "base_encoder", "pipeline", "prototypes", "context_dev"):
        if systems.get(key) and not str(systems[key]).strip():
            systems[key] = None
    for key in ("prototypes", "context_dev"):
        systems[key] = _resolve(base, systems[key])
    if systems["hybrid"]:
        systems["sparse_weight"] = check_weight(systems["sparse_weight"], name="evaluate.systems")
        check_settings("char_wb", systems["sparse_ngrams"])
        if systems["hybrid_tune"] and not ds["train"]:
            raise ConfigError(Errors.E303.format(path=where, what="systems.hybrid_tune needs training files in "
                                                 "[evaluate.dataset] train (the weight is tuned on their mentions)"))
    _check_levers(systems, base, where)
    return {
        "name": str(ev["name"]), "seed": int(ev["seed"]), "ks": list(ev["ks"]),
        "candidate_ks": list(check_ks(ev["candidate_ks"])), "modes": list(modes),
        "exclude_composite": bool(ev["exclude_composite"]), "levenshtein_threshold": float(thr),
        "error_sample": int(ev["error_sample"]), "cache_dir": _resolve(base, ev["cache_dir"]),
        "batch_size": int(ev["batch_size"]), "show_progress": bool(ev["show_progress"]),
        "calibration": bool(ev["calibration"]), "calibration_bins": _bins(ev["calibration_bins"], where),
        "dataset": ds, "kb": kb, "input": _input_options(ev["input"], base), "systems": systems,
        "config_path": str(config_path),
    }


def _check_levers(systems: Dict[str, Any], base: Path, where: Any) -> None:
    """The candidate-stage keys (``candidates``, ``query_variants``: they shape the hybrid system, so they need
    ``hybrid = true``) and the re-ranker keys, as the linker checks its own (E814 for a bad value, E815 for a
    key that needs another); ``reranker`` becomes a ``Path``."""

    def refuse(key: str, allowed: str) -> None:
        raise ConfigError(Errors.E814.format(key=key, value=systems[key], path=where, allowed=allowed))

    try:
        systems["candidates"] = check_mode(systems["candidates"])
    except ConfigError:
        refuse("candidates", f"one of {', '.join(CANDIDATE_MODES)}")
    try:
        systems["query_variants"] = check_kinds(systems["query_variants"])
    except ConfigError:
        refuse("query_variants", f"a list of distinct kinds from {', '.join(KINDS)} ([] = none)")
    if not systems["hybrid"]:
        for key, default in (("candidates", "score"), ("query_variants", [])):
            if systems[key] != default:
                raise ConfigError(Errors.E815.format(
                    key=key, path=where, what="hybrid = true (it shapes the hybrid system's candidate stage)",
                    fix=f"Set hybrid = true (and a sparse_weight), or {key} = {default!r}."))
    bad = bad_rerank_setting(systems["reranker_k"], systems["reranker_margin"], systems["reranker_window"])
    if bad is not None:
        refuse(*bad)
    try:
        systems["reranker_dense_weight"] = check_dense_weight(systems["reranker_dense_weight"])
    except ConfigError:
        refuse("reranker_dense_weight", f"a finite number from 0 to {MAX_DENSE_WEIGHT:g} (0: the re-ranker alone)")
    systems["reranker_margin"] = float(systems["reranker_margin"])
    systems["reranker_window"] = float(systems["reranker_window"])
    if not isinstance(systems.get("reranker_skip_names"), bool):
        refuse("reranker_skip_names", "true or false")
    try:
        check_precision(systems.get("reranker_precision"))
    except ConfigError:
        refuse("reranker_precision", " or ".join(f'"{name}"' for name in PRECISION_FILES))
    folder = systems.get("reranker")
    systems["reranker"] = _resolve(base, folder) if folder and str(folder).strip() else None
    if systems["reranker"] is not None and not systems["reranker"].is_dir():
        raise ConfigError(Errors.E815.format(
            key="reranker", path=where, what=f"a re-ranker folder, but '{systems['reranker']}' is not one",
            fix="Give the model/ folder `spacy-sapbert train-reranker` wrote (OUTPUT/model), or reranker = null."))


def _bins(value: Any, where: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BINS:
        raise ConfigError(Errors.E303.format(path=where, what=f"calibration_bins must be an integer from 1 to "
                                                              f"{MAX_BINS:,}, got {value!r}"))
    return value


__all__ = ["DEFAULT_CONFIG", "MODES", "default_config", "load_evaluate_config", "merge_config", "settings_from_config"]
