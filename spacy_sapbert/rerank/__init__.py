"""The cross-encoder re-ranker: a model that reads a mention and a candidate name together and re-orders the
bi-encoder's best candidates (``train-reranker``; the linker's ``reranker_path``). See docs/reranker.md."""
from __future__ import annotations

from .apply import (DEFAULT_DENSE_WEIGHT, DEFAULT_RERANK_K, DEFAULT_RERANK_MARGIN, DEFAULT_RERANK_WINDOW, candidate_logits,
                    check_compatible, check_dense_weight, check_rerank_settings, combine, needs_rerank, rerank,
                    window_size)
from .candidates import nearest_names
from .model import CrossEncoder, OnnxCrossEncoder, export_int8, load_reranker, read_meta
from .train import RerankerSettings, train_reranker

__all__ = ["DEFAULT_DENSE_WEIGHT", "DEFAULT_RERANK_K", "DEFAULT_RERANK_MARGIN", "DEFAULT_RERANK_WINDOW",
           "candidate_logits", "check_dense_weight", "combine", "CrossEncoder", "OnnxCrossEncoder", "RerankerSettings",
           "check_compatible", "check_rerank_settings", "export_int8", "load_reranker", "nearest_names",
           "needs_rerank", "read_meta", "rerank", "train_reranker", "window_size"]
