"""The linker's index at UMLS scale (millions of names, 768-d), on this machine.

Real UMLS and a 768-d SapBERT are not here, so the names are synthetic vectors with a dictionary's
structure (``scale_data.py``: heavy-tailed names per concept, anisotropic, near-duplicate concepts,
shared names, calibrated on MiniLM vectors of MEDIC names). For each size and index kind it measures,
each step in its own process:

- build: time (``--threads`` threads), peak RSS (and its anonymous part), files on disk;
- ``spacy.load`` of a pipeline holding the index (a BERT-base-sized random encoder for 768 dims, so the
  encoder's load is that of a real SapBERT): cold (the pipeline's and KB's pages dropped from the page
  cache with ``posix_fadvise``) and warm; RSS after load (anonymous and file-backed parts);
- queries/s of ``ConceptIndex.search(k=5)`` at batch 256 and batch 1, RSS after ``--queries`` queries; the
  batch-256 pass runs twice: first right after the load (the re-scored rows are read from disk), then the same
  queries again (those rows in the page cache: the steady state of a long-running process);
- concept recall@1 / @5 against exact search over the same vectors (``--recall-queries`` queries);
- the same with a semantic-type filter that keeps 10 % of the concepts (queries/s, recall@1/@5).

``--kinds`` picks the indexes (``ivf``, ``hnsw``, ``exact``; the compact index, removed on 2026-11-27, has rows in
the results files written before).
hnswlib float32 (today's index) is the baseline in the same run; its RSS is its file size (it reads
the whole file at load), so above ``--hnsw-max`` names it is not built and its figures are computed
from its file layout (marked "formula"). 10M names are extrapolated linearly from the two largest
measured sizes, for the ivf index (marked "extrapolated").

    python benchmarks/umls_scale.py                                  # 1M and 3M names, 768 dims
    python benchmarks/umls_scale.py --names 200000 --dims 384        # a quick run

Work files go to benchmarks/output/umls_scale/ (git-ignored; ~8 GB at 3M x 768); the figures to
benchmarks/results/umls_scale.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy

from common import OUTPUT, AnonPeak, dir_mb, drop_page_cache, memory_mb, minilm_path, timed_search
from scale_diagnose import concepts_of, diagnose, exact_rows, recall

OUT = OUTPUT / "umls_scale"
FILTER_TYPE = "T1"  # 10 % of the concepts
GT_ROWS = 200


# ---------------------------------------------------------------- helpers
def pin_cores(cores: int) -> None:
    """Run this process on its first ``cores`` cores (0: leave it), a bigger machine standing in for an
    ordinary one: torch's threads and the ivf index's search threads follow the CPU set."""
    if not cores:
        return
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cores]))
    import torch

    torch.set_num_threads(cores)


def _work(n: int, dim: int, geometry: str = "isotropic") -> Path:
    return OUT / (f"n{n}_d{dim}" if geometry == "isotropic" else f"n{n}_d{dim}_{geometry}")


# ---------------------------------------------------------------- steps (each in its own process)
def step_prepare(n: int, dim: int, n_recall: int, n_queries: int, pipeline: bool = True,
                 geometry: str = "isotropic") -> Dict[str, Any]:
    """Vectors (``scale_data`` geometry ``geometry``), KB (jsonl → build_kb), encoder, queries and exact
    ground truth; reused when present."""
    import scale_data as sd

    work = _work(n, dim, geometry)
    done = work / "prepared.json"
    if done.exists():
        return json.loads(done.read_text())
    t0 = time.perf_counter()
    kb_syn = sd.generate(work, n, dim, seed=0, geometry=geometry)
    # KB: names "n000000123" sort like their rows, so kb.names[i] is row i of the vectors
    concept_rows: List[List[int]] = [[] for _ in range(kb_syn.n_concepts)]
    ptr, idx = kb_syn.row_ptr, kb_syn.row_idx
    for r in range(n):
        for c in idx[ptr[r]:ptr[r + 1]]:
            concept_rows[int(c)].append(r)
    jsonl = work / "kb.jsonl"
    with open(jsonl, "w", encoding="utf8") as fh:
        for c, rows in enumerate(concept_rows):
            names = [f"n{r:010d}" for r in rows]
            fh.write(json.dumps({"concept_id": f"C{c:08d}", "canonical_name": names[0], "aliases": names[1:],
                                 "types": [FILTER_TYPE if c % 10 == 0 else "T2"], "definition": None}) + "\n")
    del concept_rows
    from spacy_sapbert.kb.build import build_kb

    kb = build_kb([(jsonl, "jsonl")], work / "kb", overwrite=True)
    assert len(kb.names) == n and kb.names[n - 1] == f"n{n - 1:010d}", "KB rows do not follow the vectors"
    jsonl.unlink()
    if pipeline:
        _make_encoder(work / "encoder", dim)
    q, qc = sd.queries(kb_syn, n_queries, seed=7)
    numpy.save(work / "queries.npy", q)
    # exact ground truth for the first n_recall queries: top rows, unfiltered and among FILTER_TYPE rows
    cmask = kb.concept_type_mask([FILTER_TYPE])
    row_mask = kb.rows_of_concept_mask(cmask)
    X = kb_syn.vectors()
    Q = q[:n_recall]
    best = [numpy.zeros((len(Q), 0), numpy.int64), numpy.zeros((len(Q), 0), numpy.int64)]
    best_s = [numpy.zeros((len(Q), 0), numpy.float32), numpy.zeros((len(Q), 0), numpy.float32)]
    for start, chunk in sd.iter_chunks(X, 200_000):
        S = Q @ chunk.T
        for j, mask in enumerate((None, row_mask[start:start + len(chunk)])):
            Sj = S if mask is None else numpy.where(mask[None, :], S, -numpy.inf)
            top = numpy.argpartition(-Sj, GT_ROWS, axis=1)[:, :GT_ROWS]
            cat_r = numpy.concatenate([best[j], top + start], axis=1)
            cat_s = numpy.concatenate([best_s[j], numpy.take_along_axis(Sj, top, 1)], axis=1)
            order = numpy.argsort(-cat_s, axis=1, kind="stable")[:, :GT_ROWS]
            best[j], best_s[j] = numpy.take_along_axis(cat_r, order, 1), numpy.take_along_axis(cat_s, order, 1)
    gt = {}
    allowed = {kb.concept_ids[int(c)] for c in numpy.flatnonzero(cmask)}
    for j, name in enumerate(("all", "filtered")):
        keep = None if j == 0 else allowed  # a shared name row also names a concept the filter drops
        gt[name] = [concepts_of(kb, best[j][i], best_s[j][i], 5, keep) for i in range(len(Q))]
    (work / "ground_truth.json").write_text(json.dumps(gt))
    info = {"n_names": n, "dim": dim, "n_concepts": len(kb), "filter_concepts": int(cmask.sum()),
            "filter_rows": int(row_mask.sum()), "prepare_s": round(time.perf_counter() - t0, 1),
            "vectors_mb": round((work / kb_syn.vectors_path.name).stat().st_size / 1e6, 1),
            "vectors_file": kb_syn.vectors_path.name, "geometry": geometry}
    done.write_text(json.dumps(info))
    return info


def _make_encoder(path: Path, dim: int) -> None:
    """A random BERT of SapBERT's size (768: 12 layers, BERT-base) or MiniLM's (384: the real MiniLM),
    saved as the linker's encoder folder."""
    if path.exists():
        return
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from spacy_sapbert.encoding.torch_encoder import Encoder

    base = minilm_path()
    if dim == 384:
        enc = Encoder.load(base, pooling="mean", device="cpu")
    else:
        torch.manual_seed(0)
        tmp = path.with_name("hf_random")
        BertModel(BertConfig(hidden_size=dim, num_attention_heads=max(1, dim // 64))).save_pretrained(tmp)
        AutoTokenizer.from_pretrained(base).save_pretrained(tmp)
        enc = Encoder.load(str(tmp), pooling="cls", device="cpu")
    enc.to_disk(path)


class _Fields:
    """The encoder fields an index records, for runs without a pipeline (no encoder needed)."""

    def __init__(self, dim: int) -> None:
        self.fingerprint, self.dim, self.pooling, self.max_length, self.name = "synthetic", dim, "cls", 25, "synthetic"


def step_build(n: int, dim: int, kind: str, threads: int, pipeline: bool = True,
               geometry: str = "isotropic", reuse: bool = False) -> Dict[str, Any]:
    """Build the index of ``kind`` (and a pipeline holding it); with ``reuse`` an index folder already
    there with its build record (``build_KIND.json``) is kept and its record returned."""
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import KnowledgeBase

    work = _work(n, dim, geometry)
    record = work / f"build_{kind}.json"
    if reuse and record.exists() and (work / f"index_{kind}").exists() and (not pipeline or (work / f"pipeline_{kind}").exists()):
        return json.loads(record.read_text())
    info = json.loads((work / "prepared.json").read_text())
    kb = KnowledgeBase.from_disk(work / "kb")
    if pipeline:
        from spacy_sapbert.encoding.torch_encoder import Encoder

        enc: Any = Encoder.from_disk(work / "encoder", device="cpu", precision="fp32")
    else:
        enc = _Fields(dim)
    vectors = numpy.load(work / info["vectors_file"], mmap_mode="r")
    t0 = time.perf_counter()
    with AnonPeak() as anon:
        index = ConceptIndex.from_vectors(kb, vectors, enc, kind=kind, num_threads=threads, show_progress=False,
                                          hnsw_vectors="float32")  # its rows are labelled hnswlib float32
        index_dir = work / f"index_{kind}"
        index.to_disk(index_dir)
    build_s = time.perf_counter() - t0
    peak = memory_mb()["peak"]
    out = {"build_s": round(build_s, 1), "build_peak_mb": round(peak, 0), "build_peak_anon_mb": round(anon.mb, 0),
           "index_mb": round(dir_mb(index_dir), 1)}
    record.write_text(json.dumps(out))
    if not pipeline:
        return out
    import spacy

    # a pipeline holding encoder, KB and index (the index files are hard links: no extra disk)
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(work / "encoder"), "device": "cpu",
                                                    "runtime": "torch", "pooling": enc.pooling})
    del index
    linker.set_resources(enc, ConceptIndex.from_disk(index_dir, kb), path=index_dir)
    nlp.to_disk(work / f"pipeline_{kind}")
    return dict(out, pipeline_mb=round(dir_mb(work / f"pipeline_{kind}"), 1))


def step_serve(n: int, dim: int, kind: str, n_recall: int, cold: bool, pipeline: bool = True,
               cores: int = 0, geometry: str = "isotropic", diagnose_misses: bool = False) -> Dict[str, Any]:
    """Load (cold or warm), then queries."""
    pin_cores(cores)
    work = _work(n, dim, geometry)
    folder = work / (f"pipeline_{kind}" if pipeline else f"index_{kind}")
    if cold:
        drop_page_cache(folder)
        drop_page_cache(work / "kb")
    if pipeline:
        import spacy
    else:
        from spacy_sapbert.index import ConceptIndex
        from spacy_sapbert.kb import KnowledgeBase
    base = memory_mb()
    t0 = time.perf_counter()
    if pipeline:
        index = spacy.load(folder).get_pipe("sapbert_linker").index
    else:
        index = ConceptIndex.from_disk(folder, KnowledgeBase.from_disk(work / "kb"))
    load_s = time.perf_counter() - t0
    after_load = memory_mb()
    q = numpy.load(work / "queries.npy")
    gt = json.loads((work / "ground_truth.json").read_text())
    out: Dict[str, Any] = {"ef_search": getattr(index, "ef_search", None), "load_s": round(load_s, 2),
                           "rss_load_mb": round(after_load["rss"], 0), "anon_load_mb": round(after_load["anon"], 0),
                           "file_load_mb": round(after_load["file"], 0), "rss_python_mb": round(base["rss"], 0)}
    if cold:
        return out
    results, seconds = timed_search(index, q)
    out["qps_b256"] = round(len(q) / seconds, 1)
    _, seconds = timed_search(index, q)  # the same queries again: the rows they re-score are in the page cache now
    out["qps_b256_again"] = round(len(q) / seconds, 1)
    n1 = min(1000, len(q))
    out["qps_b1"] = round(n1 / timed_search(index, q[:n1], batch=1)[1], 1)
    after = memory_mb()
    out.update(rss_queries_mb=round(after["rss"], 0), anon_queries_mb=round(after["anon"], 0),
               file_queries_mb=round(after["file"], 0))
    out.update(recall(results[:n_recall], gt["all"]))
    if diagnose_misses:  # the decomposition needs exact rows and scores, not only concepts
        info = json.loads((work / "prepared.json").read_text())
        X = numpy.load(work / info["vectors_file"], mmap_mode="r")
        rows, scores = exact_rows(X, q[:n_recall], GT_ROWS)
        out.update(diagnose(index, index.kb, q[:n_recall], results[:n_recall], rows, scores, gt["all"], X))
    filtered, seconds = timed_search(index, q[:n_recall], semantic_types=[FILTER_TYPE])
    out["filter_qps_b256"] = round(n_recall / seconds, 1)
    out.update({f"filter_{k}": v for k, v in recall(filtered, gt["filtered"]).items()})
    return out


STEPS = {"prepare": step_prepare, "build": step_build, "serve": step_serve}


# ---------------------------------------------------------------- driver
def _run_step(name: str, *args: Any) -> Dict[str, Any]:
    cmd = [sys.executable, __file__, "--step", name, json.dumps(list(args))]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-3000:] + result.stderr[-3000:])
        raise SystemExit(f"step {name} {args} failed (exit {result.returncode})")
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def hnsw_file_mb(n: int, dim: int, M: int = 32) -> float:
    """hnswlib's file (= its RSS after load): level 0 (links, vector, label) + upper levels (~1/M of
    the elements, M links each), from its layout."""
    level0 = n * (4 * (2 * M + 1) + 4 * dim + 8)
    upper = n * 4 + n / (M - 1) * 4 * (M + 1) * 1.0
    return (96 + level0 + upper) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, nargs="+", default=[1_000_000, 3_000_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[768])
    parser.add_argument("--kinds", nargs="+", default=["ivf", "hnsw"], choices=["ivf", "hnsw", "exact"])
    parser.add_argument("--hnsw-max", type=int, default=1_000_000, help="Largest size hnswlib is built at.")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--recall-queries", type=int, default=2_000)
    parser.add_argument("--note", action="append", default=[], help="What else ran on the machine, etc.")
    parser.add_argument("--no-pipeline", action="store_true",
                        help="Time ConceptIndex.from_disk instead of spacy.load of a pipeline (no spaCy or encoder needed).")
    parser.add_argument("--serve-cores", type=int, default=0,
                        help="Pin the load/query steps to this many cores (0: all), e.g. 2 on a bigger machine.")
    parser.add_argument("--geometry", default="isotropic", choices=["isotropic", "spectrum"],
                        help="Synthetic vectors' geometry (scale_data.py): isotropic (the first) or spectrum (real MiniLM's).")
    parser.add_argument("--diagnose", action="store_true",
                        help="Add the top-1 miss decomposition (tie / graph / other, top row found; scale_diagnose.py).")
    parser.add_argument("--reuse-builds", action="store_true",
                        help="Keep an index (and pipeline) a previous run built for the same size, kind and geometry.")
    parser.add_argument("--name", default="umls_scale", help="Results file name (benchmarks/results/NAME.json).")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs="?", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.step:
        print("RESULT " + json.dumps(STEPS[opts.step](*json.loads(opts.args))), flush=True)
        return
    from results_io import table, write_results

    rows, raw = [], {}
    for dim in opts.dims:
        for n in opts.names:
            pipeline = not opts.no_pipeline
            info = _run_step("prepare", n, dim, opts.recall_queries, opts.queries, pipeline, opts.geometry)
            print(f"prepared {n:,} x {dim}: {info}", flush=True)
            for kind in opts.kinds:
                key = f"{kind}_n{n}_d{dim}"
                if kind == "hnsw" and n > opts.hnsw_max:
                    mb = hnsw_file_mb(n, dim)
                    raw[key] = {"formula": True, "index_mb": round(mb, 0), "rss_queries_mb": round(mb, 0)}
                    rows.append(["hnswlib f32 (formula)", n, dim, None, round(mb, 0), None, None, round(mb, 0),
                                 None, None, None, None, None, None, None, None] + [None] * (4 if opts.diagnose else 0))
                    continue
                fig = _run_step("build", n, dim, kind, opts.threads, pipeline, opts.geometry, opts.reuse_builds)
                serve = ("serve", n, dim, kind, opts.recall_queries)
                fig.update({f"cold_{k}": v for k, v in _run_step(*serve, True, pipeline, opts.serve_cores,
                                                                 opts.geometry, False).items()})
                fig.update(_run_step(*serve, False, pipeline, opts.serve_cores, opts.geometry, opts.diagnose))
                raw[key] = fig
                print(f"{key}: {fig}", flush=True)
                label = {"hnsw": "hnswlib f32 (today)",
                         "ivf": "ivf (faiss fast-scan codes in RAM + f16 re-score)", "exact": "exact (torch)"}[kind]
                rows.append([label, n, dim, fig["build_s"], fig["index_mb"], fig["cold_load_s"], fig["load_s"],
                             fig["rss_queries_mb"], fig["anon_queries_mb"], fig["qps_b256"], fig["qps_b1"],
                             fig["recall1"], fig["recall5"], fig["filter_qps_b256"], fig["filter_recall1"],
                             fig["qps_b256_again"]]
                            + ([fig["miss_tie"], fig["miss_graph"], fig["miss_other"], fig["top_row_found"]]
                               if opts.diagnose else []))
    extra = ["miss: tie", "miss: graph", "miss: other", "top row found"] if opts.diagnose else []
    rows += [r + [None] * len(extra) for r in _extrapolate(raw, opts.names, opts.dims)]
    columns = ["index", "names", "dim", "build s", "files MB", "load s cold", "load s warm",
               "RSS MB after queries", "of which anon MB", "q/s batch 256", "q/s batch 1", "recall@1", "recall@5",
               "10% type filter q/s", "filter recall@1", "q/s batch 256, same queries again"] + extra
    path = write_results(opts.name, {"index_at_scale": table(columns, rows)}, notes=opts.note, figures=raw)
    print(f"\nwritten {path}")
    for r in [columns] + rows:
        print(" | ".join("" if v is None else str(v) for v in r))


