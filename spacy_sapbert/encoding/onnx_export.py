"""Where an encoder folder keeps its ONNX export, and whether that export is current.

A leaf module shared by :mod:`spacy_sapbert.encoding.torch_encoder` (which drops a stale export when it writes new
weights) and :mod:`spacy_sapbert.encoding.onnx_encoder` (which writes and loads exports), so that neither
imports the other both ways. The names are also importable from :mod:`spacy_sapbert.encoding.onnx_encoder`.
"""
from __future__ import annotations

import json
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
           "export_is_current"]
