"""The encoder run by ONNX Runtime: the same vectors as :class:`~spacy_sapbert.encoding.torch_encoder.Encoder`
(float32, within ~1e-6), about twice as fast on a CPU, and loaded without importing torch or
transformers.

:func:`export_onnx` writes ``model.onnx`` (transformer + pooling + L2 normalisation in one graph,
dynamic batch and length) and ``onnx_export.json`` (the fingerprint of the weights it came from)
into an encoder folder written by :meth:`Encoder.to_disk`. :class:`OnnxEncoder` loads such a
folder: the tokenizer from ``tokenizer.json`` through the ``tokenizers`` library, the graph through
an ``onnxruntime.InferenceSession``. It refuses an export whose fingerprint differs from the
folder's weights (E121).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, List, Optional, Union

import numpy

from ..base.extras import is_installed, missing_message
from ..base.integrity import file_problem, file_records
from ..base.processes import ProcessSession  # importing it also registers its collection before every fork
from ..base.util import PathLike, atomic_write, device_is_cpu, ensure_path, get_logger
from ..errors import ConfigError, DataFormatError, Errors, IntegrityError, MissingExtraError, MissingInputError
from .cached import CachedEncoder
from .files import check_recorded, read_settings
from .int8_recipes import NAME_RECIPE, Int8Recipe, get_recipe, nodes_to_exclude
from .onnx_export import (DATA_FILE, EXPORT_FILE, INT8_DATA_FILE, INT8_FILE, ONNX_FILE, export_is_current,  # noqa: F401
                          has_export, move_into, recorded_export, save_weights_beside)
from .tokenizer_file import pad_token_id, truncating_rows
from .torch_encoder import Encoder, pool

logger = get_logger("onnx")

OPSET = 17
RUNTIMES = ("auto", "torch", "onnx")
INT8 = "int8"  # the linker's precision that runs the int8 copy of the export (ONNX Runtime, CPU)


def onnxruntime_available() -> bool:
    """Whether ``onnxruntime`` can be imported (a requirement of the package, but an environment may lack it)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def export_onnx(encoder: "Encoder", folder: PathLike) -> Path:
    """Write ``model.onnx`` (its weights in ``model.onnx.data`` beside it: :data:`DATA_FILE`) + ``onnx_export.json``
    for ``encoder`` into ``folder`` (each file atomically; the record last).

    The graph takes ``input_ids`` and ``attention_mask`` (int64, ``[batch, length]``) and returns
    the pooled, L2-normalised vectors (``[batch, dim]`` float32). It is exported from a float32 CPU
    copy of the weights, whatever device and precision ``encoder`` runs in.
    """
    try:
        import onnx  # noqa: F401  (lazy: the [train] extra; torch's exporter and save_weights_beside need it)
        import torch  # lazy: torch
    except ImportError as err:  # the [train] extra
        raise MissingExtraError(missing_message("Exporting the encoder to ONNX", err.name or "onnx", str(err))) from err
    folder = ensure_path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = encoder.model
    if next(model.parameters()).device.type != "cpu" or next(model.parameters()).dtype != torch.float32:
        import copy

        model = copy.deepcopy(model).to(device="cpu", dtype=torch.float32)

    class _Graph(torch.nn.Module):
        def __init__(self, inner: Any, pooling: str) -> None:
            super().__init__()
            self.inner, self.pooling = inner, pooling

        def forward(self, input_ids: "torch.Tensor", attention_mask: "torch.Tensor") -> "torch.Tensor":
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return torch.nn.functional.normalize(pool(hidden, attention_mask, self.pooling), p=2.0, dim=-1)

    graph = _Graph(model, encoder.pooling).eval()
    # a padded example, so that the traced graph keeps the attention mask
    ids = torch.tensor([[2, 3, 4, 5], [2, 3, 0, 0]], dtype=torch.long)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.long)
    stage = folder / f".onnx_export.{os.getpid()}.tmp"  # the graph and its weights, written here first
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and deprecation notes of torch's exporter
            torch.onnx.export(
                graph, (ids, mask), str(stage / "whole.onnx"), input_names=["input_ids", "attention_mask"],
                output_names=["vectors"],
                dynamic_axes={"input_ids": {0: "batch", 1: "length"}, "attention_mask": {0: "batch", 1: "length"},
                              "vectors": {0: "batch"}},
                opset_version=OPSET, dynamo=False,
            )
        save_weights_beside(stage / "whole.onnx", stage / ONNX_FILE, DATA_FILE)
        (folder / EXPORT_FILE).unlink(missing_ok=True)  # no record of a half-replaced export
        for stale in (INT8_FILE, INT8_DATA_FILE):  # made from the previous export, if any
            (folder / stale).unlink(missing_ok=True)
        move_into(stage, folder, ONNX_FILE, DATA_FILE)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    files = [name for name in (ONNX_FILE, DATA_FILE) if (folder / name).is_file()]
    with atomic_write(folder / EXPORT_FILE) as fh:
        json.dump({"fingerprint": encoder.fingerprint, "pooling": encoder.pooling, "dim": encoder.dim,
                   "opset": OPSET, "files": file_records(folder, files)}, fh, indent=2, sort_keys=True)
    return folder / ONNX_FILE


