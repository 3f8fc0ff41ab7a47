"""The output folder of a training run: its identity, checkpoints, and the final model.

```
OUTPUT/run.json                  what defines the run (config, base model, KB and pair checksums)
OUTPUT/pairs/                    the pair set (pretraining writes it here)
OUTPUT/checkpoints/step-000100/  a HF model folder + optimizer.pt, scaler.pt, state.json
OUTPUT/metrics.jsonl             loss / throughput / dev figures, one JSON object a line
OUTPUT/model/                    the final (or best) model: a HF folder the Encoder loads
```
Every folder is written with ``atomic_dir`` and every file with ``atomic_write``: a crash leaves the
previous checkpoint intact. ``optimizer.pt`` / ``scaler.pt`` hold only tensors and plain values and
are read with ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..base.util import PathLike, atomic_dir, atomic_write, ensure_path, get_logger
from ..encoding.files import SETTINGS_FILE, write_settings  # noqa: F401  (SETTINGS_FILE: kept importable here)
from ..errors import ConfigError, Errors, MissingInputError, TrainingError
from .adapters import ADAPTER_FILE, adapter_state, exportable, is_adapted, load_adapter_state
from .config import TrainConfig

logger = get_logger("training.checkpoint")

RUN_FILE = "run.json"
STATE_FILE = "state.json"
OPTIMIZER_FILE = "optimizer.pt"
SCALER_FILE = "scaler.pt"
_STEP_DIR = re.compile(r"^step-(\d+)$")

# settings that may change between an interrupted run and its resumption
RESUMABLE_SETTINGS = {
    "pretokenize",  # same token ids, same batches: only how fast the inputs are made
    "loader_workers",
    "checkpoint_every",
    "keep_checkpoints",
    "eval_every",
    "log_every",
    "max_minutes",
    "max_steps",
    "epochs",
    "patience",
    "device",
}


def _identity_config(config_dict: Dict[str, Any]) -> Dict[str, Any]:
    """The settings that make a run what it is (those a resumed run may change left out)."""
    return {s: {k: v for k, v in vals.items() if k not in RESUMABLE_SETTINGS} for s, vals in config_dict.items()}


def run_identity(config_dict: Dict[str, Any], base_model: str, kb_checksum: str, pairs_meta: Dict[str, Any]) -> Dict[str, Any]:
    cfg = _identity_config(config_dict)
    return {
        "base_model": str(base_model),
        "kb_checksum": kb_checksum,
        "pairs": {k: pairs_meta.get(k) for k in ("kind", "n_pairs", "kb_checksum", "max_pairs_per_concept", "seed")},
        "config": cfg,
    }


_ABSENT = object()


def _first_difference(a: Any, b: Any, prefix: str = "", defaults: Any = _ABSENT) -> Optional[Tuple[str, Any, Any]]:
    """The first setting where the recorded run ``a`` and this run ``b`` differ, as (dotted key, a, b).
    A setting that the recorded run lacks (a later version added it) is no difference when this run has it
    at its default (``defaults`` mirrors ``b``), so a run started before an upgrade still resumes."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            sub = defaults.get(key, _ABSENT) if isinstance(defaults, dict) else _ABSENT
            if key not in a and sub is not _ABSENT and json.dumps(b.get(key), sort_keys=True) == json.dumps(sub, sort_keys=True):
                continue
            diff = _first_difference(a.get(key), b.get(key), f"{prefix}{key}.", sub)
            if diff:
                return diff
        return None
    return None if a == b else (prefix.rstrip("."), a, b)


def _defaults() -> Dict[str, Any]:
    """What each identity setting is at its default (for runs recorded before a setting existed)."""
    return {"config": json.loads(json.dumps(_identity_config(TrainConfig().to_dict())))}


