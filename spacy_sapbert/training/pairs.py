"""Training pairs, streamed to disk.

A *pair set* is a folder:

- ``pairs.bin``: little-endian int64 rows ``(text_a, text_b, label)``. A text id below
  ``n_kb_names`` is a row of ``kb.names``; a larger id ``n_kb_names + i`` is line ``i`` of
  ``texts.txt`` (task-data mentions). ``label`` is the position of the concept in ``kb.concept_ids``.
- ``texts.txt``: extra (normalised) texts, one a line; empty for KB synonym pairs.
- ``meta.json``: counts, the KB checksum, the cap and seed, written last (its presence marks a
  complete pair set).

Pairs are written a block of concepts at a time (numpy, no Python object per pair), so memory stays flat
for a UMLS-sized KB; the reader
memory-maps ``pairs.bin``.
"""
from __future__ import annotations

import json
import math
from bisect import bisect_left
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..base.util import PathLike, atomic_dir, ensure_path, get_logger
from ..errors import DataFormatError, EmptyResultError, Errors, IncompatibleError, MissingInputError
from ..kb.concept import normalize_name

logger = get_logger("training.pairs")

PAIRS_FILE = "pairs.bin"
TEXTS_FILE = "texts.txt"
META_FILE = "meta.json"
FORMAT_VERSION = 1
_CHUNK = 65536
_CONCEPT_CHUNK = 100_000  # concepts per numpy block of write_kb_pairs: <= 5M pairs, 120 MB


def _combination(index: int, n: int) -> Tuple[int, int]:
    """The ``index``-th pair ``(i, j)``, ``i < j``, of ``range(n)`` in lexicographic order."""
    # Pairs starting at i: n - 1 - i. Solve for the largest i whose start offset <= index.
    i = int(n - 2 - math.floor(math.sqrt(-8 * index + 4 * n * (n - 1) - 7) / 2.0 - 0.5))
    start = i * n - i * (i + 1) // 2
    # guard against float rounding
    while start > index:
        i -= 1
        start = i * n - i * (i + 1) // 2
    while i + 1 < n - 1 and (i + 1) * n - (i + 1) * (i + 2) // 2 <= index:
        i += 1
        start = i * n - i * (i + 1) // 2
    return i, i + 1 + (index - start)


def sample_pairs(n: int, cap: Optional[int], rng: random.Random) -> List[Tuple[int, int]]:
    """All ``i < j`` pairs of ``n`` items, or ``cap`` of them sampled without replacement (sorted)."""
    total = n * (n - 1) // 2
    if cap is None or total <= cap:
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    picked = sorted(rng.sample(range(total), cap))
    return [_combination(t, n) for t in picked]


def _concept_rng(seed: int, concept_id: str) -> random.Random:
    # str seeds are hashed with SHA-512 by random.Random: stable across runs and processes.
    return random.Random(f"{seed}:{concept_id}")


class _PairWriter:
    def __init__(self, folder: Path) -> None:
        self.fh = open(folder / PAIRS_FILE, "wb")
        self.buffer: List[Tuple[int, int, int]] = []
        self.count = 0

    def add(self, a: int, b: int, label: int) -> None:
        self.buffer.append((a, b, label))
        if len(self.buffer) >= _CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.fh.write(np.asarray(self.buffer, dtype="<i8").tobytes())
            self.count += len(self.buffer)
            self.buffer = []

    def close(self) -> None:
        self.flush()
        self.fh.close()


