"""Context-aware disambiguation: context encoding, prototype stores, re-ranking, type priors.

``build_prototypes(docs, kb, ContextEncoder.load(model))`` makes a :class:`PrototypeStore` from
annotated documents; the linker re-ranks its name candidates with it (``prototypes_path`` in
``[initialize.components.sapbert_linker]``, weights in the component config). See docs/context.md.
"""
from .build import build_prototypes, read_documents
from .context_encoder import ContextEncoder
from .priors import TypePriors, search_with_prior
from .ranker import ContextRanker
from .rerank import ContextWeights, rerank, tune_weights
from .store import PrototypeStore

__all__ = ["ContextEncoder", "PrototypeStore", "build_prototypes", "read_documents", "ContextWeights",
           "rerank", "tune_weights", "TypePriors", "search_with_prior", "ContextRanker"]
