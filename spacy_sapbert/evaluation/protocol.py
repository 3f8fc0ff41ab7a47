"""The evaluation protocol, defined once: what ``evaluate`` reports for every system besides acc@k.

- **Mention classes** (:data:`~.metrics.MENTION_CLASSES`): each mention is *a dictionary name* (its
  key equals a name of the KB as loaded, before any back-off), *a train mention* (equals a mention of
  the training files and is not a dictionary name) or *neither* (the refined subset: what nobody spelled
  out). Keys are the protocol's normalisation (:func:`protocol_key`): the KB's
  :func:`~spacy_sapbert.kb.normalize_name` (NFKC, lowercase, whitespace folded) plus the run's punctuation
  folding, applied to the query, the training mentions and the dictionary names alike, so that keeping
  case (``input.lowercase = false``) does not move a mention from one class to another.
- **Unseen in train**: the mention's key is not a training mention's (whether or not it is a dictionary
  name); the number a fine-tuning claim must be judged on.
- **Ambiguous subset** (:data:`AMBIGUOUS`): one definition, whether or not a context system runs.
- **Candidate recall@k** (:func:`candidate_recall`): the share of mentions whose gold concept is among the
  first ``k`` concepts of a system's *candidate stage* (strict), for k in :data:`CANDIDATE_KS`; for a
  re-ranker it is the ceiling of what re-ranking can reach.
- **Linking speed** (:func:`link_speed`): mentions/s of ranking every mention with everything the system
  encodes for them (mention names; the contexts a context system re-ranks, as the linker picks them), encoder
  caches emptied first; the one-off encoding of the dictionary and the prototypes is not part of it (it is
  reported apart, as ``setup_seconds``).
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence

from ..kb.concept import normalize_name
from ..mentions.metrics import MENTION_CLASSES, Gold, Ranking, class_split, first_hit_strict, mention_classes
from .preprocess import make_preprocessor

CANDIDATE_KS = (1, 5, 16, 64)

CLASS_LABELS = {"overall": "overall", "dictionary": "a dictionary name", "train": "a train mention",
                "neither": "neither (refined)", "unseen_in_train": "unseen in train"}

CLASSES = ("mention classes, on the normalised mention (NFKC, lowercase, whitespace folded, the run's punctuation "
           "folding; the same for dictionary names and train mentions): a dictionary name (of the KB before "
           "back-off) / a train mention (not a dictionary name) / neither = the refined subset; unseen in train = "
           "not a train mention")

AMBIGUOUS = ("ambiguous subset: the preprocessed mention is a dictionary name of 2+ concepts, or the two best "
             "concepts of the reference name-only encoder ({reference}) tie")
AMBIGUOUS_NO_REFERENCE = ("ambiguous subset: the preprocessed mention is a dictionary name of 2+ concepts (no "
                          "name-only encoder in the run to add its ties)")

CANDIDATE_RECALL = ("candidate recall@k: share of mentions whose gold concept is among the first k concepts of the "
                    "system's candidate stage (strict; a re-ranker cannot do better); '–' where k exceeds the depth "
                    "the stage proposes")

SPEED = ("linking speed: mentions/s of ranking every mention with everything the system encodes for it (mention "
         "names; the contexts of the mentions a context system re-ranks; encoder caches emptied first); the one-off "
         "encoding of the dictionary and prototypes (setup) is not counted")


def protocol_key(fold_punctuation: bool) -> Callable[[str], str]:
    """The protocol's normalisation of a mention or a name (see the module doc)."""
    prep = make_preprocessor(lowercase=True, fold_punctuation=fold_punctuation)
    return lambda text: prep(normalize_name(text))


class MentionClasses:
    """The class of every mention of a run and whether it is unseen in train (see the module doc)."""

    def __init__(self, queries: Sequence[str], dictionary_names: Iterable[str], train_mentions: Iterable[str], *,
                 fold_punctuation: bool = False) -> None:
        key = protocol_key(fold_punctuation)
        keys = [key(q) for q in queries]
        train = {key(t) for t in train_mentions}
        self.classes: List[str] = mention_classes(keys, {key(n) for n in dictionary_names}, train)
        self.unseen_in_train: List[bool] = [k not in train for k in keys]

    def counts(self) -> Dict[str, int]:
        out = {c: self.classes.count(c) for c in MENTION_CLASSES}
        out["unseen_in_train"] = sum(self.unseen_in_train)
        return out

    def split(self, hits: Sequence[bool]) -> Dict[str, Dict[str, Optional[float]]]:
        """Accuracy and count overall, per class and unseen in train (``acc`` None for an empty part)."""
        out = class_split(hits, self.classes)
        chosen = [bool(h) for h, unseen in zip(hits, self.unseen_in_train) if unseen]
        out["unseen_in_train"] = {"n": len(chosen), "acc": (sum(chosen) / len(chosen)) if chosen else None}
        return out

    def strict_split(self, golds: Sequence[Gold], rankings: Sequence[Ranking]) -> Dict[str, Dict[str, Optional[float]]]:
        """:meth:`split` of strict acc@1."""
        return self.split([first_hit_strict(g, r) == 1 for g, r in zip(golds, rankings)])


def candidate_recall(golds: Sequence[Gold], candidates: Sequence[Ranking], ks: Sequence[int],
                     depth: int) -> Dict[str, object]:
    """``{"depth": depth, "n": n, "recall@k": share or None (k > depth), ..., "recall@depth": share}``: a gold
    concept among the first k (at most ``depth``) concepts of each mention's candidate ranking."""
    n = len(golds)
    hits = [first_hit_strict(g, Ranking(concepts=list(c.concepts[:depth]))) for g, c in zip(golds, candidates)]

    def share(k: int) -> float:
        return sum(1 for h in hits if h is not None and h <= k) / n if n else 0.0

    out: Dict[str, object] = {"depth": int(depth), "n": n}
    for k in ks:
        out[f"recall@{k}"] = share(k) if k <= depth else None
    out["recall@depth"] = share(depth)
    return out


def link_speed(n: int, seconds: float) -> Dict[str, object]:
    """``{"link_seconds", "mentions_per_s"}`` of linking ``n`` mentions in ``seconds`` (see :data:`SPEED`)."""
    return {"link_seconds": round(seconds, 6), "mentions_per_s": round(n / seconds, 1) if seconds > 0 else None}


def cold(*encoders: object) -> None:
    """Empty the LRU caches of ``encoders`` (those that have one: name encoders, a re-ranker stage's logits) so
    that a timed call encodes and scores what it links (the dictionary encoding fills the name encoder's cache)."""
    for encoder in encoders:
        clear = getattr(encoder, "clear_cache", None)
        if callable(clear):
            clear()


__all__ = ["CANDIDATE_KS", "CLASS_LABELS", "CLASSES", "AMBIGUOUS", "AMBIGUOUS_NO_REFERENCE", "CANDIDATE_RECALL",
           "SPEED", "protocol_key", "MentionClasses", "candidate_recall", "link_speed", "cold"]
