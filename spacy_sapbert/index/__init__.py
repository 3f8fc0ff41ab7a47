"""Nearest-name search over a KB's name vectors: :class:`ConceptIndex` and its back-ends
(exact, hnswlib, and for KBs of millions of names the faiss ivf fast-scan index, re-scored against
memory-mapped float16 vectors)."""
from .backends import HNSW_FILE, VECTORS_FILE
from .concept_index import (DEFAULT_EF_CONSTRUCTION, DEFAULT_EF_SEARCH, DEFAULT_M, EXACT_MAX_NAMES, KINDS,
                            LARGE_MIN_NAMES, META_FILE, ConceptIndex, choose_kind)
from .settings import IndexSettings
from .two_stage import VECTORS_F16_FILE
from .build import _build_hnsw, _encode_names  # noqa: F401  (import path of benchmarks)

__all__ = ["ConceptIndex", "IndexSettings", "choose_kind", "EXACT_MAX_NAMES", "LARGE_MIN_NAMES", "KINDS", "DEFAULT_M",
           "DEFAULT_EF_CONSTRUCTION", "DEFAULT_EF_SEARCH", "META_FILE", "HNSW_FILE", "VECTORS_FILE", "VECTORS_F16_FILE"]
