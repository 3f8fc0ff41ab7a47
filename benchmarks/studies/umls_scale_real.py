"""The ivf index and hnswlib on real name embeddings (issue 13's honest check on structure).

The UMLS-scale runs (``umls_scale.py``) index synthetic vectors. This one indexes all-MiniLM-L6-v2 vectors
(384 dims, mean pooling, max_length 25) of every public dictionary name here (MEDIC + HPO + DO + MeSH
descriptors, one KB, names normalised and deduplicated by ``build_kb``), and queries them with

- the mention texts of NCBI-disease (train/dev/test) and BC5CDR (train/dev, chemicals and diseases), and
- held-out perturbations of dictionary names (a word dropped, two words swapped, a letter changed),

then reports, against exact search over the same float16 vectors (the ivf index's own data):
concept recall@1 / @5 and q/s of the ivf index and hnswlib float32 (rows of the compact index, removed on
2026-11-27, stay in the results written before), with the miss decomposition of
``scale_diagnose.py`` (float16 rounding against float32, concept ties, graph misses).

It also measures what a generator of synthetic vectors should match (``--spectrum``): the PCA spectrum
of the name vectors, its participation ratio and the dimensions holding 90/95/99 % of the variance, the
local intrinsic dimension (Levina-Bickel MLE over the 20 nearest names), the cosine of a concept's names
to each other and the query top1-top2 score gap. The spectrum is saved in the results' figures, where
``scale_data.py --geometry real`` reads it.

    python benchmarks/studies/umls_scale_real.py --max-names 60000   # what ran here (the machine was shared)
    python benchmarks/studies/umls_scale_real.py --max-names 200000  # all 151,209 names: ~8 min of encoding on 2 free cores

Work files (KB, float32 vectors, cached by content) go to benchmarks/output/umls_scale_real/.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io, umls_scale
from common import DATA, OUTPUT, bc5cdr_file, medic_file, minilm_path, ncbi_file, timed_search  # noqa: E402

OUT = OUTPUT / "umls_scale_real"
CHUNK = 8192


def build_names(data: Path, max_names: int, seed: int = 0) -> Any:
    """One KB over the public dictionaries; above ``max_names`` names, the concepts of a random sample
    holding about ``max_names`` names (reused when present)."""
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.build import build_kb

    kb_dir = OUT / f"kb_{max_names}"
    if (kb_dir / "kb.json").exists():
        return KnowledgeBase.from_disk(kb_dir)
    sources = [(medic_file(data), "medic"), (data / "hpo" / "hp.obo", "obo"),
               (data / "doid" / "doid_2016-09-01.obo", "obo"), (data / "mesh" / "mesh_descriptors.tsv", "tsv")]
    kb = build_kb(sources)
    if len(kb.names) > max_names:
        ids = list(kb.concept_ids)
        random.Random(seed).shuffle(ids)
        keep, total = [], 0
        for cid in ids:
            if total >= max_names:
                break
            keep.append(kb.cui_to_entity[cid])
            total += len(kb.rows_of_concept(cid))
        kb = KnowledgeBase.from_concepts(keep, source="public")
    kb.to_disk(kb_dir)
    return kb


def encode_cached(enc: Any, texts: List[str], path: Path) -> numpy.ndarray:
    """float32 vectors of ``texts``, written chunk by chunk to ``path`` (resumes an interrupted run)."""
    from tqdm import tqdm

    done_file = path.with_suffix(".done.json")
    state = json.loads(done_file.read_text()) if done_file.exists() else {}
    if state.get("n") != len(texts):
        state = {"n": len(texts), "rows": 0}
        numpy.lib.format.open_memmap(path, mode="w+", dtype=numpy.float32, shape=(len(texts), enc.dim)).flush()
    out = numpy.load(path, mmap_mode="r+")
    with tqdm(total=len(texts), initial=state["rows"], desc=f"encode {path.name}", unit="name") as bar:
        for start in range(state["rows"], len(texts), CHUNK):
            stop = min(len(texts), start + CHUNK)
            out[start:stop] = enc.encode(texts[start:stop], batch_size=256, use_cache=False)
            out.flush()
            state["rows"] = stop
            done_file.write_text(json.dumps(state))
            bar.update(stop - start)
    return numpy.load(path, mmap_mode="r")


def perturb(name: str, rng: random.Random) -> str:
    words = name.split()
    kind = rng.randrange(3) if len(words) > 2 else 2
    if kind == 0:  # drop a word
        del words[rng.randrange(len(words))]
    elif kind == 1:  # swap two neighbouring words
        i = rng.randrange(len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    else:  # change a letter
        i = rng.randrange(len(words))
        w = words[i]
        if len(w) > 3:
            j = rng.randrange(1, len(w) - 1)
            words[i] = w[:j] + rng.choice("abcdefghijklmnopqrstuvwxyz") + w[j + 1:]
        else:
            words.append("disease")
    return " ".join(words)


def query_texts(data: Path, kb: Any, n_perturbed: int, seed: int) -> Tuple[List[str], List[str]]:
    """Mention texts (NCBI, BC5CDR) not in the dictionary, then perturbed dictionary names; with their source."""
    from spacy_sapbert.mentions.datasets import read_pubtator
    from spacy_sapbert.kb.concept import normalize_name

    known = set(kb.names)
    seen, texts, source = set(), [], []
    files = [ncbi_file(s, data) for s in ("train", "dev", "test")] + [bc5cdr_file(s, data) for s in ("train", "dev")]
    for path in files:
        for doc in read_pubtator(path):
            for m in doc.mentions:
                t = normalize_name(m.text)
                if t and t not in known and t not in seen:
                    seen.add(t)
                    texts.append(t)
                    source.append("mention")
    rng = random.Random(seed)
    rows = rng.sample(range(len(kb.names)), min(len(kb.names), 3 * n_perturbed))
    for r in rows:
        t = normalize_name(perturb(kb.names[r], rng))
        if t and t not in known and t not in seen:
            seen.add(t)
            texts.append(t)
            source.append("perturbed")
            if source.count("perturbed") >= n_perturbed:
                break
    return texts, source


def spectrum_figures(X: numpy.ndarray, kb: Any, gt_scores: numpy.ndarray, knn_d: numpy.ndarray) -> Dict[str, Any]:
    """What the vectors look like to an index: PCA spectrum, intrinsic dimension, synonym cosines."""
    mean = X.mean(0)
    cov = numpy.cov((X - mean).T)
    ev = numpy.sort(numpy.linalg.eigvalsh(cov))[::-1].clip(min=0)
    frac = numpy.cumsum(ev) / ev.sum()
    # Levina-Bickel MLE of the local intrinsic dimension over the k nearest names (distances of unit vectors)
    d = numpy.sqrt(numpy.maximum(knn_d, 1e-12))
    lid = (d.shape[1] - 1) / numpy.log(d[:, -1:] / d[:, :-1]).sum(1)
    syn = []
    rng = numpy.random.default_rng(0)
    for ci in rng.choice(len(kb), size=min(3000, len(kb)), replace=False):
        rows = kb.rows_of_concept(kb.concept_ids[int(ci)]) if hasattr(kb, "rows_of_concept") else []
        if len(rows) >= 2:
            a, b = rng.choice(rows, 2, replace=False)
            syn.append(float(X[a] @ X[b]))
    gap = gt_scores[:, 0] - gt_scores[:, 1]
    return {
        "mean_norm": round(float(numpy.linalg.norm(mean)), 3),
        "eigenvalues": [float(v) for v in ev],
        "participation_ratio": round(float(ev.sum() ** 2 / (ev ** 2).sum()), 1),
        "dims_90": int(numpy.searchsorted(frac, 0.90) + 1), "dims_95": int(numpy.searchsorted(frac, 0.95) + 1),
        "dims_99": int(numpy.searchsorted(frac, 0.99) + 1),
        "local_id_median": round(float(numpy.median(lid)), 1),
        "synonym_cos_median": round(float(numpy.median(syn)), 3) if syn else None,
        "synonym_cos_mean": round(float(numpy.mean(syn)), 3) if syn else None,
        "gap_top1_top2_median": round(float(numpy.median(gap)), 4),
        "top1_median": round(float(numpy.median(gt_scores[:, 0])), 3),
    }


def knn_sample(X: numpy.ndarray, n: int, k: int = 20) -> numpy.ndarray:
    """Squared distances of ``n`` sampled names to their ``k`` nearest other names (for the local ID)."""
    from scale_diagnose import exact_rows

    rows = numpy.random.default_rng(1).choice(len(X), size=min(n, len(X)), replace=False)
    _, s = exact_rows(X, numpy.asarray(X[rows], dtype=numpy.float32), k + 1)
    return numpy.maximum(2.0 - 2.0 * s[:, 1:], 0.0)


def time_search(index: Any, Q: numpy.ndarray) -> Tuple[List[List[Any]], float, float]:
    results, seconds = timed_search(index, Q)
    n1 = min(500, len(Q))
    return results, round(len(Q) / seconds, 1), round(n1 / timed_search(index, Q[:n1], batch=1)[1], 1)


class Fields:
    """The encoder fields an index records (the vectors are computed here, not by an encoder it holds)."""

    def __init__(self, enc: Any) -> None:
        self.fingerprint, self.dim, self.pooling = enc.fingerprint, enc.dim, enc.pooling
        self.max_length, self.name = enc.max_length, "all-MiniLM-L6-v2"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--max-names", type=int, default=60_000,
                        help="Encode the concepts of a random sample of about this many names (all: 151,209).")
    parser.add_argument("--perturbed", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kinds", nargs="+", default=["ivf", "hnsw"], choices=["hnsw", "ivf"])
    parser.add_argument("--ivf-probes", type=int, nargs="*", default=[],
                        help="ivf: also search with these numbers of cells scanned (its default is always measured).")
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--name", default="umls_scale_real",
                        help="Results file (benchmarks/results/NAME.json). Only umls_scale_real's spectrum is the one "
                             "scale_data.py's 'spectrum' geometry reads: name other runs otherwise.")
    opts = parser.parse_args()
    import torch

    from results_io import table, write_results
    from scale_diagnose import concepts_of, diagnose, exact_rows, f16_ceiling, recall

    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.index import ConceptIndex

    torch.set_num_threads(opts.threads)
    OUT.mkdir(parents=True, exist_ok=True)
    kb = build_names(opts.data, opts.max_names)
    enc = Encoder.load(minilm_path(), pooling="mean", max_length=25, device="cpu",
                       precision="fp32")
    X32 = encode_cached(enc, list(kb.names), OUT / f"names_{opts.max_names}_f32.npy")
    texts, source = query_texts(opts.data, kb, opts.perturbed, seed=3)
    (OUT / "queries.json").write_text(json.dumps({"texts": texts, "source": source}))
    Q = numpy.ascontiguousarray(encode_cached(enc, texts, OUT / f"queries_{opts.max_names}_f32.npy"))
    X16 = numpy.asarray(X32, dtype=numpy.float16)
    print(f"{len(kb.names):,} names of {len(kb):,} concepts; {len(Q):,} queries "
          f"({source.count('mention')} mentions, {source.count('perturbed')} perturbed names)", flush=True)
    depth = 200
    gt_rows, gt_scores = exact_rows(X16, Q, depth)
    gt = [concepts_of(kb, gt_rows[i], gt_scores[i], 5) for i in range(len(Q))]
    spec = spectrum_figures(numpy.asarray(X32), kb, gt_scores, knn_sample(X32, 2000))
    if opts.name == "umls_scale_real":  # scale_data.py's 'spectrum' geometry reads it (when no results hold it)
        (OUT / "spectrum.json").write_text(json.dumps(spec))
    ceiling = f16_ceiling(kb, numpy.asarray(X32), Q, depth)
    figures: Dict[str, Any] = {"n_names": len(kb.names), "n_concepts": len(kb), "n_queries": len(Q),
                               "spectrum": spec, **ceiling}
    print({k: v for k, v in spec.items() if k != "eigenvalues"}, ceiling, flush=True)
    rows = []
    labels = {"hnsw": "hnswlib f32",
              "ivf": "ivf (faiss fast-scan + f16 re-score)"}
    for kind in opts.kinds:
        t0 = time.perf_counter()
        index = ConceptIndex.from_vectors(kb, X16, Fields(enc), kind=kind, num_threads=opts.threads,
                                          hnsw_vectors="float32")  # labelled hnswlib f32
        build_s = round(time.perf_counter() - t0, 1)
        default = index.ef_search
        depths = [default] + sorted(set(opts.ivf_probes) - {default}) if kind == "ivf" else [default]
        for depth in depths:
            index.set_ef(depth)
            results, qps256, qps1 = time_search(index, Q)
            fig = dict(build_s=build_s, ef_search=depth, qps_b256=qps256, qps_b1=qps1, **recall(results, gt),
                       **diagnose(index, kb, Q, results, gt_rows, gt_scores, gt, X16))
            for src in ("mention", "perturbed"):
                sel = [i for i, s in enumerate(source) if s == src]
                fig[f"{src}_recall1"] = recall([results[i] for i in sel], [gt[i] for i in sel])["recall1"]
            label = labels[kind]
            if kind == "ivf":
                label += f", {depth} of {index.meta['lists']} cells" + (" (default)" if depth == default else "")
                figures[f"ivf_{depth}"] = fig
            else:
                figures[kind] = fig
            print(label, fig, flush=True)
            rows.append([label, len(kb.names), 384, fig["build_s"], fig["qps_b256"], fig["qps_b1"], fig["recall1"],
                         fig["recall5"], fig["mention_recall1"], fig["perturbed_recall1"], fig["miss_tie"],
                         fig["miss_graph"], fig["miss_other"], fig["top_row_found"]])
    columns = ["index", "names", "dim", "build s", "q/s batch 256", "q/s batch 1", "recall@1", "recall@5",
               "recall@1 mentions", "recall@1 perturbed", "miss: tie", "miss: graph", "miss: other",
               "top row found"]
    shape = [["names", len(kb.names)], ["concepts", len(kb)], ["queries", len(Q)],
             ["float16 ceiling recall@1 (exact f16 vs exact f32)", ceiling["f16_recall1"]],
             ["float16 ceiling recall@5", ceiling["f16_recall5"]],
             ["mean vector norm", spec["mean_norm"]], ["PCA participation ratio", spec["participation_ratio"]],
             ["PCA dims for 90 / 95 / 99 % variance", f"{spec['dims_90']} / {spec['dims_95']} / {spec['dims_99']}"],
             ["local intrinsic dimension (MLE, k=20, median)", spec["local_id_median"]],
             ["synonym cosine median", spec["synonym_cos_median"]],
             ["query top-1 score median", spec["top1_median"]],
             ["query top1-top2 gap median", spec["gap_top1_top2_median"]]]
    path = write_results(opts.name, {"real_recall": table(columns, rows),
                                             "real_shape": table(["figure", "value"], shape)},
                         notes=opts.note, figures=figures)
    print(f"written {path}")


if __name__ == "__main__":
    main()