def _kb_pair_chunks(ptr: np.ndarray, rows: np.ndarray, concept_ids: Sequence[str], cap: Optional[int], seed: int,
                    chunk: int) -> Iterator[np.ndarray]:
    """The ``[n, 3]`` int64 pair rows of ``chunk`` concepts at a time, concept by concept. Concepts whose
    pairs all fit under ``cap`` are filled with numpy, grouped by name count (their pairs in
    lexicographic order, as ``sample_pairs`` gives them); only capped ones sample, with their own RNG."""
    for start in range(0, len(ptr) - 1, chunk):
        stop = min(len(ptr) - 1, start + chunk)
        n = np.diff(ptr[start : stop + 1]).astype(np.int64)
        total = n * (n - 1) // 2
        sampled = total > cap if cap is not None else np.zeros(len(n), dtype=bool)
        counts = np.where(sampled, cap or 0, total)
        offsets = np.cumsum(counts) - counts
        out = np.empty((int(counts.sum()), 3), dtype="<i8")
        full = (n >= 2) & ~sampled
        for size in np.unique(n[full]).tolist():
            which = np.flatnonzero(full & (n == size))
            first, second = np.triu_indices(size, 1)
            base = ptr[start + which][:, None]
            at = (offsets[which][:, None] + np.arange(len(first))).ravel()
            out[at, 0] = rows[(base + first).ravel()]
            out[at, 1] = rows[(base + second).ravel()]
            out[at, 2] = np.repeat(start + which, len(first))
        for k in np.flatnonzero(sampled).tolist():
            cid = concept_ids[start + k]
            own = rows[ptr[start + k] : ptr[start + k + 1]]
            picked = np.asarray(sample_pairs(int(n[k]), cap, _concept_rng(seed, cid)), dtype=np.int64)
            at = slice(int(offsets[k]), int(offsets[k]) + len(picked))
            out[at, 0], out[at, 1], out[at, 2] = own[picked[:, 0]], own[picked[:, 1]], start + k
        yield out


