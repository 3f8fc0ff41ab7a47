"""Deprecated import path, kept so that older code still imports: use :mod:`spacy_sapbert.encoding.onnx_encoder`."""
from importlib import import_module
from typing import Any
import warnings

_NEW = "spacy_sapbert.encoding.onnx_encoder"


def __getattr__(name: str) -> Any:
    warnings.warn(f"spacy_sapbert.onnx_encoder.{name} moved to {_NEW}.{name}; the old path will be removed in 1.0",
                  DeprecationWarning, stacklevel=2)
    return getattr(import_module(_NEW), name)
