"""The SapBERT encoder: a Hugging Face model + tokenizer that turns names into unit vectors.

``Encoder.load("cambridgeltl/SapBERT-from-PubMedBERT-fulltext")`` (or a local folder) gives an
object whose :meth:`Encoder.encode` returns float32 ``[n, d]`` L2-normalised vectors. Inputs are
tokenised once, sorted by length and batched so that padding stays small; repeated strings are
served from a bounded LRU cache (both done by :class:`~spacy_sapbert.encoding.cached.CachedEncoder`, which the
ONNX runtime shares). Callers normalise names with :func:`normalize_name` first.

:func:`pool` is the one pooling function; the trainer uses it too, so training and inference
always agree.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Dict, List, Optional, Sequence, Tuple, Union

import numpy

from ..base.defaults import DEFAULT_MODEL, MAX_LENGTH
from ..base.extras import require
from ..base.processes import fork_guard
from ..base.util import PathLike, ensure_path, get_logger, resolve_device
from ..errors import ConfigError, Errors, MissingInputError
from .cached import CachedEncoder
from .files import SETTINGS_FILE, check_hub_model, check_recorded, looks_local, read_settings, write_settings
from .onnx_export import EXPORT_FILES, export_is_current
from .pooling import POOLINGS, resolve_pooling

if TYPE_CHECKING:  # for annotations only
    import torch

logger = get_logger("encoder")

PRECISIONS = ("auto", "fp32", "fp16", "bf16")
# Any one of these in a folder means a tokenizer can be loaded from it.
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "spiece.model", "sentencepiece.bpe.model",
                    "vocab.json")


def pool(last_hidden_state: "torch.Tensor", attention_mask: "torch.Tensor", pooling: str) -> "torch.Tensor":  # noqa: F821
    """Pool token vectors ``[b, t, d]`` to one vector per input ``[b, d]`` (not normalised).

    ``cls``: the first token's vector (SapBERT's choice). ``mean``: the mean over the tokens
    that ``attention_mask`` marks as real.
    """
    if pooling == "cls":
        return last_hidden_state[:, 0]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)
        summed = (last_hidden_state * mask).sum(dim=1)
        return summed / mask.sum(dim=1).clamp(min=1.0)
    raise ConfigError(Errors.E002.format(what="pooling", value=pooling, choices=", ".join(POOLINGS)))


def pad_token_rows(rows: Sequence[Sequence[int]], pad_id: int, device: Any) -> Tuple["torch.Tensor", "torch.Tensor"]:  # noqa: F821
    """``(input_ids, attention_mask)`` long tensors on ``device``, padded to the longest row."""
    import torch  # lazy: torch

    lengths = numpy.fromiter(map(len, rows), dtype=numpy.int64, count=len(rows))
    width = int(lengths.max())
    filled = numpy.arange(width)[None, :] < lengths[:, None]  # row-major: the rows' ids in order
    ids = numpy.full((len(rows), width), pad_id, dtype=numpy.int64)
    ids[filled] = numpy.fromiter(itertools.chain.from_iterable(rows), dtype=numpy.int64, count=int(lengths.sum()))
    return torch.from_numpy(ids).to(device), torch.from_numpy(filled.astype(numpy.int64)).to(device)


def _check_pooling(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise ConfigError(Errors.E002.format(what="pooling", value=pooling, choices=", ".join(POOLINGS)))
    return pooling


MAX_LENGTH_LIMIT = 1 << 20  # word pieces, for a model whose config gives no position limit (index_meta's bound)
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert")  # positions start after the padding id


def _position_limit(config: Any) -> int:
    """The most word pieces ``config``'s model reads at once: its ``max_position_embeddings`` (less the padding
    offset of RoBERTa-style models, whose positions start at ``pad_token_id + 1``), else :data:`MAX_LENGTH_LIMIT`."""
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, bool) or not isinstance(positions, int) or positions < 1:
        return MAX_LENGTH_LIMIT
    if getattr(config, "model_type", None) in _OFFSET_POSITIONS:
        positions -= int(getattr(config, "pad_token_id", None) or 0) + 1
    return max(3, min(positions, MAX_LENGTH_LIMIT))


def _resolve_dtype(precision: str, device: "torch.device") -> Tuple["torch.dtype", bool]:  # noqa: F821
    """``(weight dtype, cpu_autocast)``. On CUDA the weights are cast (``auto``: bf16 where supported,
    else fp16). On CPU the weights stay fp32; ``bf16`` (asked for explicitly, never guessed) runs the
    forward pass under CPU bf16 autocast: much faster on CPUs with bf16 instructions (AVX512-BF16,
    AMX), slow elsewhere, and the vectors move by ~1e-2, so near-ties between names may swap."""
    import torch  # lazy: torch

    if precision not in PRECISIONS:
        raise ConfigError(Errors.E002.format(what="precision", value=precision, choices=", ".join(PRECISIONS)))
    if device.type != "cuda":
        if precision == "fp16" or (precision == "bf16" and device.type != "cpu"):
            raise ConfigError(Errors.E102.format(precision=precision, device=device))
        return torch.float32, precision == "bf16"
    if precision == "fp32":
        return torch.float32, False
    if precision == "fp16":
        return torch.float16, False
    if precision == "bf16" or torch.cuda.is_bf16_supported():
        return torch.bfloat16, False
    return torch.float16, False


def load_hf_model(name_or_path: str, config: Any = None) -> Any:
    """The bare Hugging Face encoder of a folder or hub id (``AutoModel`` semantics).

    The class is looked up by the config's ``model_type`` in transformers' table of base models;
    ``AutoModel.from_pretrained`` would import every config class of the library first to check its
    argument (half a second, most of a pipeline's own load time). Unknown types go through AutoModel.
    """
    import transformers  # lazy: transformers
    from transformers import AutoConfig, AutoModel  # lazy: transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES  # lazy: transformers

    if config is None:
        config = AutoConfig.from_pretrained(name_or_path)
    class_name = MODEL_MAPPING_NAMES.get(getattr(config, "model_type", ""))
    model_class = getattr(transformers, class_name, None) if isinstance(class_name, str) else None
    return (model_class or AutoModel).from_pretrained(name_or_path, config=config)


def weights_fingerprint(model: "torch.nn.Module") -> str:  # noqa: F821
    """A short hash of the model's weights, independent of device and precision casts done later.

    Per tensor it hashes name, shape, dtype, the exact integer sum of its raw bits (so any single
    changed weight changes it) and a strided sample of values. One pass over the weights: cheap
    even for a 400 MB model, and deterministic (integer sums do not depend on thread count).
    """
    import torch  # lazy: torch

    int_views = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    digest = hashlib.sha256()
    with torch.inference_mode():
        for name, tensor in sorted(model.state_dict().items()):
            flat = tensor.detach().reshape(-1).cpu()
            digest.update(f"{name}|{tuple(tensor.shape)}|{tensor.dtype}|".encode("utf8"))
            if flat.numel() == 0:
                continue
            bits = flat.contiguous().view(int_views[flat.element_size()])
            digest.update(str(int(bits.to(torch.int64).sum())).encode("ascii"))
            step = max(1, flat.numel() // 256)
            digest.update(bits[::step].numpy().tobytes())
    return digest.hexdigest()[:16]


def _drop_stale_export(folder: Path, fingerprint: str, pooling: str) -> None:
    """Delete an ONNX export in ``folder`` made from other weights than those about to be written."""
    if any((folder / name).exists() for name in EXPORT_FILES):
        if not export_is_current(folder, fingerprint, pooling):
            for name in EXPORT_FILES:
                (folder / name).unlink(missing_ok=True)


class Encoder(CachedEncoder):
    """A tokenizer + transformer that encodes strings into L2-normalised float32 vectors.

    Build it with :meth:`load` (hub id or local folder), :meth:`from_disk` (a folder written by
    :meth:`to_disk`, settings included) or the constructor (an in-memory model, e.g. from the
    trainer). ``cache_size`` bounds the LRU cache of repeated strings (0 disables it).
    The constructor takes ownership of ``model``: it moves it to ``device``, casts it to the
    inference precision and puts it in eval mode (the trainer restores train mode itself).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        pooling: str = "cls",
        max_length: int = MAX_LENGTH,
        device: str = "auto",
        precision: str = "auto",
        cache_size: int = 50_000,
        name: str = "",
        fingerprint: Optional[str] = None,
    ) -> None:
        self.pooling = _check_pooling(pooling)
        self.pooling_source = "explicit"  # Encoder.load: or the model folder's declaration / the default
        if not isinstance(max_length, int) or max_length < 3:
            raise ConfigError(Errors.E103.format(value=max_length))
        limit = _position_limit(getattr(model, "config", None))
        if max_length > limit:  # a RuntimeError in the embeddings at the first long input, an OverflowError at 2**63
            raise ConfigError(Errors.E131.format(value=max_length, name=name or "(in memory)", limit=limit))
        self.max_length = max_length
        self.device = resolve_device(device)
        self.precision = precision
        dtype, self._cpu_autocast = _resolve_dtype(precision, self.device)
        self.fingerprint = fingerprint or weights_fingerprint(model)
        self.model = model.to(device=self.device, dtype=dtype).eval()
        self.tokenizer = tokenizer
        self.name = name
        self.cache_size = max(0, int(cache_size))
        self._cache: "OrderedDict[str, numpy.ndarray]" = OrderedDict()
        self._pid = os.getpid()
        self._compiled: Any = None  # compile(): the forward pass torch.compile made of self.model
        self.dim = int(getattr(model.config, "hidden_size", 0)) or self._probe_dim()

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        name_or_path: Union[str, Path],
        *,
        pooling: str = "auto",
        max_length: int = MAX_LENGTH,
        device: str = "auto",
        precision: str = "auto",
        cache_size: int = 50_000,
    ) -> "Encoder":
        """Load a Hugging Face model from a local folder or a hub id (the hub may download).
        ``pooling``: ``cls`` or ``mean`` as given, or ``auto``: what the folder declares
        (``sapbert_encoder.json``, sentence-transformers' ``1_Pooling/config.json``), else ``cls``
        (see :mod:`spacy_sapbert.encoding.pooling`); the encoder's ``pooling_source`` says which.
        Needs the [train] extra (torch, transformers): E820 without it."""
        require("The PyTorch encoder (a Hugging Face model folder or hub id, runtime 'torch')", "torch", "transformers")
        pooling, source = resolve_pooling(pooling, name_or_path)
        name = str(name_or_path)
        if looks_local(name):
            path = ensure_path(name).expanduser()
            if not path.is_dir():
                raise MissingInputError(
                    Errors.E001.format(what="Model folder", path=path, hint="give a Hugging Face model folder or hub id.")
                )
            if not any((path / f).exists() for f in _TOKENIZER_FILES):
                raise MissingInputError(Errors.E100.format(path=path, files=", ".join(_TOKENIZER_FILES)))
            if not (path / "config.json").exists():
                raise MissingInputError(Errors.E101.format(name=path, reason="config.json is missing"))
            name = str(path.resolve())
        else:
            check_hub_model(name)  # E512 at once when the hub cannot give it
        from transformers import AutoTokenizer  # lazy: transformers

        try:
            tokenizer = AutoTokenizer.from_pretrained(name)
            model = load_hf_model(name)
        except (OSError, ValueError) as err:
            raise MissingInputError(Errors.E101.format(name=name, reason=str(err).splitlines()[0].rstrip("."))) from err
        enc = cls(
            model,
            tokenizer,
            pooling=pooling,
            max_length=max_length,
            device=device,
            precision=precision,
            cache_size=cache_size,
            name=name,
        )
        enc.pooling_source = source
        return enc

    @classmethod
    def from_disk(
        cls, path: PathLike, *, device: str = "auto", precision: str = "auto", cache_size: int = 50_000
    ) -> "Encoder":
        """Load a folder written by :meth:`to_disk` (settings from ``sapbert_encoder.json``)."""
        path = ensure_path(path)
        settings = read_settings(path)
        check_recorded(path, settings)
        enc = cls.load(
            path,
            pooling=settings["pooling"],
            max_length=settings["max_length"],
            device=device,
            precision=precision,
            cache_size=cache_size,
        )
        enc.name = settings.get("name", str(path))
        enc.pooling_source = str(path / SETTINGS_FILE)
        return enc

    def to_disk(self, path: PathLike) -> None:
        """Write a normal HF folder (config, model.safetensors in fp32, tokenizer) + our settings."""
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        _drop_stale_export(path, self.fingerprint, self.pooling)
        state = {k: v.detach().float().cpu().contiguous() for k, v in self.model.state_dict().items()}
        self.model.save_pretrained(path, state_dict=state, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        write_settings(path, self.settings(), exclude=EXPORT_FILES)  # with checksums of the files

    # ---- encoding -----------------------------------------------------------------------
    def check_fork(self) -> None:
        """Call before torch work: one intra-op thread in a process forked after torch ran (:func:`fork_guard`)."""
        self._pid = fork_guard(self._pid)

    def _token_rows(self, texts: List[str]) -> List[List[int]]:
        self.check_fork()
        return self.tokenizer(
            list(texts), truncation=True, max_length=self.max_length, padding=False, return_attention_mask=False
        )["input_ids"]

    @property
    def compiled(self) -> bool:
        """Whether :meth:`compile` was called: the forward pass runs through ``torch.compile``."""
        return self._compiled is not None

    def compile(self) -> "Encoder":
        """Run the forward pass through ``torch.compile`` (Inductor, shapes dynamic, the weights frozen into the
        compiled graph) from the next batch on, for bulk jobs (``build-index --compile``): the first batch compiles
        (~20 s for MiniLM on a CPU, with a C++ compiler), later ones run fused kernels (under bf16 autocast on an
        AMX CPU 1.2x eager for MiniLM, 1.5x for a 768-d BERT; docs/scale.md). The weights are read once: an
        encoder that trains afterwards must not be compiled. E835 when compiling fails. Returns the encoder."""
        import torch  # lazy: torch

        self.model.eval()
        self._compiled = torch.compile(self.model, dynamic=True)
        return self

    def _inference(self) -> ContextManager[Any]:
        import torch  # lazy: torch

        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode())
        stack.enter_context(torch.autocast("cpu", dtype=torch.bfloat16, enabled=self._cpu_autocast))
        if self._compiled is not None:  # weights as constants of the compiled graph (Inductor's "freezing")
            import torch._inductor.config as inductor_config  # lazy: torch

            stack.enter_context(inductor_config.patch(freezing=True))
        return stack

    def _encode_batch(self, rows: List[List[int]]) -> numpy.ndarray:
        import torch  # lazy: torch

        batch = self._pad(rows)
        hidden = self._forward(batch).last_hidden_state
        vec = pool(hidden, batch["attention_mask"], self.pooling).float()
        return torch.nn.functional.normalize(vec, p=2.0, dim=-1).cpu().numpy()

    def _forward(self, batch: Dict[str, "torch.Tensor"]) -> Any:  # noqa: F821
        if self._compiled is None:
            return self.model(**batch)
        from torch._dynamo.exc import TorchDynamoException  # lazy: torch

        try:
            return self._compiled(**batch)
        except TorchDynamoException as err:  # Inductor's errors (no C++ compiler, ...) come wrapped in these
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ConfigError(Errors.E835.format(name=self.name or "(in memory)", device=self.device,
                                                 reason=reason[:300])) from err

    def _pad(self, rows: List[List[int]]) -> Dict[str, "torch.Tensor"]:  # noqa: F821
        ids, mask = pad_token_rows(rows, self.tokenizer.pad_token_id or 0, self.device)
        return {"input_ids": ids, "attention_mask": mask}

    def _probe_dim(self) -> int:
        import torch  # lazy: torch

        with torch.inference_mode():
            batch = self.tokenizer(["a"], return_tensors="pt").to(self.device)
            return int(self.model(**batch).last_hidden_state.shape[-1])

    def __repr__(self) -> str:
        return (
            f"Encoder(name={self.name!r}, dim={self.dim}, pooling={self.pooling!r}, "
            f"max_length={self.max_length}, device={str(self.device)!r}, fingerprint={self.fingerprint!r})"
        )


__all__ = ["Encoder", "CachedEncoder", "SETTINGS_FILE", "pool", "weights_fingerprint", "POOLINGS", "PRECISIONS", "DEFAULT_MODEL"]