def prepare_output(output: PathLike, identity: Dict[str, Any], *, resume: bool) -> Path:
    """Check ``output`` against this run; write ``run.json`` for a new run (rank 0 only)."""
    output = ensure_path(output)
    run_file = output / RUN_FILE
    if run_file.is_file():
        try:
            theirs = json.loads(run_file.read_text(encoding="utf8"))
        except ValueError:
            theirs = {}
        diff = _first_difference(theirs, json.loads(json.dumps(identity)), defaults=_defaults())
        if diff:
            raise ConfigError(Errors.E208.format(path=output, field=diff[0], theirs=diff[1], ours=diff[2]))
        if not resume:
            raise ConfigError(Errors.E209.format(path=output))
        return output
    if resume:
        raise MissingInputError(Errors.E210.format(path=output))
    if output.exists() and any(p.name != "pairs" for p in output.iterdir()):
        raise ConfigError(
            Errors.E208.format(path=output, field="run.json", theirs="missing (the folder is not empty)", ours=RUN_FILE)
        )
    output.mkdir(parents=True, exist_ok=True)
    with atomic_write(run_file) as fh:
        json.dump(identity, fh, indent=2)
    return output


def list_checkpoints(output: Path) -> List[Tuple[int, Path]]:
    folder = output / "checkpoints"
    found = []
    if folder.is_dir():
        for child in folder.iterdir():
            m = _STEP_DIR.match(child.name)
            if m and child.is_dir():
                found.append((int(m.group(1)), child))
    return sorted(found)


def save_model_folder(model: Any, tokenizer: Any, folder: Path, settings: Dict[str, Any]) -> None:
    """A plain HF folder (adapters merged in) + tokenizer + settings; an adapted model also leaves
    its adapter weights alone in ``adapter.safetensors`` (what resume restores)."""
    from safetensors.torch import save_file  # lazy: safetensors

    exportable(model).save_pretrained(folder, safe_serialization=True)
    if is_adapted(model):
        save_file(adapter_state(model), str(folder / ADAPTER_FILE))
    tokenizer.save_pretrained(folder)
    write_settings(folder, settings)  # with the checksums of the files above (checked at load)


def save_checkpoint(
    output: Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer: Any,
    scaler: Optional[Any],
    state: Dict[str, Any],
    settings: Dict[str, Any],
    *,
    keep: int = 2,
) -> Path:
    import torch  # lazy: torch

    target = output / "checkpoints" / f"step-{step:06d}"
    with atomic_dir(target, overwrite=True) as tmp:
        save_model_folder(model, tokenizer, tmp, settings)
        torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        if scaler is not None:
            torch.save(scaler.state_dict(), tmp / SCALER_FILE)
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2), encoding="utf8")
    for _, old in list_checkpoints(output)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def load_checkpoint(folder: Path, model: Any, optimizer: Any, scaler: Optional[Any]) -> Dict[str, Any]:
    """Restore weights, optimizer and scaler in place; return the trainer state. Any damage → E207."""
    import torch  # lazy: torch
    from safetensors.torch import load_file  # lazy: safetensors

    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf8"))
        if is_adapted(model):
            load_adapter_state(model, load_file(str(folder / ADAPTER_FILE)))
        else:
            weights = load_file(str(folder / "model.safetensors"))
            missing, unexpected = model.load_state_dict(weights, strict=False)
            if unexpected or [m for m in missing if "position_ids" not in m]:
                raise ValueError(f"weights do not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
        optimizer.load_state_dict(torch.load(folder / OPTIMIZER_FILE, map_location="cpu", weights_only=True))
        if scaler is not None:
            scaler.load_state_dict(torch.load(folder / SCALER_FILE, map_location="cpu", weights_only=True))
        for key in ("global_step", "epoch", "step_in_epoch", "pairs_seen"):
            int(state[key])
    except Exception as err:  # safetensors, torch and json raise many types for damaged files
        raise TrainingError(Errors.E207.format(path=folder, what=f"{type(err).__name__}: {err}"[:300])) from None
    return state


def write_final_model(output: Path, model: Any, tokenizer: Any, settings: Dict[str, Any],
                      source: Optional[Path] = None, *, name: str = "model") -> Path:
    """``OUTPUT/<name>``: from the in-memory model, or copied from another model folder (the best one)."""
    target = output / name
    with atomic_dir(target, overwrite=True) as tmp:
        if source is not None:
            for item in source.iterdir():
                if item.name not in (OPTIMIZER_FILE, SCALER_FILE, STATE_FILE):
                    shutil.copy2(item, tmp / item.name)
        else:
            save_model_folder(model, tokenizer, tmp, settings)
    logger.info("model written to %s", target)
    return target


__all__ = [
    "prepare_output",
    "save_checkpoint",
    "load_checkpoint",
    "list_checkpoints",
    "write_final_model",
    "run_identity",
]