def _rows_in(ptr: np.ndarray, rows: np.ndarray, keep: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The concept → rows CSR with only the rows where ``keep`` is True."""
    ptr, rows = np.asarray(ptr, dtype=np.int64), np.asarray(rows)
    kept = keep[rows]
    sums = np.concatenate([[0], np.cumsum(kept)])
    return sums[ptr].astype(np.int64), rows[kept]


def _cross_lingual_chunks(ptr: np.ndarray, rows: np.ndarray, bits: np.ndarray, concept_ids: Sequence[str],
                          cap: Optional[int], seed: int, chunk: int) -> Iterator[np.ndarray]:
    """``_kb_pair_chunks`` without a cap, keeping the pairs of two rows that both have a language and
    share none; then at most ``cap`` per concept (seeded per-concept sample, kept in order)."""
    for block in _kb_pair_chunks(ptr, rows, concept_ids, None, seed, chunk):
        a, b = bits[block[:, 0]], bits[block[:, 1]]
        block = block[(a != 0) & (b != 0) & ((a & b) == 0)]
        if cap is not None and len(block):
            labels, first, counts = np.unique(block[:, 2], return_index=True, return_counts=True)
            keep = np.ones(len(block), dtype=bool)
            for label, start, n in zip(*(x[counts > cap].tolist() for x in (labels, first, counts))):
                chosen = np.zeros(n, dtype=bool)
                chosen[_concept_rng(seed, concept_ids[label]).sample(range(n), cap)] = True
                keep[start:start + n] = chosen
            block = block[keep]
        yield block


def write_kb_pairs(
    kb: Any,
    path: PathLike,
    *,
    max_pairs_per_concept: Optional[int] = 50,
    seed: int = 0,
    overwrite: bool = False,
    show_progress: bool = False,
    cross_lingual: bool = False,
    languages: Optional[Sequence[str]] = None,
    extra: Sequence[Tuple[str, int, int]] = (),
    mention_like: Optional[Mapping[str, Any]] = None,
) -> "PairSet":
    """Synonym pairs of every concept of ``kb`` (its normalised, deduplicated names), at most
    ``max_pairs_per_concept`` per concept, sampled with a per-concept seeded RNG (so the result
    does not depend on the order concepts are visited). Concepts with one name give nothing.
    Written ``_CONCEPT_CHUNK`` concepts at a time with numpy (no Python object per pair).

    ``languages`` (ISO 639-1 codes): only names in these languages. ``cross_lingual``: only pairs
    of names in different languages (translation pairs: rows that share no language, both known;
    as in the SapBERT authors' cross-lingual self-alignment), the cap applied after that choice.

    ``extra``: more pairs ``(text, name row, concept label)`` written after the synonym pairs, their
    texts (normalised) into ``texts.txt`` (mention-like variants, abbreviations); ``mention_like``: the
    settings and counts that made them, kept in ``meta.json`` (a resumed run checks them)."""
    from tqdm import tqdm

    path = ensure_path(path)
    n_names = len(kb.names)
    ptr, rows = kb.concept_row_csr()  # labels are positions in kb.concept_ids: no id → label map in RAM
    if languages:
        ptr, rows = _rows_in(ptr, rows, kb.row_language_mask(languages))
    if cross_lingual:
        chunks = _cross_lingual_chunks(ptr, rows, kb.row_languages(), kb.concept_ids, max_pairs_per_concept, seed,
                                       _CONCEPT_CHUNK // 10)
    else:
        chunks = _kb_pair_chunks(ptr, rows, kb.concept_ids, max_pairs_per_concept, seed, _CONCEPT_CHUNK)
    n_concepts_used = 0
    count = 0
    with atomic_dir(path, overwrite=overwrite) as tmp:
        with open(tmp / PAIRS_FILE, "wb") as fh, tqdm(total=len(ptr) - 1, desc="pairs", unit="concept",
                                                       disable=not show_progress) as bar:
            for block in chunks:
                fh.write(block.tobytes())
                count += len(block)
                n_concepts_used += len(np.unique(block[:, 2]))  # a block holds whole concepts
                bar.update(min(_CONCEPT_CHUNK, bar.total - bar.n))
            texts = _write_extra(fh, extra, n_names)
            count += len(extra)
        if count == 0 and cross_lingual:
            raise EmptyResultError(Errors.E743.format(languages=list(languages or []) or "all",
                                                      available=kb.language_counts()))
        if count == 0:
            raise EmptyResultError(Errors.E200.format(n=len(kb)))
        (tmp / TEXTS_FILE).write_text("".join(t + "\n" for t in texts), encoding="utf8")
        meta = {
            "format": FORMAT_VERSION,
            "kind": "kb",
            "n_pairs": count,
            "n_kb_names": n_names,
            "n_texts": len(texts),
            "n_concepts": n_concepts_used,
            "kb_checksum": kb.checksum,
            "max_pairs_per_concept": max_pairs_per_concept,
            "seed": seed,
            "cross_lingual": bool(cross_lingual),
            "languages": list(languages) if languages else None,
            "mention_like": dict(mention_like) if mention_like is not None else None,
        }
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf8")
    logger.info("%d pairs from %d concepts written to %s", count, n_concepts_used, path)
    return PairSet(path)


def _write_extra(fh: Any, extra: Sequence[Tuple[str, int, int]], n_names: int) -> List[str]:
    """Write the ``extra`` pairs' rows; return their texts in text-id order (id ``n_names + i``)."""
    texts: Dict[str, int] = {}
    rows = np.empty((len(extra), 3), dtype="<i8")
    for i, (text, row, label) in enumerate(extra):
        rows[i] = (texts.setdefault(normalize_name(text), n_names + len(texts)), row, label)
    if len(rows):
        fh.write(rows.tobytes())
    return list(texts)


def _mention_fields(mention: Any) -> Tuple[str, Sequence[str]]:
    if isinstance(mention, tuple) and len(mention) == 2:
        return mention[0], mention[1]
    return mention.text, mention.ids


def write_task_pairs(
    kb: Any,
    mentions: Iterable[Any],
    path: PathLike,
    *,
    max_pairs_per_mention: Optional[int] = None,
    seed: int = 0,
    dedupe: bool = True,
    overwrite: bool = False,
    mention_like: Optional[Mapping[str, Any]] = None,
) -> "PairSet":
    """Pairs for fine-tuning: each mention (``Mention`` or ``(text, ids)``) with every dictionary
    name of each of its gold concepts (ids resolved with ``kb.resolve_id``; unknown ids skipped
    and counted). ``max_pairs_per_mention`` caps very synonym-rich concepts (seeded sample);
    ``dedupe`` writes a repeated (normalised text, gold concepts) mention once. ``mention_like``: the
    settings and counts of mention-like variants among ``mentions``, kept in ``meta.json``."""
    path = ensure_path(path)
    n_names = len(kb.names)
    concept_ids = kb.concept_ids
    texts: Dict[str, int] = {}
    unknown = 0
    n_mentions = 0
    seen = set()
    with atomic_dir(path, overwrite=overwrite) as tmp:
        writer = _PairWriter(tmp)
        try:
            for k, mention in enumerate(mentions):
                raw, ids = _mention_fields(mention)
                text = normalize_name(raw)
                if not text:
                    continue
                cids = sorted({c for c in (kb.resolve_id(i) for i in ids) if c is not None})
                unknown += sum(1 for i in ids if kb.resolve_id(i) is None)
                if not cids or (dedupe and (text, tuple(cids)) in seen):
                    continue
                seen.add((text, tuple(cids)))
                n_mentions += 1
                text_id = texts.setdefault(text, n_names + len(texts))
                pairs = [(row, bisect_left(concept_ids, c)) for c in cids for row in kb.rows_of_concept(c)]
                if max_pairs_per_mention is not None and len(pairs) > max_pairs_per_mention:
                    rng = random.Random(f"{seed}:{k}:{text}")
                    pairs = sorted(rng.sample(pairs, max_pairs_per_mention))
                for row, label in pairs:
                    writer.add(text_id, int(row), label)
        finally:
            writer.close()
        if writer.count == 0:
            raise EmptyResultError(Errors.E201.format(unknown=unknown))
        with open(tmp / TEXTS_FILE, "w", encoding="utf8") as fh:
            for text in texts:  # insertion order == id order
                fh.write(text + "\n")
        meta = {
            "format": FORMAT_VERSION,
            "kind": "task",
            "n_pairs": writer.count,
            "n_kb_names": n_names,
            "n_texts": len(texts),
            "n_mentions": n_mentions,
            "unknown_ids": unknown,
            "dedupe": dedupe,
            "kb_checksum": kb.checksum,
            "max_pairs_per_concept": max_pairs_per_mention,
            "seed": seed,
            "mention_like": dict(mention_like) if mention_like is not None else None,
        }
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf8")
    if unknown:
        logger.warning("%d gold ids were not found in the KB and were skipped", unknown)
    logger.info("%d task pairs from %d mentions written to %s", writer.count, n_mentions, path)
    return PairSet(path)


@dataclass
class PairSet:
    """A pair set folder on disk; ``pairs`` is a read-only memory map ``[n, 3]`` int64."""

    path: Path

    def __post_init__(self) -> None:
        self.path = ensure_path(self.path)
        meta_path = self.path / META_FILE
        if not meta_path.is_file():
            raise MissingInputError(
                Errors.E001.format(
                    what="Pair set", path=self.path, hint="write it with write_kb_pairs / write_task_pairs."
                )
            )
        try:
            self.meta: Dict[str, Any] = json.loads(meta_path.read_text(encoding="utf8"))
            n = int(self.meta["n_pairs"])
        except (ValueError, KeyError) as err:
            raise DataFormatError(Errors.E202.format(path=meta_path, what=str(err))) from None
        bin_path = self.path / PAIRS_FILE
        size = bin_path.stat().st_size if bin_path.is_file() else -1
        if size != n * 3 * 8:
            raise DataFormatError(
                Errors.E202.format(path=bin_path, what=f"{size} bytes, expected {n * 24} for {n} pairs")
            )
        self.pairs = np.memmap(bin_path, dtype="<i8", mode="r", shape=(n, 3))
        lines = (self.path / TEXTS_FILE).read_text(encoding="utf8").split("\n")
        self.texts: List[str] = lines[:-1] if lines and lines[-1] == "" else lines
        if len(self.texts) != int(self.meta.get("n_texts", 0)):
            raise DataFormatError(Errors.E202.format(path=self.path / TEXTS_FILE, what="wrong number of lines"))

    def __len__(self) -> int:
        return int(self.pairs.shape[0])

    def check_kb(self, kb: Any) -> None:
        """Raise if the pairs were written from another KB (their ids would point elsewhere)."""
        if self.meta.get("kb_checksum") != kb.checksum:
            raise IncompatibleError(
                Errors.E203.format(path=self.path, theirs=self.meta.get("kb_checksum"), ours=kb.checksum)
            )

    def text(self, kb: Any, text_id: int) -> str:
        n = int(self.meta["n_kb_names"])
        return kb.names[text_id] if text_id < n else self.texts[text_id - n]

    def iter_pairs(self, kb: Any) -> Iterator[Tuple[str, str, str]]:
        """``(name_a, name_b, concept_id)`` for every pair (for inspection and tests)."""
        cids = kb.concept_ids
        for a, b, label in self.pairs:
            yield self.text(kb, int(a)), self.text(kb, int(b)), cids[int(label)]


__all__ = ["PairSet", "write_kb_pairs", "write_task_pairs", "sample_pairs"]
