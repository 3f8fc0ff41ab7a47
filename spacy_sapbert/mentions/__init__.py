"""Mentions: the floor below training, context, corpus, NER and evaluation.

The records every mention reader returns (:class:`Mention`, :class:`Document`), the readers (PubTator, BioSyn,
TSV / JSONL mention lists, brat, XL-BEL, CodiEsp; one :func:`read_dataset` with formats), gold-id resolution and the
acc@k metrics, and the abbreviations inside mentions. Nothing here imports a package above it.
"""
from .brat import read_brat
from .clinical import read_codiesp, read_xlbel
from .datasets import (Document, Mention, read_biosyn, read_dataset, read_mentions_jsonl, read_mentions_tsv,
                       read_pubtator)
from .metrics import Gold, Ranking, resolve_gold, score, subset_masks

__all__ = [
    "Document",
    "Mention",
    "read_pubtator",
    "read_biosyn",
    "read_mentions_tsv",
    "read_mentions_jsonl",
    "read_brat",
    "read_xlbel",
    "read_codiesp",
    "read_dataset",
    "Gold",
    "Ranking",
    "resolve_gold",
    "score",
    "subset_masks",
]
