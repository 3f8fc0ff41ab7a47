"""Exact re-scoring of candidate rows (index/rescore.py): scores, the read-ahead of rows not in the page cache,
and the budget of mapped vector pages."""
from __future__ import annotations

import mmap
import sys
from pathlib import Path

import numpy
import pytest

from spacy_sapbert.index import rescore
from spacy_sapbert.index.two_stage import RescoredBackend, load_float16, save_float16
from spacy_sapbert.errors import ConfigError
from spacy_sapbert.index.rescore import (MAPPED_ENV, MappedBudget, PageIn, Rescorer, candidate_scores,
                                         mapped_budget_bytes, torch_rows)

DIM = 512  # 1 KiB a float16 row: four rows a page


def _unit(x):
    return (x / numpy.linalg.norm(x, axis=1, keepdims=True)).astype(numpy.float32)


@pytest.fixture()
def mapped(tmp_path):
    rng = numpy.random.default_rng(3)
    X16 = _unit(rng.normal(size=(64, DIM))).astype(numpy.float16)
    save_float16(X16, tmp_path)
    return X16, load_float16(tmp_path, 64, DIM)


class _Recorder:
    """Stands in for the memory map: records the read-ahead requests."""

    def __init__(self, size: int, fail: bool = False) -> None:
        self.size, self.fail, self.calls = size, fail, []

    def __len__(self) -> int:
        return self.size

    def madvise(self, option: int, start: int = 0, length: int = 0) -> None:
        if self.fail:
            raise OSError(22, "Invalid argument")
        self.calls.append((option, start, length))


@pytest.mark.parametrize("use_torch", [True, False])
def test_candidate_scores_equal_exact_products_full_and_partial_rows(mapped, use_torch):
    X16, X = mapped
    rng = numpy.random.default_rng(4)
    Q = _unit(rng.normal(size=(3, DIM)))
    cand = numpy.array([[5, 1, 63, 0], [7, -1, 2, -1], [-1, -1, -1, -1]])
    got = Rescorer(X, use_torch=use_torch)(Q, cand)
    if use_torch:
        assert numpy.array_equal(got, candidate_scores(torch_rows(X), Q, cand))
    for i in range(3):
        for j, row in enumerate(cand[i]):
            if row < 0:
                assert numpy.isneginf(got[i, j])
            else:
                assert got[i, j] == pytest.approx(float(X16[row].astype(numpy.float64) @ Q[i]), abs=1e-5)


def test_page_in_asks_for_the_pages_of_each_row_merged(mapped, monkeypatch):
    _, X = mapped
    monkeypatch.setattr(rescore, "COLD_ROW_SECONDS", -1.0)  # always cold
    page_in = PageIn(X)
    rec = page_in._map = _Recorder(len(X._mmap))
    page_in(numpy.array([[2, 1, -1], [40, 63, 1]]))
    start = X.offset % mmap.ALLOCATIONGRANULARITY
    assert all(opt == mmap.MADV_WILLNEED and a % mmap.PAGESIZE == 0 and a + n <= rec.size for opt, a, n in rec.calls)
    for row in (1, 2, 40, 63):  # every byte of each row is asked for
        lo, hi = start + row * DIM * 2, start + (row + 1) * DIM * 2
        assert any(a <= lo and hi <= a + n for _, a, n in rec.calls), row
    spans = sorted((a, a + n) for _, a, n in rec.calls)
    assert all(b0 < a1 for (_, b0), (a1, _) in zip(spans, spans[1:]))  # merged: no two touch
    assert len(rec.calls) == 3  # rows 1 and 2 share a page; 40 and 63 have their own


def test_page_in_leaves_rows_in_the_page_cache_alone(mapped, monkeypatch):
    _, X = mapped
    clock = iter([0.0, 1e-7])  # the probe of 3 rows took 0.1 us: in the page cache
    monkeypatch.setattr(rescore, "perf_counter", lambda: next(clock))
    page_in = PageIn(X)
    rec = page_in._map = _Recorder(len(X._mmap))
    page_in(numpy.array([[2, 1, 40]]))
    assert rec.calls == []


