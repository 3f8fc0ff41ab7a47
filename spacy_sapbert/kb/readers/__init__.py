"""Readers: each turns a source file (or folder) into ``Concept``s. ``READERS`` maps a format name
to its reader; ``get_reader`` raises a coded error for an unknown name."""
from __future__ import annotations

from typing import Callable, Dict, Iterator

from ...errors import ConfigError, Errors
from ..concept import Concept
from .babelon import read_babelon
from .jsonl import read_jsonl, write_jsonl
from .medic import normalize_medic_id, read_medic
from .obo import SCOPES as SCOPES_ALL, read_obo
from .tsv import read_tsv
from .umls import read_umls

Reader = Callable[..., Iterator[Concept]]

READERS: Dict[str, Reader] = {
    "umls": read_umls,
    "obo": read_obo,
    "medic": read_medic,
    "jsonl": read_jsonl,
    "tsv": read_tsv,
    "babelon": read_babelon,
}
# formats whose concepts add names to the concepts of the other sources (ids checked against them)
TRANSLATION_FORMATS = ("babelon",)
FORMATS = tuple(READERS)


def get_reader(name: str) -> Reader:
    """The reader for a format name (case-insensitive)."""
    reader = READERS.get(str(name).strip().lower())
    if reader is None:
        raise ConfigError(Errors.E002.format(what="KB format", value=name, choices=", ".join(FORMATS)))
    return reader


__all__ = ["READERS", "FORMATS", "get_reader", "read_umls", "read_obo", "read_medic", "read_jsonl",
           "read_tsv", "read_babelon", "write_jsonl", "normalize_medic_id", "SCOPES_ALL", "TRANSLATION_FORMATS"]
