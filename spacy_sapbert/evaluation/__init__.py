"""Evaluation: benchmark readers, strict/lenient acc@k and filtered subsets, baselines, reports.

``evaluate_config("configs/evaluate.cfg", "out/")`` runs a whole evaluation; ``spacy-sapbert
evaluate`` is the same from the command line.
"""
from .brat import read_brat
from .clinical import read_codiesp, read_xlbel
from .datasets import Document, Mention, read_biosyn, read_dataset, read_mentions_jsonl, read_mentions_tsv, read_pubtator
from .metrics import Gold, Ranking, resolve_gold, score, subset_masks
from .preprocess import InputOptions
from .run import evaluate, evaluate_config

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
    "InputOptions",
    "evaluate",
    "evaluate_config",
]
