"""Graph and faiss candidate stages' search depth at UMLS scale, and where top-1 misses come from.

The compact index (usearch graph) this study was written for was removed on 2026-11-27 (docs/scale.md); its
rows stay in the results file, and ``--from-log`` still reads logs of its runs. Now: one hnswlib build per
``--hnsw`` degree, then a sweep of the search depth (``ef``) over it, and faiss candidate stages
(``--faiss``) with ``rescore`` candidates re-scored exactly against the float16 vectors. For each point: q/s at batch 256 and batch 1 (``--threads`` threads), concept
recall@1 / @5 against exact search over the same float16 vectors, and the miss decomposition of
``scale_diagnose.py`` (tie / graph / other, and how often the graph returned exact search's best row).

The vectors, KB and queries are ``umls_scale.py``'s (its ``prepare`` step, reused when present), made by
the generator ``--geometry`` names (``scale_data.py``: ``isotropic``, the first one, or ``spectrum``,
matched to real MiniLM name vectors).

    python benchmarks/studies/umls_scale_sweep.py --names 1000000 --dim 384 --geometry isotropic

Systems on the same queries, same threads: ``--hnsw 32`` (hnswlib float32) and ``--faiss 'HNSW32,SQ8'`` (a faiss
index as the candidate stage, re-scored against the same float16 file).

    python benchmarks/studies/umls_scale_sweep.py --names 200000 --dim 384 --geometry spectrum --table systems \
        --hnsw 32 --faiss HNSW32,SQ8 --ef 256 384 512 --rescore 64

Results: benchmarks/results/umls_scale_sweep.json (one table per run kind, named by size and geometry).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io, umls_scale

import umls_scale  # noqa: E402
from common import dir_mb, memory_mb, timed_search  # noqa: E402
from scale_diagnose import concepts_of, diagnose, exact_rows, recall  # noqa: E402


def _folder(work: Path, kind: str, connectivity: int, dims: int) -> Path:
    return work / (f"sweep_{kind}_M{connectivity}" + (f"_pca{dims}" if dims else ""))


def build(n: int, dim: int, geometry: str, connectivity: int, threads: int, kind: str = "hnsw",
          dims: int = 0) -> Dict[str, Any]:
    """One index of ``kind`` (``hnsw``: hnswlib float32) of graph degree ``connectivity``; ``dims``: kept for the
    folder names of the removed compact index's builds (0)."""
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import KnowledgeBase

    work = umls_scale._work(n, dim, geometry)
    folder = _folder(work, kind, connectivity, dims)
    done = folder / "build.json"
    if done.exists():
        return json.loads(done.read_text())
    info = json.loads((work / "prepared.json").read_text())
    kb = KnowledgeBase.from_disk(work / "kb")
    vectors = numpy.load(work / info["vectors_file"], mmap_mode="r")
    t0 = time.perf_counter()
    index = ConceptIndex.from_vectors(kb, vectors, umls_scale._Fields(dim), kind=kind, M=connectivity,
                                      num_threads=threads, show_progress=True,
                                      hnsw_vectors="float32")  # its hnsw rows are labelled hnswlib f32
    index.to_disk(folder)
    out = {"build_s": round(time.perf_counter() - t0, 1), "build_peak_mb": round(memory_mb()["peak"], 0),
           "index_mb": round(dir_mb(folder), 1)}
    done.write_text(json.dumps(out))
    return out


