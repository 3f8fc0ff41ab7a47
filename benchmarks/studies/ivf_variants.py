"""Variants of the ivf index on the same vectors, queries and truth: what would make it faster.

Over ``umls_scale.py``'s prepared vectors and its ivf build at one size (default 1M x 768, spectrum geometry),
with its recall queries and exact truth, page cache warm, ``--threads`` threads. Each variant's candidates are
re-scored by the index's own re-scoring and go through ``ConceptIndex.search``, so recall is the concept
recall@1 / @5 of ``umls_scale.py``:

- ``build``: the index as built (``index_ivf``), by cells scanned and rows re-scored;
- ``pq{m}``: the same number of cells with coarser codes (``m`` sub-quantizers instead of dim / 2);
- ``cells{c}``: ``c`` cells (two-level k-means of faiss.contrib.clustering over 300,000 names), by share scanned;
- ``rabitq``: faiss's RaBitQ fast-scan codes in the same number of cells (``IVF{lists},RaBitQfs``);
- ``margin{t}``: the build's cells whose centroid score is within ``t`` of the query's best cell (at most half
  of them), instead of a fixed number.

Variants are trained on 100,000 names drawn with seed 100, as the index is. Columns: cells scanned (mean),
rows re-scored, candidate-stage q/s (faiss alone), q/s through ``ConceptIndex.search`` (second of two passes),
recall@1, recall@5, build s.

    python benchmarks/studies/ivf_variants.py                       # 1M x 768, ~15 min on 2 cores
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io, umls_scale

import umls_scale  # noqa: E402
from common import timed_search  # noqa: E402
from scale_diagnose import recall  # noqa: E402

TRAIN = 100_000
SEED = 100


def _train_rows(n: int, count: int) -> numpy.ndarray:
    return numpy.sort(numpy.random.default_rng(SEED).choice(n, min(n, count), replace=False))


def _fill(index: Any, X: numpy.ndarray) -> None:
    for start in range(0, len(X), 65_536):
        index.add(numpy.ascontiguousarray(X[start:start + 65_536], dtype=numpy.float32))


def build_factory(X: numpy.ndarray, spec: str) -> Any:
    import faiss

    index = faiss.index_factory(X.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
    index.cp.min_points_per_centroid = 1
    index.cp.seed = SEED
    index.train(numpy.ascontiguousarray(X[_train_rows(len(X), TRAIN)], dtype=numpy.float32))
    _fill(index, X)
    return index


def build_two_level(X: numpy.ndarray, cells: int) -> Any:
    import faiss
    from faiss.contrib.clustering import two_level_clustering

    d = X.shape[1]
    sample = numpy.ascontiguousarray(X[_train_rows(len(X), 300_000)], dtype=numpy.float32)
    centroids, _ = two_level_clustering(sample, int(round(cells ** 0.5)), cells, clustering_niter=10,
                                        spherical=True, seed=SEED)
    quantizer = faiss.IndexFlatIP(d)
    quantizer.add(numpy.ascontiguousarray(centroids, dtype=numpy.float32))
    index = faiss.IndexIVFPQFastScan(quantizer, d, cells, d // 2, 4, faiss.METRIC_INNER_PRODUCT)
    index.by_residual = True
    index.train(sample[:TRAIN])  # the quantizer holds its cells already: this trains the codes
    _fill(index, X)
    return index


class Bench:
    def __init__(self, work: Path, n_queries: int, threads: int) -> None:
        import faiss

        from spacy_sapbert.index import ConceptIndex
        from spacy_sapbert.kb import KnowledgeBase

        faiss.omp_set_num_threads(threads)
        self.index = ConceptIndex.from_disk(work / "index_ivf", KnowledgeBase.from_disk(work / "kb"))
        self.backend = self.index._backend
        self.built = self.backend._ivf
        self.X = self.backend._X
        self.q = numpy.ascontiguousarray(numpy.load(work / "queries.npy")[:n_queries], dtype=numpy.float32)
        self.truth = json.loads((work / "ground_truth.json").read_text())["all"][:n_queries]
        self.rows: List[List[Any]] = []

    def measure(self, label: str, ivf: Any, probes: int, rescore: int, build_s: Optional[float],
                candidates: Optional[Callable[[numpy.ndarray, int], numpy.ndarray]] = None) -> List[Any]:
        be = self.backend
        before = be.rescore
        be._ivf, be.lists, be.rescore = ivf, int(ivf.nlist), rescore
        ivf.nprobe = min(probes, ivf.nlist)
        if candidates is not None:
            be._candidates = candidates
        try:
            t0 = time.perf_counter()
            if candidates is None:
                ivf.search(self.q, rescore)
            else:
                for start in range(0, len(self.q), 256):
                    candidates(self.q[start:start + 256], rescore)
            scan = len(self.q) / (time.perf_counter() - t0)
            found, seconds = timed_search(self.index, self.q, passes=2)  # pass 1 brings the re-scored rows in
        finally:
            be.__dict__.pop("_candidates", None)
            be._ivf, be.lists, be.rescore = self.built, int(self.built.nlist), before
        r = recall(found, self.truth)
        row = [label, ivf.nprobe, rescore, round(scan, 1), round(len(self.q) / seconds, 1), r["recall1"], r["recall5"],
               build_s]
        self.rows.append(row)
        print(row, flush=True)  # a margin row's cells scanned are set after: the mean over its batches
        return row

    def margin(self, tau: float, rescore: int) -> None:
        """The build's cells within ``tau`` of the best centroid score, at most half of them."""
        ivf, cap = self.built, self.built.nlist // 2
        scanned: List[float] = []

        def candidates(vectors: numpy.ndarray, depth: int) -> numpy.ndarray:
            vectors = numpy.ascontiguousarray(vectors, dtype=numpy.float32)
            D, I = ivf.quantizer.search(vectors, cap)
            I[D < D[:, :1] - tau] = -1
            scanned.append(float((I >= 0).sum(1).mean()))
            _, rows = ivf.search_preassigned(vectors, depth, I, D)
            return numpy.asarray(rows, dtype=numpy.int64)

        row = self.measure(f"margin {tau}", ivf, cap, rescore, None, candidates=candidates)
        row[1] = round(float(numpy.mean(scanned)), 1)  # the mean over the batches of every pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--geometry", default="spectrum", choices=["isotropic", "spectrum"])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--note", action="append", default=[], help="What else ran on the machine, etc.")
    parser.add_argument("--name", default="ivf_variants", help="Results file name (benchmarks/results/NAME.json).")
    opts = parser.parse_args()
    from results_io import table, write_results

    from spacy_sapbert.index.ivf import DEFAULT_IVF_RESCORE

    work = umls_scale._work(opts.names, opts.dim, opts.geometry)
    if not (work / "index_ivf" / "index_meta.json").exists():
        raise SystemExit(f"{work / 'index_ivf'} holds no index: run benchmarks/umls_scale.py --kinds ivf at this size first")
    bench = Bench(work, opts.queries, opts.threads)
    lists, dim, rescore = int(bench.built.nlist), opts.dim, DEFAULT_IVF_RESCORE
    for probes in (lists // 4, lists // 2):
        for depth in (rescore, 4 * rescore):
            bench.measure("build", bench.built, probes, depth, None)
    for m in (dim // 4, dim // 8):
        t0 = time.perf_counter()
        ivf = build_factory(bench.X, f"IVF{lists},PQ{m}x4fsr")
        build_s = round(time.perf_counter() - t0, 1)
        for depth in (rescore, 2 * rescore):
            bench.measure(f"pq{m}", ivf, lists // 2, depth, build_s)
        del ivf
    t0 = time.perf_counter()
    ivf = build_two_level(bench.X, 4 * lists)
    build_s = round(time.perf_counter() - t0, 1)
    for share in (8, 4, 2):
        bench.measure(f"cells{4 * lists}", ivf, 4 * lists // share, rescore, build_s)
    del ivf
    t0 = time.perf_counter()
    ivf = build_factory(bench.X, f"IVF{lists},RaBitQfs")
    build_s = round(time.perf_counter() - t0, 1)
    for probes in (lists // 4, lists // 2):
        bench.measure("rabitq", ivf, probes, 2 * rescore, build_s)
    del ivf
    for tau in (0.12, 0.15):
        bench.margin(tau, rescore)
    columns = ["variant", "cells scanned", "rows re-scored", "candidate q/s", "q/s batch 256", "recall@1",
               "recall@5", "build s"]
    name = f"n{opts.names}_d{opts.dim}_{opts.geometry}"
    figures: Dict[str, Any] = {"lists": lists, "queries": len(bench.q)}
    print(f"written {write_results(opts.name, {name: table(columns, bench.rows)}, notes=opts.note, figures=figures)}")


if __name__ == "__main__":
    main()
