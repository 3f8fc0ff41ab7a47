"""Query-side mention variants: what a dictionary might write for a mention, used at link time to widen
the candidate stage (``sapbert_linker``'s ``query_variants``; :func:`~.hybrid.gather`'s ``variants``).

The training generators (:mod:`spacy_sapbert.kb.variants`) turn dictionary names into what text
writes; these go the other way, from a normalised mention (:func:`~spacy_sapbert.kb.concept.normalize_name`)
to spellings a dictionary uses. Each kind is a small function ``text -> candidates``:

- ``number``: the head word (last word, or the word before " of ") singular ↔ plural ("ovarian cyst" ↔
  "ovarian cysts"; MeSH names are mostly plural);
- ``generic_head``: a generic head word dropped ("huntington disease" → "huntington", "cardiac defects" →
  "cardiac"; the words are :data:`GENERIC_HEADS`), only when a word of three letters or more is left;
- ``punctuation``: hyphens as spaces and dropped, "'s" dropped, a "(...)" part dropped;
- ``word_order``: "x of (the) y" → "y x" and a two- or three-word "a b" → MeSH's inverted "b, a".

A variant only adds candidates: every candidate concept is still scored against the mention as written
(its dense and sparse scores), so the top concept can change only when a variant brings in one the
mention's own lists missed. :func:`query_variants` is deterministic (no RNG): the same mention gives the
same variants, in the order of ``kinds``, duplicates and the mention itself removed, at most ``limit``.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Sequence, Tuple

from ..errors import ConfigError, Errors
from ..kb.concept import normalize_name
from ..kb.spellings import WORD as _WORD, punctuation_variants, toggle_number

GENERIC_HEADS: Tuple[str, ...] = ("disease", "diseases", "disorder", "disorders", "syndrome", "syndromes",
                                  "defect", "defects", "deficiency", "condition", "conditions", "symptoms",
                                  "abnormality", "abnormalities", "anomaly", "anomalies")
MAX_VARIANTS = 8  # per mention: each variant is one more dense and one more sparse search


def number(text: str) -> List[str]:
    words = text.split(" ")
    at = words.index("of") - 1 if "of" in words[1:] else len(words) - 1
    toggled = toggle_number(words[at], y_plural=True)
    return [" ".join(words[:at] + [toggled] + words[at + 1:])] if toggled else []


def generic_head(text: str) -> List[str]:
    words = text.split(" ")
    if len(words) < 2 or words[-1] not in GENERIC_HEADS:
        return []
    rest = " ".join(words[:-1]).strip(" ,")
    return [rest] if any(len(w) >= 3 for w in re.findall(r"[a-z]+", rest)) else []


def word_order(text: str) -> List[str]:
    m = re.match(r"^(.+?) of (?:the )?(.+)$", text)
    if m and " of " not in m.group(2) and "," not in text:
        return [f"{m.group(2)} {m.group(1)}"]
    words = text.split(" ")
    if 2 <= len(words) <= 3 and "," not in text and all(_WORD.match(w) for w in words):
        return [f"{words[-1]}, {' '.join(words[:-1])}"]
    return []


KINDS: Dict[str, Callable[[str], List[str]]] = {
    "number": number,
    "generic_head": generic_head,
    "punctuation": punctuation_variants,
    "word_order": word_order,
}


def check_kinds(kinds: Any, *, name: str = "sapbert_linker") -> List[str]:
    """``kinds`` as a list of distinct names of :data:`KINDS` (order kept), else E786."""
    ok = isinstance(kinds, (list, tuple)) and all(isinstance(x, str) and x in KINDS for x in kinds)
    if not ok or len(set(kinds)) != len(kinds):
        raise ConfigError(Errors.E786.format(what="query_variants", value=kinds,
                                             allowed=f"a list of distinct kinds from {', '.join(KINDS)} ([] = none; "
                                                     f"[components.{name}])"))
    return list(kinds)


def query_variants(text: str, kinds: Sequence[str], *, limit: int = MAX_VARIANTS) -> List[str]:
    """The variants of the normalised mention ``text`` made by ``kinds`` (names of :data:`KINDS`, checked by
    the caller), normalised, without ``text`` itself and duplicates, at most ``limit`` (see the module doc)."""
    out: List[str] = []
    for kind in kinds:
        for raw in KINDS[kind](text):
            variant = normalize_name(raw)
            if variant and variant != text and variant not in out:
                out.append(variant)
    return out[:limit]


__all__ = ["GENERIC_HEADS", "KINDS", "MAX_VARIANTS", "check_kinds", "query_variants"]
