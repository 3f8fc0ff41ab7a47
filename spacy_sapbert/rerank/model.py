"""The cross-encoder: one BERT-like model that reads a mention and a candidate name together and gives
one score (a logit; higher: more likely the mention's concept).

Unlike the name encoder, which embeds the mention and each name apart, the cross-encoder attends across
the pair (word order, a dropped head word, a plural), which is what unseen mentions need; it is too slow to
score a whole KB, so it re-orders the bi-encoder's few best candidates (:mod:`.apply`).

A re-ranker folder holds a Hugging Face sequence-classification model (``config.json``, safetensors
weights, the tokenizer) and ``sapbert_reranker.json``: what it was trained for (the KB checksum and the
fingerprint of the name encoder whose candidates it learnt to re-order), its ``max_length``, and size +
sha256 records of every file, checked at load (E551 for a damaged or missing file). :func:`export_int8`
adds ``model.onnx`` and its int8 copy ``model.int8.onnx`` (per-channel weight scales: :data:`INT8_OPTIONS`), recorded
in the same file; ONNX Runtime runs either (:class:`OnnxCrossEncoder`, the linker's ``reranker_precision``).

The two graphs batch differently. The int8 graph quantizes its activations with the extremes of each batch, so a
pair's logit depends on the pairs batched with it: each mention's pairs are one batch of their own
(:func:`group_batches`). The float32 graph gives a pair the same logit in any batch, so the pairs of all mentions of
a call are scored together, in batches of pairs of one token length (:func:`length_batches`): no padding, fewer
and fuller batches.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy

from ..base.extras import missing_message
from ..base.integrity import check_files, file_records
from ..base.processes import ProcessSession  # importing it also registers its collection before every fork
from ..base.util import PathLike, atomic_write, ensure_path, resolve_device
from ..encoding.onnx_export import DATA_FILE, INT8_DATA_FILE, INT8_FILE, ONNX_FILE, move_into, save_weights_beside
from ..encoding.tokenizer_file import PairBatches
from ..errors import ConfigError, DataFormatError, Errors, MissingExtraError, MissingInputError

META_FILE = "sapbert_reranker.json"
# the graphs (ONNX_FILE, INT8_FILE) and their weights' files carry the name encoder's export's names
# the graph the linker's reranker_precision names: int8 (ONNX Runtime's dynamic quantization) or float32
PRECISION_FILES = {"int8": INT8_FILE, "float32": ONNX_FILE}
# each graph's weights beside it as ONNX external data (exports since 2026-12-04), mapped by ONNX Runtime at load as the
# name encoder's are (docs/footprint.md); recorded in "onnx_files" with the graphs. An export before keeps them inside.
DATA_FILES = {ONNX_FILE: DATA_FILE, INT8_FILE: INT8_DATA_FILE}
GRAPH_FILES = (ONNX_FILE, INT8_FILE, *DATA_FILES.values())
DEFAULT_RERANK_PRECISION = "int8"
FORMAT_VERSION = 1
DEFAULT_MAX_LENGTH = 48
OPSET = 17
# per-channel weight scales and 7-bit weights: on 150 NCBI training groups of a trained MiniLM re-ranker cut to the
# linker's 4 candidates, int8 scores correlate 0.993 with PyTorch's (ONNX Runtime's default, one scale per tensor:
# 0.971; benchmarks/reranker_int8.py --group-size 4)
INT8_OPTIONS = {"per_channel": True, "reduce_range": True}
_META_TYPES = {"format_version": int, "max_length": int, "kb_checksum": str, "encoder_fingerprint": str,
               "files": dict, "inputs": list}


def read_meta(folder: PathLike) -> Dict[str, Any]:
    """``sapbert_reranker.json`` of a re-ranker folder, its fields type-checked (E801 missing, E802 damaged)."""
    folder = ensure_path(folder)
    path = folder / META_FILE
    if not folder.is_dir() or not path.is_file():
        raise MissingInputError(Errors.E801.format(path=folder, file=META_FILE))
    try:
        meta = json.loads(path.read_text(encoding="utf8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DataFormatError(Errors.E802.format(path=path, why=f"not valid JSON ({err})")) from None
    if not isinstance(meta, dict):
        raise DataFormatError(Errors.E802.format(path=path, why="not a JSON object"))
    for key, kind in _META_TYPES.items():
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise DataFormatError(Errors.E802.format(path=path, why=f"'{key}' is {value!r}, not a {kind.__name__}"))
    if meta["format_version"] > FORMAT_VERSION:
        raise DataFormatError(Errors.E802.format(path=path, why=f"format version {meta['format_version']} is newer "
                                                                f"than this package's {FORMAT_VERSION}"))
    if not 8 <= meta["max_length"] <= 512:
        raise DataFormatError(Errors.E802.format(path=path, why=f"max_length {meta['max_length']} is not in 8-512"))
    if not all(name in ("input_ids", "attention_mask", "token_type_ids") for name in meta["inputs"]):
        raise DataFormatError(Errors.E802.format(path=path, why=f"unknown model inputs {meta['inputs']}"))
    return meta


def recorded_files(meta: Mapping[str, Any]) -> Dict[str, Any]:
    """Every file record of a re-ranker's metadata: its model files and, when exported, its ONNX graphs."""
    return {**meta["files"], **(meta.get("onnx_files") or {})}