def sweep(n: int, dim: int, geometry: str, connectivity: int, threads: int, efs: List[int], rescores: List[int],
          n_recall: int, n_single: int, kind: str = "hnsw", dims: int = 0, cores: int = 0) -> List[Dict[str, Any]]:
    """The depth sweep over one build, timed on ``threads`` threads, or on the first ``cores`` cores."""
    import torch

    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import KnowledgeBase

    torch.set_num_threads(threads)
    umls_scale.pin_cores(cores)
    work = umls_scale._work(n, dim, geometry)
    kb = KnowledgeBase.from_disk(work / "kb")
    t0 = time.perf_counter()
    index = ConceptIndex.from_disk(_folder(work, kind, connectivity, dims), kb)
    load_s = time.perf_counter() - t0
    X, Q, gt_rows, gt_scores, gt = _truth(work, kb, n_recall)
    backend = index._backend
    out = []
    for ef in efs:
        for rescore in (rescores if hasattr(backend, "rescore") else [None]):
            if rescore is not None:
                backend.rescore = rescore
            index.set_ef(ef)
            results, qps256, qps1 = _timed(index, Q, n_single)
            fig = {"index": kind, "ef": ef, "rescore": rescore, "connectivity": connectivity, "qps_b256": round(qps256, 1),
                   "qps_b1": round(qps1, 1), **recall(results, gt),
                   **diagnose(index, kb, Q, results, gt_rows, gt_scores, gt, X)}
            print(json.dumps(fig), file=sys.stderr, flush=True)
            out.append(fig)
    st = memory_mb()
    out.append({"load_s": round(load_s, 2), "rss_mb": round(st["rss"], 0), "anon_mb": round(st["anon"], 0)})
    return out


def _timed(index: Any, Q: numpy.ndarray, n_single: int) -> Any:
    """Top-5 concepts of every query (batches of 256), q/s at batch 256, q/s of the first ``n_single`` one by one."""
    results, seconds = timed_search(index, Q)
    return results, len(Q) / seconds, n_single / timed_search(index, Q[:n_single], batch=1)[1]


def _truth(work: Path, kb: Any, n_recall: int) -> Any:
    """Vectors, queries, exact rows / scores and concepts of the first ``n_recall`` queries (cached)."""
    X = numpy.load(work / json.loads((work / "prepared.json").read_text())["vectors_file"], mmap_mode="r")
    Q = numpy.load(work / "queries.npy")[:n_recall]
    gt_file = work / f"exact_rows_{n_recall}.npz"
    if not gt_file.exists():
        r, s = exact_rows(X, Q, 200)
        numpy.savez(gt_file, rows=r, scores=s)
    gt_data = numpy.load(gt_file)
    gt_rows, gt_scores = gt_data["rows"], gt_data["scores"]
    return X, Q, gt_rows, gt_scores, [concepts_of(kb, gt_rows[i], gt_scores[i], 5) for i in range(len(Q))]


