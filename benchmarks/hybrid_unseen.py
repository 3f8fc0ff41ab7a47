"""Hybrid (dense + sparse) scoring on mentions nobody annotated: NCBI-disease test and BC5CDR-disease dev.

MEDIC 2012 as the dictionary, the base all-MiniLM-L6-v2 (mean pooling) as the name encoder.

Rows: name-only (dense, w = 0), sparse only (the char n-gram tf-idf of the MEDIC names), hybrid
((dense + w * sparse) / (1 + w), the linker's ``sparse_weight``). Columns: strict acc@1 overall, per
class of :func:`~spacy_sapbert.mentions.metrics.mention_classes` (a dictionary name / a train mention /
neither = the refined subset), on the mentions unseen in train, and candidate recall@1/5/16/64 (a gold
concept among the top k). Mentions as written, normalised as the linker does (``normalize_name``; no
abbreviation expansion), composite mentions kept (right if any part is predicted at rank 1).

The n-gram range is picked on NCBI train (weight tuned per range); ``w`` is tuned on each corpus's train
set only (NCBI train, BC5CDR train), never on the evaluated set. Candidates: dense top 64 concepts united
with sparse top 64 (the linker's ``k = 64, sparse_k = 64``). CPU only; encodings cached in --cache-dir.

    python benchmarks/hybrid_unseen.py [--cache-dir /work/cache/hybrid]
    python benchmarks/hybrid_unseen.py --part ncbi:2,3   # one part in its own process (then the plain run reuses it)
    python benchmarks/hybrid_unseen.py --scale 1000000    # the sparse part's size and load time at 1M names

``--scale N`` builds the sparse index of N synthetic names (MEDIC names recombined and misspelt), saves
it, and measures file sizes, load time and the resident memory after loading and after 1,000 searches
(benchmarks/results/hybrid_sparse_scale.json); it times no throughput.
"""
from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple


from common import MEDIC, OUTPUT, UNSEEN_SETS, memory_mb, minilm_path
from results_io import table, write_results  # noqa: E402

NGRAM_GRID = ((2, 3), (3, 3))
KS = (1, 5, 16, 64)
K = 64


def mentions(path: Path, types) -> List[Any]:
    from spacy_sapbert.mentions.datasets import iter_mentions, read_dataset

    return [m for m in iter_mentions(read_dataset(path, types=types)) if m.ids]


def queries_golds(kb, found: Sequence[Any]) -> Tuple[List[str], List[Any]]:
    from spacy_sapbert.mentions.metrics import resolve_gold
    from spacy_sapbert.kb.concept import normalize_name

    pairs = [(normalize_name(m.text), resolve_gold(kb, m.ids)) for m in found]
    pairs = [(q, g) for q, g in pairs if q and g.in_kb]
    return [q for q, _ in pairs], [g for _, g in pairs]


def scores(golds, rankings, classes, unseen) -> List[Any]:
    from spacy_sapbert.mentions.metrics import class_split, first_hit_strict

    first = [first_hit_strict(g, r) for g, r in zip(golds, rankings)]
    top1 = [f == 1 for f in first]
    split = class_split(top1, classes)
    unseen_hits = [h for h, u in zip(top1, unseen) if u]
    row = [round(100 * split[c]["acc"], 1) if split[c]["acc"] is not None else None
           for c in ("overall", "dictionary", "train", "neither")]
    row.append(round(100 * sum(unseen_hits) / max(1, len(unseen_hits)), 1))
    row += [round(100 * sum(f is not None and f <= k for f in first) / len(first), 1) for k in KS]
    return row


CORPORA = UNSEEN_SETS  # name, train file, test file, entity types kept


