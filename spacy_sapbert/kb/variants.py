"""Mention-like variants of dictionary names: what running text writes instead of the name.

Each generator is one small function ``(name, rng) -> candidates`` on a *normalised* name
(:func:`~spacy_sapbert.kb.concept.normalize_name`: lowercase, NFKC, whitespace folded):

- ``word_order``: "carcinoma of the breast" → "breast carcinoma"; MeSH's inverted names
  "carcinoma, ductal, breast" → "breast ductal carcinoma".
- ``number``: the head word singular ↔ plural ("ovarian cysts" ↔ "ovarian cyst"; the head is the
  last word, or the word before " of ").
- ``generic_head``: a generic head dropped ("huntington disease" → "huntington", "deficiency of
  factor ix" → "factor ix"; the heads are a setting).
- ``punctuation``: hyphen → space and hyphen dropped ("non-hodgkin" → "non hodgkin", "nonhodgkin"),
  "'s" dropped ("crohn's disease" → "crohn disease"), a parenthesised part dropped.
- ``typo``: one character typo (deletion, transposition, a keyboard neighbour, a doubled letter) in
  a word of 5+ letters, never its first letter; only for a share ``typo_rate`` of the names.

Case variants are not generated: the one normaliser lowercases names, training texts and queries alike,
so "Breast Cancer" and "breast cancer" are the same text to the encoder.

:func:`name_variants` runs the chosen generators on one name with a RNG seeded by ``(seed, name)``
(so a name's variants do not depend on the order names are visited), normalises every candidate
and keeps it only if it differs from the name, is not a name of another concept (``is_taken``) and
is not empty; at most ``max_per_name`` of them (a seeded sample).
"""
from __future__ import annotations

import random
import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from .concept import normalize_name
from .spellings import WORD as _WORD, punctuation_variants, toggle_number

Generator = Callable[[str, random.Random], List[str]]

DEFAULT_GENERIC_HEADS: Tuple[str, ...] = ("disease", "diseases", "syndrome", "syndromes", "disorder", "disorders",
                                          "deficiency of")
_LIST_WORDS = {"and", "or", "with", "included", "formerly", "see", "also"}  # a list or a note, not an inverted name
_KEYBOARD = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def word_order(name: str, rng: random.Random) -> List[str]:
    """"x of (the) y" → "y x" (both sides of at most three words); "a, b, c" → "c b a" (two or three parts,
    none holding a list word such as "and", "with", "included")."""
    out: List[str] = []
    m = re.match(r"^(.+?) of (?:the )?(.+)$", name)
    if m and " of " not in m.group(2) and "," not in name:
        head, modifier = m.group(1), m.group(2)
        if len(head.split()) <= 3 and len(modifier.split()) <= 3:
            out.append(f"{modifier} {head}")
    parts = [p.strip() for p in name.split(",")]
    plain = all(p and not set(p.split()) & _LIST_WORDS for p in parts)
    if 1 < len(parts) <= 3 and plain:
        out.append(" ".join(reversed(parts)))
    return out


def number(name: str, rng: random.Random) -> List[str]:
    """The head word (last word, the word before " of ", or the last word before the first comma of
    an inverted name) singular ↔ plural."""
    words = name.split(" ")
    if "," in name:
        at = next((i for i, w in enumerate(words) if w.endswith(",")), -1)
        toggled = toggle_number(words[at][:-1]) if at >= 0 else ""
        return [" ".join(words[:at] + [toggled + ","] + words[at + 1:])] if toggled else []
    at = words.index("of") - 1 if "of" in words[1:] else len(words) - 1
    toggled = toggle_number(words[at])
    if not toggled:
        return []
    return [" ".join(words[:at] + [toggled] + words[at + 1:])]


def generic_head(name: str, rng: random.Random, heads: Sequence[str] = DEFAULT_GENERIC_HEADS) -> List[str]:
    """The name without a generic head word at its end ("x disease") or start ("deficiency of x",
    "syndrome x"); only when at least one word of three letters or more is left."""
    out: List[str] = []
    for head in heads:
        rest = ""
        if name.endswith(" " + head):
            rest = name[: -len(head) - 1]
        elif name.startswith(head + " "):
            rest = name[len(head) + 1:]
        rest = rest.strip(" ,")
        if rest and any(len(w) >= 3 for w in re.findall(r"[a-z]+", rest)):
            out.append(rest)
    return out