def _extrapolate(raw: Dict[str, Dict[str, Any]], names: List[int], dims: List[int],
                 targets: tuple = (3_000_000, 10_000_000)) -> List[List[Any]]:
    """3M and 10M names from the two largest measured sizes (linear in n for build time, files, load and
    RSS); sizes measured already are skipped."""
    out = []
    for dim in dims:
        for target in targets:
            if target in names:
                continue
            for kind in ("ivf",):
                pts = sorted((n, raw[f"{kind}_n{n}_d{dim}"]) for n in names if f"{kind}_n{n}_d{dim}" in raw)
                if len(pts) >= 2 and pts[-1][0] < target:
                    (n0, a), (n1, b) = pts[-2], pts[-1]

                    def lin(key: str) -> float:
                        return round(a[key] + (b[key] - a[key]) * (target - n0) / (n1 - n0), 1)

                    out.append([f"{kind} (extrapolated)", target, dim, lin("build_s"), lin("index_mb"), None,
                                lin("load_s"), lin("rss_queries_mb"), lin("anon_queries_mb"), None, None, None, None,
                                None, None, None])
            out.append(["hnswlib f32 (formula)", target, dim, None, round(hnsw_file_mb(target, dim), 0), None, None,
                        round(hnsw_file_mb(target, dim), 0), None, None, None, None, None, None, None, None])
    return out


if __name__ == "__main__":
    main()
