"""The re-ranker system of ``evaluate`` (``[evaluate.systems] reranker``): the linker's candidate stage, then its
cross-encoder re-ranking of the close calls, as ``sapbert_linker`` with ``reranker_path`` ranks.

The candidate stage is the run's hybrid system (``hybrid = true``: its weight, ``candidates`` and
``query_variants``) or else the reference name encoder over an exact :class:`~spacy_sapbert.index.ConceptIndex`
of ``kb.names`` (the linker's dense search). Its top ``max(k, reranker_k)`` concepts are handed to
:func:`spacy_sapbert.rerank.apply.rerank` with the keys ``reranker_k``, ``reranker_margin``,
``reranker_dense_weight``, ``reranker_window`` and ``reranker_skip_names`` (``reranker_precision``: the graph the
stage runs): the mentions whose two best scores lie
within the margin get those of their top ``reranker_k`` within the window of the best re-ordered by logit + dense
weight x score, the others keep the stage's list. Mention texts written alike are
ranked once (the linker ranks each distinct text of a batch once). The system's candidate recall is its stage's
(:attr:`RerankSystem.candidate_stage`): a re-ranker only re-orders what the stage proposes.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ..errors import ConfigError, Errors
from ..mentions.metrics import Ranking
from ..rerank.apply import DEFAULT_RERANK_WINDOW, check_rerank_settings
from ..rerank.model import DEFAULT_RERANK_PRECISION
from ..rerank.stage import RerankStage
from .baselines import System
from .hybrid import HybridSetup, HybridSystem

Ranked = List[Tuple[str, float]]


class IndexDense(System):
    """The linker's dense search (exact index over ``kb.names``, concepts by their best name): the re-ranker's
    candidate stage when the run has no hybrid system."""

    def __init__(self, setup: HybridSetup, name: str) -> None:
        self.setup, self.name = setup, name

    @property
    def encoder(self) -> Any:
        return self.setup.encoder

    def scored(self, queries: Sequence[str], k: int, vectors: Optional[numpy.ndarray] = None) -> List[Ranked]:
        return self.setup.index.search(self.setup.encode(queries) if vectors is None else vectors, k)

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:
        return [Ranking(concepts=list(found)) for found in self.scored(queries, k)]


class RerankSystem(System):
    """A candidate stage (:class:`~.hybrid.HybridSystem` or :class:`IndexDense`) + a loaded re-ranker (see the
    module docstring)."""

    def __init__(self, stage: Any, reranker: RerankStage, *, k: int, margin: float, dense_weight: float,
                 name: str, batch_size: int = 64, skip_names: bool = True,
                 window: float = DEFAULT_RERANK_WINDOW) -> None:
        check_rerank_settings(k, margin, dense_weight, window)
        self.window = float(window)  # the candidates read: those within this of the best (the linker's key)
        self.skip_names = bool(skip_names)  # a mention that is a KB name keeps its list (the linker's key)
        self.candidate_stage, self.reranker, self.name = stage, reranker, name
        self.k, self.margin, self.dense_weight, self.batch_size = int(k), float(margin), float(dense_weight), batch_size
        self.reranked_share: Optional[float] = None

    @property
    def encoder(self) -> Any:  # emptied before the timed call (protocol.cold)
        return self.candidate_stage.encoder

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:
        setup = self.candidate_stage.setup
        unique = sorted(set(queries))
        depth = max(int(k), self.k)
        vectors = setup.encode(unique)  # the stage's queries; the re-ranker picks each candidate's nearest name
        if isinstance(self.candidate_stage, HybridSystem):
            ranked: List[Ranked] = [[(x.concept_id, x.score) for x in found]
                                    for found in self.candidate_stage.scored(unique, depth, vectors)]
        else:
            ranked = [list(found) for found in self.candidate_stage.scored(unique, depth, vectors)]
        out = self.reranker.apply(setup.index, unique, vectors, ranked, k=self.k, margin=self.margin,
                                  dense_weight=self.dense_weight, batch_size=self.batch_size,
                                  skip_names=self.skip_names, window=self.window)
        changed = sum(1 for before, after in zip(ranked, out) if before != after)
        self.reranked_share = changed / len(unique) if unique else 0.0
        by_text = dict(zip(unique, out))
        return [Ranking(concepts=list(by_text[q][:k])) for q in queries]

    def describe(self) -> Dict[str, object]:
        return {**super().describe(), "candidate_stage": self.candidate_stage.name, "reranker": str(self.reranker.folder),
                "reranker_k": self.k, "reranker_margin": self.margin, "reranker_dense_weight": self.dense_weight,
                "reranker_skip_names": self.skip_names, "reranker_window": self.window,
                "reranker_precision": self.reranker.precision,
                "order": "re-ranker logit + reranker_dense_weight x stage score, close calls only (reranker_margin)",
                "distinct_texts_reordered": self.reranked_share}


def rerank_system(settings: Dict[str, Any], kb: Any, dense: Any, hybrid: Optional[HybridSystem]) -> RerankSystem:
    """The ``[evaluate.systems] reranker`` system of a run: ``hybrid`` (the run's hybrid system) or ``dense``'s
    encoder over the KB as its candidate stage, the re-ranker folder checked against the KB and the encoder
    (E811, as the linker does)."""
    sy = settings["systems"]
    if dense is None:
        raise ConfigError(Errors.E305.format(system="reranker", what="a name-only dense system whose candidates "
                                             "it re-orders", hint="Set [evaluate.systems] model or base_encoder."))
    if hybrid is not None:
        stage: Any = hybrid
    else:
        setup = HybridSetup(dense.encoder, kb, cache_dir=settings["cache_dir"], batch_size=settings["batch_size"],
                            ngram_range=tuple(sy["sparse_ngrams"]), show_progress=settings["show_progress"])
        stage = IndexDense(setup, name=dense.name)
    reranker = RerankStage(sy["reranker"], device=str(sy["device"]),
                           precision=str(sy.get("reranker_precision", DEFAULT_RERANK_PRECISION)))
    reranker.check(kb, stage.encoder, owner=f"the one of evaluate's system '{stage.name}'")
    return RerankSystem(stage, reranker, k=int(sy["reranker_k"]), margin=float(sy["reranker_margin"]),
                        dense_weight=float(sy["reranker_dense_weight"]), name=f"{stage.name} + {sy['reranker_name']}",
                        batch_size=settings["batch_size"], skip_names=bool(sy.get("reranker_skip_names", True)),
                        window=float(sy.get("reranker_window", DEFAULT_RERANK_WINDOW)))


__all__ = ["IndexDense", "RerankSystem", "rerank_system"]
