"""Validate an hnswlib index file before hnswlib loads it.

hnswlib (0.8) trusts its file: a neighbour id out of range loads fine and segfaults at the first
query, and damaged vector bytes give "cosine" scores in the thousands. :func:`check_hnsw_file` reads
the file's layout (hnswlib's ``HierarchicalNSW::saveIndex``: a 96-byte header, the level-0 block of
``cur_element_count`` fixed-size elements — link count, ``maxM0`` neighbour ids, the vector, the
label — then, per element, the size and bytes of its upper-level link lists) through a memory map,
vectorised per 8k elements, and raises a coded error naming the file on the first inconsistency.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy

from ..errors import Errors, MissingInputError

_HEADER = struct.Struct("<QQQQQQiIQQQdQ")  # offsetLevel0 .. ef_construction: 96 bytes
# elements checked at a time: the float32 norms of one chunk of 384-d vectors are ~12 MB of temporaries
# (65,536 elements in float64 held ~400 MB for a moment: that was the peak RSS of a MEDIC pipeline's load)
_CHUNK = 8_192
_NORM_TOLERANCE = 1e-2


def _bad(path: Path, reason: str) -> MissingInputError:
    return MissingInputError(Errors.E107.format(path=path, reason=f"damaged hnsw file: {reason}"))


def check_hnsw_file(path: Path, *, n: int, dim: int) -> None:
    """Raise :class:`MissingInputError` unless ``path`` is a well-formed hnswlib file of ``n`` unit
    vectors of ``dim`` floats whose labels are ``0..n-1`` and whose neighbour ids are all in range."""
    if not path.is_file():  # e.g. a float16 graph's folder whose meta says vectors "float32" (or nothing)
        raise _bad(path, "no such file" if not path.exists() else "not a file")
    size = path.stat().st_size
    if size < _HEADER.size:
        raise _bad(path, f"{size} bytes, shorter than the header")
    raw = numpy.memmap(path, dtype=numpy.uint8, mode="r")
    (offset0, _max_elements, count, per_element, label_offset, data_offset, max_level, entry, max_m,
     max_m0, _m, _mult, _efc) = _HEADER.unpack_from(raw[: _HEADER.size].tobytes())
    links0 = 4 * (max_m0 + 1)
    if count != n:
        raise _bad(path, f"{count} elements, expected {n}")
    if (offset0 != 0 or data_offset != links0 or label_offset != links0 + 4 * dim
            or per_element != label_offset + 8 or not 0 < max_m0 < 4096 or not 0 < max_m <= max_m0):
        raise _bad(path, "inconsistent header (layout, dimension or graph degree)")
    if not 0 <= max_level < 64 or (n and entry >= n):
        raise _bad(path, f"entry point {entry} / top level {max_level} out of range")
    level0_end = _HEADER.size + n * per_element
    if size < level0_end:
        raise _bad(path, f"truncated: {size} bytes, the level-0 block alone needs {level0_end}")
    block = raw[_HEADER.size: level0_end]
    labels_seen = numpy.zeros(n, dtype=bool)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        elems = block[start * per_element: stop * per_element].reshape(stop - start, per_element)
        _check_links(path, elems[:, :links0].view(numpy.uint32), max_m0, n, "level-0")
        vecs = elems[:, data_offset:label_offset].view(numpy.float32)  # a view: no copy
        with numpy.errstate(all="ignore"):  # overflow to inf is a bad norm, not a warning
            norms = numpy.sqrt(numpy.einsum("ij,ij->i", vecs, vecs))
        if not numpy.isfinite(norms).all() or (numpy.abs(norms - 1.0) > _NORM_TOLERANCE).any():
            raise _bad(path, "a stored vector is not unit length")
        labels = elems[:, label_offset:per_element].view(numpy.uint64).ravel()
        if int(labels.max()) >= n:
            raise _bad(path, "a label is out of range")
        labels_seen[labels.astype(numpy.int64)] = True
    if not labels_seen.all():
        raise _bad(path, "labels are not the rows 0..n-1")
    _check_upper_levels(path, raw, level0_end, size, n, max_m)


def _check_upper_levels(path: Path, raw: numpy.memmap, pos: int, size: int, n: int, max_m: int) -> None:
    """The ``n`` records after the level-0 block: a uint32 byte count, then that many bytes of link lists
    (``[count, id_1 .. id_maxM]`` uint32 rows). Most elements have no upper level (a zero count), so the
    walk jumps over runs of zero words and visits only the ~n/M records that hold lists; all their link
    rows are then checked at once."""
    per_level = 4 * (max_m + 1)
    if (size - pos) % 4:  # every record is whole uint32 words
        raise _bad(path, "the upper-level links are not whole 4-byte words (truncated or padded)")
    words = numpy.asarray(raw[pos:size]).view("<u4")  # a plain view of the map: np.memmap slices cost ~20 us each
    nonzero = numpy.flatnonzero(words)
    at, done, lists = 0, 0, []
    while done < n:
        nxt = int(nonzero.searchsorted(at))
        stop = int(nonzero[nxt]) if nxt < len(nonzero) else len(words)
        zeros = min(stop - at, n - done)  # zero-count records: one word each
        at, done = at + zeros, done + zeros
        if done == n:
            break
        if at >= len(words):
            raise _bad(path, "truncated in the upper-level links")
        nbytes = int(words[at])
        at += 1
        if nbytes % per_level or at + nbytes // 4 > len(words):
            raise _bad(path, "an upper-level link list has a bad size")
        lists.append(words[at: at + nbytes // 4])
        at, done = at + nbytes // 4, done + 1
    if at != len(words):
        raise _bad(path, f"{4 * (len(words) - at)} unexpected bytes after the last element")
    if lists:
        _check_links(path, numpy.concatenate(lists).reshape(-1, max_m + 1), max_m, n, "upper-level")


def _check_links(path: Path, words: numpy.ndarray, degree: int, n: int, level: str) -> None:
    """Rows of ``[count, id_1 .. id_degree]`` (uint32): counts within the degree, used ids below ``n``."""
    if not len(words):
        return
    counts = words[:, 0] & 0xFFFF
    if int(counts.max()) > degree:
        raise _bad(path, f"a {level} link count exceeds the graph degree")
    ids = words[:, 1:]
    if ids.size and int(ids.max()) >= n:  # rare: a sound file's unused slots hold zeros or earlier, in-range ids
        suspect = numpy.flatnonzero((ids >= n).any(axis=1))  # the rows holding an id out of range: used there?
        used = numpy.arange(degree)[None, :] < counts[suspect, None]
        if (ids[suspect][used] >= n).any():
            raise _bad(path, f"a {level} neighbour id is out of range")


class StoredVectors:
    """Name vectors read straight from a checked hnswlib file: the bytes hnswlib loaded, so the same floats as
    ``Index.get_items`` gives (which copies each vector through Python, ~100 us a row on this CPU: the candidate rows of a
    hybrid NCBI test pass took 5 s). Row ``r`` is the element labelled ``r``; the label -> element map is read once (in
    chunks, never memory-mapped: mapped pages would count as resident memory). Reads use ``os.pread``
    per row, so nothing of the file stays resident. Only for a file known to hold the loaded graph
    (:class:`~.backends.HnswBackend` checks its size and mtime before each use)."""

    def __init__(self, path: Path, *, n: int, dim: int) -> None:
        self.path, self.n, self.dim = path, n, dim
        with open(path, "rb") as fh:
            header = fh.read(_HEADER.size)
            (_offset0, _max_elements, count, per_element, label_offset, data_offset, *_rest) = _HEADER.unpack(header)
            if count != n or label_offset != data_offset + 4 * dim or per_element != label_offset + 8:
                raise _bad(path, "inconsistent header (layout, dimension or graph degree)")
            self.per_element, self.data_offset = int(per_element), int(data_offset)
            element_of = numpy.full(n, -1, dtype=numpy.int64)
            for start in range(0, n, _CHUNK):
                stop = min(n, start + _CHUNK)
                fh.seek(_HEADER.size + start * per_element)
                raw = numpy.frombuffer(fh.read((stop - start) * per_element), dtype=numpy.uint8)
                if raw.size != (stop - start) * per_element:
                    raise _bad(path, "truncated in the level-0 block")
                labels = raw.reshape(stop - start, per_element)[:, label_offset:per_element].copy().view(numpy.uint64)
                labels = labels.ravel().astype(numpy.int64)
                if labels.size and (labels.min() < 0 or labels.max() >= n):
                    raise _bad(path, "a label is out of range")
                element_of[labels] = numpy.arange(start, stop, dtype=numpy.int64)
        if (element_of < 0).any():
            raise _bad(path, "labels are not the rows 0..n-1")
        self.element_of = element_of

    def read(self, rows: numpy.ndarray) -> numpy.ndarray:
        """float32 ``[len(rows), dim]``, a fresh array (rows in ``0..n-1``, checked by the caller)."""
        size = 4 * self.dim
        offsets = _HEADER.size + self.element_of[numpy.asarray(rows, dtype=numpy.int64)] * self.per_element \
            + self.data_offset
        fd = os.open(self.path, os.O_RDONLY)
        try:
            buf = b"".join([os.pread(fd, size, offset) for offset in offsets.tolist()])
        finally:
            os.close(fd)
        if len(buf) != size * len(offsets):
            raise _bad(self.path, "truncated while reading stored vectors")
        return numpy.frombuffer(bytearray(buf), dtype=numpy.float32).reshape(len(offsets), self.dim)


__all__ = ["check_hnsw_file", "StoredVectors"]
