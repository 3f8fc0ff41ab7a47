"""Name languages: the one code system (ISO 639-1, lowercase, e.g. ``en``, ``es``) and the bit per
language that a KB stores for each name row.

Inputs may also use UMLS ``LAT`` codes (``ENG``, ``SPA``, ``FRE``, ``GER``, ``DUT``, ``POR``, ``ITA``
...): :func:`language_code` maps them to ISO 639-1. ``und`` means "unknown" (a KB written before
languages were kept, names added with ``add_alias``): such a row has no bit set.

A name row's language mask is a ``uint64``: bit ``i`` is :data:`LANGUAGES`\\ ``[i]``. The table only
grows at its end, so a KB written with a shorter table reads the same bits.
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

import numpy as np

from ..errors import ConfigError, Errors

UNKNOWN = "und"

# UMLS Metathesaurus LAT values -> ISO 639-1 (the languages of the UMLS releases).
UMLS_LAT: Dict[str, str] = {
    "ENG": "en", "SPA": "es", "FRE": "fr", "GER": "de", "DUT": "nl", "POR": "pt", "ITA": "it", "JPN": "ja",
    "CHI": "zh", "RUS": "ru", "CZE": "cs", "HUN": "hu", "KOR": "ko", "POL": "pl", "SWE": "sv", "NOR": "no",
    "DAN": "da", "FIN": "fi", "TUR": "tr", "HEB": "he", "GRE": "el", "LAV": "lv", "EST": "et", "SCR": "hr",
    "HRV": "hr", "BAQ": "eu", "ARA": "ar", "PER": "fa", "UKR": "uk", "LIT": "lt", "SLO": "sk", "SLV": "sl",
    "BUL": "bg", "RUM": "ro", "CAT": "ca", "GLG": "gl", "ICE": "is", "HIN": "hi", "THA": "th", "VIE": "vi",
}

# Bit order of the name-row masks: append only, never reorder (at most 64 languages).
LANGUAGES: Tuple[str, ...] = tuple(dict.fromkeys(UMLS_LAT.values()))
_BIT = {code: i for i, code in enumerate(LANGUAGES)}
assert len(LANGUAGES) <= 64


def language_code(value: str) -> str:
    """The ISO 639-1 code of ``value`` (an ISO 639-1 code in any case, a UMLS LAT code, or ``und``);
    an unknown code is a :class:`ConfigError` (E735) listing the known ones."""
    text = str(value).strip()
    if text.lower() in _BIT or text.lower() == UNKNOWN:
        return text.lower()
    if text.upper() in UMLS_LAT:
        return UMLS_LAT[text.upper()]
    raise ConfigError(Errors.E735.format(value=value, iso=", ".join(LANGUAGES), lat=", ".join(UMLS_LAT)))


def language_codes(values: Iterable[str]) -> Tuple[str, ...]:
    """:func:`language_code` of each value, in order, without repeats."""
    return tuple(dict.fromkeys(language_code(v) for v in values))


def language_bits(codes: Iterable[str]) -> int:
    """The mask of ``codes`` (already checked ISO codes; ``und`` adds no bit)."""
    mask = 0
    for code in codes:
        if code != UNKNOWN:
            mask |= 1 << _BIT[code]
    return mask


def codes_of_bits(mask: int) -> Tuple[str, ...]:
    """The codes of a mask, in table order; ``()`` for 0 (unknown)."""
    mask = int(mask)
    return tuple(code for i, code in enumerate(LANGUAGES) if mask >> i & 1)


def rows_in_languages(row_bits: np.ndarray, codes: Iterable[str]) -> np.ndarray:
    """bool mask over rows: a row is in ``codes`` when it has one of their bits (``und``: no bit at all)."""
    codes = language_codes(codes)
    bits = np.uint64(language_bits(codes))
    out = (row_bits & bits) != 0
    if UNKNOWN in codes:
        out |= row_bits == 0
    return out


def count_languages(row_bits: np.ndarray) -> Dict[str, int]:
    """Rows per language (a row with several languages counts for each; ``und``: rows without any)."""
    counts = {code: int(np.count_nonzero(row_bits & np.uint64(1 << i))) for i, code in enumerate(LANGUAGES)}
    out = {code: n for code, n in counts.items() if n}
    unknown = int(np.count_nonzero(row_bits == 0))
    if unknown:
        out[UNKNOWN] = unknown
    return out


__all__ = ["LANGUAGES", "UMLS_LAT", "UNKNOWN", "language_code", "language_codes", "language_bits", "codes_of_bits",
           "rows_in_languages", "count_languages"]
