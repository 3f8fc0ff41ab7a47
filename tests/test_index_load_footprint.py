"""What loading a saved index costs in memory and what it still refuses (issue 31, "Footprint").

The hnswlib file check reads the file through a memory map in small chunks (no float64 copy of the
vectors) and walks the upper-level link lists without a Python step per element; a damaged file is
still refused with SB-E107 before hnswlib reads it.
"""
from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path
from typing import List, Tuple

import numpy
import pytest

from spacy_sapbert.errors import MissingInputError
from spacy_sapbert.index.hnsw_file import check_hnsw_file

DIM = 32
_HEADER = struct.Struct("<QQQQQQiIQQQdQ")


def _hnsw_file(tmp_path: Path, n: int, *, M: int = 8, dim: int = DIM, seed: int = 0) -> Path:
    import hnswlib

    rng = numpy.random.default_rng(seed)
    X = rng.normal(size=(n, dim)).astype(numpy.float32)
    X /= numpy.linalg.norm(X, axis=1, keepdims=True)
    index = hnswlib.Index(space="ip", dim=dim)
    index.init_index(max_elements=n, M=M, ef_construction=20, random_seed=seed)
    index.add_items(X, numpy.arange(n), num_threads=1)
    path = tmp_path / f"names_{n}.hnsw"
    index.save_index(str(path))
    return path


def _upper_lists(raw: bytes, n: int) -> Tuple[List[Tuple[int, int]], int]:
    """Reference walk of the upper-level records, one element at a time: ``[(offset, nbytes)]`` of the
    non-empty link lists, and where the records start."""
    header = _HEADER.unpack_from(raw, 0)
    pos = _HEADER.size + n * header[3]
    start, lists = pos, []
    for _ in range(n):
        (nbytes,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        if nbytes:
            lists.append((pos, nbytes))
            pos += nbytes
    assert pos == len(raw)
    return lists, start


@pytest.fixture(scope="module")
def hnsw_file(tmp_path_factory):
    path = _hnsw_file(tmp_path_factory.mktemp("hnsw"), 3000)
    lists, _ = _upper_lists(path.read_bytes(), 3000)
    assert len(lists) > 10  # the graph has upper levels to damage
    return path


def test_a_well_formed_file_passes(hnsw_file):
    check_hnsw_file(hnsw_file, n=3000, dim=DIM)


@pytest.mark.parametrize("which", ["first", "last"])
def test_an_upper_level_neighbour_out_of_range_is_refused(hnsw_file, tmp_path, which):
    raw = bytearray(hnsw_file.read_bytes())
    lists, _ = _upper_lists(bytes(raw), 3000)
    offset, _ = lists[0] if which == "first" else lists[-1]
    struct.pack_into("<I", raw, offset, 1)  # one link ...
    struct.pack_into("<I", raw, offset + 4, 10 ** 7)  # ... to an element that does not exist
    damaged = tmp_path / "d.hnsw"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(MissingInputError, match="SB-E107.*damaged hnsw file.*upper-level neighbour id"):
        check_hnsw_file(damaged, n=3000, dim=DIM)


def test_an_upper_level_link_count_above_the_degree_is_refused(hnsw_file, tmp_path):
    raw = bytearray(hnsw_file.read_bytes())
    lists, _ = _upper_lists(bytes(raw), 3000)
    struct.pack_into("<I", raw, lists[len(lists) // 2][0], 9)  # M = 8
    damaged = tmp_path / "d.hnsw"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(MissingInputError, match="SB-E107.*upper-level link count exceeds"):
        check_hnsw_file(damaged, n=3000, dim=DIM)


@pytest.mark.parametrize("damage", ["bad size", "huge size", "extra word", "extra byte", "zero size", "cut"])
def test_damaged_upper_level_records_are_refused(hnsw_file, tmp_path, damage):
    raw = bytearray(hnsw_file.read_bytes())
    lists, start = _upper_lists(bytes(raw), 3000)
    offset, nbytes = lists[len(lists) // 2]
    if damage == "bad size":
        struct.pack_into("<I", raw, offset - 4, nbytes + 4)  # not whole link lists
    elif damage == "huge size":
        struct.pack_into("<I", raw, offset - 4, 36 * 10 ** 6)  # whole lists, past the end of the file
    elif damage == "extra word":
        raw += b"\0\0\0\0"
    elif damage == "extra byte":
        raw += b"\0"
    elif damage == "zero size":  # the list's words are then read as records of their own
        struct.pack_into("<I", raw, offset - 4, 0)
    else:
        raw = raw[: offset + nbytes // 2]
    damaged = tmp_path / "d.hnsw"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(MissingInputError, match="SB-E107.*damaged hnsw file"):
        check_hnsw_file(damaged, n=3000, dim=DIM)


def test_the_check_holds_no_copy_of_the_vectors(tmp_path):
    """The norms are computed chunk by chunk in float32 on views of the memory map: the check's
    allocations stay below one float32 copy of the vectors (the two float64 copies it made before
    were four times that, for a moment, at every load: ~400 MB for MEDIC's 75k x 384)."""
    n, dim = 20_000, 64
    path = _hnsw_file(tmp_path, n, dim=dim)
    check_hnsw_file(path, n=n, dim=dim)  # imports and first-call allocations out of the way
    tracemalloc.start()
    try:
        check_hnsw_file(path, n=n, dim=dim)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < n * dim * 4, peak


def test_an_id_out_of_range_in_an_unused_link_slot_passes_and_a_used_one_beside_it_is_refused(hnsw_file, tmp_path):
    """Only the slots a link count covers are neighbour ids: junk past the count is not refused (hnswlib never
    reads it), while a used slot out of range in the same chunk still is (the check's fast path sees the junk
    first and must look at which slots are used)."""
    raw = bytearray(hnsw_file.read_bytes())
    header = _HEADER.unpack_from(raw, 0)
    per_element, max_m0 = header[3], header[9]
    counts = [struct.unpack_from("<I", raw, 96 + i * per_element)[0] & 0xFFFF for i in range(3000)]
    loose = [i for i, c in enumerate(counts) if 0 < c < max_m0][:2]
    assert len(loose) == 2
    for i in loose:  # junk in the last (unused) slot of two elements
        struct.pack_into("<I", raw, 96 + i * per_element + 4 * max_m0, 10 ** 7)
    junk = tmp_path / "junk.hnsw"
    junk.write_bytes(bytes(raw))
    check_hnsw_file(junk, n=3000, dim=DIM)
    used = loose[1]
    struct.pack_into("<I", raw, 96 + used * per_element + 4, 10 ** 7)  # its first (used) slot out of range too
    junk.write_bytes(bytes(raw))
    with pytest.raises(MissingInputError, match="SB-E107.*level-0 neighbour id is out of range"):
        check_hnsw_file(junk, n=3000, dim=DIM)
