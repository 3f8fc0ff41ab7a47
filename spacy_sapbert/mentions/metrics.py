"""Scoring: gold resolution through the KB, acc@k lenient and strict, ambiguity, filtered subsets.

Protocols (every number says which one it uses):

- **strict** (KRISSBERT): a prediction is one concept; acc@k asks whether a gold concept is among
  the first k *concepts* (concepts ranked by their best name's score, as the systems rank them: ties go to
  the concept whose preferred name it is, then by concept id).
- **lenient** (SapBERT / BioSyn): a prediction is one dictionary *name*; it is right if any concept
  sharing that name is gold; acc@k looks at the first k *names*. Only systems that rank names
  have it (concept-only systems such as scispaCy's linker report ``None``).
- **composite** gold (``A|B``, ``A+B``): a prediction is right if it hits *any* part, in both
  protocols (as the SapBERT/BioSyn scripts do); the runner's ``exclude_composite`` drops such
  mentions instead (the setting of the reference numbers).
- gold ids go through ``kb.resolve_id`` (alternate ids: MEDIC's OMIM numbers, MeSH); a mention
  with no gold id in the KB stays in the denominator, counts as wrong, and is reported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ConfigError, Errors

# a ranked concept list, best first: [(concept_id, score), ...]
ConceptRanking = List[Tuple[str, float]]
# a ranked name list, best first: [(name, concepts sharing it, score), ...]
NameRanking = List[Tuple[str, Tuple[str, ...], float]]


@dataclass
class Ranking:
    """What a system returns for one mention."""

    concepts: ConceptRanking = field(default_factory=list)
    names: Optional[NameRanking] = None


@dataclass(frozen=True)
class Gold:
    """A mention's gold concepts after KB resolution. ``missing`` are raw ids the KB lacks."""

    ids: FrozenSet[str]
    raw: Tuple[str, ...]
    missing: Tuple[str, ...] = ()

    @property
    def in_kb(self) -> bool:
        return bool(self.ids)


def resolve_gold_id(kb, raw_id: str) -> Optional[str]:
    """``kb.resolve_id(raw_id)``; failing that, the id without its ``PREFIX:`` (``OMIM:123`` →
    ``123``, ``MESH:D001`` → ``D001``), then with ``MESH:`` added. First hit wins."""
    tries = [raw_id]
    if ":" in raw_id:
        tries.append(raw_id.split(":", 1)[1])
    else:
        tries.append(f"MESH:{raw_id}")
    for candidate in tries:
        cid = kb.resolve_id(candidate)
        if cid is not None:
            return cid
    return None


def resolve_gold(kb, raw_ids: Sequence[str]) -> Gold:
    found: List[str] = []
    missing: List[str] = []
    for raw in raw_ids:
        cid = resolve_gold_id(kb, raw)
        if cid is None:
            missing.append(raw)
        elif cid not in found:
            found.append(cid)
    return Gold(ids=frozenset(found), raw=tuple(raw_ids), missing=tuple(missing))


def check_ks(ks: Sequence[int]) -> Tuple[int, ...]:
    try:
        out = tuple(sorted({int(k) for k in ks}))
    except (TypeError, ValueError):
        raise ConfigError(Errors.E304.format(value=list(ks))) from None
    if not out or out[0] < 1 or any(isinstance(k, bool) for k in ks):
        raise ConfigError(Errors.E304.format(value=list(ks)))
    return out


def first_hit_strict(gold: Gold, ranking: Ranking) -> Optional[int]:
    """1-based rank of the first gold concept, or None."""
    for rank, (cid, _score) in enumerate(ranking.concepts, start=1):
        if cid in gold.ids:
            return rank
    return None


def first_hit_lenient(gold: Gold, ranking: Ranking) -> Optional[int]:
    """1-based rank of the first name some gold concept shares, or None."""
    if ranking.names is None:
        return None
    for rank, (_name, cids, _score) in enumerate(ranking.names, start=1):
        if gold.ids.intersection(cids):
            return rank
    return None


def acc_at_k(first_hits: Sequence[Optional[int]], ks: Sequence[int]) -> Dict[int, float]:
    """Share of mentions whose first hit is at rank ≤ k, for each k."""
    n = len(first_hits)
    if n == 0:
        return {k: 0.0 for k in ks}
    ranks = np.array([h if h is not None else np.iinfo(np.int64).max for h in first_hits], dtype=np.int64)
    return {k: float((ranks <= k).sum()) / n for k in ks}


