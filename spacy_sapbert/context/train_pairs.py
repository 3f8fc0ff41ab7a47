"""Training pairs for the context encoder: a mention in its context ↔ a name of its concept.

Two sources of mentions, alone or together (``source``):

- ``supervised``: the annotated mentions of the documents (one id in the KB; the same rules and
  coded errors as prototypes: :func:`~spacy_sapbert.context.build.collect_examples`);
- ``self`` (KRISSBERT's self-supervision): the documents' text with the annotations ignored, searched
  for *unambiguous* exact dictionary names (the normalised word n-gram is a KB name of exactly one
  concept; longest match first, no overlaps, at least ``min_chars`` characters).

Each mention is paired with up to ``names_per_mention`` names of its concept (a seeded sample per
mention); with probability ``mask_probability`` (seeded per mention) its own words are replaced by
the tokenizer's mask token, so that the encoder must read the context (KRISSBERT masks; 0 keeps the
name).

The result is a training :class:`~spacy_sapbert.training.PairSet` folder (``meta.json`` kind
``"context"``): text ids below ``n_kb_names`` are KB names, text ``n_kb_names + i`` is line ``i`` of
``texts.txt``, a *packed context*: the window of characters around the mention with newlines folded
and the mention between ``<ENT>`` and ``</ENT>`` (:func:`pack_context` / :func:`unpack_context`).
"""
from __future__ import annotations

import json
import random
import re
import warnings
from bisect import bisect_left
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..base.util import PathLike, atomic_dir, ensure_path, get_logger
from ..errors import ConfigError, DataFormatError, EmptyResultError, Errors, Warnings
from ..kb.concept import normalize_name
from .build import collect_examples
from .context_encoder import _WINDOW_CHARS, MARKERS, MentionInText, check_mention

logger = get_logger("context.train_pairs")

SOURCES = ("supervised", "self", "both")
PAIRS_FILE, TEXTS_FILE, META_FILE = "pairs.bin", "texts.txt", "meta.json"  # training.pairs' layout
_WORD = re.compile(r"\w+|[^\w\s]")
_FOLD = re.compile(r"[\r\n\t\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")  # what str.splitlines would cut


def pack_context(text: str, start: int, end: int, *, mask_token: Optional[str] = None) -> str:
    """One line: the window around ``text[start:end]`` with the mention between the markers (or
    ``mask_token`` in its place); line breaks become spaces, marker strings in the text are blanked."""
    check_mention(text, start, end)
    lo, hi = max(0, start - _WINDOW_CHARS), min(len(text), end + _WINDOW_CHARS)

    def clean(part: str) -> str:
        for marker in MARKERS:
            part = part.replace(marker, " " * len(marker))
        return _FOLD.sub(" ", part)

    mention = mask_token if mask_token else clean(text[start:end])
    return f"{clean(text[lo:start])}{MARKERS[0]}{mention}{MARKERS[1]}{clean(text[end:hi])}"


def unpack_context(line: str) -> MentionInText:
    """``(text, start, end)`` of a packed context (the inverse of :func:`pack_context`)."""
    start = line.find(MARKERS[0])
    close = line.find(MARKERS[1], start + 1)
    if start < 0 or close < 0:
        raise DataFormatError(Errors.E618.format(path="<texts.txt>", why=f"a line without the markers: {line[:80]!r}"))
    mention = line[start + len(MARKERS[0]):close]
    text = line[:start] + mention + line[close + len(MARKERS[1]):]
    return text, start, start + len(mention)


