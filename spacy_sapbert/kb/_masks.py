"""Vectorised masks over concepts and name rows (semantic types, definitions), for filters that must
not loop in Python over millions of concepts. Mixed into ``KnowledgeBase``."""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from ._build import TYPE_SEP


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
