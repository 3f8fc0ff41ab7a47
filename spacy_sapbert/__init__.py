"""spacy_sapbert: SapBERT concept linking for biomedical spaCy pipelines.

The names below are importable from the package root. Those that need torch, transformers or
spaCy are imported on first use, so ``import spacy_sapbert`` stays cheap.
"""
from importlib import import_module
from typing import Any

from .about import __version__
from .errors import Errors, SapbertError, Warnings
from .kb import Concept, KnowledgeBase, build_kb, normalize_name

_LAZY = {
    # linking
    "Encoder": ".encoding",
    "pool": ".encoding",
    "ConceptIndex": ".index",
    "SapbertLinker": ".linker",
    "make_sapbert_linker": ".linker",
    "create_pipeline": ".commands.pipeline",
    # training
    "pretrain": ".training",
    "finetune": ".training",
    "TrainConfig": ".training",
    "Trainer": ".training",
    "MultiSimilarityLoss": ".training",
    "TripletMarginMiner": ".training",
    # evaluation and mentions
    "evaluate": ".evaluation",
    "evaluate_config": ".evaluation",
    "read_pubtator": ".mentions",
    "read_dataset": ".mentions",
    "Mention": ".mentions",
    "Document": ".mentions",
    # assets
    "download_umls": ".assets",
    "UmlsDownload": ".assets",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spacy_sapbert' has no attribute '{name}'")
    return getattr(import_module(module, __name__), name)


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__",
    "Errors",
    "Warnings",
    "SapbertError",
    "Concept",
    "KnowledgeBase",
    "build_kb",
    "normalize_name",
    *_LAZY,
]
