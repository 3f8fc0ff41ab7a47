"""Name encoders: the PyTorch runtime (:class:`Encoder`), the ONNX Runtime one (:class:`OnnxEncoder`), the
shared batching/cache base (:mod:`.cached`), and the files that describe a saved encoder and its ONNX export."""
from .cached import CachedEncoder
from .files import SETTINGS_FILE, read_settings, write_settings
from .onnx_encoder import (RUNTIMES, OnnxEncoder, check_runtime, export_onnx, load_saved_encoder,
                           onnxruntime_available, write_export_for)
from .torch_encoder import DEFAULT_MODEL, POOLINGS, PRECISIONS, Encoder, pool, weights_fingerprint

__all__ = ["Encoder", "CachedEncoder", "OnnxEncoder", "pool", "weights_fingerprint", "export_onnx", "load_saved_encoder",
           "write_export_for", "onnxruntime_available", "check_runtime", "RUNTIMES", "POOLINGS", "PRECISIONS",
           "DEFAULT_MODEL", "SETTINGS_FILE", "read_settings", "write_settings"]