def dictionary_mentions(docs: Sequence[Any], kb: Any, *, min_chars: int = 3, max_words: int = 6,
                        what: str = "the documents") -> Tuple[List[MentionInText], List[str], Dict[str, int]]:
    """Unambiguous exact KB names in the documents' text (annotations ignored): ``(mentions,
    concept ids, counts)``. Word n-grams (``\\w+`` or one punctuation mark per word) of at most
    ``max_words`` words, longest first; a span whose name has 2+ concepts is consumed, not used."""
    if not isinstance(min_chars, int) or min_chars < 1 or not isinstance(max_words, int) or max_words < 1:
        raise ConfigError(Errors.E616.format(option="min_chars / max_words", value=(min_chars, max_words),
                                             why="both must be integers >= 1"))
    mentions: List[MentionInText] = []
    concepts: List[str] = []
    counts = {"documents": len(docs), "no_text": 0, "matches": 0, "ambiguous": 0}
    for doc in docs:
        text = doc.text or ""
        if not text:
            counts["no_text"] += 1
            continue
        words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
        i = 0
        while i < len(words):
            step = 1
            for n in range(min(max_words, len(words) - i), 0, -1):
                start, end = words[i][0], words[i + n - 1][1]
                name = normalize_name(text[start:end])
                if len(name) < min_chars or not any(c.isalpha() for c in name):
                    continue
                row = kb.row_of_name(name)
                if row < 0:
                    continue
                owners = kb.concepts_of_row(row)
                if len(owners) == 1:
                    mentions.append((text, start, end))
                    concepts.append(owners[0])
                    counts["matches"] += 1
                else:
                    counts["ambiguous"] += 1
                step = n
                break
            i += step
    if counts["no_text"]:
        warnings.warn(Warnings.W615.format(n=counts["no_text"], total=len(docs)))
    if not mentions:
        raise EmptyResultError(Errors.E615.format(what=what, docs=len(docs) - counts["no_text"], min_chars=min_chars))
    return mentions, concepts, counts


def context_mentions(docs: Sequence[Any], kb: Any, source: str, *, min_chars: int = 3,
                     what: str = "the documents") -> Tuple[List[MentionInText], List[str], Dict[str, Any]]:
    """The mentions ``source`` asks for (supervised first, then self-supervised), with counts."""
    if source not in SOURCES:
        raise ConfigError(Errors.E002.format(what="context pair source", value=source, choices=", ".join(SOURCES)))
    mentions: List[MentionInText] = []
    concepts: List[str] = []
    counts: Dict[str, Any] = {}
    if source in ("supervised", "both"):
        found, cids, counts["supervised"] = collect_examples(docs, kb, what=what)
        mentions += found
        concepts += cids
    if source in ("self", "both"):
        found, cids, counts["self"] = dictionary_mentions(docs, kb, min_chars=min_chars, what=what)
        mentions += found
        concepts += cids
    return mentions, concepts, counts