def check_meta_files(folder: PathLike, meta: Mapping[str, Any], *, full: bool = False) -> None:
    """Sizes and hashes of every recorded file (the int8 graph's too, when recorded): E551 otherwise.
    Only plain file names inside the folder are accepted as records."""
    folder = ensure_path(folder)
    records = recorded_files(meta)
    for name in records:
        if not isinstance(name, str) or Path(name).name != name or name.startswith("."):
            raise DataFormatError(Errors.E802.format(path=folder / META_FILE, why=f"file record {name!r} is not a "
                                                                                  "file name inside the folder"))
    check_files(folder, records, full=full, what="re-ranker")


def pair_inputs(tokenizer: Any, mentions: Sequence[str], names: Sequence[str], max_length: int,
                inputs: Sequence[str], tensors: str) -> Dict[str, Any]:
    """The model inputs of (mention, name) pairs, padded to the longest pair of the batch."""
    encoded = tokenizer(list(mentions), list(names), truncation=True, max_length=max_length, padding=True,
                        return_tensors=tensors)
    return {key: encoded[key] for key in inputs}


def group_batches(groups: Sequence[Tuple[str, Sequence[str]]], batch_size: int,
                  run: Callable[[List[str], List[str]], Any]) -> List[numpy.ndarray]:
    """``run(mentions, names)`` over each group's pairs (a mention and its candidate names), one batch per group
    (a group of more than ``batch_size`` distinct names in consecutive batches of ``batch_size``): what a mention's
    pairs score depends on that mention alone, never on which other mentions were linked with it. A name that
    several candidates share (the nearest name of two concepts) is read once and its logit given to each: the int8
    graph quantizes a batch by its extremes, which a repeated row does not move, so the logits are the same bit for
    bit (docs/reranker.md, "Remembered logits, shared names")."""
    out: List[numpy.ndarray] = []
    step = max(1, batch_size)
    for mention, names in groups:
        names = list(names)
        distinct = list(dict.fromkeys(names))
        logits = numpy.zeros(len(distinct), dtype=numpy.float32)
        for start in range(0, len(distinct), step):
            chunk = distinct[start:start + step]
            logits[start:start + len(chunk)] = run([mention] * len(chunk), chunk)
        if len(distinct) < len(names):
            at = {name: i for i, name in enumerate(distinct)}
            logits = logits[[at[name] for name in names]]
        out.append(logits)
    return out


def length_batches(groups: Sequence[Tuple[str, Sequence[str]]], batch_size: int,
                   encode: Callable[[List[str], List[str]], Dict[str, numpy.ndarray]],
                   run: Callable[[Dict[str, numpy.ndarray]], Any]) -> List[numpy.ndarray]:
    """Logits of each group's pairs with the distinct pairs of all ``groups`` tokenized at once (``encode``: padded
    model inputs) and run (``run(inputs)``) in batches of at most ``batch_size`` pairs of one token length, cut to
    that length: only for a graph whose logit of a pair does not depend on its batch (the float32 graph; the int8
    graph needs :func:`group_batches`). A pair two groups share is read once."""
    at: Dict[Tuple[str, str], int] = {}
    for mention, names in groups:
        for name in names:
            at.setdefault((mention, name), len(at))
    logits = numpy.zeros(len(at), dtype=numpy.float32)
    if at:
        pairs = list(at)
        feed = encode([m for m, _ in pairs], [n for _, n in pairs])
        lengths = feed["attention_mask"].sum(axis=1)
        step = max(1, batch_size)
        for length in sorted(set(lengths.tolist())):
            rows = numpy.flatnonzero(lengths == length)
            for start in range(0, len(rows), step):
                chunk = rows[start:start + step]
                logits[chunk] = numpy.asarray(run({key: numpy.ascontiguousarray(value[chunk, :length])
                                                   for key, value in feed.items()})).reshape(-1)
    return [logits[[at[(mention, name)] for name in names]] for mention, names in groups]


