"""Where an encoder folder keeps its ONNX export, and whether that export is current.

A leaf module shared by :mod:`spacy_sapbert.encoding.torch_encoder` (which drops a stale export when it writes new
weights) and :mod:`spacy_sapbert.encoding.onnx_encoder` (which writes and loads exports), so that neither
imports the other both ways; it also writes the optimised copy of the graph (:func:`optimize_graph`) and says
which float32 graph a load runs (:func:`float_graph`). The names are also importable from :mod:`spacy_sapbert.encoding.onnx_encoder`.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Optional

from ..base.integrity import file_problem
from ..base.util import PathLike, ensure_path, get_logger
from ..errors import Errors, IntegrityError, MissingInputError, Warnings

logger = get_logger("onnx")

ONNX_FILE = "model.onnx"
EXPORT_FILE = "onnx_export.json"
# the int8 copy of model.onnx (dynamic quantization), recorded in EXPORT_FILE beside it
INT8_FILE = "model.int8.onnx"
# model.onnx as ONNX Runtime's graph optimiser leaves it at the "extended" level (no hardware-specific layout
# changes), saved at export and loaded with optimisation off: recorded in EXPORT_FILE under "optimized"
OPT_FILE = "model.opt.onnx"


def has_export(folder: PathLike) -> bool:
    """Whether an encoder folder holds an ONNX export (it may still be stale: see :class:`~spacy_sapbert.encoding.onnx_encoder.OnnxEncoder`)."""
    folder = ensure_path(folder)
    return (folder / ONNX_FILE).is_file() and (folder / EXPORT_FILE).is_file()


def recorded_export(folder: PathLike) -> Dict[str, Any]:
    """What ``onnx_export.json`` of ``folder`` records (``{}`` when it is missing or unreadable)."""
    try:
        recorded = json.loads((ensure_path(folder) / EXPORT_FILE).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def export_is_current(folder: PathLike, fingerprint: str, pooling: str) -> bool:
    """Whether ``folder`` holds an ONNX export of the weights with ``fingerprint``, pooled by ``pooling``."""
    recorded = recorded_export(folder)
    return has_export(folder) and (recorded.get("fingerprint"), recorded.get("pooling")) == (fingerprint, pooling)


def optimize_graph(folder: Path) -> Optional[Dict[str, str]]:
    """Write ``model.opt.onnx`` beside ``model.onnx``: the graph as ONNX Runtime's optimiser leaves it at the
    "extended" level (constant folding, node eliminations and the fusions of attention, layer norm and GELU for
    the CPU; not the layout changes of the "all" level, which tie a saved graph to the CPU it was made on), so
    that a load skips that work (about half of the session's initialisation for MiniLM, and ~25 MB less
    resident memory; the same vectors: ``benchmarks/studies/load_path.py onnx``). Returns its record for
    ``onnx_export.json`` (file, level, the onnxruntime version that wrote it), or None where it could not be
    written (no onnxruntime here, or a graph ONNX Runtime cannot save)."""
    try:
        import onnxruntime  # lazy: onnxruntime
    except ImportError:
        return None
    tmp = folder / f".{OPT_FILE}.{os.getpid()}.tmp"
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp)
    options.log_severity_level = 3
    try:
        onnxruntime.InferenceSession(str(folder / ONNX_FILE), options, providers=["CPUExecutionProvider"])
        os.replace(tmp, folder / OPT_FILE)
    except Exception as err:  # onnxruntime's own types; e.g. a graph over protobuf's 2 GB
        logger.info("no optimised graph written to %s: %s", folder, str(err)[:200])
        return None
    finally:
        tmp.unlink(missing_ok=True)
    return {"file": OPT_FILE, "level": "extended", "onnxruntime": str(onnxruntime.__version__)}


def float_graph(folder: Path) -> str:
    """The float32 graph a load runs: the optimised copy where the export recorded one (checked: E835) and this
    onnxruntime's version is the writer's (major.minor), else ``model.onnx`` (W816 when only the version differs;
    an export made before the copy existed has none)."""
    recorded = recorded_export(folder)
    if "optimized" not in recorded:
        return ONNX_FILE
    entry, files = recorded["optimized"], recorded.get("files")
    record = files.get(OPT_FILE) if isinstance(files, dict) else None
    why = None
    if not isinstance(entry, dict) or entry.get("file") != OPT_FILE or record is None:
        why = "has a record in onnx_export.json this version does not understand"
    elif not (folder / OPT_FILE).is_file():
        why = "is missing"
    else:
        problem = file_problem(folder, OPT_FILE, record)
        why = None if problem is None else f"is damaged: {problem}"
    if why is not None:
        kind = IntegrityError if why.startswith("is damaged") else MissingInputError
        raise kind(Errors.E835.format(path=folder / OPT_FILE, why=why, folder=owner_folder(folder)))
    try:
        import onnxruntime  # lazy: onnxruntime
    except ImportError:  # the session then says so (E119)
        return ONNX_FILE
    written, running = str(entry.get("onnxruntime", "?")), str(onnxruntime.__version__)
    if written.split(".")[:2] != running.split(".")[:2]:
        warnings.warn(Warnings.W816.format(path=folder / OPT_FILE, written=written, running=running,
                                           folder=owner_folder(folder)))
        return ONNX_FILE
    return OPT_FILE


def owner_folder(folder: Path) -> Path:
    """The folder to give ``export-onnx``: the pipeline of a linker's ``encoder/`` folder, else the folder."""
    pipeline = folder.parent.parent
    return pipeline if folder.name == "encoder" and (pipeline / "config.cfg").is_file() else folder


__all__ = ["ONNX_FILE", "EXPORT_FILE", "INT8_FILE", "OPT_FILE", "has_export", "recorded_export", "export_is_current",
           "optimize_graph", "float_graph", "owner_folder"]
