"""Dev evaluation during training: strict acc@k of the current weights, split into seen / unseen.

Cheap by design (``training.dev_candidates``):

- ``shortlist`` (default): the names searched are fixed once, before training: a seeded sample of
  ``training.dev_sample_names`` KB names (distractors), up to ``training.dev_gold_names`` names of
  each gold concept (its canonical name, then a seeded sample of its synonyms; 0 = all), and each
  distinct dev mention's ``training.dev_shortlist_k`` nearest names by character 3-gram tf-idf
  (``char_wb``, fitted on the KB names). Each evaluation encodes only those names and the distinct
  mentions, so it costs seconds, not a pass over the KB; the figures are an optimistic proxy of a
  full-KB search (the names a dense model could confuse with the gold but that share no 3-grams
  with the mention are missing). Final figures come from ``spacy-sapbert evaluate``.
- ``all``: every KB name (the full search; minutes for a large KB on a CPU).

Every evaluation also splits strict acc@1 into **seen** mentions (the normalised text is a name of
the dev KB or a training mention) and **unseen** ones (neither), with counts: fine-tuning that only
memorises raises the first and not the second. :func:`selection_score` mixes overall and unseen
accuracy for keeping the best model (``training.select_unseen_weight``; 0 = overall).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..base.util import get_logger
from ..kb.concept import normalize_name
from ..mentions.metrics import seen_mask, seen_split

logger = get_logger("training.dev_eval")

DEV_CANDIDATES = ("shortlist", "all")
_NAME_POOL = 5  # names looked at per concept wanted (concepts share names)


@dataclass
class DevSet:
    """Mentions ``(text, gold_ids)`` and the KB to search (may differ from the training KB);
    ``train_texts``: the training mentions (for the seen / unseen split; the KB's names always count as seen)."""

    kb: Any
    mentions: Sequence[Tuple[str, Sequence[str]]]
    ks: Tuple[int, ...] = (1, 5)
    train_texts: Sequence[str] = ()


def selection_score(figures: Dict[str, Any], unseen_weight: float, k: int = 1) -> float:
    """``(1 - w) * overall + w * unseen`` strict acc@k (unseen counts as overall when there is none)."""
    overall = float(figures[f"dev_acc@{k}"])
    unseen = figures.get(f"dev_unseen_acc@{k}")
    return overall if not unseen_weight or unseen is None else (1 - unseen_weight) * overall + unseen_weight * float(unseen)


def _shortlist_rows(names: Sequence[str], queries: Sequence[str], k: int, chunk: int = 256) -> np.ndarray:
    """Rows of each query's ``k`` nearest names by char-3gram tf-idf cosine (union, unsorted)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if k <= 0 or not len(queries):
        return np.zeros(0, dtype=np.int64)
    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3), dtype=np.float32)
    matrix = vectorizer.fit_transform(list(names)).T.tocsr()
    q = vectorizer.transform(list(queries))
    found: List[np.ndarray] = []
    k = min(k, len(names))
    for start in range(0, q.shape[0], chunk):
        sims = (q[start:start + chunk] @ matrix).toarray()
        found.append(np.argpartition(-sims, k - 1, axis=1)[:, :k].ravel())
    return np.concatenate(found).astype(np.int64)


def _gold_rows(kb: Any, concepts: Sequence[str], per_concept: int, rng: np.random.Generator) -> List[int]:
    """Name rows of the gold ``concepts``: all (``per_concept`` 0) or the canonical name plus a seeded
    sample of ``per_concept - 1`` synonyms each."""
    out: List[int] = []
    for cid in concepts:
        rows = list(kb.rows_of_concept(cid))
        if per_concept and len(rows) > per_concept:
            rows = [rows[0]] + sorted(rng.choice(rows[1:], size=per_concept - 1, replace=False).tolist())
        out += rows
    return out


class DevEvaluator:
    """Scores an encoder on a :class:`DevSet`; the candidate names are chosen once, at construction."""

    def __init__(self, dev: DevSet, *, candidates: str = "shortlist", sample_names: int = 500,
                 shortlist_k: int = 5, gold_names: int = 5, seed: int = 0) -> None:
        started = time.perf_counter()
        self.dev, self.candidates = dev, candidates
        kb = dev.kb
        queries = [normalize_name(text) for text, _ in dev.mentions]
        self.queries, self.inverse = np.unique(np.asarray(queries, dtype=object), return_inverse=True)
        self.golds = [{kb.resolve_id(i) for i in ids} - {None} for _, ids in dev.mentions]
        train = [normalize_name(t) for t in dev.train_texts]
        self.seen = np.asarray(seen_mask(queries, kb.names, train), dtype=bool)
        n_names = len(kb.names)
        if candidates == "all":
            self.rows = np.arange(n_names, dtype=np.int64)
        else:
            rng = np.random.default_rng(seed)
            sample = rng.choice(n_names, size=min(int(sample_names), n_names), replace=False)
            gold_rows = _gold_rows(kb, sorted(set().union(*self.golds)), int(gold_names), rng)
            short = _shortlist_rows(kb.names, list(self.queries), int(shortlist_k))
            self.rows = np.unique(np.concatenate([sample.astype(np.int64), np.asarray(gold_rows, dtype=np.int64),
                                                  short]))
        self.row_ptr, self.row_concepts = (np.asarray(a) for a in kb.row_concept_csr())
        self.setup_seconds = time.perf_counter() - started
        logger.info("dev set: %d mentions (%d distinct; %d seen, %d unseen), %d candidate names (%s) of %d, "
                    "chosen in %.1f s", len(queries), len(self.queries), int(self.seen.sum()),
                    int((~self.seen).sum()), len(self.rows), candidates, n_names, self.setup_seconds)

    def describe(self) -> Dict[str, Any]:
        return {"dev_mentions": len(self.golds), "dev_seen": int(self.seen.sum()), "dev_unseen": int((~self.seen).sum()),
                "dev_candidate_names": int(len(self.rows)), "dev_candidates": self.candidates}

    def _concept_ranks(self, sims: np.ndarray, k: int) -> List[List[int]]:
        """Per query row of ``sims`` (over ``self.rows``): the first ``k`` concept indices, best name first."""
        pool = min(sims.shape[1], _NAME_POOL * k)
        top = np.argpartition(-sims, pool - 1, axis=1)[:, :pool] if pool < sims.shape[1] else \
            np.tile(np.arange(sims.shape[1]), (sims.shape[0], 1))
        out: List[List[int]] = []
        for qi in range(sims.shape[0]):
            order = top[qi][np.argsort(-sims[qi, top[qi]], kind="stable")]
            ranked: List[int] = []
            for col in order:
                row = self.rows[col]
                for c in self.row_concepts[self.row_ptr[row]:self.row_ptr[row + 1]]:
                    if int(c) not in ranked:
                        ranked.append(int(c))
                if len(ranked) >= k:
                    break
            out.append(ranked[:k])
        return out

    def evaluate(self, encoder: Any, *, name_vectors: Optional[np.ndarray] = None) -> Tuple[Dict[str, Any], np.ndarray]:
        """``(figures, vectors of the candidate names)`` for ``encoder`` (any object with ``encode``);
        ``name_vectors``: the candidate names' vectors when the caller has them already."""
        started = time.perf_counter()
        kb, ks = self.dev.kb, self.dev.ks
        names = name_vectors if name_vectors is not None else encoder.encode([kb.names[int(r)] for r in self.rows])
        qv = encoder.encode([str(q) for q in self.queries])
        ranks: List[List[int]] = []
        for start in range(0, len(qv), 512):
            ranks += self._concept_ranks(qv[start:start + 512] @ names.T, max(ks))
        concept_ids = kb.concept_ids
        figures: Dict[str, Any] = {}
        for k in ks:
            hits = [any(concept_ids[c] in gold for c in ranks[qi][:k]) for gold, qi in zip(self.golds, self.inverse)]
            split = seen_split(hits, self.seen)
            figures[f"dev_acc@{k}"] = split["overall"]["acc"] or 0.0
            if k == ks[0]:
                figures[f"dev_seen_acc@{k}"] = split["seen"]["acc"]
                figures[f"dev_unseen_acc@{k}"] = split["unseen"]["acc"]
                figures["dev_n_seen"], figures["dev_n_unseen"] = split["seen"]["n"], split["unseen"]["n"]
        figures["dev_eval_seconds"] = round(time.perf_counter() - started, 3)  # this evaluation (the row also has the total)
        return figures, names


__all__ = ["DevSet", "DevEvaluator", "DEV_CANDIDATES", "selection_score"]
