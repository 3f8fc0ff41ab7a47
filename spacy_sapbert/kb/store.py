"""``KnowledgeBase``: concepts, their names, and the name rows the index shares.

Storage: a folder of ``.npy`` arrays (packed UTF-8 strings + int offsets, CSR maps between name
rows and concepts) and a small ``kb.json``. ``from_disk`` memory-maps the arrays, so opening a UMLS
sized KB takes milliseconds and nothing is decoded until asked for; no pickle anywhere.

Name rows: ``kb.names`` are the deduplicated normalised names, sorted (code point order), then the
rows added by ``add_alias`` in the order they were added. Existing rows never move.

``add_alias`` never modifies files: additions live in memory on top of the (memory-mapped) base and
``to_disk`` writes them beside the base as ``additions.jsonl`` (replayed by ``from_disk``), so the
checksum and the row numbers survive a save/load round trip.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from itertools import chain
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import ConfigError, DataFormatError, Errors, MissingInputError, Warnings
from ..base.integrity import NPY_READ_ERRORS, check_files, file_records
from ..base.util import PathLike, atomic_dir, atomic_write, ensure_path, get_logger
from .assemble import ARRAY_NAMES, LANG_ARRAY, TYPE_SEP, build_arrays, checksum_arrays
from ._masks import MaskMixin
from ._strings import StrArray
from ._views import AliasView, ConceptView, Names
from .concept import Concept, normalize_name
from .languages import LANGUAGES, codes_of_bits

logger = get_logger("kb")

FORMAT = "spacy_sapbert.kb"
FORMAT_VERSION = 2  # 2: name languages (name_lang.npy, "languages" in kb.json); 1 still loads (all "und")
READ_VERSIONS = (1, 2)
META_FILE = "kb.json"
ADDITIONS_FILE = "additions.jsonl"


def _load_array(path: Path) -> np.ndarray:
    try:
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError:  # zero-size arrays cannot be memory-mapped
            return np.load(path, allow_pickle=False)
    except NPY_READ_ERRORS as err:  # a truncated or damaged .npy
        raise DataFormatError(Errors.E552.format(
            path=path, what="a knowledge base array", why=str(err).splitlines()[0] if str(err) else type(err).__name__,
            fix=f"Rebuild the KB (`spacy-sapbert build-kb`); `spacy-sapbert verify {path.parent}` checks all its files.",
        )) from None


class KnowledgeBase(MaskMixin):
    """Concepts and names; see the module doc for storage, rows and ``add_alias``."""

    def __init__(self, arrays: Dict[str, np.ndarray], *, source: str = "custom",
                 sources: Optional[List[Dict[str, object]]] = None, checksum: Optional[str] = None) -> None:
        if LANG_ARRAY not in arrays:  # format 1: every name's language unknown
            arrays = dict(arrays, **{LANG_ARRAY: np.zeros(len(arrays["name_off"]) - 1, dtype=np.uint64)})
        self._a = arrays
        self.source = source
        self._base_checksum = checksum or checksum_arrays(arrays)
        self._cids = StrArray(arrays["cid_blob"], arrays["cid_off"], is_sorted=True)
        self._base_names = StrArray(arrays["name_blob"], arrays["name_off"], sep=True, is_sorted=True)
        self._alts = StrArray(arrays["alt_blob"], arrays["alt_off"], is_sorted=True)
        # additions (add_alias), in memory
        self._ops: List[Tuple[str, str]] = []
        self._extra_names: List[str] = []
        self._extra_row: Dict[str, int] = {}
        self._row_extra: Dict[int, List[int]] = {}
        self._concept_extra_rows: Dict[int, List[int]] = {}
        self._concept_extra_aliases: Dict[int, List[str]] = {}
        self._checksum: Optional[str] = None
        self._path: Optional[Path] = None  # set by from_disk: pickling reopens the memory map
        self._sources = sources if sources is not None else [self._own_stats(source)]

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_concepts(cls, concepts: Iterable[Concept], source: str = "custom") -> "KnowledgeBase":
        """Build in memory from any iterable of concepts (consumed once; duplicates merged)."""
        return cls(build_arrays(concepts), source=source)

    @classmethod
    def merge(cls, kbs: Sequence["KnowledgeBase"]) -> "KnowledgeBase":
        """One KB with every concept of ``kbs`` (same ids merged: the first KB's canonical name wins).
        Additions made with ``add_alias`` are kept as aliases; per-source counts are carried."""
        if not kbs:
            raise ConfigError(Errors.E012.format(option="kbs", value=[], why="merge needs at least one knowledge base"))
        merged = cls(build_arrays(chain.from_iterable(kb.cui_to_entity.values() for kb in kbs)),
                     source="+".join(kb.source for kb in kbs))
        merged._sources = [dict(s) for kb in kbs for s in kb.sources]
        return merged

    # ---- persistence --------------------------------------------------------------------
    def to_disk(self, path: PathLike, *, overwrite: bool = True) -> None:
        """Write the KB folder atomically (arrays, ``kb.json``, ``additions.jsonl``)."""
        path = ensure_path(path)
        with atomic_dir(path, overwrite=overwrite) as tmp:
            for key in ARRAY_NAMES:
                np.save(tmp / f"{key}.npy", np.asarray(self._a[key]), allow_pickle=False)
            np.save(tmp / f"{LANG_ARRAY}.npy", self._base_row_bits(), allow_pickle=False)
            meta = {"format": FORMAT, "version": FORMAT_VERSION, "source": self.source,
                    "checksum": self._base_checksum, "n_concepts": len(self),
                    "n_names": len(self._base_names), "sources": self.sources,
                    "languages": list(LANGUAGES), "name_languages": self.language_counts()}
            if self._ops:
                with atomic_write(tmp / ADDITIONS_FILE) as fh:
                    for cid, name in self._ops:
                        fh.write(json.dumps([cid, name], ensure_ascii=False) + "\n")
            meta["files"] = file_records(tmp, [f"{key}.npy" for key in ARRAY_NAMES + (LANG_ARRAY,)]
                                         + ([ADDITIONS_FILE] if self._ops else []))
            with atomic_write(tmp / META_FILE) as fh:
                json.dump(meta, fh, indent=2, ensure_ascii=False)
            os.chmod(tmp, 0o755)  # mkdtemp/mkstemp create private modes; a KB is meant to be shared
            for file in tmp.iterdir():
                os.chmod(file, 0o644)

    @classmethod
    def from_disk(cls, path: PathLike, *, replay: bool = True) -> "KnowledgeBase":
        """Open a KB folder: arrays are memory-mapped, additions replayed (unless ``replay=False``)."""
        path = ensure_path(path)
        if not path.is_dir():
            raise MissingInputError(Errors.E001.format(what="Knowledge base folder", path=path,
                                                       hint="build it with `spacy-sapbert build-kb`."))
        meta_path = path / META_FILE
        try:
            meta = json.loads(meta_path.read_text(encoding="utf8"))
        except FileNotFoundError:
            raise DataFormatError(Errors.E010.format(path=path, why=f"{META_FILE} is missing")) from None
        except (ValueError, UnicodeDecodeError) as err:
            raise DataFormatError(Errors.E010.format(path=path, why=f"{META_FILE} is not valid JSON: {err}")) from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") not in READ_VERSIONS:
            raise DataFormatError(Errors.E010.format(path=path, why=f"{META_FILE} is not format {FORMAT} v{FORMAT_VERSION}"))
        keys = ARRAY_NAMES + ((LANG_ARRAY,) if meta["version"] >= 2 else ())
        for key in keys:
            if not (path / f"{key}.npy").exists():
                raise DataFormatError(Errors.E010.format(path=path, why=f"{key}.npy is missing"))
        table = meta.get("languages", [])
        if meta["version"] >= 2 and (not isinstance(table, list) or tuple(table) != LANGUAGES[:len(table)]):
            raise DataFormatError(Errors.E736.format(path=path, found=table, known=list(LANGUAGES)))
        check_kb_files(path, meta)
        arrays = {key: _load_array(path / f"{key}.npy") for key in keys}
        kb = cls(arrays, source=meta["source"], sources=meta.get("sources"), checksum=meta["checksum"])
        kb._path = path.resolve()
        additions = path / ADDITIONS_FILE
        if additions.exists() and replay:
            with additions.open(encoding="utf8") as fh:
                for lineno, line in enumerate(fh, 1):
                    try:
                        cid, name = json.loads(line)
                    except ValueError:
                        raise DataFormatError(Errors.E011.format(
                            path=additions, line=lineno, what="not a JSON [concept_id, name] pair",
                            fix="Restore the file from the saved KB or delete it to drop the additions.")) from None
                    kb.add_alias(cid, name)
        return kb

    # ---- sizes, ids ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._cids)

    def __contains__(self, cid: object) -> bool:
        return isinstance(cid, str) and self._cindex(cid) >= 0

    def __repr__(self) -> str:
        return f"KnowledgeBase(source={self.source!r}, concepts={len(self)}, names={len(self.names)})"

    @property
    def concept_ids(self) -> Sequence[str]:
        return self._cids

    @property
    def names(self) -> Sequence[str]:
        return Names(self._base_names, self._extra_names)

    @property
    def cui_to_entity(self) -> Mapping[str, Concept]:
        return ConceptView(self)

    @property
    def alias_to_cuis(self) -> Mapping[str, Set[str]]:
        return AliasView(self)

    def _cindex(self, cid: str) -> int:
        return self._cids.find(cid)

    def resolve_id(self, any_id: str) -> Optional[str]:
        """The concept id for a concept id or an alternate id (exact string), else None."""
        if not isinstance(any_id, str):
            return None
        if self._cindex(any_id) >= 0:
            return any_id
        j = self._alts.find(any_id)
        return self._cids[int(self._a["alt_target"][j])] if j >= 0 else None

    # ---- rows ---------------------------------------------------------------------------
    def row_of_name(self, name: str) -> int:
        """Row of a name (normalised here), or -1."""
        norm = normalize_name(name)
        row = self._base_names.find(norm)
        return row if row >= 0 else self._extra_row.get(norm, -1)

    def _row_cindices(self, row: int) -> List[int]:
        nb = len(self._base_names)
        out: List[int] = []
        if row < nb:
            ptr = self._a["row_ptr"]
            out = [int(x) for x in self._a["row_concepts"][int(ptr[row]) : int(ptr[row + 1])]]
        return out + self._row_extra.get(row, [])

    def concepts_of_row(self, i: int) -> Tuple[str, ...]:
        """Concept ids sharing name row ``i``, sorted."""
        n = len(self.names)
        if not -n <= i < n:
            raise IndexError(i)
        return tuple(self._cids[ci] for ci in sorted(self._row_cindices(i % n)))

    def _rows_of(self, ci: int) -> Tuple[int, ...]:
        ptr = self._a["crow_ptr"]
        base = tuple(int(x) for x in self._a["crow_rows"][int(ptr[ci]) : int(ptr[ci + 1])])
        return base + tuple(self._concept_extra_rows.get(ci, ()))

    def rows_of_concept(self, cid: str) -> Tuple[int, ...]:
        """Name rows of a concept: canonical name first. KeyError for an unknown id."""
        ci = self._cindex(cid)
        if ci < 0:
            raise KeyError(cid)
        return self._rows_of(ci)

    def names_of_concept(self, cid: str) -> Tuple[str, ...]:
        """Normalised names of a concept, canonical first, deduplicated."""
        names = self.names
        return tuple(names[r] for r in self.rows_of_concept(cid))

    def row_concept_csr(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(ptr int64 [n_rows+1], concept_index int32)``: row i's concepts are
        ``concept_ids[j] for j in concept_index[ptr[i]:ptr[i+1]]`` (sorted); includes additions.
        Handy for vectorised max-over-names aggregation."""
        ptr, idx = np.asarray(self._a["row_ptr"]), np.asarray(self._a["row_concepts"])
        if not self._row_extra:
            return ptr, idx
        counts = np.diff(ptr).tolist()
        lists = [idx[ptr[r]:ptr[r + 1]] for r in range(len(counts))]
        n = len(self.names)
        for r in range(n):
            if r >= len(counts):
                counts.append(0)
                lists.append(np.zeros(0, np.int32))
            if r in self._row_extra:
                merged = np.sort(np.concatenate([lists[r], np.asarray(self._row_extra[r], np.int32)]))
                lists[r] = merged.astype(np.int32)
                counts[r] = len(merged)
        return (np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                np.concatenate(lists).astype(np.int32) if lists else np.zeros(0, np.int32))

    def concept_row_csr(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(ptr int64 [n_concepts+1], rows int32)``: concept ``concept_ids[j]`` has name rows
        ``rows[ptr[j]:ptr[j+1]]`` (canonical first); includes additions. For loops over all concepts."""
        ptr, rows = np.asarray(self._a["crow_ptr"]), np.asarray(self._a["crow_rows"])
        if not self._concept_extra_rows:
            return ptr, rows
        counts = np.diff(ptr)
        parts, new_counts = [], counts.copy()
        for ci in range(len(self)):
            parts.append(rows[ptr[ci]:ptr[ci + 1]])
            extra = self._concept_extra_rows.get(ci)
            if extra:
                parts.append(np.asarray(extra, dtype=np.int32))
                new_counts[ci] += len(extra)
        return (np.concatenate([[0], np.cumsum(new_counts)]).astype(np.int64),
                np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32))

    # ---- pickling (multiprocessing, e.g. nlp.pipe(n_process=2)) ---------------------------
    def __reduce__(self):
        if self._path is not None:
            return (_reopen, (str(self._path), self._base_checksum, list(self._ops)))
        return (_rebuild, (dict((k, np.asarray(v)) for k, v in self._a.items()), self.source, self.sources,
                           self._base_checksum, list(self._ops)))

    # ---- concepts -----------------------------------------------------------------------
    def _concept(self, ci: int) -> Concept:
        a = self._a
        canon = StrArray(a["canon_blob"], a["canon_off"])[ci]
        aliases = StrArray(a["alias_blob"], a["alias_off"])[int(a["alias_ptr"][ci]) : int(a["alias_ptr"][ci + 1])]
        aliases.extend(self._concept_extra_aliases.get(ci, ()))
        types = StrArray(a["type_blob"], a["type_off"])[ci]
        definition = StrArray(a["def_blob"], a["def_off"])[ci]
        return Concept(concept_id=self._cids[ci], canonical_name=canon, aliases=tuple(aliases),
                       types=tuple(types.split(TYPE_SEP)) if types else (), definition=definition or None,
                       alt_ids=self._alt_ids_of(ci), languages=self._name_languages(ci, (canon, *aliases)))

    def _name_languages(self, ci: int, raw: Sequence[str]) -> Tuple[Tuple[str, ...], ...]:
        """Per raw name, the languages of its row (a row's languages are those of every concept
        naming it); ``()`` when none of the concept's rows has a language."""
        base = self._base_row_bits()  # rows added by add_alias (beyond the base) are unknown
        rows = self._rows_of(ci)
        bits = [int(base[r]) if r < len(base) else 0 for r in rows]
        if not any(bits):
            return ()
        by_name = {self.names[r]: b for r, b in zip(rows, bits)}
        return tuple(codes_of_bits(by_name.get(normalize_name(name), 0)) for name in raw)

    def _alt_ids_of(self, ci: int) -> Tuple[str, ...]:
        ptr = self._a["calt_ptr"]
        hits = self._a["calt_idx"][int(ptr[ci]) : int(ptr[ci + 1])]
        return tuple(self._alts[int(j)] for j in hits)

    # ---- additions ----------------------------------------------------------------------
    def add_alias(self, cid: str, name: str) -> None:
        """Add ``name`` as a synonym of concept ``cid`` (a concept or alternate id).

        A new normalised name gets a new row after all existing rows; a name the concept already
        has changes nothing. Kept in memory; ``to_disk`` saves it (see module doc)."""
        target = self.resolve_id(cid)
        if target is None:
            raise ConfigError(Errors.E008.format(concept_id=cid))
        norm = normalize_name(name) if isinstance(name, str) else ""
        if not norm:
            raise ConfigError(Errors.E009.format(name=name))
        ci = self._cindex(target)
        row = self.row_of_name(norm)
        if row >= 0 and ci in self._row_cindices(row):
            return
        if row < 0:
            row = len(self.names)
            self._extra_names.append(norm)
            self._extra_row[norm] = row
        self._row_extra.setdefault(row, []).append(ci)
        self._concept_extra_rows.setdefault(ci, []).append(row)
        self._concept_extra_aliases.setdefault(ci, []).append(name)
        self._ops.append((target, name))
        self._checksum = None

    # ---- identity and statistics --------------------------------------------------------
    @property
    def checksum(self) -> str:
        """sha256 of the arrays (and of the additions, in order): equal KBs, equal checksums."""
        if not self._ops:
            return self._base_checksum
        if self._checksum is None:
            h = hashlib.sha256(self._base_checksum.encode())
            for cid, name in self._ops:
                h.update(json.dumps([cid, name], ensure_ascii=False).encode())
            self._checksum = h.hexdigest()
        return self._checksum

    def verify(self) -> None:
        """Recompute the checksum of the arrays (reads them all) and raise if the files were altered."""
        if checksum_arrays(self._a) != self._base_checksum:
            raise DataFormatError(Errors.E010.format(path=self._path or "<memory>",
                                                     why="its arrays do not match the checksum in kb.json"))

    def ambiguous_names(self) -> int:
        """Number of name rows shared by more than one concept."""
        counts = np.diff(np.asarray(self._a["row_ptr"]))
        total = int(np.count_nonzero(counts > 1))
        nb = len(self._base_names)
        for row, extra in self._row_extra.items():
            before = int(counts[row]) if row < nb else 0
            total += int(before + len(extra) > 1) - int(before > 1)
        return total

    def _own_stats(self, source: str) -> Dict[str, object]:
        return {"source": source, "concepts": len(self), "names": len(self.names),
                "ambiguous_names": self.ambiguous_names()}

    @property
    def sources(self) -> List[Dict[str, object]]:
        """Per-source counts (as built; a merged KB lists every source it was made from)."""
        return [dict(s) for s in self._sources]

    def stats(self) -> Dict[str, object]:
        return {"concepts": len(self), "names": len(self.names), "ambiguous_names": self.ambiguous_names(),
                "sources": self.sources}


def check_kb_files(path: Path, meta: Mapping[str, object], *, full: bool = False) -> None:
    """Check the KB's files against the records in ``kb.json`` (E551); a KB saved before records were
    kept loads with a warning (W550)."""
    records = meta.get("files")
    if records is None:
        warnings.warn(Warnings.W550.format(path=path, what="knowledge base"))
        return
    if not isinstance(records, dict):
        raise DataFormatError(Errors.E010.format(path=path, why=f"'files' in {META_FILE} is not a mapping"))
    check_files(path, records, full=full, what="knowledge base")


def _replay(kb: KnowledgeBase, ops: List[Tuple[str, str]]) -> KnowledgeBase:
    for cid, name in ops:
        kb.add_alias(cid, name)
    return kb


def _reopen(path: str, checksum: str, ops: List[Tuple[str, str]]) -> KnowledgeBase:
    kb = KnowledgeBase.from_disk(path, replay=False)
    if kb._base_checksum != checksum:
        raise DataFormatError(Errors.E010.format(path=path, why="the folder changed since this KB was opened"))
    return _replay(kb, ops)


def _rebuild(arrays, source, sources, checksum, ops) -> KnowledgeBase:
    return _replay(KnowledgeBase(arrays, source=source, sources=sources, checksum=checksum), ops)

__all__ = ["KnowledgeBase", "check_kb_files"]
