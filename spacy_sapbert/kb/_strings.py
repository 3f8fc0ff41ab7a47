"""Packed string arrays: one UTF-8 blob plus int64 offsets, readable from a memory map.

A ``StrArray`` is a ``Sequence[str]`` over ``blob[off[i]:off[i+1]]``; nothing is decoded until
asked for, so a 10M-name array opens in milliseconds. With ``sep=True`` every item is followed by a
``"\\n"`` in the blob (only for strings that cannot contain one, e.g. normalised names), which lets
slices and iteration decode a whole chunk at once and split it: ~20x faster than item by item.
"""
from __future__ import annotations

from typing import Iterable, Iterator, List, Sequence, Tuple, Union, overload

import numpy as np

_CHUNK = 65536


def pack_strings(items: Iterable[str], *, sep: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """Encode ``items`` into ``(blob uint8, offsets int64 of length n+1)``."""
    parts: List[bytes] = []
    offsets = [0]
    total = 0
    tail = b"\n" if sep else b""
    for item in items:
        data = item.encode("utf8") + tail
        parts.append(data)
        total += len(data)
        offsets.append(total)
    blob = np.frombuffer(b"".join(parts), dtype=np.uint8) if total else np.zeros(0, dtype=np.uint8)
    return blob, np.asarray(offsets, dtype=np.int64)


class StrArray(Sequence[str]):
    """A read-only sequence of strings stored as a blob + offsets (see module doc)."""

    __slots__ = ("blob", "offsets", "sep")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, *, sep: bool = False) -> None:
        self.blob = blob
        self.offsets = offsets
        self.sep = sep

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def _item(self, i: int) -> str:
        start = int(self.offsets[i])
        end = int(self.offsets[i + 1]) - (1 if self.sep else 0)
        return self.blob[start:end].tobytes().decode("utf8")

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> List[str]: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[str, List[str]]:
        n = len(self)
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                return [self._item(j) for j in range(start, stop, step)]
            return self._range(start, stop) if stop > start else []
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._item(i)

    def _range(self, start: int, stop: int) -> List[str]:
        if not self.sep:
            return [self._item(j) for j in range(start, stop)]
        out: List[str] = []
        for a in range(start, stop, _CHUNK):
            b = min(a + _CHUNK, stop)
            text = self.blob[int(self.offsets[a]) : int(self.offsets[b])].tobytes().decode("utf8")
            out.extend(text.split("\n")[:-1])
        return out

    def __iter__(self) -> Iterator[str]:
        n = len(self)
        for a in range(0, n, _CHUNK):
            yield from self._range(a, min(a + _CHUNK, n))

    def find(self, key: str) -> int:
        """Index of ``key`` in a *sorted* array (code point order), or -1."""
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._item(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self) and self._item(lo) == key:
            return lo
        return -1


__all__ = ["StrArray", "pack_strings"]