def punctuation(name: str, rng: random.Random) -> List[str]:
    """Hyphens as spaces or dropped, "'s" dropped, a "(...)" part dropped (inverted names: ``word_order``)."""
    return punctuation_variants(name)


def _neighbours(char: str) -> str:
    for row in _KEYBOARD:
        i = row.find(char)
        if i >= 0:
            return row[max(0, i - 1) : i] + row[i + 1 : i + 2]
    return ""


def typo(name: str, rng: random.Random) -> List[str]:
    """One typo in a word of five letters or more (never its first letter)."""
    words = name.split(" ")
    long_words = [i for i, w in enumerate(words) if _WORD.match(w) and len(w) >= 5]
    if not long_words:
        return []
    i = rng.choice(long_words)
    word = words[i]
    at = rng.randrange(1, len(word) - 1)
    kind = rng.choice(("delete", "transpose", "neighbour", "double"))
    if kind == "delete":
        word = word[:at] + word[at + 1:]
    elif kind == "transpose":
        word = word[:at] + word[at + 1] + word[at] + word[at + 2:]
    elif kind == "neighbour":
        near = _neighbours(word[at])
        word = word[:at] + (rng.choice(near) if near else word[at]) + word[at + 1:]
    else:
        word = word[:at] + word[at] + word[at:]
    return [" ".join(words[:i] + [word] + words[i + 1:])]


GENERATORS: Dict[str, Generator] = {
    "word_order": word_order,
    "number": number,
    "generic_head": generic_head,
    "punctuation": punctuation,
    "typo": typo,
}


def name_variants(name: str, generators: Sequence[str], *, is_taken: Callable[[str], bool], seed: int = 0,
                  max_per_name: int = 2, typo_rate: float = 0.1,
                  generic_heads: Sequence[str] = DEFAULT_GENERIC_HEADS) -> List[Tuple[str, str]]:
    """``(variant, generator)`` for one normalised ``name``: every candidate of ``generators`` (names of
    :data:`GENERATORS`), normalised, kept when it is not the name, not ``is_taken`` (a name of another
    concept) and not seen before; at most ``max_per_name`` (a sample seeded by ``seed`` and the name)."""
    rng = random.Random(f"{seed}:{name}")
    found: Dict[str, str] = {}
    for kind in generators:
        if kind == "typo":
            if rng.random() >= typo_rate:
                continue
            candidates = typo(name, rng)
        elif kind == "generic_head":
            candidates = generic_head(name, rng, generic_heads)
        else:
            candidates = GENERATORS[kind](name, rng)
        for raw in candidates:
            variant = normalize_name(raw)
            if variant and variant != name and variant not in found and not is_taken(variant):
                found[variant] = kind
    chosen = list(found.items())
    if len(chosen) > max_per_name:
        chosen = [chosen[i] for i in sorted(rng.sample(range(len(chosen)), max_per_name))]
    return chosen


def kb_variants(kb: Any, generators: Sequence[str], *, seed: int = 0, max_per_name: int = 2, typo_rate: float = 0.1,
                generic_heads: Sequence[str] = DEFAULT_GENERIC_HEADS,
                rows: Optional[Iterable[int]] = None) -> Iterator[Tuple[str, int, int, str]]:
    """``(variant, name row, concept label, generator)`` for the names of ``kb`` that belong to one concept
    (``rows``: only these rows; default all). A variant that is a name of another concept, or a name of
    the same concept already, is dropped (the second is already a synonym pair); ``label`` is the
    concept's position in ``kb.concept_ids``."""
    from bisect import bisect_left

    concept_ids = kb.concept_ids
    names = kb.names

    def taken(text: str) -> bool:  # a name already: another concept's (wrong) or its own (no new pair)
        return kb.row_of_name(text) >= 0

    for row in (range(len(names)) if rows is None else rows):
        owners = kb.concepts_of_row(row)
        if len(owners) != 1:
            continue  # an ambiguous name: which concept its variants mean is unknown
        for variant, kind in name_variants(names[row], generators, is_taken=taken, seed=seed,
                                           max_per_name=max_per_name, typo_rate=typo_rate,
                                           generic_heads=generic_heads):
            yield variant, int(row), bisect_left(concept_ids, owners[0]), kind


__all__ = ["GENERATORS", "DEFAULT_GENERIC_HEADS", "word_order", "number", "generic_head", "punctuation", "typo",
           "name_variants", "kb_variants"]
