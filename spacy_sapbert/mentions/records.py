"""The records every benchmark reader returns (:class:`Mention`, :class:`Document`) and the helpers the readers
share: gold-id splitting, UTF-8 line reading, offset checks and the language code of a mention.

A leaf of :mod:`spacy_sapbert.evaluation`: :mod:`~spacy_sapbert.mentions.datasets` (PubTator, BioSyn, TSV,
JSONL and the format registry) and the multilingual readers (:mod:`~spacy_sapbert.mentions.brat`,
:mod:`~spacy_sapbert.mentions.clinical`) all import it, and it imports none of them.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterator, List, Optional, Sequence, Tuple

from ..errors import ConfigError, DataFormatError, Errors, MissingInputError
from ..base.util import PathLike, ensure_path

_ID_SPLIT = re.compile(r"[|+]")
NO_ID = "-1"
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})?$")


@dataclass(frozen=True)
class Mention:
    """One gold mention. ``ids`` holds the gold ids with composite parts split (``()`` for -1);
    ``start``/``end`` are character offsets into the owning :class:`Document`'s text; ``language`` is the
    mention's language code when the reader was told it (``read_dataset(..., language="es")``)."""

    text: str
    ids: Tuple[str, ...]
    start: Optional[int] = None
    end: Optional[int] = None
    type: Optional[str] = None
    doc_id: Optional[str] = None
    composite: bool = False
    language: Optional[str] = None


@dataclass
class Document:
    """A document with its gold mentions; ``text`` is ``""`` when the source has no text."""

    doc_id: str
    text: str
    mentions: List[Mention] = field(default_factory=list)


def split_ids(raw: str) -> Tuple[Tuple[str, ...], bool]:
    """``"A|B"`` / ``"A+B"`` → ``(("A", "B"), True)``; ``"-1"`` or ``""`` → ``((), False)``.

    Parts are stripped, ``-1`` parts dropped, duplicates removed (order kept).
    """
    parts: List[str] = []
    for part in _ID_SPLIT.split(raw.strip()):
        part = part.strip()
        if part and part != NO_ID and part not in parts:
            parts.append(part)
    return tuple(parts), len(parts) > 1


def read_lines(path: Path) -> Iterator[Tuple[int, str]]:
    """``(line number, line)``; bad UTF-8 is E004 naming the line (the KB readers' line reader)."""
    from ..base.lines import iter_lines

    return iter_lines(path)


def read_text(path: Path) -> str:
    """A whole text file; bad UTF-8 is E004 naming the line."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf8")
    except UnicodeDecodeError as err:
        raise DataFormatError(Errors.E004.format(path=path, line=raw[: err.start].count(b"\n") + 1)) from None


def require_file(path: PathLike, what: str) -> Path:
    """``path`` as a ``Path``; E001 when it does not exist."""
    path = ensure_path(path)
    if not path.exists():
        raise MissingInputError(
            Errors.E001.format(what=what, path=path, hint="see the README for where benchmark files live.")
        )
    return path


_WS = re.compile(r"\s+")


def span_text(text: str, start: int, end: int, mention: str) -> Optional[str]:
    """The text at ``start:end`` when it is ``mention`` up to whitespace (NCBI's train set has a few
    mentions with trailing blanks), else None."""
    found = text[start:end] if 0 <= start <= end <= len(text) else None
    if found is None or (found != mention and _WS.sub(" ", found).strip() != _WS.sub(" ", mention).strip()):
        return None
    return found


def match_fragments(text: str, spans: Sequence[Tuple[int, int]], mention: str) -> Tuple[Optional[str], str]:
    """``(found, shown)`` for a mention given as character ``spans`` (one, or several of a discontinuous mention):
    ``shown`` is the text of the fragments joined by a space (``<out of range>`` past the text's end), ``found`` is
    it when it matches ``mention`` up to whitespace, else None."""
    if not all(0 <= s < e <= len(text) for s, e in spans):
        return None, "<out of range>"
    whole = " ".join(text[s:e] for s, e in spans)
    return span_text(whole, 0, len(whole), mention), whole


def type_ok(mtype: Optional[str], types: Optional[Collection[str]]) -> bool:
    """Whether a mention of type ``mtype`` passes the type filter ``types`` (None: all)."""
    return types is None or (mtype is not None and mtype in types)


def check_language(code: Optional[str]) -> Optional[str]:
    """A language code in lower case (ISO 639-1 ``es`` or 639-2 ``spa``, optionally with a region ``pt-br``);
    None stays None; anything else is E725."""
    if code is None or code == "":
        return None
    value = str(code).strip().lower()
    if not _LANGUAGE.match(value):
        raise ConfigError(Errors.E725.format(value=code))
    return value


def with_language(docs: Sequence[Document], language: Optional[str]) -> List[Document]:
    """``docs`` with every mention's ``language`` set to ``language`` (checked; None leaves them as read)."""
    code = check_language(language)
    if code is None:
        return list(docs)
    for doc in docs:
        doc.mentions = [dataclasses.replace(m, language=code) for m in doc.mentions]
    return list(docs)


__all__ = ["Mention", "Document", "NO_ID", "split_ids", "read_lines", "read_text", "require_file", "span_text", "match_fragments",
           "type_ok", "check_language", "with_language"]
