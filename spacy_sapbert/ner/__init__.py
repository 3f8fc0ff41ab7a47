"""NER stage: PubTator → DocBin conversion and a thin wrapper over ``spacy train``."""
from .convert import (
    DEFAULT_LABEL_MAP,
    MISALIGNED_CHOICES,
    ConversionStats,
    convert_pubtator,
    pubtator_to_docs,
)
from .train import train_ner, ner_scores

__all__ = [
    "DEFAULT_LABEL_MAP",
    "MISALIGNED_CHOICES",
    "ConversionStats",
    "convert_pubtator",
    "pubtator_to_docs",
    "train_ner",
    "ner_scores",
]
