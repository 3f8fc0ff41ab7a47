"""Evaluation: strict/lenient acc@k and filtered subsets, baselines, reports (the readers and metrics it scores
with are in :mod:`spacy_sapbert.mentions`).

``evaluate_config("configs/evaluate.cfg", "out/")`` runs a whole evaluation; ``spacy-sapbert
evaluate`` is the same from the command line.
"""
from .preprocess import InputOptions
from .run import evaluate, evaluate_config

__all__ = ["InputOptions", "evaluate", "evaluate_config"]
