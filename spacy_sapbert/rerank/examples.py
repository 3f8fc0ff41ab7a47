"""Training groups of the cross-encoder: a mention, its gold concept's nearest name, and the names of the
bi-encoder's other top candidates (hard negatives: what the re-ranker must learn to put below the gold one).

Mentions come from annotated documents (``(text, gold id)``) and, optionally, from the KB itself: a synonym of
a concept with two or more names serves as a *pseudo-mention* of it, its own name row excluded from the
candidate names, so the pair is never a copy; and, optionally, *mention-like variants* of both
(:func:`variant_mentions`: "carcinoma of the breast" → "breast carcinoma", a plural, a dropped generic head, a
hyphen, a typo), which read like what text writes rather than like a dictionary name. Groups are written once
into the run folder (``examples.jsonl`` + ``examples.json`` with their count, settings and sha256) and read back
on resume, so a resumed run trains on the very same groups.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy

from ..errors import DataFormatError, EmptyResultError, Errors
from ..kb.concept import normalize_name
from ..kb.variants import GENERATORS, name_variants
from ..base.util import atomic_write
from .candidates import nearest_names, split_gold

EXAMPLES_FILE = "examples.jsonl"
EXAMPLES_META = "examples.json"


@dataclass(frozen=True)
class Group:
    """One training group: ``names[0]`` is the gold concept's, the rest are hard negatives."""
    mention: str
    names: Tuple[str, ...]
    gold_in_top_k: bool
    pseudo: bool
    variant: bool = False  # the mention is a mention-like variant of an annotated mention or a pseudo-mention


def gold_mentions(docs: Iterable[Any], kb: Any) -> Tuple[List[Tuple[str, str]], Dict[str, int]]:
    """The distinct ``(normalised text, concept id)`` of the annotated mentions with one gold id the KB resolves,
    in first-seen order (composite and unknown ids are counted and left out; a mention written alike again
    makes the same training group, so it is counted as ``repeated``)."""
    kept: List[Tuple[str, str]] = []
    seen = set()
    counts = {"read": 0, "composite_or_no_id": 0, "not_in_kb": 0, "empty": 0, "repeated": 0}
    for doc in docs:
        for m in doc.mentions:
            counts["read"] += 1
            if m.composite or len(m.ids) != 1:
                counts["composite_or_no_id"] += 1
                continue
            cid = kb.resolve_id(m.ids[0])
            text = normalize_name(m.text)
            if cid is None:
                counts["not_in_kb"] += 1
            elif not text:
                counts["empty"] += 1
            elif (text, cid) in seen:
                counts["repeated"] += 1
            else:
                seen.add((text, cid))
                kept.append((text, cid))
    return kept, counts


def pseudo_mentions(kb: Any, n: int, seed: int) -> List[Tuple[str, str, int]]:
    """``n`` (seeded) ``(name, concept id, row)``: a name of a concept with two or more names, chosen among
    the concepts at random (at most one per concept)."""
    if n <= 0:
        return []
    rng = numpy.random.default_rng(seed)
    order = rng.permutation(len(kb.concept_ids))
    out: List[Tuple[str, str, int]] = []
    for ci in order.tolist():
        cid = kb.concept_ids[ci]
        rows = sorted(kb.rows_of_concept(cid))
        if len(rows) < 2:
            continue
        row = rows[int(rng.integers(len(rows)))]
        out.append((kb.names[row], cid, row))
        if len(out) >= n:
            break
    return out


def variant_mentions(mentions: Sequence[Tuple[str, str]], kb: Any, per_mention: int,
                     seed: int) -> List[Tuple[str, str]]:
    """Up to ``per_mention`` mention-like variants (every generator of ``pretrain``'s ``[pairs.mention_like]`` at its
    default: :func:`~spacy_sapbert.kb.variants.name_variants`) of each distinct ``(text, concept id)`` of
    ``mentions``, as ``(variant, concept id)``: never a KB name (a name is not a new way to write a concept), never
    one of ``mentions``' texts, and a variant made for two concepts is left out (which one it means is unknown)."""
    if per_mention <= 0:
        return []
    normalized = [(normalize_name(t), c) for t, c in mentions]
    given = {t for t, _ in normalized}
    found: Dict[str, List[str]] = {}  # variant -> the concepts it was made for, in first-seen order
    for text, cid in dict.fromkeys(normalized):
        for variant, _kind in name_variants(text, tuple(GENERATORS), is_taken=lambda v: kb.row_of_name(v) >= 0,
                                            seed=seed, max_per_name=per_mention):
            if variant not in given and cid not in found.setdefault(variant, []):
                found[variant].append(cid)
    return [(v, cids[0]) for v, cids in found.items() if len(cids) == 1]


