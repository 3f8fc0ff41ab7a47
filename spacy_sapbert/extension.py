"""The ``Span._.kb_ents`` extension: one type whatever path a doc took.

scispaCy's format is a list of ``(concept_id, score)`` tuples. spaCy stores extension values in
``doc.user_data`` and sends them through msgpack when a doc crosses processes
(``nlp.pipe(n_process=2)``) or a ``DocBin``; msgpack turns tuples into lists. The getter here turns
them back (once, in place), so ``span._.kb_ents`` is always ``List[Tuple[str, float]]`` (or ``None``
for a span the linker did not see). Values live under spaCy's own key for span extensions
(``("._.", name, start_char, end_char)``), so docs saved before this getter existed read the same.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Iterable, List, Optional, Tuple

from spacy.tokens import Span

KbEnts = List[Tuple[str, float]]


def _key(name: str, span: Span) -> Tuple[str, str, int, int]:
    return ("._.", name, span.start_char, span.end_char)


def _as_tuples(value: Iterable[Any]) -> KbEnts:
    return [(str(cid), float(score)) for cid, score in value]


def _get(name: str, span: Span) -> Optional[KbEnts]:
    user_data = span.doc.user_data
    value = user_data.get(_key(name, span))
    if value is None:
        return None
    if not isinstance(value, list) or not all(type(item) is tuple for item in value):
        value = _as_tuples(value)
        user_data[_key(name, span)] = value
    return value


def _set(name: str, span: Span, value: Optional[Iterable[Any]]) -> None:
    span.doc.user_data[_key(name, span)] = None if value is None else _as_tuples(value)


def register_kb_ents(name: str) -> None:
    """Register ``Span._.<name>`` with the tuple-keeping getter/setter, unless something (scispaCy,
    another linker) registered that name already: then it is left as it is."""
    if not Span.has_extension(name):
        Span.set_extension(name, getter=partial(_get, name), setter=partial(_set, name))


def has_alnum(text: str) -> bool:
    """Whether ``text`` holds a letter or digit of any script (``"."``, emoji, zero-width spaces: no)."""
    return any(ch.isalnum() for ch in text)


__all__ = ["register_kb_ents", "has_alnum", "KbEnts"]