def base_config(base: str, layers: int = 0) -> Any:
    """The Hugging Face config a re-ranker starts from: ``base``'s, with one output and, when ``layers`` is not 0,
    only its first ``layers`` transformer layers (E803 for a folder without a config, E808 for more layers than
    the base has)."""
    from transformers import AutoConfig  # lazy: transformers

    try:
        config = AutoConfig.from_pretrained(str(base), num_labels=1)
    except (OSError, ValueError) as err:
        raise MissingInputError(Errors.E803.format(path=base, why=str(err)[:300])) from None
    if layers:
        have = getattr(config, "num_hidden_layers", None)
        if not isinstance(have, int) or not 1 <= layers <= have:
            allowed = f"an integer from 0 to {have} (the layers of {base})" if isinstance(have, int) else \
                "0 (the base's config gives no num_hidden_layers)"
            raise ConfigError(Errors.E808.format(name="layers", value=layers, allowed=allowed))
        config.num_hidden_layers = int(layers)  # the checkpoint's later layers are not read
    return config


class CrossEncoder:
    """A sequence-classification model (one output) over (mention, name) pairs, run by PyTorch. Build one
    to train with :meth:`start`, load a trained one with :meth:`from_disk`."""

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int, meta: Optional[Dict[str, Any]] = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_length = int(max_length)
        self.meta: Dict[str, Any] = dict(meta or {})
        self.inputs: List[str] = [n for n in ("input_ids", "attention_mask", "token_type_ids")
                                  if n in tokenizer.model_input_names]

    @classmethod
    def start(cls, base: str, *, max_length: int = DEFAULT_MAX_LENGTH, layers: int = 0,
              device: str = "cpu") -> "CrossEncoder":
        """A fresh cross-encoder from any BERT-like folder (the name encoder, typically): its weights, a new
        one-output head. ``layers``: keep only the base's first ``layers`` transformer layers (0: all of them),
        a re-ranker that reads a pair in about ``layers / all`` of the time (E808 for more than the base has)."""
        if not 8 <= int(max_length) <= 512:
            raise ConfigError(Errors.E111.format(what="max_length (8-512)", minimum=8, value=max_length))
        from transformers import AutoModelForSequenceClassification, AutoTokenizer  # lazy: transformers
        from transformers.utils import logging as hf_logging  # lazy: transformers

        config = base_config(base, layers)
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # "some weights were newly initialised": the head, on purpose
        try:
            model = AutoModelForSequenceClassification.from_pretrained(str(base), config=config)
            tokenizer = AutoTokenizer.from_pretrained(str(base))
        except (OSError, ValueError) as err:
            raise MissingInputError(Errors.E803.format(path=base, why=str(err)[:300])) from None
        finally:
            hf_logging.set_verbosity(verbosity)
        model.to(resolve_device(device))
        return cls(model, tokenizer, max_length=max_length, meta={"base": str(base)})

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def logits(self, mentions: Sequence[str], names: Sequence[str]) -> Any:
        """Logits ``[n]`` of the pairs as a torch tensor (with grad when the model trains)."""
        batch = pair_inputs(self.tokenizer, mentions, names, self.max_length, self.inputs, "pt")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        return self.model(**batch).logits[:, 0]

    def score_groups(self, groups: Sequence[Tuple[str, Sequence[str]]], *, batch_size: int = 64) -> List[numpy.ndarray]:
        """Logits of each ``(mention, names)`` group's pairs, float32, one batch per group
        (see :func:`group_batches`)."""
        import torch  # lazy: torch

        self.model.eval()
        with torch.inference_mode():
            return group_batches(groups, batch_size, lambda m, n: self.logits(m, n).float().cpu().numpy())

    def score(self, mentions: Sequence[str], names: Sequence[str], *, batch_size: int = 64) -> numpy.ndarray:
        """Logits of the pairs, float32 ``[n]``; pairs are scored in batches of similar length."""
        import torch  # lazy: torch

        out = numpy.zeros(len(mentions), dtype=numpy.float32)
        order = sorted(range(len(mentions)), key=lambda i: (len(mentions[i]) + len(names[i]), i))
        self.model.eval()
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                chunk = order[start: start + batch_size]
                values = self.logits([mentions[i] for i in chunk], [names[i] for i in chunk])
                out[chunk] = values.float().cpu().numpy()
        return out

    def to_disk(self, path: PathLike, meta: Mapping[str, Any]) -> Path:
        """Write the model, tokenizer and ``sapbert_reranker.json`` (``meta`` + records) into ``path``."""
        folder = ensure_path(path)
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder, safe_serialization=True)
        self.tokenizer.save_pretrained(folder)
        names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name not in (META_FILE, *GRAPH_FILES)
                       and not p.name.startswith("."))
        doc = {**dict(meta), "format_version": FORMAT_VERSION, "max_length": self.max_length, "inputs": self.inputs,
               "files": file_records(folder, names)}
        doc.pop("onnx_files", None)
        for stale in GRAPH_FILES:
            (folder / stale).unlink(missing_ok=True)
        with atomic_write(folder / META_FILE) as fh:
            json.dump(doc, fh, indent=2, sort_keys=True)
        self.meta = doc
        return folder

    @classmethod
    def from_disk(cls, path: PathLike, *, device: str = "cpu", full_check: bool = False) -> "CrossEncoder":
        folder = ensure_path(path)
        meta = read_meta(folder)
        check_meta_files(folder, meta, full=full_check)
        from transformers import AutoModelForSequenceClassification, AutoTokenizer  # lazy: transformers

        model = AutoModelForSequenceClassification.from_pretrained(str(folder), num_labels=1)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model.to(resolve_device(device)).eval()
        return cls(model, tokenizer, max_length=meta["max_length"], meta=meta)