def run_part(args, corpus: str, ngrams: Tuple[int, int]) -> Dict[str, Any]:
    """One corpus with one n-gram range: the weight tuned on its train set, the rows on its test set."""
    import torch

    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.hybrid import HybridSetup, tune_weight
    from spacy_sapbert.mentions.metrics import mention_classes
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.concept import normalize_name
    from spacy_sapbert.kb.readers.medic import read_medic

    torch.set_num_threads(args.threads)
    concepts = list(read_medic(MEDIC))
    kb = KnowledgeBase.from_concepts(concepts[:args.max_concepts] if args.max_concepts else concepts, source="medic")
    enc = Encoder.load(minilm_path(), pooling="mean", max_length=25, device="cpu")
    name, train, test, types = CORPORA[corpus]
    train_q, train_g = queries_golds(kb, mentions(train, types))
    test_q, test_g = queries_golds(kb, mentions(test, types))
    train_texts = [normalize_name(m.text) for m in mentions(train, types)]
    setup = HybridSetup(enc, kb, cache_dir=args.cache_dir, ngram_range=ngrams)
    weight, grid = tune_weight(setup, setup.gather(train_q, k=K, sparse_k=K), train_g)
    found = setup.gather(test_q, k=K, sparse_k=K)
    classes = mention_classes(test_q, list(kb.names), train_texts)
    train_set = set(train_texts)
    unseen = [q not in train_set for q in test_q]
    rows = [["name-only (dense, w = 0)"] + scores(test_g, setup.rank(found, 0.0, K), classes, unseen),
            [f"sparse only (char_wb {ngrams[0]}-{ngrams[1]})"] + scores(test_g, setup.sparse_only(test_q, K),
                                                                       classes, unseen),
            [f"hybrid (w = {weight}, tuned on train)"] + scores(test_g, setup.rank(found, weight, K), classes, unseen)]
    return {"corpus": name, "ngram_range": list(ngrams), "weight": weight, "train_acc@1": max(r["acc@1"] for r in grid),
            "train_grid": grid, "rows": rows, "mentions": len(test_q), "train_mentions": len(train_q),
            "classes": {c: classes.count(c) for c in ("dictionary", "train", "neither")},
            "unseen_in_train": sum(unseen), "n_features": setup.sparse.n_features}


def accuracy(args) -> None:
    """Every (corpus, n-gram range) part (run as separate processes with --part, or here), then the tables."""
    import json

    parts_dir = args.parts_dir
    parts_dir.mkdir(parents=True, exist_ok=True)
    if args.part:
        corpus, lo_hi = args.part.split(":")
        ngrams = tuple(int(x) for x in lo_hi.split(","))
        found = run_part(args, corpus, ngrams)
        (parts_dir / f"{corpus}_{ngrams[0]}_{ngrams[1]}.json").write_text(json.dumps(found, indent=1))
        print(found["rows"], flush=True)
        return
    grid = [tuple(int(x) for x in g.split(",")) for g in args.grid] if args.grid else list(NGRAM_GRID)
    parts = {}
    for corpus in CORPORA:
        for ngrams in grid:
            path = parts_dir / f"{corpus}_{ngrams[0]}_{ngrams[1]}.json"
            parts[corpus, ngrams] = json.loads(path.read_text()) if path.exists() else run_part(args, corpus, ngrams)
    chosen = max(grid, key=lambda n: (parts["ncbi", n]["train_acc@1"], -grid.index(n)))
    tables: Dict[str, Any] = {"n-gram range picked on NCBI-disease train (strict acc@1 at the weight tuned there)": table(
        ["char_wb n-grams", "tuned w", "NCBI train strict acc@1", "n-grams"],
        [[f"{n[0]}-{n[1]}", parts["ncbi", n]["weight"], round(100 * parts["ncbi", n]["train_acc@1"], 1),
          parts["ncbi", n]["n_features"]] for n in grid])}
    figures: Dict[str, Any] = {"ngram_range": list(chosen), "k": K, "sparse_k": K}
    columns = ["system", "strict acc@1", "dictionary name", "train mention", "neither (refined)", "unseen in train"] \
        + [f"recall@{k}" for k in KS]
    for corpus in CORPORA:
        part = parts[corpus, chosen]
        tables[f"{part['corpus']} (MEDIC, base MiniLM, strict, %)"] = table(columns, part["rows"])
        figures[part["corpus"]] = {key: part[key] for key in ("mentions", "classes", "unseen_in_train", "weight",
                                                            "train_mentions", "train_grid")}
    if args.no_write:
        print(tables, flush=True)
        return
    write_results("hybrid_unseen", tables, figures=figures, command=args.command, notes=[
        "Mentions as written (normalize_name, no abbreviation expansion); composite mentions kept; strict acc@1.",
        "Classes: 'dictionary name' = the mention is a MEDIC name, 'train mention' = a train mention and not a "
        "name, 'neither' = the refined subset; 'unseen in train' = not a train mention (may be a name).",
        "Weight tuned on each corpus's train set only (NCBI train; BC5CDR train); n-gram range on NCBI train.",
        "Candidates: dense top 64 concepts + sparse top 64 (linker: k = 64, sparse_k = 64).",
        "Shared CPU machine; no timings are reported."])


