"""The search depth of an index that ``umls_scale.py`` built, served with the page cache warm.

For each ``--ef`` (the index's ``ef_search``: the cells an ivf index scans, the beam of a graph) it sets the
depth, runs the recall queries once to bring the rows they re-score into the page cache, then times them
again at batch 256 and measures concept recall@1 / @5 against exact search (``umls_scale.py``'s truth). The
build's own depth is in the table too, as ``default``. Nothing else is rebuilt: run ``umls_scale.py`` with
the size, dimension, geometry and kind first.

    python benchmarks/studies/umls_scale_depth.py --names 1000000 3000000 10000000 --dim 768 --kind ivf \
        --ef 1024 1536 2048 3072 4096

Results: benchmarks/results/NAME.json (``--name``, default umls_scale_depth), one table per size.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io, umls_scale

import umls_scale  # noqa: E402
from common import timed_search  # noqa: E402
from scale_diagnose import recall  # noqa: E402


def sweep(work: Path, kind: str, efs: List[int], n_queries: int) -> List[Dict[str, Any]]:
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import KnowledgeBase

    folder = work / f"index_{kind}"
    if not (folder / "index_meta.json").exists():
        raise SystemExit(f"{folder} holds no index: run benchmarks/umls_scale.py for this size and kind first")
    index = ConceptIndex.from_disk(folder, KnowledgeBase.from_disk(work / "kb"))
    q = numpy.load(work / "queries.npy")[:n_queries]
    truth = json.loads((work / "ground_truth.json").read_text())["all"][:n_queries]
    default = index.ef_search
    out = []
    for ef in [default] + [e for e in efs if e != default]:
        index.set_ef(ef)
        found, seconds = timed_search(index, q, passes=2)  # the first pass reads the rows into the page cache
        row = {"ef_search": ef, "default": ef == default, "qps_b256": round(len(q) / seconds, 1)}
        row.update(recall(found, truth))
        print(row, flush=True)
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, nargs="+", required=True)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--geometry", default="spectrum", choices=["isotropic", "spectrum"])
    parser.add_argument("--kind", default="ivf", choices=["ivf", "compact"])
    parser.add_argument("--ef", type=int, nargs="+", required=True, help="Search depths to measure at every size.")
    parser.add_argument("--queries", type=int, default=2000, help="Recall queries (umls_scale.py's --recall-queries).")
    parser.add_argument("--note", action="append", default=[], help="What else ran on the machine, etc.")
    parser.add_argument("--name", default="umls_scale_depth", help="Results file name (benchmarks/results/NAME.json).")
    opts = parser.parse_args()
    from results_io import table, write_results

    columns = ["ef_search", "build default", "q/s batch 256 (cache warm)", "recall@1", "recall@5"]
    tables, figures = {}, {}
    for n in opts.names:
        rows = sweep(umls_scale._work(n, opts.dim, opts.geometry), opts.kind, opts.ef, opts.queries)
        name = f"{opts.kind}_n{n}_d{opts.dim}_{opts.geometry}"
        tables[name] = table(columns, [[r["ef_search"], r["default"], r["qps_b256"], r["recall1"], r["recall5"]]
                                       for r in rows])
        figures[name] = rows
    print(f"written {write_results(opts.name, tables, notes=opts.note, figures=figures)}")

if __name__ == "__main__":
    main()