def _check_count(option: str, value: Any, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(Errors.E616.format(option=option, value=value, why=f"an integer >= {low}"))


def _context_rows(concepts: Sequence[str], per_mention: int, seed: int, n_names: int,
                  label_of: Dict[str, int]) -> List[Tuple[int, int, int]]:
    """Context-to-context pairs: each mention with up to ``per_mention`` other mentions of its concept
    (seeded sample), so that the loss pulls contexts of one concept together, as prototypes are compared."""
    by_concept: Dict[str, List[int]] = {}
    position: List[int] = []
    for i, cid in enumerate(concepts):
        group = by_concept.setdefault(cid, [])
        position.append(len(group))
        group.append(i)
    rows: List[Tuple[int, int, int]] = []
    for i, cid in enumerate(concepts):
        group, own = by_concept[cid], position[i]
        n_others = len(group) - 1
        rng = random.Random(f"{seed}:context:{i}:{cid}")
        # positions among the others (own skipped): O(per_mention) however many mentions the concept has
        picked = sorted(rng.sample(range(n_others), per_mention)) if n_others > per_mention else range(n_others)
        rows += [(n_names + i, n_names + group[q if q < own else q + 1], label_of[cid]) for q in picked]
    return rows


def write_context_pairs(kb: Any, mentions: Sequence[MentionInText], concepts: Sequence[str], path: PathLike, *,
                        names_per_mention: int = 1, contexts_per_mention: int = 0, mask_probability: float = 0.0,
                        mask_token: str = "[MASK]", seed: int = 0, overwrite: bool = False,
                        extra: Optional[Dict[str, Any]] = None) -> Any:
    """Write the pair set of ``mentions`` (``(text, start, end)``) and their ``concepts`` (KB ids) to
    ``path`` (atomically) and return it as a :class:`~spacy_sapbert.training.PairSet`: each context
    with ``names_per_mention`` names of its concept and with ``contexts_per_mention`` other contexts of
    it (KRISSBERT's mention-to-mention positives; 0: none)."""
    from ..training.pairs import PairSet  # lazy: torch

    _check_count("names_per_mention", names_per_mention, 1)
    _check_count("contexts_per_mention", contexts_per_mention, 0)
    if not isinstance(mask_probability, (int, float)) or not 0.0 <= mask_probability <= 1.0:
        raise ConfigError(Errors.E616.format(option="mask_probability", value=mask_probability,
                                             why="a number in [0, 1] (0: keep the mention's words, 1: always mask)"))
    if len(mentions) != len(concepts) or not mentions:
        raise EmptyResultError(Errors.E616.format(option="mentions", value=len(mentions),
                                                  why=f"need one concept per mention and at least one "
                                                      f"({len(concepts)} concepts)"))
    path = ensure_path(path)
    n_names = len(kb.names)
    concept_ids = kb.concept_ids
    rows: List[Tuple[int, int, int]] = []
    masked = 0
    with atomic_dir(path, overwrite=overwrite) as tmp:
        with open(tmp / TEXTS_FILE, "w", encoding="utf8") as fh:
            for i, ((text, start, end), cid) in enumerate(zip(mentions, concepts)):
                if kb.resolve_id(cid) != cid:
                    raise ConfigError(Errors.E616.format(option="concepts", value=cid,
                                                         why="every concept must be a concept id of the KB"))
                names = kb.rows_of_concept(cid)
                rng = random.Random(f"{seed}:{i}:{cid}")
                mask = rng.random() < mask_probability
                masked += mask
                picked = sorted(rng.sample(names, names_per_mention)) if len(names) > names_per_mention else names
                fh.write(pack_context(text, start, end, mask_token=mask_token if mask else None) + "\n")
                label = bisect_left(concept_ids, cid)
                rows += [(n_names + i, int(row), label) for row in picked]
        if contexts_per_mention:
            labels = {cid: bisect_left(concept_ids, cid) for cid in set(concepts)}
            rows += _context_rows(concepts, contexts_per_mention, seed, n_names, labels)
        np.asarray(rows, dtype="<i8").reshape(-1, 3).tofile(tmp / PAIRS_FILE)
        meta = {"format": 1, "kind": "context", "n_pairs": len(rows), "n_kb_names": n_names,
                "n_texts": len(mentions), "n_mentions": len(mentions), "n_concepts": len(set(concepts)),
                "masked": masked, "kb_checksum": kb.checksum, "names_per_mention": names_per_mention,
                "contexts_per_mention": contexts_per_mention,
                "mask_probability": mask_probability, "mask_token": mask_token, "seed": seed, **(extra or {})}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf8")
    logger.info("%d context pairs from %d mentions (%d masked) written to %s", len(rows), len(mentions), masked, path)
    return PairSet(path)


def make_context_pairs(docs: Sequence[Any], kb: Any, path: PathLike, *, source: str = "both",
                       names_per_mention: int = 1, contexts_per_mention: int = 0, mask_probability: float = 0.0,
                       mask_token: str = "[MASK]", min_chars: int = 3, seed: int = 0, overwrite: bool = False,
                       what: str = "the documents") -> Any:
    """:func:`context_mentions` then :func:`write_context_pairs`; the counts go into ``meta.json``."""
    mentions, concepts, counts = context_mentions(docs, kb, source, min_chars=min_chars, what=what)
    return write_context_pairs(kb, mentions, concepts, path, names_per_mention=names_per_mention,
                               contexts_per_mention=contexts_per_mention, mask_probability=mask_probability, mask_token=mask_token, seed=seed,
                               overwrite=overwrite, extra={"source": source, "min_chars": min_chars,
                                                           "counts": counts})


def check_context_pairs(pairs: Any) -> None:
    """Raise E618 unless ``pairs`` is a context pair set whose texts are packed contexts."""
    if pairs.meta.get("kind") != "context":
        raise DataFormatError(Errors.E618.format(path=pairs.path, why=f"kind {pairs.meta.get('kind')!r}"))
    for line in pairs.texts[:1]:
        try:
            unpack_context(line)
        except DataFormatError:
            raise DataFormatError(Errors.E618.format(path=pairs.path, why="texts.txt lines lack the markers")) from None


__all__ = ["SOURCES", "pack_context", "unpack_context", "dictionary_mentions", "context_mentions",
           "write_context_pairs", "make_context_pairs", "check_context_pairs"]