def export_int8(model: CrossEncoder, folder: PathLike) -> Path:
    """Add ``model.onnx`` (float32, exported from a CPU copy) and ``model.int8.onnx`` (ONNX Runtime's dynamic
    int8 quantization), each with its weights beside it (:data:`DATA_FILES`), to a saved re-ranker folder, recorded in
    its ``sapbert_reranker.json``."""
    try:
        import onnx  # noqa: F401  (torch's exporter and save_weights_beside need it)
        import torch  # lazy: torch
        from onnxruntime.quantization import QuantType, quantize_dynamic  # lazy: onnxruntime
    except ImportError as err:  # torch / onnx: the [train] extra (E820, exit 2 from the command line)
        raise MissingExtraError(missing_message("Exporting the re-ranker to ONNX", err.name or "onnx", str(err))) from err
    folder = ensure_path(folder)
    meta = read_meta(folder)
    inner = model.model
    if inner.device.type != "cpu" or next(inner.parameters()).dtype != torch.float32:
        import copy

        inner = copy.deepcopy(inner).to(device="cpu", dtype=torch.float32)

    class _Graph(torch.nn.Module):
        def __init__(self, wrapped: Any, names: Sequence[str]) -> None:
            super().__init__()
            self.wrapped, self.names = wrapped, list(names)

        def forward(self, *tensors: "torch.Tensor") -> "torch.Tensor":
            return self.wrapped(**dict(zip(self.names, tensors))).logits[:, 0]

    graph = _Graph(inner, model.inputs).eval()
    example = pair_inputs(model.tokenizer, ["a b c", "a"], ["d e", "f g h i"], model.max_length, model.inputs, "pt")
    stage = folder / f".onnx_export.{os.getpid()}.tmp"  # both graphs and their weights, written here first
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    axes = {name: {0: "batch", 1: "length"} for name in model.inputs}
    logging.disable(logging.WARNING)  # the quantizer's advice, logged on the root logger
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(graph, tuple(example[n] for n in model.inputs), str(stage / "whole.onnx"),
                              input_names=model.inputs, output_names=["logits"],
                              dynamic_axes={**axes, "logits": {0: "batch"}}, opset_version=OPSET, dynamo=False)
            quantize_dynamic(str(stage / "whole.onnx"), str(stage / "whole8.onnx"), weight_type=QuantType.QInt8,
                             **INT8_OPTIONS)
        for whole, graph_file in (("whole.onnx", ONNX_FILE), ("whole8.onnx", INT8_FILE)):
            save_weights_beside(stage / whole, stage / graph_file, DATA_FILES[graph_file])
        for graph_file in (ONNX_FILE, INT8_FILE):
            move_into(stage, folder, graph_file, DATA_FILES[graph_file])
    finally:
        logging.disable(logging.NOTSET)
        shutil.rmtree(stage, ignore_errors=True)
    meta["onnx_files"] = file_records(folder, [name for name in GRAPH_FILES if (folder / name).is_file()])
    with atomic_write(folder / META_FILE) as fh:
        json.dump(meta, fh, indent=2, sort_keys=True)
    return folder / INT8_FILE