def make_groups(annotated: Sequence[Tuple[str, str]], pseudo: Sequence[Tuple[str, str, int]], kb: Any, index: Any,
                encoder: Any, *, k: int, variants: Sequence[Tuple[str, str]] = (), batch_size: int = 128,
                show_progress: bool = False) -> List[Group]:
    """The groups of ``annotated`` mentions, ``pseudo`` mentions and mention-like ``variants`` (``(text, concept
    id)``, :func:`variant_mentions`): the bi-encoder's top ``k`` concepts of each, the gold one first (added when
    the bi-encoder missed it), names from :func:`nearest_names`."""
    texts = [t for t, _ in annotated] + [t for t, _, _ in pseudo] + [t for t, _ in variants]
    golds = [c for _, c in annotated] + [c for _, c, _ in pseudo] + [c for _, c in variants]
    exclude = [-1] * len(annotated) + [r for _, _, r in pseudo] + [-1] * len(variants)
    first_variant = len(annotated) + len(pseudo)
    if not texts:
        raise EmptyResultError(Errors.E809.format(what="no mention with a gold concept of the KB"))
    vectors = encoder.encode(texts, batch_size=batch_size, show_progress=show_progress)
    ranked = index.search(vectors, k + 1)
    groups: List[Group] = []
    for start in range(0, len(texts), 512):
        part = range(start, min(start + 512, len(texts)))
        splits = [split_gold(ranked[i], golds[i], k) for i in part]
        names = nearest_names(index, vectors[start: start + len(splits)], [ids for ids, _ in splits],
                              exclude_rows=exclude[start: start + len(splits)])
        for i, (ids, found), row_names in zip(part, splits, names):
            if row_names[0] is None:
                continue  # a pseudo-mention's concept left without another name
            negatives = tuple(n for n in row_names[1:] if n is not None and n != row_names[0])
            if negatives:
                groups.append(Group(texts[i], (row_names[0],) + negatives, found, len(annotated) <= i < first_variant,
                                    i >= first_variant))
    if not groups:
        raise EmptyResultError(Errors.E809.format(what="no mention has a negative candidate (the KB is too small)"))
    return groups


def _digest(lines: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf8", "surrogatepass") + b"\n")
    return digest.hexdigest()


def write_groups(folder: Path, groups: Sequence[Group], settings: Dict[str, Any]) -> None:
    lines = [json.dumps({"m": g.mention, "n": list(g.names), "hit": g.gold_in_top_k, "pseudo": g.pseudo,
                         **({"variant": True} if g.variant else {})}, ensure_ascii=False) for g in groups]
    with atomic_write(folder / EXAMPLES_FILE) as fh:
        fh.write("".join(line + "\n" for line in lines))
    with atomic_write(folder / EXAMPLES_META) as fh:
        json.dump({"n_groups": len(lines), "sha256": _digest(lines), "settings": settings}, fh, indent=2,
                  sort_keys=True)


def read_groups(folder: Path) -> Tuple[List[Group], Dict[str, Any]]:
    """The groups written by :func:`write_groups`, checked against their recorded count and hash (E802)."""
    path = folder / EXAMPLES_FILE
    try:
        meta = json.loads((folder / EXAMPLES_META).read_text(encoding="utf8"))
        lines = path.read_text(encoding="utf8").splitlines()
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DataFormatError(Errors.E802.format(path=path, why=f"unreadable ({err})")) from None
    if not isinstance(meta, dict) or meta.get("n_groups") != len(lines) or meta.get("sha256") != _digest(lines):
        raise DataFormatError(Errors.E802.format(path=path, why="its lines differ from the count and hash "
                                                                f"recorded in {EXAMPLES_META}"))
    groups = []
    for line in lines:
        row = json.loads(line)
        groups.append(Group(row["m"], tuple(row["n"]), bool(row["hit"]), bool(row["pseudo"]),
                            bool(row.get("variant", False))))
    return groups, meta


def candidate_recall(groups: Sequence[Group], *, annotated_only: bool = True) -> Optional[float]:
    """Share of (annotated) groups whose gold concept was in the bi-encoder's top k."""
    chosen = [g for g in groups if not (annotated_only and (g.pseudo or g.variant))]
    return (sum(g.gold_in_top_k for g in chosen) / len(chosen)) if chosen else None


__all__ = ["Group", "gold_mentions", "pseudo_mentions", "variant_mentions", "make_groups", "write_groups", "read_groups",
           "candidate_recall", "EXAMPLES_FILE", "EXAMPLES_META"]
