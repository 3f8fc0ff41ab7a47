"""Which pooling a model folder declares, and the one rule that picks an encoder's pooling.

The rule (:func:`resolve_pooling`): an explicit ``cls`` / ``mean`` always wins; ``auto`` (or None)
takes what the model folder declares, else :data:`DEFAULT_POOLING` (``cls``, SapBERT's). A folder
declares its pooling in

- ``sapbert_encoder.json`` (written by :meth:`Encoder.to_disk` and by training): its ``pooling``;
- a sentence-transformers folder: the ``sentence_transformers.models.Pooling`` module named in
  ``modules.json`` (else ``1_Pooling/``), whose ``config.json`` sets ``pooling_mode_cls_token`` or
  ``pooling_mode_mean_tokens``. Other modes (max, mean-sqrt-len, weighted) are not ours: warning W760
  and the default.

The source is logged and kept on the encoder (``pooling_source``), so a report can say where it came from.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Optional, Tuple

from ..errors import ConfigError, Errors, Warnings
from ..base.util import get_logger

logger = get_logger("encoding.pooling")

POOLINGS = ("cls", "mean")
AUTO = "auto"
DEFAULT_POOLING = "cls"
ST_POOLING_TYPE = "sentence_transformers.models.Pooling"
_ST_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean"}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _st_pooling_dir(folder: Path) -> Path:
    modules = _read_json(folder / "modules.json")
    if isinstance(modules, list):
        for module in modules:
            if isinstance(module, dict) and module.get("type") == ST_POOLING_TYPE and module.get("path"):
                return folder / str(module["path"])
    return folder / "1_Pooling"


def declared_pooling(model: Any) -> Optional[Tuple[str, str]]:
    """``(pooling, source file)`` that the model folder ``model`` declares, or None (a hub id, a
    folder that declares nothing, or a sentence-transformers mode we do not have: W760)."""
    folder = Path(str(model)).expanduser()
    if not folder.is_dir():
        return None
    settings = _read_json(folder / "sapbert_encoder.json")
    if isinstance(settings, dict) and settings.get("pooling") in POOLINGS:
        return str(settings["pooling"]), str(folder / "sapbert_encoder.json")
    config_path = _st_pooling_dir(folder) / "config.json"
    config = _read_json(config_path) if config_path.is_file() else None
    if not isinstance(config, dict):
        return None
    chosen = [ours for key, ours in _ST_MODES.items() if config.get(key) is True]
    others = sorted(k for k, v in config.items() if k.startswith("pooling_mode") and v is True and k not in _ST_MODES)
    if len(chosen) == 1 and not others:
        return chosen[0], str(config_path)
    warnings.warn(Warnings.W760.format(path=config_path, modes=", ".join(others + [k for k in _ST_MODES
                                                                                  if config.get(k) is True]) or "none",
                                       default=DEFAULT_POOLING))
    return None


def resolve_pooling(requested: Optional[str], model: Any, *, what: str = "encoder") -> Tuple[str, str]:
    """``(pooling, source)``: ``requested`` when it is ``cls`` or ``mean`` (source ``"explicit"``),
    else the folder's declaration, else the default. Logged at INFO; a bad value gives E002."""
    if requested not in (None, AUTO) and requested not in POOLINGS:
        raise ConfigError(Errors.E002.format(what="pooling", value=requested, choices=", ".join((AUTO,) + POOLINGS)))
    if requested in POOLINGS:
        pooling, source = str(requested), "explicit"
    else:
        found = declared_pooling(model)
        pooling, source = found if found is not None else (DEFAULT_POOLING, "default")
    logger.info("%s %s: %s pooling (%s)", what, model, pooling, source)
    return pooling, source


__all__ = ["POOLINGS", "AUTO", "DEFAULT_POOLING", "declared_pooling", "resolve_pooling"]