def quantize_export(folder: PathLike, recipe: Union[str, Int8Recipe] = NAME_RECIPE) -> Path:
    """Add ``model.int8.onnx`` to an encoder folder that holds a current ONNX export: the same graph
    quantized to int8 by ONNX Runtime's dynamic quantization (weights int8, activations quantized per batch
    at run time) as ``recipe`` says (:mod:`~spacy_sapbert.encoding.int8_recipes`; E828 for an unknown name).
    The default, ``dynamic-pc-l0`` (per-channel weights, the first transformer layer float32), keeps the name
    encoder's strict acc@1 within half a point of float32 on NCBI-disease test and BC5CDR-disease dev
    (``benchmarks/int8_name.py``); ``dynamic`` (per-tensor, every node) is what the context encoder uses. Its
    vectors differ from the float32 ones by a few hundredths of cosine, so vectors meant to be compared with
    each other (prototypes and the mentions re-ranked against them) must all come from it. Recorded in
    ``onnx_export.json``: ``int8`` and the file's record (size, hashes), ``int8_recipe`` and ``int8_options``
    (the options it resolved to, the nodes kept float32 among them)."""
    folder = ensure_path(folder)
    chosen = get_recipe(recipe)
    recorded = recorded_export(folder)
    if not has_export(folder) or not recorded:
        raise MissingInputError(Errors.E123.format(path=folder, file=ONNX_FILE, folder=folder))
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic  # lazy: onnxruntime
    except ImportError as err:  # it imports onnx, a package of the [train] extra
        if is_installed("onnxruntime") and (err.name or "").split(".")[0] != "onnxruntime":
            raise MissingExtraError(missing_message("Quantizing the encoder to int8", err.name or "onnx", str(err))) from err
        raise ConfigError(Errors.E119.format(reason=str(err))) from err
    exclude = nodes_to_exclude(chosen, folder / ONNX_FILE)
    stage = folder / f".{INT8_FILE}.{os.getpid()}.tmp"  # the quantized graph and its weights, written here first
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    logging.disable(logging.WARNING)  # its advice to pre-process the graph, logged on the root logger
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_dynamic(str(folder / ONNX_FILE), str(stage / "whole.onnx"), weight_type=QuantType.QInt8,
                             per_channel=chosen.per_channel, reduce_range=chosen.reduce_range,
                             op_types_to_quantize=list(chosen.op_types) or None, nodes_to_exclude=exclude or None)
        save_weights_beside(stage / "whole.onnx", stage / INT8_FILE, INT8_DATA_FILE)
        move_into(stage, folder, INT8_FILE, INT8_DATA_FILE)
    finally:
        logging.disable(logging.NOTSET)
        shutil.rmtree(stage, ignore_errors=True)
    files = {name: record for name, record in (recorded.get("files") or {}).items() if name != INT8_DATA_FILE}
    written = [name for name in (INT8_FILE, INT8_DATA_FILE) if (folder / name).is_file()]
    files.update(file_records(folder, written))
    with atomic_write(folder / EXPORT_FILE) as fh:
        json.dump({**recorded, "files": files, "int8": INT8_FILE, "int8_data": INT8_DATA_FILE if INT8_DATA_FILE in written
                   else None, "int8_recipe": chosen.name, "int8_options": chosen.options(exclude)}, fh, indent=2,
                  sort_keys=True)
    return folder / INT8_FILE


