"""The encoder a bulk job runs (``build-index``: every name of a KB): PyTorch, or ONNX Runtime running an
export of the same weights, in float32 or int8.

- ``runtime="torch"``: the loaded :class:`~spacy_sapbert.encoding.torch_encoder.Encoder` itself (any device,
  precision ``fp32`` / ``bf16`` on a CPU, ``fp16`` / ``bf16`` on a GPU).
- ``runtime="onnx"``: the encoder's weights exported to ONNX in a work folder (reused when it holds an export
  of the same weights) and run by :class:`~spacy_sapbert.encoding.onnx_encoder.OnnxEncoder` on the CPU. Its
  float32 vectors equal PyTorch's within ~1e-6; ``precision="int8"`` runs the dynamically quantized copy
  (:func:`~spacy_sapbert.encoding.onnx_encoder.quantize_export`, recipe ``dynamic``: the one
  ``benchmarks/encode_speed.py`` measured): faster, vectors a few hundredths of cosine away (opt-in; see
  docs/scale.md, "Encoding time for big KBs").
- ``runtime="auto"``: ONNX Runtime float32 on a CPU from :data:`ONNX_AUTO_MIN_NAMES` names where ``onnx`` and
  ``onnxruntime`` are installed (the export then costs little against the encoding), else PyTorch (always
  PyTorch on Ray, unless int8 is asked for: ``--runtime onnx`` there needs the work folder on storage that every
  node reads).

``compile=True`` (``build-index --compile``) runs the PyTorch encoder's forward pass through ``torch.compile``
(:meth:`~spacy_sapbert.encoding.torch_encoder.Encoder.compile`): a one-off compile of ~20 s, then fused kernels;
with bf16 on a CPU with AMX the fastest way this package encodes a big KB at float32-like recall (docs/scale.md).
It always runs PyTorch (``auto`` resolves to ``torch``).

:func:`names_precision` says which numbers the vectors hold (recorded in the work folder and the index
metadata, so that chunks of an int8 build are never mixed with float32 ones).
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Dict, Optional

from ..base.util import PathLike, device_is_cpu, ensure_path, get_logger
from ..errors import ConfigError, Errors, Warnings
from .int8_recipes import LEGACY_RECIPE, recorded_recipe
from .onnx_encoder import OnnxEncoder, export_onnx, quantize_export
from .onnx_export import INT8_FILE, export_is_current, recorded_export
from .torch_encoder import PRECISIONS

logger = get_logger("encoding.bulk")

BULK_RUNTIMES = ("auto", "torch", "onnx")
BULK_PRECISIONS = PRECISIONS + ("int8",)
# from this many names, runtime "auto" exports the model to ONNX (seconds) and encodes with ONNX Runtime
ONNX_AUTO_MIN_NAMES = 20_000
# names per encoder batch in a bulk job (build-index): the batches of a length-sorted chunk, each padded to its longest
# name; 64 was never slower than 256 and up to 1.3x faster for MiniLM and a 768-d model (benchmarks/encode_speed.py
# --builds-only --build-batch-sizes 64, results encode_speed_batch; docs/scale.md); the linker's batch too
BULK_BATCH_SIZE = 64
# ... except under bf16 autocast on a CPU, where larger batches keep the bf16 matrix units busy: 256 names a batch
# encoded a MiniLM build 1.4x faster than 64 on an AMX CPU and 1.09x on an AVX512-BF16 one; bf16 vectors move with
# the batch's shape (up to 0.0013 between 256 and 64 over MEDIC), both at cosine >= 0.9999 to float32 (results
# encode_speed_amx_builds, encode_speed_avx512_builds; docs/scale.md)
BF16_CPU_BULK_BATCH_SIZE = 256
ENCODER_FOLDER = "encoder"


def check_bulk_options(runtime: str, precision: str, device: str, *, compile: bool = False) -> None:
    """E830 for an unknown runtime or precision; E831 for a combination no runtime runs (int8 on PyTorch,
    ONNX Runtime on a GPU or in half precision, ``compile`` with ONNX Runtime or int8)."""
    if runtime not in BULK_RUNTIMES:
        raise ConfigError(Errors.E830.format(name="runtime", value=runtime, allowed=", ".join(BULK_RUNTIMES)))
    if precision not in BULK_PRECISIONS:
        raise ConfigError(Errors.E830.format(name="precision", value=precision, allowed=", ".join(BULK_PRECISIONS)))
    on_cpu = device.strip().lower() in ("auto", "cpu")
    if precision == "int8" and (runtime == "torch" or not on_cpu):
        raise ConfigError(Errors.E831.format(
            what=f"precision 'int8' with runtime '{runtime}' on device '{device}'",
            fix="int8 runs on ONNX Runtime on the CPU: use --runtime onnx (or auto) with --device cpu (or auto)"))
    if runtime == "onnx" and (not on_cpu or precision in ("fp16", "bf16")):
        raise ConfigError(Errors.E831.format(
            what=f"runtime 'onnx' with precision '{precision}' on device '{device}'",
            fix="ONNX Runtime runs fp32 or int8 on the CPU: use --runtime torch for a GPU or for fp16/bf16"))
    if compile and (runtime == "onnx" or precision == "int8"):
        raise ConfigError(Errors.E831.format(
            what=f"--compile with runtime '{runtime}' and precision '{precision}'",
            fix="--compile compiles the PyTorch encoder: use --runtime torch (or auto) with precision auto, fp32, "
                "fp16 or bf16, or leave --compile out for ONNX Runtime and int8"))


def bulk_batch_size(batch_size: Optional[int], precision: str, device: str, *, gpus_per_actor: float = 0.0) -> int:
    """Names per encoder batch of a bulk job: ``batch_size`` when given (E105 below 1), else
    :data:`BF16_CPU_BULK_BATCH_SIZE` for bf16 on a CPU (the Ray actors' too, unless they have GPUs), else
    :data:`BULK_BATCH_SIZE`."""
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(Errors.E105.format(value=batch_size))
        return batch_size
    if precision == "bf16" and device_is_cpu(device) and not gpus_per_actor:
        return BF16_CPU_BULK_BATCH_SIZE
    return BULK_BATCH_SIZE


def warn_emulated_bf16(precision: str, device: str, cpuinfo: str = "/proc/cpuinfo") -> bool:
    """W814 (and True) when ``bf16`` is asked for on a CPU whose flags (Linux ``/proc/cpuinfo``) show no bf16
    instructions: autocast then runs slower than float32. Silent where the flags cannot be read."""
    if precision != "bf16" or device.strip().lower() not in ("auto", "cpu"):
        return False
    if not device_is_cpu(device):
        return False
    try:
        text = Path(cpuinfo).read_text(encoding="utf8", errors="replace")
    except OSError:
        return False
    flags = set()
    model = "unknown"
    for line in text.splitlines():
        if line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[-1].split())
        elif line.startswith("model name") and model == "unknown":
            model = line.split(":", 1)[-1].strip()
    if not flags or flags & {"avx512_bf16", "amx_bf16"}:
        return False
    warnings.warn(Warnings.W814.format(cpu=model))
    return True


def resolve_runtime(runtime: str, precision: str, device: str, n_names: int, *, ray: bool = False,
                    compile: bool = False) -> str:
    """``torch`` or ``onnx``: what ``runtime`` (checked by :func:`check_bulk_options`) means for a job of
    ``n_names`` names (see the module docstring). On Ray (``ray``) ``auto`` is ``torch`` unless int8 is asked
    for: the actors would read the export from the driver's work folder, which other nodes may not see, and
    they may have GPUs the driver has not. ``compile`` runs PyTorch."""
    if runtime != "auto":
        return runtime
    if precision == "int8":
        return "onnx"
    if (compile or ray or precision not in ("auto", "fp32") or n_names < ONNX_AUTO_MIN_NAMES
            or not _onnx_export_possible()):
        return "torch"
    return "onnx" if device_is_cpu(device) else "torch"


def _onnx_export_possible() -> bool:
    """Whether ``onnx`` (torch's exporter needs it) and ``onnxruntime`` are installed, without importing them."""
    from ..base.extras import is_installed  # lazy: tests patch spacy_sapbert.base.extras.is_installed

    return is_installed("onnx") and is_installed("onnxruntime")


def bulk_encoder(enc: Any, runtime: str, precision: str, folder: PathLike, *, threads: int = 0,
                 compile: bool = False) -> Any:
    """The encoder that runs the job: ``enc`` itself for ``runtime="torch"`` (compiled with ``compile``); for
    ``"onnx"`` an :class:`OnnxEncoder` of ``enc``'s weights exported into ``folder`` (int8 with
    ``precision="int8"``), which gives the same fingerprint, pooling and dimension as ``enc``."""
    if runtime == "torch":
        return enc.compile() if compile else enc
    folder = ensure_path(folder)
    quantized = precision == "int8"
    if not export_is_current(folder, enc.fingerprint, enc.pooling):
        logger.info("exporting %s to ONNX in %s", enc.name, folder)
        enc.to_disk(folder)
        export_onnx(enc, folder)
    if quantized:
        recorded = recorded_export(folder)
        if recorded.get("int8") != INT8_FILE or recorded_recipe(recorded) != LEGACY_RECIPE:
            quantize_export(folder, LEGACY_RECIPE)
    return OnnxEncoder(folder, threads=threads, cache_size=0, quantized=quantized)


def names_precision(enc: Any) -> str:
    """The numbers an encoder's vectors come from: ``fp32`` (PyTorch float32, or ONNX Runtime float32: equal
    within ~1e-6), ``bf16`` (CPU autocast or GPU), ``fp16`` or ``int8``."""
    precision = str(getattr(enc, "precision", "fp32"))
    if precision == "int8":
        return "int8"
    if getattr(enc, "_cpu_autocast", False):
        return "bf16"
    model = getattr(enc, "model", None)
    if model is not None:
        dtype = str(next(model.parameters()).dtype)
        return {"torch.float16": "fp16", "torch.bfloat16": "bf16"}.get(dtype, "fp32")
    return "fp32"


def ray_encoder_options(enc: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    """What a Ray actor needs to load the same encoder as ``enc``: the torch ``options`` (pooling,
    max_length, device, precision) and ``compile`` when ``enc`` is compiled, or the ONNX folder and whether it
    runs int8."""
    folder: Optional[Path] = getattr(enc, "folder", None)
    if folder is None:
        return dict(options, compile=True) if getattr(enc, "compiled", False) else dict(options)
    return {"onnx_folder": str(Path(folder).resolve()), "quantized": enc.precision == "int8"}


__all__ = ["BULK_RUNTIMES", "BULK_PRECISIONS", "ONNX_AUTO_MIN_NAMES", "ENCODER_FOLDER", "check_bulk_options",
           "resolve_runtime", "warn_emulated_bf16", "bulk_encoder", "names_precision", "ray_encoder_options"]