def check_precision(value: Any, name: str = "reranker_precision") -> str:
    """``value`` if it names a re-ranker graph (:data:`PRECISION_FILES`), else E810 naming ``name``."""
    if not isinstance(value, str) or value not in PRECISION_FILES:
        raise ConfigError(Errors.E810.format(name=name, value=value, allowed=" or ".join(map(repr, PRECISION_FILES))))
    return value


class OnnxCrossEncoder:
    """A saved re-ranker's ONNX graph run by ONNX Runtime on the CPU (what the linker uses): the int8 graph
    (``precision="int8"``) or the float32 one (``"float32"``: the same logit for a pair in any batch)."""

    def __init__(self, folder: PathLike, *, threads: int = 0, precision: str = DEFAULT_RERANK_PRECISION) -> None:
        self.folder = ensure_path(folder)
        self.meta = read_meta(self.folder)
        self.precision = check_precision(precision)
        self.file = PRECISION_FILES[self.precision]
        if self.file not in (self.meta.get("onnx_files") or {}):
            raise MissingInputError(Errors.E804.format(path=self.folder, file=self.file, precision=self.precision))
        check_meta_files(self.folder, self.meta)
        self.max_length = int(self.meta["max_length"])
        self.inputs = list(self.meta["inputs"])
        self._pairs = PairBatches(self.folder, self.max_length, self.inputs)  # tokenizer.json: no transformers
        self._sessions = ProcessSession(self._make_session, threads)  # one thread in a forked worker

    def _make_session(self, threads: int) -> Any:
        try:
            import onnxruntime  # lazy: onnxruntime
        except ImportError as err:
            raise ConfigError(Errors.E119.format(reason=str(err))) from err
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            return onnxruntime.InferenceSession(str(self.folder / self.file), options,
                                                providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime's own types for a damaged graph
            raise DataFormatError(Errors.E802.format(path=self.folder / self.file,
                                                     why=f"{type(err).__name__}: {str(err)[:200]}")) from None

    def score_groups(self, groups: Sequence[Tuple[str, Sequence[str]]], *, batch_size: int = 64) -> List[numpy.ndarray]:
        """Logits of each ``(mention, names)`` group's pairs, float32: the int8 graph one batch per group (see
        :func:`group_batches`: it quantizes its activations per batch, so only this keeps a mention's logits its own),
        the float32 graph in batches of pairs of one length across the groups (:func:`length_batches`)."""
        session = self._sessions.get()
        if self.precision == "float32":
            return length_batches(groups, batch_size, self._pairs, lambda feed: session.run(None, feed)[0])
        return group_batches(groups, batch_size, lambda m, n: session.run(None, self._pairs(m, n))[0])

    def score(self, mentions: Sequence[str], names: Sequence[str], *, batch_size: int = 64) -> numpy.ndarray:
        """Logits of the pairs, float32 ``[n]`` (as :meth:`CrossEncoder.score`; a pair's logit depends on the pairs
        batched with it: the linker scores with :meth:`score_groups`)."""
        session = self._sessions.get()
        out = numpy.zeros(len(mentions), dtype=numpy.float32)
        order = sorted(range(len(mentions)), key=lambda i: (len(mentions[i]) + len(names[i]), i))
        for start in range(0, len(order), batch_size):
            chunk = order[start: start + batch_size]
            feed = self._pairs([mentions[i] for i in chunk], [names[i] for i in chunk])
            out[chunk] = session.run(None, feed)[0]
        return out


def load_reranker(path: PathLike, *, runtime: str = "auto", device: str = "cpu",
                  precision: str = DEFAULT_RERANK_PRECISION) -> Any:
    """A saved re-ranker: ONNX Runtime over its ``precision`` graph (``onnx``; ``auto`` when the folder holds it and
    the device is the CPU) or PyTorch (``torch``)."""
    if runtime not in ("auto", "onnx", "torch"):
        raise ConfigError(Errors.E805.format(value=runtime))
    check_precision(precision)
    meta = read_meta(path)
    has_graph = PRECISION_FILES[precision] in (meta.get("onnx_files") or {})
    if runtime == "onnx" or (runtime == "auto" and has_graph and device in ("cpu", "auto")):
        return OnnxCrossEncoder(path, precision=precision)
    return CrossEncoder.from_disk(path, device=device)


__all__ = ["META_FILE", "ONNX_FILE", "INT8_FILE", "DATA_FILES", "GRAPH_FILES", "PRECISION_FILES", "DEFAULT_RERANK_PRECISION", "DEFAULT_MAX_LENGTH", "CrossEncoder",
           "OnnxCrossEncoder", "check_precision", "group_batches", "length_batches", "export_int8", "load_reranker", "read_meta", "check_meta_files", "recorded_files",
           "pair_inputs", "base_config"]