def ambiguous_share(rankings: Sequence[Ranking]) -> Optional[float]:
    """Share of mentions whose best name belongs to more than one concept (None: no names)."""
    if not rankings or any(r.names is None for r in rankings):
        return None
    amb = sum(1 for r in rankings if r.names and len(r.names[0][1]) > 1)
    return amb / len(rankings)


def score(golds: Sequence[Gold], rankings: Sequence[Ranking], ks: Sequence[int]) -> Dict[str, object]:
    """acc@k strict and lenient (None when the system ranks no names), ambiguity share, counts."""
    ks = check_ks(ks)
    strict = [first_hit_strict(g, r) for g, r in zip(golds, rankings)]
    has_names = bool(rankings) and all(r.names is not None for r in rankings)
    lenient = [first_hit_lenient(g, r) for g, r in zip(golds, rankings)] if has_names else None
    return {
        "n": len(golds),
        "strict": {f"acc@{k}": v for k, v in acc_at_k(strict, ks).items()},
        "lenient": {f"acc@{k}": v for k, v in acc_at_k(lenient, ks).items()} if lenient is not None else None,
        "ambiguous_top1": ambiguous_share(rankings),
        "no_prediction": sum(1 for r in rankings if not r.concepts),
    }


# ---------------------------------------------------------------- filtered subsets

def levenshtein_within(a: str, b: str, max_dist: int) -> Optional[int]:
    """Edit distance of ``a`` and ``b`` if it is ≤ ``max_dist``, else None (banded DP, O(len·band))."""
    la, lb = len(a), len(b)
    if abs(la - lb) > max_dist:
        return None
    if la > lb:
        a, b, la, lb = b, a, lb, la
    if la == 0:
        return lb if lb <= max_dist else None
    big = max_dist + 1
    prev = [j if j <= max_dist else big for j in range(lb + 1)]
    for i in range(1, la + 1):
        lo, hi = max(1, i - max_dist), min(lb, i + max_dist)
        cur = [big] * (lb + 1)
        cur[0] = i if i <= max_dist else big
        ca = a[i - 1]
        best = cur[0]
        for j in range(lo, hi + 1):
            v = prev[j - 1] + (ca != b[j - 1])
            if prev[j] + 1 < v:
                v = prev[j] + 1
            if cur[j - 1] + 1 < v:
                v = cur[j - 1] + 1
            cur[j] = v if v < big else big
            if v < best:
                best = v
        if best > max_dist:
            return None
        prev = cur
    return prev[lb] if prev[lb] <= max_dist else None


def _char_counts(texts: Sequence[str], alphabet: Dict[str, int]) -> np.ndarray:
    out = np.zeros((len(texts), len(alphabet) + 1), dtype=np.int16)
    other = len(alphabet)
    for i, t in enumerate(texts):
        for ch in t:
            out[i, alphabet.get(ch, other)] += 1
    return out


def near_duplicates(queries: Sequence[str], references: Sequence[str], threshold: float) -> List[bool]:
    """For each query: is some reference within normalised Levenshtein distance ≤ ``threshold``
    (distance / max(len))? Exact: a length filter and a character-count (bag distance) lower bound
    prune pairs in NumPy; a banded edit distance settles the rest."""
    refs = sorted(set(references), key=len)
    if not refs or not queries:
        return [False] * len(queries)
    ref_set = set(refs)
    ref_len = np.array([len(r) for r in refs])
    # characters not in any query share one bucket: merging buckets keeps a valid lower bound
    alphabet = {ch: i for i, ch in enumerate(sorted(set("".join(queries))))}
    ref_counts = _char_counts(refs, alphabet)
    q_counts = _char_counts(queries, alphabet)
    result: List[bool] = []
    for qi, q in enumerate(queries):
        if q in ref_set:
            result.append(True)
            continue
        lq = len(q)
        # d/max(lq, lr) <= t with d >= |lq - lr|: lr in [lq*(1-t), lq/(1-t)]
        lo = np.searchsorted(ref_len, int(np.floor(lq * (1 - threshold))), side="left")
        hi = np.searchsorted(ref_len, int(np.ceil(lq / (1 - threshold))) if threshold < 1 else 10**9, side="right")
        hit = False
        if hi > lo:
            cand_len = ref_len[lo:hi]
            max_d = np.floor(threshold * np.maximum(cand_len, lq) + 1e-9).astype(np.int64)
            diff = ref_counts[lo:hi].astype(np.int32) - q_counts[qi].astype(np.int32)
            bag = np.maximum(np.clip(diff, 0, None).sum(1), np.clip(-diff, 0, None).sum(1))
            for j in np.nonzero(bag <= max_d)[0]:
                if levenshtein_within(q, refs[lo + j], int(max_d[j])) is not None:
                    hit = True
                    break
        result.append(hit)
    return result


