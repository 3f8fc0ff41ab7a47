"""The ``Concept`` record every reader yields, and the one name normaliser used everywhere."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Optional, Tuple

_WS = re.compile(r"\s+")


def normalize_name(text: str) -> str:
    """Unicode NFKC, lowercase, whitespace folded to single spaces and stripped.

    The *only* name normaliser: KB building, training pairs and query time all call it, so a
    name always maps to the same string.
    """
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


@dataclass(frozen=True)
class Concept:
    """One concept. Field names match scispaCy's ``Entity`` (plus ``alt_ids``).

    ``aliases`` holds the synonyms as written in the source (not normalised, canonical name
    excluded, no duplicates); ``alt_ids`` are other identifiers of the same concept (MEDIC's
    OMIM/MeSH alternates, OBO ``alt_id``) that the KB resolves to ``concept_id``. ``languages``:
    empty (every name's language unknown) or one tuple of ISO 639-1 codes per name of ``names()``
    (canonical first), e.g. ``(("en",), ("en", "fr"))``; see :mod:`spacy_sapbert.kb.languages`.
    """

    concept_id: str
    canonical_name: str
    aliases: Tuple[str, ...] = ()
    types: Tuple[str, ...] = ()
    definition: Optional[str] = None
    alt_ids: Tuple[str, ...] = field(default=())
    languages: Tuple[Tuple[str, ...], ...] = field(default=())

    def names(self) -> Tuple[str, ...]:
        """Canonical name first, then aliases, as written."""
        return (self.canonical_name, *self.aliases)

    def name_languages(self) -> Tuple[Tuple[str, ...], ...]:
        """One tuple of language codes per name of ``names()`` (``()`` where unknown)."""
        n = 1 + len(self.aliases)
        return tuple(self.languages[:n]) + ((),) * max(0, n - len(self.languages))


__all__ = ["Concept", "normalize_name"]
