"""Turn a stream of ``Concept``s into the packed arrays a ``KnowledgeBase`` is made of.

Concepts with the same id are merged (first canonical name and definition win; aliases, types and
alternate ids are unioned in order). Concept ids are sorted (code point order); the deduplicated
normalised names are sorted too, so name lookups are a binary search over the memory map.
"""
from __future__ import annotations

import hashlib
from array import array
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from ..base.util import get_logger
from ._strings import pack_strings
from .concept import Concept, normalize_name
from .languages import language_bits, language_codes

logger = get_logger("kb")

TYPE_SEP = "\x1f"

# Every array of a KB, in checksum order. (name, kind) where kind is the numpy dtype.
ARRAY_NAMES: Tuple[str, ...] = (
    "cid_blob", "cid_off",
    "canon_blob", "canon_off",
    "alias_blob", "alias_off", "alias_ptr",
    "type_blob", "type_off",
    "def_blob", "def_off",
    "alt_blob", "alt_off", "alt_target", "calt_ptr", "calt_idx",
    "name_blob", "name_off",
    "row_ptr", "row_concepts",
    "crow_ptr", "crow_rows",
)
# uint64 [n_rows]: each name row's languages (kb/languages.py); KB format 2. Not in ARRAY_NAMES: a KB of
# format 1 has none (all names unknown), and a KB without any language keeps the checksum it had.
LANG_ARRAY = "name_lang"


# A concept while building: (canonical_name, aliases, types, definition, alt_ids, language bits per name
# (canonical first; empty: all unknown)); a plain tuple takes a fraction of the memory of a Concept
# instance, which matters at UMLS scale.
_Record = Tuple[str, Tuple[str, ...], Tuple[str, ...], Optional[str], Tuple[str, ...], Tuple[int, ...]]


def _bits(c: Concept) -> Tuple[int, ...]:
    if not c.languages:
        return ()
    return tuple(language_bits(language_codes(codes)) for codes in c.name_languages())


def _record(c: Concept) -> _Record:
    return (c.canonical_name, tuple(c.aliases), tuple(c.types), c.definition or None, tuple(c.alt_ids), _bits(c))


def _merge(old: _Record, new: Concept) -> _Record:
    canonical, aliases, types, definition, alt_ids, bits = old
    names = (canonical, *aliases)
    merged: Dict[str, int] = dict(zip(names, bits or (0,) * len(names)))
    new_bits = _bits(new)
    for name, b in zip(new.names(), new_bits or (0,) * len(new.names())):
        merged[name] = merged.get(name, 0) | b
    merged_bits = tuple(merged.values())
    return (canonical, tuple(n for n in merged if n != canonical), tuple(dict.fromkeys(types + tuple(new.types))),
            definition or new.definition or None, tuple(dict.fromkeys(alt_ids + tuple(new.alt_ids))),
            merged_bits if any(merged_bits) else ())


