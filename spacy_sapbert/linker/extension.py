"""The ``Span._.kb_ents`` extension: one type whatever path a doc took.

scispaCy's format is a list of ``(concept_id, score)`` tuples. spaCy stores extension values in
``doc.user_data`` and sends them through msgpack when a doc crosses processes
(``nlp.pipe(n_process=2)``) or a ``DocBin``; msgpack turns tuples into lists. The getter here turns
them back (once, in place), so ``span._.kb_ents`` is always ``List[Tuple[str, float]]`` (or ``None``
for a span the linker did not see). Values live under spaCy's own key for span extensions
(``("._.", name, start_char, end_char)``), so docs saved before this getter existed read the same.
A plain ``default=[]`` extension of the same name (scispaCy's linker registers one, also after us)
is replaced by this one, keeping its default for spans never linked.
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


def _get(name: str, default: Optional[list], span: Span) -> Optional[KbEnts]:
    user_data = span.doc.user_data
    value = user_data.get(_key(name, span))
    if value is None:
        return None if default is None else list(default)
    if not isinstance(value, list) or not all(type(item) is tuple for item in value):
        value = _as_tuples(value)
        user_data[_key(name, span)] = value
    return value


def _set(name: str, span: Span, value: Optional[Iterable[Any]]) -> None:
    span.doc.user_data[_key(name, span)] = None if value is None else _as_tuples(value)


def _is_ours(ext: Tuple[Any, Any, Any, Any]) -> bool:
    getter = ext[2]
    return isinstance(getter, partial) and getter.func is _get


def register_kb_ents(name: str) -> None:
    """Make ``Span._.<name>`` the tuple-keeping extension. A plain default-valued extension of that
    name (scispaCy's linker registers ``kb_ents`` with ``default=[]``, also after us) is replaced
    keeping its default: it stores values under the same key, so nothing is lost. An extension with
    its own getter or method is left as it is. Cheap: the linker calls it for every batch."""
    current = Span.get_extension(name)
    if current is not None and _is_ours(current):
        return
    if current is None or all(part is None for part in current[1:]):
        default = list(current[0]) if current is not None and isinstance(current[0], (list, tuple)) else None
        Span.set_extension(name, getter=partial(_get, name, default), setter=partial(_set, name), force=True)


def has_alnum(text: str) -> bool:
    """Whether ``text`` holds a letter or digit of any script (``"."``, emoji, zero-width spaces: no)."""
    return any(ch.isalnum() for ch in text)


__all__ = ["register_kb_ents", "has_alnum", "KbEnts"]
