"""``[pairs.mention_like]`` put to work: the extra pairs of ``pretrain`` and the extra mentions of ``finetune``.

Pretraining: every name of one concept gives up to ``max_per_name`` variants (:mod:`.variants`),
each paired with that name; abbreviations mined from ``raw_text`` (:mod:`.abbreviation_pairs`) are
paired with the name their long form matched. Fine-tuning: each training mention gives variants the
same way, and each becomes one more training mention with the mention's gold ids (it is paired with
their names like the mention); mined abbreviations become mentions of their concept.

Both return a record of the settings and of how many pairs each generator gave, which the pair set
keeps in ``meta.json`` (a resumed run refuses other settings, E208).
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..kb.concept import normalize_name
from ..base.util import get_logger
from .abbreviation_pairs import raw_text_pairs
from .config import MentionLikeSettings
from ..kb.variants import kb_variants, name_variants

logger = get_logger("training.mention_like")

Pair = Tuple[str, int, int]


def settings_record(settings: MentionLikeSettings) -> Optional[Dict[str, Any]]:
    """What a pair set records of the settings (None when mention-like pairs are off)."""
    return dataclasses.asdict(settings) if settings.enabled else None


def _record(settings: MentionLikeSettings, counts: Counter) -> Dict[str, Any]:
    return {"settings": settings_record(settings), "counts": dict(sorted(counts.items()))}


def pretrain_pairs(kb: Any, settings: MentionLikeSettings, seed: int) -> Tuple[List[Pair], Optional[Dict[str, Any]]]:
    """``(text, name row, concept label)`` pairs for :func:`~spacy_sapbert.training.pairs.write_kb_pairs`'s
    ``extra`` and the record for its meta; ``([], None)`` when the settings are off. A variant made from
    names of two concepts is left out (counted as ``dropped_ambiguous``)."""
    if not settings.enabled:
        return [], None
    counts: Counter = Counter()
    pairs: List[Pair] = []
    found = list(kb_variants(kb, settings.generators, seed=seed, max_per_name=settings.max_per_name,
                             typo_rate=settings.typo_rate, generic_heads=settings.generic_heads))
    found += raw_text_pairs(kb, settings.raw_text)
    labels: Dict[str, set] = {}
    for text, _row, label, _kind in found:
        labels.setdefault(text, set()).add(label)
    for text, row, label, kind in found:
        if len(labels[text]) > 1:  # the same variant made from names of two concepts: which one it means is unknown
            counts["dropped_ambiguous"] += 1
            continue
        pairs.append((text, row, label))
        counts[kind] += 1
    logger.info("mention-like pairs: %s", dict(counts))
    return pairs, _record(settings, counts)


def _fields(mention: Any) -> Tuple[str, Tuple[str, ...]]:
    if isinstance(mention, tuple) and len(mention) == 2:
        return mention[0], tuple(mention[1])
    return mention.text, tuple(mention.ids)


def finetune_mentions(kb: Any, mentions: Sequence[Any], settings: MentionLikeSettings,
                      seed: int) -> Tuple[List[Any], Optional[Dict[str, Any]]]:
    """``mentions`` followed by ``(variant, ids)`` of each distinct training mention and
    ``(short form, (concept id,))`` of each mined abbreviation, and the record for the pair set's meta;
    ``(mentions, None)`` when the settings are off."""
    if not settings.enabled:
        return list(mentions), None
    counts: Counter = Counter()
    extra: List[Tuple[str, Tuple[str, ...]]] = []
    seen = set()

    def taken(text: str) -> bool:
        return kb.row_of_name(text) >= 0

    for mention in mentions:
        text, ids = _fields(mention)
        key = (normalize_name(text), ids)
        if not key[0] or not ids or key in seen:
            continue
        seen.add(key)
        for variant, kind in name_variants(key[0], settings.generators, is_taken=taken, seed=seed,
                                           max_per_name=settings.max_per_name, typo_rate=settings.typo_rate,
                                           generic_heads=settings.generic_heads):
            extra.append((variant, ids))
            counts[kind] += 1
    concept_ids = kb.concept_ids
    for short, _row, label, kind in raw_text_pairs(kb, settings.raw_text):
        extra.append((short, (concept_ids[label],)))
        counts[kind] += 1
    logger.info("mention-like training mentions: %s", dict(counts))
    return list(mentions) + extra, _record(settings, counts)


def check_record(meta: Dict[str, Any], settings: MentionLikeSettings) -> Tuple[Any, Any]:
    """``(theirs, ours)``: the settings a pair set was written with and the ones asked for now."""
    theirs = (meta.get("mention_like") or {}).get("settings")
    return theirs, settings_record(settings)


__all__ = ["pretrain_pairs", "finetune_mentions", "settings_record", "check_record"]

