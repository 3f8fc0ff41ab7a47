"""Read-only views of a ``KnowledgeBase``: the name sequence and scispaCy's two mappings."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Mapping, Sequence, Set

from ._strings import StrArray
from .concept import Concept

if TYPE_CHECKING:  # pragma: no cover
    from .store import KnowledgeBase


class Names(Sequence[str]):
    """Base names (memory-mapped) followed by the names added with ``add_alias``."""

    def __init__(self, base: StrArray, extra: List[str]) -> None:
        self._base = base
        self._extra = extra

    def __len__(self) -> int:
        return len(self._base) + len(self._extra)

    def __getitem__(self, i):  # type: ignore[override]
        nb = len(self._base)
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                return [self[j] for j in range(start, stop, step)]
            out = self._base[start : min(stop, nb)] if start < nb else []
            if stop > nb:
                out.extend(self._extra[max(start - nb, 0) : stop - nb])
            return out
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._base[i] if i < nb else self._extra[i - nb]

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from list(self._extra)

    def __contains__(self, name: object) -> bool:
        return name in self._base or name in self._extra

    def index(self, name, start: int = 0, stop=None) -> int:  # type: ignore[override]
        """Row of an (already normalised) name; ValueError if absent."""
        if start == 0 and stop is None and isinstance(name, str):
            row = self._base.find(name)
            if row >= 0:
                return row
            if name in self._extra:
                return len(self._base) + self._extra.index(name)
            raise ValueError(f"{name!r} is not a name of this KB")
        return super().index(name, start, len(self) if stop is None else stop)


class ConceptView(Mapping[str, Concept]):
    """scispaCy's ``cui_to_entity``: concept id -> ``Concept`` (built on access)."""

    def __init__(self, kb: "KnowledgeBase") -> None:
        self._kb = kb

    def __getitem__(self, cid: str) -> Concept:
        ci = self._kb._cindex(cid)
        if ci < 0:
            raise KeyError(cid)
        return self._kb._concept(ci)

    def __contains__(self, cid: object) -> bool:
        return isinstance(cid, str) and self._kb._cindex(cid) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self._kb.concept_ids)

    def __len__(self) -> int:
        return len(self._kb)

    def values(self):  # type: ignore[override]
        return (self._kb._concept(ci) for ci in range(len(self._kb)))


class AliasView(Mapping[str, Set[str]]):
    """scispaCy's ``alias_to_cuis``: normalised name -> set of concept ids (keys are normalised on lookup)."""

    def __init__(self, kb: "KnowledgeBase") -> None:
        self._kb = kb

    def __getitem__(self, name: str) -> Set[str]:
        row = self._kb.row_of_name(name) if isinstance(name, str) else -1
        if row < 0:
            raise KeyError(name)
        return set(self._kb.concepts_of_row(row))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._kb.row_of_name(name) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self._kb.names)

    def __len__(self) -> int:
        return len(self._kb.names)


__all__ = ["AliasView", "ConceptView", "Names"]