def faiss_sweep(n: int, dim: int, geometry: str, spec: str, threads: int, params: List[str], rescore: int,
                n_recall: int, n_single: int, cores: int = 0) -> List[Dict[str, Any]]:
    """A faiss index (``index_factory`` ``spec``, inner product, trained on 100k rows) as the candidate
    stage of a two-stage index: its candidates re-scored against the same float16 file, aggregated by
    ``ConceptIndex``. Built here (not kept), timed on ``threads`` threads."""
    import faiss
    import torch

    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.index.two_stage import RescoredBackend
    from spacy_sapbert.kb import KnowledgeBase

    faiss.omp_set_num_threads(threads)
    torch.set_num_threads(threads)
    work = umls_scale._work(n, dim, geometry)
    kb = KnowledgeBase.from_disk(work / "kb")
    X, Q, gt_rows, gt_scores, gt = _truth(work, kb, n_recall)
    t0 = time.perf_counter()
    fi = faiss.index_factory(dim, spec, faiss.METRIC_INNER_PRODUCT)
    pick = numpy.sort(numpy.random.default_rng(0).choice(n, min(n, 100_000), replace=False))
    fi.train(numpy.asarray(X[pick], dtype=numpy.float32))
    for start in range(0, n, 100_000):
        fi.add(numpy.asarray(X[start:start + 100_000], dtype=numpy.float32))
    build_s = time.perf_counter() - t0
    if cores:
        umls_scale.pin_cores(cores)
        faiss.omp_set_num_threads(cores)

    class FaissCandidates(RescoredBackend):
        kind = "faiss"

        def _candidates(self, vectors: numpy.ndarray, depth: int) -> numpy.ndarray:
            return fi.search(vectors, depth)[1].astype(numpy.int64)

    meta = {"n_names": n, "dim": dim, "kind": "ivf"}
    index = ConceptIndex(kb, meta, backend=FaissCandidates(X, rescore=rescore))
    out = []
    for p in params:
        faiss.ParameterSpace().set_index_parameters(fi, p)
        results, qps256, qps1 = _timed(index, Q, n_single)
        fig = {"index": f"faiss {spec}", "params": p, "rescore": rescore, "build_s": round(build_s, 1),
               "qps_b256": round(qps256, 1), "qps_b1": round(qps1, 1), **recall(results, gt)}
        print(json.dumps(fig), file=sys.stderr, flush=True)
        out.append(fig)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--geometry", default="isotropic", choices=["isotropic", "spectrum"])
    parser.add_argument("--ef", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--rescore", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--hnsw", type=int, nargs="*", default=[],
                        help="Also build hnswlib float32 with these M (same queries, same depths).")
    parser.add_argument("--faiss", nargs="*", default=[],
                        help="Also measure faiss index_factory specs (e.g. 'HNSW32,SQ8') as the candidate stage.")
    parser.add_argument("--faiss-params", nargs="+", default=["efSearch=256", "efSearch=512"],
                        help="faiss search parameters to sweep (ParameterSpace strings).")
    parser.add_argument("--table", default="sweep", help="Table name prefix (the table is PREFIX_nN_dD_GEOMETRY).")
    parser.add_argument("--threads", type=int, default=2, help="Build threads (and search threads, without --serve-cores).")
    parser.add_argument("--serve-cores", type=int, default=0,
                        help="Time the searches on this many cores (0: --threads threads), e.g. 2 on a bigger machine.")
    parser.add_argument("--recall-queries", type=int, default=2000)
    parser.add_argument("--single-queries", type=int, default=200)
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("--from-log", metavar="LOG",
                        help="Write the table (--table/--names/--dim/--geometry) from the printed output of a run "
                             "that a time limit stopped before it wrote its results.")
    parser.add_argument("--shape-only", action="store_true",
                        help="Only add the shape of the prepared vectors (PCA, local intrinsic dimension) to the results.")
    opts = parser.parse_args()
    if opts.step:
        fn = {"build": build, "sweep": sweep, "faiss_sweep": faiss_sweep}[opts.step]
        print("RESULT " + json.dumps(fn(*json.loads(opts.args))), flush=True)
        return
    from results_io import RESULTS_DIR, write_results

    n, dim, geo = opts.names, opts.dim, opts.geometry
    name = f"{opts.table}_n{n}_d{dim}_{geo}"
    if opts.from_log:
        return from_log(Path(opts.from_log), name, opts.note)
    if opts.shape_only:
        from scale_diagnose import shape

        old = RESULTS_DIR / "umls_scale_sweep.json"  # one file, a table per size and geometry: keep the others
        previous = json.loads(old.read_text()) if old.exists() else {}
        work = umls_scale._work(n, dim, geo)
        X = numpy.load(work / json.loads((work / "prepared.json").read_text())["vectors_file"], mmap_mode="r")
        figs = dict(previous.get("figures", {}))
        figs[name] = dict(figs.get(name, {}), shape=shape(X))
        print(figs[name]["shape"])
        write_results("umls_scale_sweep", previous.get("tables", {}), notes=previous.get("notes", []), figures=figs,
                      command=previous.get("command"))
        return
    print("command: python " + " ".join(sys.argv), flush=True)  # for --from-log, should a time limit stop the run
    info = umls_scale._run_step("prepare", n, dim, opts.recall_queries, 10_000, False, geo)  # no pipeline
    print(f"prepared {n:,} x {dim} ({geo}): {info}", flush=True)
    rows, figures = [], {}
    for kind, conn, dims in [("hnsw", m, 0) for m in opts.hnsw]:
        b = _run(build, n, dim, geo, conn, opts.threads, kind, dims)
        print(f"built {kind} M={conn} dims={dims}: {b}", flush=True)
        points = _run(sweep, n, dim, geo, conn, opts.threads, opts.ef, opts.rescore, opts.recall_queries,
                      opts.single_queries, kind, dims, opts.serve_cores)
        _add_build(rows, figures, kind, conn, dims, b, points[:-1], points[-1])
    for spec in opts.faiss:
        points = _run(faiss_sweep, n, dim, geo, spec, opts.threads, opts.faiss_params, opts.rescore[0],
                      opts.recall_queries, opts.single_queries, opts.serve_cores)
        figures[f"faiss {spec}"] = points
        for p in points:
            rows.append([f"faiss {spec} + f16 re-score", None, p["params"], p["rescore"], p["build_s"], p["qps_b256"],
                         p["qps_b1"], p["recall1"], p["recall5"], None, None, None, None])
    _write(name, rows, dict(figures, prepared=info, geometry=geo), opts.note, "python " + " ".join(sys.argv))


