"""Adapters (the paper's ADAPTER variant): train small low-rank layers, keep the base frozen.

Built on ``peft`` (LoRA on every linear layer of the transformer blocks: query, key, value, the
attention output and both feed-forward layers; the unused pooler is left out). ``peft`` is optional
(``pip install "spacy-sapbert[adapters]"``) and imported only when ``training.adapter`` asks for it.

What leaves the trainer is always a plain Hugging Face model: checkpoints and the output folder
hold the base weights with the adapters merged in, so the linker's Encoder loads them without
``peft``. A checkpoint also keeps the adapter weights alone (``adapter.safetensors``), which is what
``--resume`` restores (the optimizer only knows the adapter parameters).
"""
from __future__ import annotations

import copy
from typing import Any, Dict

from ..errors import ConfigError, Errors

ADAPTER_FILE = "adapter.safetensors"
# every linear layer of each transformer block (BERT-style names), never the pooler
TARGET_MODULES = r".*layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense)"


def add_adapters(model: Any, rank: int, alpha: float, dropout: float) -> Any:
    """``model`` wrapped with LoRA adapters of ``rank``; only the adapters are trainable."""
    try:
        from peft import LoraConfig, get_peft_model  # lazy: peft
    except ImportError as err:
        raise ConfigError(Errors.E215.format(what=str(err))) from None
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=TARGET_MODULES, bias="none")
    try:
        return get_peft_model(model, config)
    except ValueError as err:  # no module matched: not a BERT-like layout
        raise ConfigError(Errors.E216.format(model=type(model).__name__, what=str(err).splitlines()[0][:200])) from None


def is_adapted(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


def exportable(model: Any) -> Any:
    """The plain model to save or fingerprint: a merged copy for an adapted model (the training
    model keeps its adapters), else ``model`` itself."""
    if not is_adapted(model):
        return model
    return copy.deepcopy(model).merge_and_unload()


def adapter_state(model: Any) -> Dict[str, Any]:
    from peft import get_peft_model_state_dict  # lazy: peft

    return {k: v.detach().cpu().contiguous() for k, v in get_peft_model_state_dict(model).items()}


def load_adapter_state(model: Any, weights: Dict[str, Any]) -> None:
    """Restore adapter weights saved by :func:`adapter_state`; a mismatch raises ValueError."""
    from peft import set_peft_model_state_dict  # lazy: peft

    expected = set(adapter_state(model))
    if set(weights) != expected:
        missing, unexpected = sorted(expected - set(weights)), sorted(set(weights) - expected)
        raise ValueError(f"adapter weights do not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
    set_peft_model_state_dict(model, weights)


__all__ = ["ADAPTER_FILE", "add_adapters", "is_adapted", "exportable", "adapter_state", "load_adapter_state"]
