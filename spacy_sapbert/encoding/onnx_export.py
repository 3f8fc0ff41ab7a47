"""Where an encoder folder keeps its ONNX export, whether that export is current, and how a graph is written with
its weights beside it (:func:`save_weights_beside`, :func:`move_into`: the name encoder's and the re-ranker's exports).

A leaf module shared by :mod:`spacy_sapbert.encoding.torch_encoder` (which drops a stale export when it writes new
weights) and :mod:`spacy_sapbert.encoding.onnx_encoder` (which writes and loads exports), so that neither
imports the other both ways. The names are also importable from :mod:`spacy_sapbert.encoding.onnx_encoder`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

from ..base.util import PathLike, ensure_path

ONNX_FILE = "model.onnx"
EXPORT_FILE = "onnx_export.json"
# the float32 graph's weights, kept beside it as ONNX external data (since 2026-12-03): ONNX Runtime maps this file
# instead of copying every weight out of the parsed graph (docs/footprint.md); recorded in EXPORT_FILE with the graph.
# An export written before keeps its weights inside model.onnx and loads as it always did.
DATA_FILE = "model.onnx.data"
# the int8 copy of model.onnx (dynamic quantization), recorded in EXPORT_FILE beside it
INT8_FILE = "model.int8.onnx"
# its weights as external data (since 2026-12-04), mapped by ONNX Runtime like DATA_FILE: a session 0.14 -> 0.10 s and
# 15 MB less at its peak (load_path.py int8-weights; docs/footprint.md); an int8 copy written before keeps them inside
INT8_DATA_FILE = "model.int8.onnx.data"
# every file an export may add to an encoder folder (dropped together when the weights change)
EXPORT_FILES = (ONNX_FILE, DATA_FILE, INT8_FILE, INT8_DATA_FILE, EXPORT_FILE)


# a weight of this many bytes or more goes to the weights' file; smaller ones stay in the graph
EXTERNAL_MIN_BYTES = 1024


def save_weights_beside(whole: Path, graph: Path, data_file: str) -> None:
    """Save the ONNX graph ``whole`` (weights inside) again as ``graph`` with every weight of
    :data:`EXTERNAL_MIN_BYTES` or more in ``data_file`` beside it (external data, which ONNX Runtime maps at load;
    no file when the graph has no such weight). Needs the ``onnx`` package ([train] extra)."""
    import onnx  # lazy: the [train] extra; every caller has just used it

    onnx.save_model(onnx.load(str(whole)), str(graph), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data_file, size_threshold=EXTERNAL_MIN_BYTES)


def move_into(stage: Path, folder: Path, graph_file: str, data_file: str) -> None:
    """Move ``graph_file`` and its weights' ``data_file`` (see :func:`save_weights_beside`) from ``stage`` into
    ``folder``: the weights first, as the graph names them; a weights' file left from before is dropped when the
    graph keeps every weight inside."""
    if (stage / data_file).is_file():
        os.replace(stage / data_file, folder / data_file)
    else:
        (folder / data_file).unlink(missing_ok=True)
    os.replace(stage / graph_file, folder / graph_file)


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


__all__ = ["ONNX_FILE", "DATA_FILE", "EXPORT_FILE", "INT8_FILE", "INT8_DATA_FILE", "EXPORT_FILES", "has_export", "recorded_export",
           "export_is_current", "EXTERNAL_MIN_BYTES", "save_weights_beside", "move_into"]
