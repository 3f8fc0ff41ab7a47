"""Vectorised masks over concepts and name rows (semantic types, definitions), for filters that must
not loop in Python over millions of concepts. Mixed into ``KnowledgeBase``."""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from .assemble import LANG_ARRAY, TYPE_SEP
from .languages import codes_of_bits, count_languages, rows_in_languages


class MaskMixin:
    """Needs ``self._a`` (the arrays), ``len(self)``, ``cui_to_entity`` and ``row_concept_csr()``."""

    # ---- semantic types -----------------------------------------------------------------
    def _type_bytes(self) -> List[bytes]:
        blob, off = np.asarray(self._a["type_blob"]).tobytes(), np.asarray(self._a["type_off"]).tolist()
        return [blob[off[i]:off[i + 1]] for i in range(len(self))]

    def types_of(self, cid: str) -> Tuple[str, ...]:
        return self.cui_to_entity[cid].types

    def all_types(self) -> Tuple[str, ...]:
        """Every semantic type used by some concept, sorted."""
        found = set()
        for item in set(self._type_bytes()):
            if item:
                found.update(item.decode("utf8").split(TYPE_SEP))
        return tuple(sorted(found))

    def concept_type_mask(self, types: Iterable[str]) -> np.ndarray:
        """bool [n_concepts]: concept j has one of ``types``."""
        wanted = {t.encode("utf8") for t in types}
        sep = TYPE_SEP.encode("utf8")
        cache: Dict[bytes, bool] = {}
        out = np.zeros(len(self), dtype=bool)
        for j, item in enumerate(self._type_bytes()):
            hit = cache.get(item)
            if hit is None:
                hit = cache[item] = bool(item) and not wanted.isdisjoint(item.split(sep))
            out[j] = hit
        return out

    def row_type_mask(self, types: Iterable[str]) -> np.ndarray:
        """bool [n_rows]: name row i belongs to at least one concept with one of ``types``."""
        return self.rows_of_concept_mask(self.concept_type_mask(types))

    def concept_definition_mask(self) -> np.ndarray:
        """bool [n_concepts]: concept j has a definition."""
        return np.diff(np.asarray(self._a["def_off"]).astype(np.int64)) > 0

    # ---- name languages ----------------------------------------------------------------
    def _base_row_bits(self) -> np.ndarray:
        return np.asarray(self._a[LANG_ARRAY], dtype=np.uint64)

    def row_languages(self) -> np.ndarray:
        """uint64 [n_rows]: each name row's language bits (:mod:`~spacy_sapbert.kb.languages`); rows
        added with ``add_alias`` are unknown (0)."""
        base = self._base_row_bits()
        extra = len(self.names) - len(base)
        return base if not extra else np.concatenate([base, np.zeros(extra, dtype=np.uint64)])

    def languages_of_row(self, row: int) -> Tuple[str, ...]:
        """ISO 639-1 codes of name row ``row`` (``()``: unknown)."""
        return codes_of_bits(int(self.row_languages()[row]))

    def language_counts(self) -> Dict[str, int]:
        """Name rows per language code (``und``: rows without a language)."""
        return count_languages(self.row_languages())

    def row_language_mask(self, languages: Iterable[str]) -> np.ndarray:
        """bool [n_rows]: name row i is in one of ``languages`` (ISO 639-1 or UMLS LAT codes; ``und``
        selects the rows of unknown language). An unknown code is E735."""
        return rows_in_languages(self.row_languages(), languages)

    def rows_of_concept_mask(self, cmask: np.ndarray, *, csr: Optional[Tuple[np.ndarray, np.ndarray]] = None
                             ) -> np.ndarray:
        """bool [n_rows] from bool [n_concepts]: row i has at least one concept j with ``cmask[j]``
        (combine masks with ``&`` first, e.g. types and definitions). ``csr``: the
        ``row_concept_csr()`` a caller already holds (with additions it is not free to rebuild)."""
        ptr, idx = csr if csr is not None else self.row_concept_csr()
        ptr, idx = np.asarray(ptr), np.asarray(idx)
        hits = np.asarray(cmask, dtype=bool)[idx].astype(np.int64)
        sums = np.concatenate([[0], np.cumsum(hits)])
        return (sums[ptr[1:]] - sums[ptr[:-1]]) > 0


__all__ = ["MaskMixin"]