def test_page_in_is_a_no_op_for_arrays_in_memory_and_after_a_refused_hint(mapped, monkeypatch):
    X16, X = mapped
    monkeypatch.setattr(rescore, "COLD_ROW_SECONDS", -1.0)
    PageIn(numpy.asarray(X16))(numpy.array([[1, 2]]))  # no memory map: nothing to ask for, no error
    page_in = PageIn(X)
    page_in._map = _Recorder(len(X._mmap), fail=True)
    page_in(numpy.array([[1, 2]]))
    assert page_in._map is None  # given up: later batches are read on demand
    page_in(numpy.array([[3]]))


def test_rescore_through_a_memory_map_with_read_ahead_matches_brute_force(mapped, monkeypatch):
    X16, X = mapped
    monkeypatch.setattr(rescore, "COLD_ROW_SECONDS", -1.0)
    backend = RescoredBackend(X, rescore=8)
    rng = numpy.random.default_rng(5)
    Q = _unit(rng.normal(size=(4, DIM)))
    cand = numpy.argsort(rng.random((4, 64)), axis=1)[:, :16]
    rows, scores = backend._rescore(Q, cand, 3)
    for i in range(4):
        exact = X16[cand[i]].astype(numpy.float64) @ Q[i]
        order = numpy.lexsort((cand[i], -exact))[:3]
        assert rows[i].tolist() == cand[i][order].tolist()
        assert numpy.allclose(scores[i], exact[order], atol=1e-5)


def test_mapped_budget_releases_the_mapping_after_a_batch_that_left_too_many_pages(mapped, monkeypatch):
    _, X = mapped
    budget = MappedBudget(X, budget=4 * mmap.PAGESIZE)
    if budget._map is None:
        pytest.skip("no /proc/self/statm or MADV_DONTNEED here")
    rec = budget._map = _Recorder(len(X._mmap))
    resident = iter([4, 5, 3])
    monkeypatch.setattr(budget, "file_pages", lambda: next(resident))
    budget()  # 4 pages: within the budget
    assert rec.calls == [] and budget.releases == 0
    budget()  # 5 > 4: released
    assert rec.calls == [(mmap.MADV_DONTNEED, 0, 0)] and budget.releases == 1
    budget()
    assert budget.releases == 1
    assert MappedBudget(X, budget=len(X._mmap))._map is None  # a file within the budget: left alone
    assert MappedBudget(X, budget=None)._map is None  # no cap
    refused = MappedBudget(X, budget=mmap.PAGESIZE)
    refused._map = _Recorder(len(X._mmap), fail=True)
    refused()  # the process maps far more than a page of files (its libraries): a release is due, and refused
    assert refused._map is None


def _rss_file_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RssFile from /proc")
def test_mapped_budget_lowers_the_resident_set_and_the_rows_read_the_same(tmp_path):
    rng = numpy.random.default_rng(6)
    X = rng.normal(size=(16_384, DIM))
    X16 = (X / numpy.linalg.norm(X, axis=1, keepdims=True)).astype(numpy.float16)  # 16 MiB of unit rows (load checks)
    save_float16(X16, tmp_path)
    X = load_float16(tmp_path, len(X16), DIM)
    float(numpy.asarray(X, dtype=numpy.float32).sum())  # every page mapped
    before = _rss_file_kb()
    budget = MappedBudget(X, budget=4 << 20)
    budget()  # the process's libraries alone map more than 4 MiB of files
    assert budget.releases == 1
    assert before - _rss_file_kb() >= 12 * 1024  # the file's pages left the process
    assert numpy.array_equal(numpy.asarray(X[[0, 5000, 16_383]]), X16[[0, 5000, 16_383]])


def test_mapped_budget_is_read_from_the_environment_and_a_bad_value_is_e585(monkeypatch, mapped):
    monkeypatch.delenv(MAPPED_ENV, raising=False)
    assert mapped_budget_bytes() == 2048 << 20
    monkeypatch.setenv(MAPPED_ENV, "512")
    assert mapped_budget_bytes() == 512 << 20
    monkeypatch.setenv(MAPPED_ENV, "0")
    assert mapped_budget_bytes() is None
    for bad in ("-1", "1.5", "lots", "²"):
        monkeypatch.setenv(MAPPED_ENV, bad)
        with pytest.raises(ConfigError, match="E585") as err:
            mapped_budget_bytes()
        assert MAPPED_ENV in str(err.value) and repr(bad) in str(err.value)
    with pytest.raises(ConfigError, match="E585"):  # at load, not at the first search
        RescoredBackend(mapped[1], rescore=8)
