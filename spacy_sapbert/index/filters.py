"""The filters of :class:`~spacy_sapbert.index.ConceptIndex`: semantic types, definitions and name
languages, as vectorised row masks over the KB (cached per KB checksum), applied by the masked search
of ``graph_search.py`` before the top-k cut. Mixed into ``ConceptIndex``."""
from __future__ import annotations

from typing import Any, Collection, Optional, Tuple

import numpy

from ..errors import ConfigError, EmptyResultError, Errors
from ..kb.languages import language_codes


class FilterMixin:
    """Needs ``self.kb``, ``self.meta``, ``self.languages``, ``self._masks``, ``self._known_types`` and
    ``self._row_csr()``."""

    kb: Any

    def set_languages(self, languages: Optional[Collection[str]]) -> None:
        """Search only the names in ``languages`` (ISO 639-1 / UMLS LAT codes, ``und``: unknown) from now
        on; None: all names. A row mask over the same index, nothing rebuilt; saved with the index."""
        codes = language_codes(languages) if languages else None
        if codes:
            self._filter(None, False, codes)  # E739 now if no name is in these languages
        self.languages = codes
        self.meta["languages"] = list(codes) if codes else None

    # ---- filters ------------------------------------------------------------------------
    def known_types(self) -> frozenset:
        if self._known_types is None:
            self._known_types = frozenset(self.kb.all_types())
        return self._known_types

    def check_types(self, semantic_types: Collection[str]) -> None:
        known = self.known_types()
        unknown = sorted(set(semantic_types) - known)
        if unknown:
            raise ConfigError(Errors.E113.format(unknown=unknown, known=sorted(known)[:20]))

    def _filter(self, semantic_types: Optional[Collection[str]], require_definition: bool,
                languages: Optional[Collection[str]] = None) -> Tuple[Optional[numpy.ndarray], Optional[numpy.ndarray]]:
        """``(row mask, concept mask)`` of a filter (None, None without one), from the KB's
        vectorised masks: no Python call per concept or row. ``languages`` masks rows only."""
        if not semantic_types and not require_definition and not languages:
            return None, None
        key = (self.kb.checksum, frozenset(semantic_types or ()), bool(require_definition), frozenset(languages or ()))
        if key not in self._masks:
            kb, wanted = self.kb, key[1]
            cmask = numpy.ones(len(kb), dtype=bool)
            if wanted:
                self.check_types(wanted)
                cmask &= kb.concept_type_mask(wanted)
            if require_definition:
                cmask &= kb.concept_definition_mask()
            row_mask = kb.rows_of_concept_mask(cmask, csr=self._row_csr()[1:])  # the CSR this index caches
            if languages:
                row_mask = row_mask & kb.row_language_mask(languages)
                if not row_mask.any():
                    raise EmptyResultError(Errors.E739.format(languages=sorted(languages),
                                                              available=kb.language_counts()))
            cmask = cmask if wanted or require_definition else None
            self._masks = {k: v for k, v in self._masks.items() if k[0] == key[0]}
            self._masks[key] = (row_mask, cmask)
        return self._masks[key]


__all__ = ["FilterMixin"]