def synthetic_names(n: int, seed: int = 0) -> List[str]:
    """``n`` distinct names made of MEDIC name words: random recombinations, some letters changed."""
    import random

    from spacy_sapbert.kb.concept import normalize_name
    from spacy_sapbert.kb.readers.medic import read_medic

    rng = random.Random(seed)
    words = sorted({w for c in read_medic(MEDIC)
                    for name in c.names() for w in normalize_name(name).split()})
    letters = "abcdefghijklmnopqrstuvwxyz"
    out, seen = [], set()
    while len(out) < n:
        parts = [rng.choice(words) for _ in range(rng.choice((1, 2, 2, 3, 3, 4, 5)))]
        if rng.random() < 0.3:
            i = rng.randrange(len(parts))
            w = parts[i]
            j = rng.randrange(len(w))
            parts[i] = w[:j] + rng.choice(letters) + w[j + 1:]
        name = " ".join(parts)
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


def scale(args) -> None:
    import tempfile

    from spacy_sapbert.index.sparse import SparseIndex
    from spacy_sapbert.kb import Concept, KnowledgeBase

    n = args.scale
    names = synthetic_names(n)
    kb = KnowledgeBase.from_concepts(Concept(f"S{i:08d}", name) for i, name in enumerate(names))
    queries = synthetic_names(1000, seed=1)
    del names
    gc.collect()
    rss0 = memory_mb()["rss"]
    t = time.time()
    sparse = SparseIndex.from_kb(kb, ngram_range=tuple(args.ngrams))
    build_s = time.time() - t
    rss_build = memory_mb()["rss"]
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        sparse.to_disk(tmp)
        sizes = {p.name: p.stat().st_size for p in Path(tmp).iterdir()}
        meta = dict(sparse.meta)
        del sparse
        gc.collect()
        rss_before = memory_mb()["rss"]
        t = time.time()
        loaded = SparseIndex.from_disk(tmp, kb=kb)
        load_s = time.time() - t
        rss_loaded = memory_mb()["rss"]
        loaded.search(queries, 64)
        rss_searched = memory_mb()["rss"]
        postings = loaded.postings(queries)
    total = sum(sizes.values())
    per_name = total / n
    mean_postings = float(postings.mean())
    rows = [[f"{n:,} (measured)", meta["nnz"], round(total / 2 ** 20, 1), round(per_name, 1), round(load_s, 2),
             round(rss_loaded - rss_before, 1), round(rss_searched - rss_before, 1), round(mean_postings),
             round(mean_postings * 12 / 2 ** 20, 1), round(build_s, 1), round(rss_build - rss0, 1)],
            [f"{10 * n:,} (estimated: x10)", meta["nnz"] * 10, round(10 * total / 2 ** 20, 1), round(per_name, 1),
             None, None, None, round(10 * mean_postings), round(10 * mean_postings * 12 / 2 ** 20, 1), None, None]]
    write_results("hybrid_sparse_scale", {
        "sparse part (char n-gram tf-idf) of the index at scale": table(
            ["names", "nonzeros", "files MiB", "bytes per name", "load s", "RSS after load MB",
             "RSS after 1,000 searches MB", "postings read per query", "MiB read per query",
             "build s", "build RSS growth MB"], rows)},
        figures={"names": n, "ngram_range": list(args.ngrams), "n_features": meta["n_features"], "files": sizes},
        notes=["Synthetic names: MEDIC name words recombined (1-5 words), 30% with one letter changed.",
               "RSS figures are the growth of this process's resident memory over the state before the step; the "
               "matrix is memory-mapped, so the pages read by searches stay in the page cache and count as RSS "
               "only while mapped.",
               "Postings read per query: the summed posting-list lengths of a query's n-grams (a count, not a "
               "timing); each posting is 12 bytes read (int32 row + float32 weight + the score accumulator).",
               "The x10 row is arithmetic (files grow with the nonzeros, linear in the names), not a measurement.",
               "Shared CPU machine: times indicative only."])
    print(rows, flush=True)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=OUTPUT / "cache" / "hybrid")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--scale", type=int, default=0, help="> 0: the sparse part's size and load time at N names")
    parser.add_argument("--ngrams", type=int, nargs=2, default=(2, 3))
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--max-concepts", type=int, default=0, help="> 0: a quick probe on the first N MEDIC concepts")
    parser.add_argument("--no-write", action="store_true", help="do not write benchmarks/results (probes)")
    parser.add_argument("--parts-dir", type=Path, default=OUTPUT / "hybrid_unseen")
    parser.add_argument("--grid", nargs="*", default=None, help="n-gram ranges LO,HI to choose from (default 2,3 3,3)")
    parser.add_argument("--part", default="", help="CORPUS:LO,HI (ncbi:2,3): one part, saved for the final run")
    parser.add_argument("--command", default=None, help="the command recorded in the results (default: this one)")
    args = parser.parse_args(argv)
    if args.scale:
        scale(args)
    else:
        accuracy(args)


if __name__ == "__main__":
    main()
