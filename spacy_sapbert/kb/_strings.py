"""Packed string arrays: one UTF-8 blob plus int64 offsets, readable from a memory map.

A ``StrArray`` is a ``Sequence[str]`` over ``blob[off[i]:off[i+1]]``; nothing is decoded until
asked for, so a 10M-name array opens in milliseconds. With ``sep=True`` every item is followed by a
``"\\n"`` in the blob (only for strings that cannot contain one, e.g. normalised names), which lets
slices and iteration decode a whole chunk at once and split it: ~20x faster than item by item.
"""
from __future__ import annotations

from array import array
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union, overload

import numpy as np

from ..errors import DataFormatError, Errors

_CHUNK = 65536


def pack_strings(items: Iterable[str], *, sep: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """Encode ``items`` into ``(blob uint8, offsets int64 of length n+1)``."""
    buf = bytearray()
    offsets = array("q", [0])
    for item in items:
        buf += item.encode("utf8")
        if sep:
            buf += b"\n"
        offsets.append(len(buf))
    blob = np.frombuffer(bytes(buf), dtype=np.uint8) if buf else np.zeros(0, dtype=np.uint8)
    return blob, np.frombuffer(offsets, dtype=np.int64).copy()


def _decode(blob: Union[np.ndarray, memoryview], start: int, end: int) -> str:
    """UTF-8 text of ``blob[start:end]``; damaged bytes or offsets give E554, never a UnicodeDecodeError."""
    if not 0 <= start <= end <= len(blob):
        raise DataFormatError(Errors.E554.format(start=start, end=end, what=f"a string array of {len(blob)} bytes "
                                                 "(offsets out of range)"))
    try:
        return str(blob[start:end], "utf8")
    except UnicodeDecodeError as err:
        raise DataFormatError(Errors.E554.format(start=start + err.start, end=start + err.end,
                                                 what="a string array")) from None


class StrArray(Sequence[str]):
    """A read-only sequence of strings stored as a blob + offsets (see module doc)."""

    __slots__ = ("blob", "offsets", "sep", "is_sorted", "_bytes", "_offs", "_trim")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, *, sep: bool = False, is_sorted: bool = False) -> None:
        self.blob = blob
        self.offsets = offsets
        self.sep = sep
        self.is_sorted = is_sorted
        # Reads go through memoryviews of the same (memory-mapped) buffers: slicing an np.memmap costs
        # microseconds of Python-level bookkeeping per item, a memoryview ~0.1 us; nothing is copied.
        self._bytes = memoryview(np.ascontiguousarray(blob, dtype=np.uint8)).cast("B")
        self._offs = memoryview(np.ascontiguousarray(offsets, dtype=np.int64)).cast("B").cast("q")
        self._trim = 1 if sep else 0

    def __reduce__(self):  # the memoryviews do not pickle: rebuild them from the arrays
        return (_strarray, (self.blob, self.offsets, self.sep, self.is_sorted))

    def __len__(self) -> int:
        return len(self._offs) - 1

    def _item(self, i: int) -> str:
        offs = self._offs
        return _decode(self._bytes, offs[i], offs[i + 1] - self._trim)

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
            text = _decode(self._bytes, self._offs[a], self._offs[b])
            out.extend(text.split("\n")[:-1])
        return out

    def __iter__(self) -> Iterator[str]:
        n = len(self)
        for a in range(0, n, _CHUNK):
            yield from self._range(a, min(a + _CHUNK, n))

    def __contains__(self, key: object) -> bool:
        """O(log n) for a sorted array (``is_sorted=True``), else a scan."""
        if self.is_sorted:
            return isinstance(key, str) and self.find(key) >= 0
        return any(item == key for item in self)

    def index(self, key, start: int = 0, stop: Optional[int] = None) -> int:  # type: ignore[override]
        if self.is_sorted and start == 0 and stop is None:
            i = self.find(key) if isinstance(key, str) else -1
            if i < 0:
                raise ValueError(f"{key!r} is not in the array")
            return i
        return super().index(key, start, len(self) if stop is None else stop)

    def find(self, key: str) -> int:
        """Index of ``key`` in a *sorted* array (code point order), or -1."""
        item = self._item
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if item(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self) and item(lo) == key:
            return lo
        return -1


def _strarray(blob: np.ndarray, offsets: np.ndarray, sep: bool, is_sorted: bool) -> StrArray:
    return StrArray(blob, offsets, sep=sep, is_sorted=is_sorted)


__all__ = ["StrArray", "pack_strings"]
