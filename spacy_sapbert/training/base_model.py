"""The model a run starts from (:func:`load_base_model`) and the precision check done before any work."""
from __future__ import annotations

from typing import Any, Tuple

from ..encoding.files import check_hub_model
from ..encoding.torch_encoder import load_hf_model
from ..errors import ConfigError, Errors


def load_base_model(name_or_path: str) -> Tuple[Any, Any]:
    """Tokenizer + encoder model; anything that is not a BERT-like encoder → E205."""
    from transformers import AutoConfig, AutoTokenizer  # lazy: transformers

    check_hub_model(name_or_path)  # E512 at once when it is no folder and the hub cannot give it
    try:
        config = AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError) as err:
        raise ConfigError(Errors.E205.format(path=name_or_path, what=str(err).splitlines()[0][:200])) from None
    if getattr(config, "is_encoder_decoder", False) or getattr(config, "is_decoder", False):
        raise ConfigError(Errors.E205.format(path=name_or_path, what=f"model type '{config.model_type}' is a decoder"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = load_hf_model(name_or_path, config)
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(Errors.E205.format(path=name_or_path, what=str(err).splitlines()[0][:200])) from None
    if not hasattr(model, "get_input_embeddings") or getattr(model, "main_input_name", "") != "input_ids":
        raise ConfigError(Errors.E205.format(path=name_or_path, what=f"'{type(model).__name__}' takes no token ids"))
    # the pooler head is not used ([CLS]/mean over last_hidden_state): freeze it so that DDP does not
    # wait for its gradients and the saved weights keep it unchanged
    pooler = getattr(model, "pooler", None)
    if pooler is not None:
        pooler.requires_grad_(False)
    return tokenizer, model


def check_precision(amp: str, device: Any) -> None:
    """fp16 needs CUDA; bf16 runs on CUDA or as CPU autocast (fast only on CPUs with bf16
    instructions, e.g. AVX512-BF16 or AMX). Refused elsewhere, before any work is done."""
    kind = getattr(device, "type", str(device))
    if (amp == "fp16" and kind != "cuda") or (amp == "bf16" and kind not in ("cuda", "cpu")):
        raise ConfigError(Errors.E204.format(amp=amp, device=device))


__all__ = ["load_base_model", "check_precision"]