COLUMNS = ["index", "connectivity", "expansion_search", "rescore", "build s", "q/s batch 256", "q/s batch 1",
           "recall@1", "recall@5", "miss: tie", "miss: graph", "miss: other", "top row found"]


def _add_build(rows: List[List[Any]], figures: Dict[str, Any], kind: str, conn: int, dims: int, b: Dict[str, Any],
               points: List[Dict[str, Any]], serve: Any) -> None:
    """The table rows and figures of one build's sweep points."""
    key = (f"M{conn}" if kind == "compact" else f"{kind}_M{conn}") + (f"_pca{dims}" if dims else "")
    figures[key] = {"build": b, "points": points, "serve": serve}
    label = {"hnsw": "hnswlib f32"}.get(kind, f"compact, PCA {dims}-d candidates" if dims else
                                        "compact, full-d candidates")
    for p in points:
        rows.append([label, conn, p["ef"], p["rescore"], b["build_s"], p["qps_b256"], p["qps_b1"], p["recall1"],
                     p["recall5"], p["miss_tie"], p["miss_graph"], p["miss_other"], p["top_row_found"]])


def _write(name: str, rows: List[List[Any]], figures: Dict[str, Any], notes: List[str], command: str) -> None:
    """Table ``name`` into benchmarks/results/umls_scale_sweep.json, keeping the file's other tables."""
    from results_io import RESULTS_DIR, table, write_results

    old = RESULTS_DIR / "umls_scale_sweep.json"
    previous = json.loads(old.read_text()) if old.exists() else {}  # read late: another run may have written
    tables = dict(previous.get("tables", {}), **{name: table(COLUMNS, rows)})
    figs = dict(previous.get("figures", {}), **{name: figures})
    notes = list(dict.fromkeys(list(previous.get("notes", [])) + [f"{name}: " + x for x in notes]
                               + [f"{name}: command: {command}"]))
    print(f"written {write_results('umls_scale_sweep', tables, notes=notes, figures=figs)}")


def from_log(log: Path, name: str, notes: List[str]) -> None:
    """Table ``name`` from the log of a run stopped by a time limit (``timeout``) before it wrote its
    results: the ``prepared``/``built`` lines and the points each sweep step printed as it measured them.
    The note says so; a build whose sweep was cut keeps the points it measured, and no ``serve`` figures."""
    import ast

    rows: List[List[Any]] = []
    figures: Dict[str, Any] = {}
    info: Dict[str, Any] = {}
    build_line, points, command = None, [], None

    def flush() -> None:
        if build_line is not None:
            kind, conn, dims, b = build_line
            _add_build(rows, figures, kind, conn, dims, b, points, None)

    for line in log.read_text(encoding="utf8").splitlines():
        if line.startswith("prepared "):
            info = ast.literal_eval(line.split(": ", 1)[1])
        elif line.startswith("built "):
            flush()
            head, record = line[len("built "):].split(": ", 1)
            kind, conn, dims = head.split()
            build_line, points = (kind, int(conn[2:]), int(dims[5:]), ast.literal_eval(record)), []
        elif line.startswith('{"index"'):
            points.append(json.loads(line))
        elif line.startswith("command: "):
            command = line[len("command: "):]
    flush()
    if not rows:
        raise SystemExit(f"{log}: no measured points (lines 'built ...' and '{{\"index\": ...}}')")
    cut = f"imported from the log {log.name} of a run stopped by its time limit ({len(rows)} points measured)"
    _write(name, rows, dict(figures, prepared=info, geometry=info.get("geometry")), notes + [cut],
           command or "(the log does not say)")


def _run(fn: Any, *args: Any) -> Any:
    """One step in its own process (clean RSS and page-cache accounting)."""
    import subprocess

    cmd = [sys.executable, __file__, "--step", fn.__name__, json.dumps(list(args))]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    result = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"step {fn.__name__} {args} failed (exit {result.returncode})")
    return json.loads([ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])


if __name__ == "__main__":
    main()