def checksum_arrays(arrays: Dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    lang = arrays.get(LANG_ARRAY)
    for key in ARRAY_NAMES + ((LANG_ARRAY,) if lang is not None and np.any(lang) else ()):
        arr = np.ascontiguousarray(arrays[key])
        h.update(f"{key}:{arr.dtype.str}:{arr.shape}\n".encode())
        h.update(memoryview(arr).cast("B") if arr.size else b"")
    return h.hexdigest()


def build_arrays(concepts: Iterable[Concept]) -> Dict[str, np.ndarray]:
    """Consume ``concepts`` once and return the packed arrays (see ``ARRAY_NAMES``)."""
    by_id: Dict[str, _Record] = {}
    for concept in concepts:
        old = by_id.get(concept.concept_id)
        by_id[concept.concept_id] = _record(concept) if old is None else _merge(old, concept)
    cids = sorted(by_id)
    arrays: Dict[str, np.ndarray] = {}
    arrays["cid_blob"], arrays["cid_off"] = pack_strings(cids)

    canon: List[str] = []
    aliases: List[str] = []
    alias_ptr = array("q", [0])
    types: List[str] = []
    defs: List[str] = []
    alts: List[Tuple[str, int]] = []
    name_to_row: Dict[str, int] = {}
    crow_ptr = array("q", [0])
    crow_rows = array("q")
    row_bits = array("Q")
    for ci, cid in enumerate(cids):
        canonical, c_aliases, c_types, definition, alt_ids, bits = by_id.pop(cid)
        canon.append(canonical)
        aliases.extend(c_aliases)
        alias_ptr.append(len(aliases))
        types.append(TYPE_SEP.join(c_types))
        defs.append(definition or "")
        for alt in alt_ids:
            if alt != cid:
                alts.append((alt, ci))
        local: Dict[int, None] = {}
        for raw, b in zip((canonical, *c_aliases), bits or (0,) * (1 + len(c_aliases))):
            norm = normalize_name(raw)
            if norm:
                row = name_to_row.setdefault(norm, len(name_to_row))
                if row == len(row_bits):
                    row_bits.append(0)
                row_bits[row] |= b
                local.setdefault(row)
        crow_rows.extend(local)
        crow_ptr.append(len(crow_rows))
        if not local:
            logger.warning("Concept %s has no non-empty name; it gets no name rows.", cid)
    arrays["canon_blob"], arrays["canon_off"] = pack_strings(canon)
    del canon
    arrays["alias_blob"], arrays["alias_off"] = pack_strings(aliases)
    del aliases
    arrays["alias_ptr"] = np.frombuffer(alias_ptr, dtype=np.int64).copy()
    arrays["type_blob"], arrays["type_off"] = pack_strings(types)
    arrays["def_blob"], arrays["def_off"] = pack_strings(defs)
    del types, defs

    # alternate ids: a real concept id always resolves to itself; an alt id claimed by several
    # concepts resolves to the smallest concept id (logged).
    cid_set = set(cids)
    alts = sorted((a, ci) for a, ci in alts if a not in cid_set)
    kept: List[Tuple[str, int]] = []
    shared = 0
    for alt, ci in alts:
        if kept and kept[-1][0] == alt:
            shared += kept[-1][1] != ci
            continue
        kept.append((alt, ci))
    if shared:
        logger.info("%d alternate ids name several concepts; each resolves to the smallest concept id.", shared)
    arrays["alt_blob"], arrays["alt_off"] = pack_strings(a for a, _ in kept)
    arrays["alt_target"] = np.asarray([ci for _, ci in kept], dtype=np.int32)
    by_concept = np.argsort(arrays["alt_target"], kind="stable")
    arrays["calt_idx"] = by_concept.astype(np.int32)
    alt_counts = np.bincount(arrays["alt_target"], minlength=len(cids))
    arrays["calt_ptr"] = np.concatenate([[0], np.cumsum(alt_counts)]).astype(np.int64)
    del alts, kept, cid_set

    # names: sort, then renumber rows so that row order == sorted order
    names = list(name_to_row)
    del name_to_row
    order = np.asarray(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names), dtype=np.int64)
    arrays["name_blob"], arrays["name_off"] = pack_strings((names[i] for i in order), sep=True)
    arrays[LANG_ARRAY] = np.frombuffer(row_bits, dtype=np.uint64)[order] if len(order) else np.zeros(0, np.uint64)
    del row_bits
    del names
    rows = rank[np.frombuffer(crow_rows, dtype=np.int64)] if len(crow_rows) else np.zeros(0, np.int64)
    arrays["crow_ptr"] = np.frombuffer(crow_ptr, dtype=np.int64).copy()
    arrays["crow_rows"] = rows.astype(np.int32)
    owners = np.repeat(np.arange(len(cids), dtype=np.int64), np.diff(arrays["crow_ptr"]))
    by_row = np.lexsort((owners, rows))
    arrays["row_concepts"] = owners[by_row].astype(np.int32)
    counts = np.bincount(rows, minlength=len(order)) if len(rows) else np.zeros(len(order), np.int64)
    arrays["row_ptr"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    for key in arrays:  # offsets and pointers: uint32 while they fit (halves their size on disk)
        if key.endswith(("_off", "_ptr")):
            arrays[key] = compact_offsets(arrays[key])
    return arrays


def compact_offsets(arr: np.ndarray) -> np.ndarray:
    return arr.astype(np.uint32) if arr.size == 0 or int(arr[-1]) < 2**32 else arr.astype(np.int64)


__all__ = ["ARRAY_NAMES", "LANG_ARRAY", "TYPE_SEP", "build_arrays", "checksum_arrays", "compact_offsets"]
