"""The two-stage indexes' exact re-scoring, warm and right after a load.

Over the float16 vectors of an index ``umls_scale.py`` built (default 3M x 768 spectrum, ivf), with random
candidate rows (``--rows`` a query) for random unit queries:

- page cache warm: milliseconds a query of the re-scoring now (``index/rescore.py``: torch gathers and widens
  the float16 rows) against the numpy code it replaced (each row once per batch in file order, then a float32
  product a query at a time) and the numpy path a runtime-only environment (no torch) takes, same rows, the
  scores compared;
- right after a load (the file's pages dropped from the page cache with ``posix_fadvise``): rows/s of
  reading a batch's rows through the memory map, faulted one at a time (the map is opened for scattered reads)
  against read ahead first (``PageIn``, forced on).

    python benchmarks/umls_scale.py --names 3000000 --kinds ivf ...    # the build, once
    python benchmarks/studies/rescore_speed.py --names 3000000
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io, umls_scale

import umls_scale  # noqa: E402


def numpy_scores(X: numpy.ndarray, queries: numpy.ndarray, cand: numpy.ndarray) -> numpy.ndarray:
    """The replaced re-scoring (2026-11-27 05:00 to 08:30), the baseline."""
    valid = cand >= 0
    rows, pair = numpy.unique(cand[valid], return_inverse=True)
    found = numpy.asarray(X[rows])
    counts = valid.sum(1)
    ends = numpy.cumsum(counts)
    scores = numpy.full(cand.shape, -numpy.inf, dtype=numpy.float32)
    for i in numpy.flatnonzero(counts):
        scores[i, valid[i]] = found[pair[ends[i] - counts[i]:ends[i]]].astype(numpy.float32) @ queries[i]
    return scores


def drop(path: Path) -> None:
    with open(path, "rb") as fh:
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=3_000_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--geometry", default="spectrum", choices=["isotropic", "spectrum"])
    parser.add_argument("--kind", default="ivf", choices=["ivf"])
    parser.add_argument("--queries", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=512, help="Candidate rows a query (the ivf default re-scores 512).")
    parser.add_argument("--cold-rows", type=int, default=16_384, help="Rows read per cold measurement.")
    parser.add_argument("--note", action="append", default=[], help="What else ran on the machine, etc.")
    parser.add_argument("--name", default="rescore_speed", help="Results file name (benchmarks/results/NAME.json).")
    opts = parser.parse_args()
    import torch
    from results_io import table, write_results

    from spacy_sapbert.index import rescore
    from spacy_sapbert.index.two_stage import VECTORS_F16_FILE, load_float16

    folder = umls_scale._work(opts.names, opts.dim, opts.geometry) / f"index_{opts.kind}"
    path = folder / VECTORS_F16_FILE
    if not path.exists():
        raise SystemExit(f"{path} is missing: run benchmarks/umls_scale.py --kinds {opts.kind} at this size first")
    X = load_float16(folder, opts.names, opts.dim)
    rng = numpy.random.default_rng(0)
    Q = rng.normal(size=(opts.queries, opts.dim)).astype(numpy.float32)
    Q /= numpy.linalg.norm(Q, axis=1, keepdims=True)
    cand = numpy.stack([rng.choice(len(X), opts.rows, replace=False) for _ in range(opts.queries)])
    numpy.asarray(X[numpy.unique(cand)])  # warm: these rows in the page cache
    rows16 = rescore.torch_rows(X)
    timings = {}
    for label, fn in (("numpy, rows once per batch (replaced)", lambda: numpy_scores(X, Q, cand)),
                      ("torch, a query at a time (now)", lambda: rescore.candidate_scores(rows16, Q, cand)),
                      ("numpy, a query at a time (without torch)",
                       lambda: rescore.candidate_scores_numpy(X, Q, cand))):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t0)
        timings[label] = (best, out)
    (_, a), (_, b), (_, c) = timings.values()
    max_diff = float(max(numpy.abs(a - b).max(), numpy.abs(c - b).max()))
    warm_rows = [[label, round(1e3 * t / opts.queries, 3)] for label, (t, _) in timings.items()]

    cold_rows = []
    page_in = rescore.PageIn(X)
    for label, ahead in (("faulted one at a time", False), ("read ahead first (PageIn)", True)):
        rows = numpy.sort(rng.choice(len(X), opts.cold_rows, replace=False))
        drop(path)
        t0 = time.perf_counter()
        if ahead:
            threshold, rescore.COLD_ROW_SECONDS = rescore.COLD_ROW_SECONDS, -1.0
            try:
                page_in(rows[None, :])
            finally:
                rescore.COLD_ROW_SECONDS = threshold
        numpy.take(X, rows, axis=0)
        cold_rows.append([label, round(len(rows) / (time.perf_counter() - t0), 0)])
    for r in warm_rows + cold_rows:
        print(r, flush=True)
    tables = {"warm": table(["re-scoring", f"ms a query ({opts.rows} rows x {opts.dim})"], warm_rows),
              "cold": table(["rows after a load", "rows/s"], cold_rows)}
    figures = {"max_abs_score_difference": max_diff, "torch_threads": torch.get_num_threads(),
               "vectors": f"{opts.names} x {opts.dim} {opts.geometry} ({opts.kind})"}
    print(f"written {write_results(opts.name, tables, notes=opts.note, figures=figures)}")


if __name__ == "__main__":
    main()