def subset_masks(queries: Sequence[str], dictionary_names: Sequence[str], train_mentions: Sequence[str],
                 threshold: float = 0.2) -> Dict[str, List[bool]]:
    """Masks (True = kept) for ``full``, ``filtered`` (no exact match to a dictionary name or a
    training mention) and ``filtered_lev`` (also none within normalised Levenshtein ≤ threshold).
    Strings are compared as given: normalise them the same way first."""
    refs = set(dictionary_names) | set(train_mentions)
    exact = [q in refs for q in queries]
    near = near_duplicates(queries, sorted(refs), threshold)
    return {
        "full": [True] * len(queries),
        "filtered": [not e for e in exact],
        f"filtered_lev{threshold:g}": [not (e or n) for e, n in zip(exact, near)],
    }


# ---------------------------------------------------------------- seen / unseen

def seen_mask(queries: Sequence[str], dictionary_names: Sequence[str], train_mentions: Sequence[str]) -> List[bool]:
    """For each query: is it *seen*, i.e. equal to a dictionary name or a training mention (as given:
    normalise all three the same way first)? The rest are *unseen*: what a model must generalise to."""
    refs = set(dictionary_names) | set(train_mentions)
    return [q in refs for q in queries]


MENTION_CLASSES = ("dictionary", "train", "neither")


def mention_classes(queries: Sequence[str], dictionary_names: Sequence[str], train_mentions: Sequence[str]) -> List[str]:
    """The protocol's three classes of each query (normalise all three the same way first):
    ``"dictionary"`` (equal to a dictionary name), ``"train"`` (equal to a training mention and not a
    dictionary name), ``"neither"`` (the *refined* subset of Tutubalina et al. 2020: what nobody spelled
    out). ``seen`` of :func:`seen_mask` is the first two together."""
    names, train = set(dictionary_names), set(train_mentions)
    return ["dictionary" if q in names else "train" if q in train else "neither" for q in queries]


def class_split(hits: Sequence[bool], classes: Sequence[str]) -> Dict[str, Dict[str, Optional[float]]]:
    """Accuracy and count overall and per class of :func:`mention_classes`: ``{"overall": {"n", "acc"},
    "dictionary": ..., "train": ..., "neither": ...}`` (``acc`` None for an empty class)."""
    if len(hits) != len(classes):
        raise ValueError(f"{len(hits)} hits but {len(classes)} classes")
    out: Dict[str, Dict[str, Optional[float]]] = {}
    for part in ("overall",) + MENTION_CLASSES:
        chosen = [bool(h) for h, c in zip(hits, classes) if part == "overall" or c == part]
        out[part] = {"n": len(chosen), "acc": (sum(chosen) / len(chosen)) if chosen else None}
    return out


def seen_split(hits: Sequence[bool], seen: Sequence[bool]) -> Dict[str, Dict[str, Optional[float]]]:
    """Accuracy and count overall, on the seen and on the unseen mentions: ``{"overall": {"n", "acc"},
    "seen": ..., "unseen": ...}`` (``acc`` None for an empty part)."""
    if len(hits) != len(seen):
        raise ValueError(f"{len(hits)} hits but {len(seen)} seen flags")
    out: Dict[str, Dict[str, Optional[float]]] = {}
    for part, keep in (("overall", [True] * len(hits)), ("seen", list(seen)), ("unseen", [not s for s in seen])):
        chosen = [bool(h) for h, k in zip(hits, keep) if k]
        out[part] = {"n": len(chosen), "acc": (sum(chosen) / len(chosen)) if chosen else None}
    return out


__all__ = [
    "MENTION_CLASSES",
    "mention_classes",
    "class_split",
    "seen_mask",
    "seen_split",
    "Ranking",
    "Gold",
    "ConceptRanking",
    "NameRanking",
    "resolve_gold_id",
    "resolve_gold",
    "check_ks",
    "first_hit_strict",
    "first_hit_lenient",
    "acc_at_k",
    "ambiguous_share",
    "score",
    "levenshtein_within",
    "near_duplicates",
    "subset_masks",
]