class OnnxEncoder(CachedEncoder):
    """An encoder folder (written by :meth:`Encoder.to_disk` + :func:`export_onnx`) run by ONNX Runtime.

    Float32 on the CPU; ``quantized=True`` runs the int8 copy :func:`quantize_export` wrote instead
    (``precision`` is then ``"int8"``). ``threads``: intra-op threads (0: ONNX Runtime's default, one per
    physical core). ``spinning=False``: the session's threads sleep between batches instead of spinning, what a
    saved pipeline's linker loads (:func:`load_saved_encoder`): the same vectors, and the index search after the
    encoder no longer shares the cores with idle spinning threads (docs/footprint.md). In a process forked after the
    session was made (``nlp.pipe(n_process=2)``, ``link-corpus --n-process 2``) a new session with one thread is
    made, as the torch encoder does, and the inherited one is kept, never used nor destroyed: its thread pool's
    threads were not copied by fork, and destroying it there waits forever on their condition variables (or crashes).
    """

    # token slots per batch (CachedEncoder.batch_tokens): 64 x 25 word pieces grew the CPU arena by 53 MB (int8) and
    # 74 MB (float32), 768 slots by 29-31 and 46-48 MB, at the same time per token (load_path.py arena; docs/footprint.md)
    batch_tokens: Optional[int] = 768

    def __init__(self, folder: PathLike, *, threads: int = 0, cache_size: int = 50_000, quantized: bool = False,
                 spinning: bool = True) -> None:
        folder = ensure_path(folder)
        settings = read_settings(folder)
        if not has_export(folder):
            missing = ONNX_FILE if not (folder / ONNX_FILE).is_file() else EXPORT_FILE
            raise MissingInputError(Errors.E123.format(path=folder, file=missing, folder=folder))
        if not export_is_current(folder, settings.get("fingerprint"), settings.get("pooling")):
            raise ConfigError(Errors.E121.format(path=folder / ONNX_FILE, onnx_fp=recorded_export(folder).get("fingerprint"),
                                                 settings_fp=settings.get("fingerprint"), folder=folder))
        if quantized and (recorded_export(folder).get("int8") != INT8_FILE or not (folder / INT8_FILE).is_file()):
            raise MissingInputError(Errors.E126.format(path=folder, file=INT8_FILE))
        check_recorded(folder, settings)
        check_recorded(folder, recorded_export(folder), what="ONNX export")
        self.folder = folder
        self.name = str(settings.get("name", folder))
        self.pooling = str(settings["pooling"])
        self.max_length = int(settings["max_length"])
        self.dim = int(settings["dim"])
        self.fingerprint = str(settings["fingerprint"])
        self.precision = INT8 if quantized else "fp32"
        self.graph_file = INT8_FILE if quantized else ONNX_FILE
        self.threads = max(0, int(threads))
        self.cache_size = max(0, int(cache_size))
        self.spinning = bool(spinning)
        self._cache: "OrderedDict[str, numpy.ndarray]" = OrderedDict()
        self._tokenize = truncating_rows(folder, self.max_length)
        self.pad_id = pad_token_id(folder)
        self._sessions = ProcessSession(self._make_session, self.threads)  # a new one in a forked process

    @classmethod
    def from_disk(cls, path: PathLike, *, threads: int = 0, cache_size: int = 50_000,
                  quantized: bool = False, spinning: bool = True) -> "OnnxEncoder":
        return cls(path, threads=threads, cache_size=cache_size, quantized=quantized, spinning=spinning)

    def to_disk(self, path: PathLike) -> None:
        """Copy the encoder folder (weights, tokenizer, settings and the ONNX export) to ``path``."""
        path = ensure_path(path)
        if path.exists() and path.resolve() == self.folder.resolve():
            return
        path.mkdir(parents=True, exist_ok=True)
        for item in sorted(self.folder.iterdir()):
            if item.is_file():
                shutil.copyfile(item, path / item.name)

    def _make_session(self, threads: int) -> Any:
        try:
            import onnxruntime  # lazy: onnxruntime
        except ImportError as err:
            raise ConfigError(Errors.E119.format(reason=str(err))) from err
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # no memory pattern: it plans for the shapes of past batches, and ours change (batch size and length) with
        # every call; off, the same vectors at the same speed and a peak ~16-29 MB lower
        # (benchmarks/studies/load_path.py onnx; docs/footprint.md)
        options.enable_mem_pattern = False
        if not self.spinning:
            # the linker's encoder: its pool's threads sleep after a batch instead of spinning on both cores while the
            # index searches (faiss's threads) or a re-ranker runs; bulk encoding, batch after batch, keeps the spin
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        try:
            return onnxruntime.InferenceSession(str(self.folder / self.graph_file), options,
                                                providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own types (InvalidProtobuf, Fail, ...) for a damaged file
            raise DataFormatError(Errors.E552.format(
                path=self.folder / self.graph_file, what="ONNX Runtime", why=f"{type(err).__name__}: {str(err)[:200]}",
                fix=(f"Write it again with `spacy-sapbert export-onnx --quantize {_owner(self.folder)}`, or run the "
                     "float32 export (precision 'fp32')." if self.precision == INT8 else
                     f"Export it again with `spacy-sapbert export-onnx {self.folder}`, or delete it to run the "
                     "encoder with PyTorch."))) from None

    def check_fork(self) -> None:
        """In a process forked after the session was made (it has none of the session's threads): a new
        session with one thread; the inherited one is kept alive, as destroying it would hang."""
        self._sessions.get()

    def _token_rows(self, texts: List[str]) -> List[List[int]]:
        self.check_fork()
        return self._tokenize(list(texts))

    def _encode_batch(self, rows: List[List[int]]) -> numpy.ndarray:
        width = max(len(r) for r in rows)
        ids = numpy.full((len(rows), width), self.pad_id, dtype=numpy.int64)
        mask = numpy.zeros((len(rows), width), dtype=numpy.int64)
        for j, row in enumerate(rows):
            ids[j, : len(row)] = row
            mask[j, : len(row)] = 1
        return self._sessions.get().run(None, {"input_ids": ids, "attention_mask": mask})[0]

    def __repr__(self) -> str:
        return (f"OnnxEncoder(name={self.name!r}, dim={self.dim}, pooling={self.pooling!r}, "
                f"max_length={self.max_length}, precision={self.precision!r}, fingerprint={self.fingerprint!r})")


def check_runtime(runtime: str) -> str:
    if runtime not in RUNTIMES:
        raise ConfigError(Errors.E002.format(what="runtime", value=runtime, choices=", ".join(RUNTIMES)))
    return runtime


def check_int8_settings(name: str, runtime: Any, device: Any) -> None:
    """E825 when a linker ``name`` of precision ``int8`` is set to run PyTorch or a GPU (int8 runs on ONNX Runtime,
    on the CPU)."""
    if runtime == "torch" or device not in ("auto", "cpu"):
        setting = "runtime 'torch'" if runtime == "torch" else f"device {device!r}"
        raise ConfigError(Errors.E825.format(name=name, setting=setting))


def load_saved_encoder(folder: Path, *, runtime: str, device: str, precision: str) -> CachedEncoder:
    """The encoder of a saved pipeline, run by ONNX Runtime or PyTorch as ``runtime`` says (see the
    factory's docstring); ``auto`` decides without loading anything it then drops. ``precision="int8"``:
    the int8 copy of the export (:func:`quantize_export`), checked first (E826), never a float32 fallback."""
    if precision == INT8:
        check_int8(folder)
        return OnnxEncoder.from_disk(folder, quantized=True, spinning=False)
    cpu_fp32 = device in ("auto", "cpu") and precision in ("auto", "fp32")
    if runtime == "onnx" and not cpu_fp32:
        raise ConfigError(Errors.E122.format(device=device, precision=precision))
    use_onnx = runtime == "onnx" or (
        runtime == "auto" and cpu_fp32 and has_export(folder) and onnxruntime_available()
        and device_is_cpu(device)
    )
    if use_onnx:
        return OnnxEncoder.from_disk(folder, spinning=False)
    missing = next((m for m in ("torch", "transformers") if not is_installed(m)), None)
    if missing is not None:
        why = (f"runtime={runtime!r}" if runtime == "torch" else "it has no ONNX export" if not has_export(folder)
               else f"device={device!r}, precision={precision!r}")
        raise MissingExtraError(Errors.E822.format(path=folder, why=why, reason=f"no module named '{missing}'"))
    return Encoder.from_disk(folder, device=device, precision=precision)


def check_int8(folder: Path) -> None:
    """E826 unless ``folder`` holds the int8 copy of a current export, recorded in ``onnx_export.json`` with
    the size and hash it has (sampled; ``spacy-sapbert verify`` compares the whole file), and its weights' file
    (:data:`INT8_DATA_FILE`) where the record names one."""
    recorded = recorded_export(folder)
    record = (recorded.get("files") or {}).get(INT8_FILE) if isinstance(recorded.get("files"), dict) else None
    if not (folder / INT8_FILE).is_file():
        why = "is missing"
    elif recorded.get("int8") != INT8_FILE or record is None:
        why = f"is not recorded in {EXPORT_FILE} (written by another tool, or by an older export)"
    else:
        problem = file_problem(folder, INT8_FILE, record)
        data = recorded.get("int8_data")  # its weights' file (copies written since 2026-12-04)
        if problem is None and data is not None:
            problem = (f"its weights' file is recorded as {data!r}, not {INT8_DATA_FILE!r}" if data != INT8_DATA_FILE
                       else file_problem(folder, INT8_DATA_FILE, recorded["files"].get(INT8_DATA_FILE)))
            problem = None if problem is None else f"{INT8_DATA_FILE}: {problem}"
        why = None if problem is None else f"is damaged: {problem}"
    if why is not None:
        kind = IntegrityError if why.startswith("is damaged") else MissingInputError
        raise kind(Errors.E826.format(path=folder / INT8_FILE, why=why, folder=_owner(folder)))


def ensure_int8(folder: Path) -> None:
    """Write the int8 copy of ``folder``'s export unless a sound one is recorded there (copied with the folder;
    kept whatever recipe made it, so a pipeline saved again links as before)."""
    try:
        check_int8(folder)
    except (MissingInputError, IntegrityError):
        quantize_export(folder)


def _owner(folder: Path) -> Path:
    """The folder to give ``export-onnx``: the pipeline of a linker's ``encoder/`` folder, else the folder."""
    pipeline = folder.parent.parent
    return pipeline if folder.name == "encoder" and (pipeline / "config.cfg").is_file() else folder


def quantized_copy(encoder: "Encoder", folder: PathLike, *, cache_size: int = 50_000,
                   recipe: Union[str, Int8Recipe] = NAME_RECIPE) -> "OnnxEncoder":
    """``encoder`` as an int8 :class:`OnnxEncoder`: its weights, ONNX export and int8 copy (made by ``recipe``)
    written to ``folder``."""
    folder = ensure_path(folder)
    encoder.to_disk(folder)
    export_onnx(encoder, folder)
    quantize_export(folder, recipe)
    return OnnxEncoder.from_disk(folder, cache_size=cache_size, quantized=True)


def write_export_for(encoder: Any, folder: Path, *, required: bool) -> None:
    """Add the ONNX export next to the saved weights (kept when the folder already holds one of the
    same weights); with runtime 'auto' only when torch's exporter can run here (the ``onnx`` package
    is installed)."""
    if export_is_current(folder, encoder.fingerprint, encoder.pooling):
        return
    try:
        export_onnx(encoder, folder)
    except (ConfigError, MissingExtraError):
        if required:
            raise
        logger.info("no ONNX export written to %s: the onnx package is not installed", folder)


__all__ = ["load_saved_encoder", "write_export_for", "check_int8", "check_int8_settings", "ensure_int8", "quantized_copy", "INT8",
           "OnnxEncoder", "export_onnx", "quantize_export", "INT8_FILE", "has_export", "export_is_current",
           "recorded_export", "onnxruntime_available", "check_runtime", "RUNTIMES", "ONNX_FILE", "EXPORT_FILE"]
