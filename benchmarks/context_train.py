"""Trained context encoders vs the untrained one; the re-ranking shortcut's accuracy cost and throughput.

    .venv/bin/python benchmarks/context_train.py [--minutes 6] [--prototypes-per-concept 1] [--bc5cdr-docs 30] [--variants ...]

Shares its set-up with ``benchmarks/context_ncbi.py`` (same KB, name encoder, candidates, subsets).

1. Train three context encoders from the base all-MiniLM-L6-v2 with ``spacy_sapbert.context.train``
   (the project's trainer; multi-similarity loss + miner; 64 word pieces; ``--minutes`` of training
   each, 1 epoch at most): *supervised* (NCBI-disease + BC5CDR-disease train mentions, names kept),
   *self-supervised* (unambiguous exact MEDIC names found in the same abstracts, annotations ignored,
   half of them masked), *both*. Cached in benchmarks/output/context_train/<variant>/ (a rerun
   reuses a finished model and resumes an unfinished run).
2. For the untrained encoder (= context_ncbi's context system) and each trained one: prototypes from
   the train split (at most ``--prototypes-per-concept`` per concept, the first ones, the same cap
   for every encoder), weights tuned on NCBI dev, strict acc@1 on NCBI test (as written, abbreviations
   resolved; full / ambiguous / seen / unseen) and BC5CDR-disease dev (the first ``--bc5cdr-docs``
   documents, BC5CDR train prototypes, NCBI-dev weights). Name-only in the same run.
3. The shortcut (``context_margin``): re-rank only mentions whose name top-1 is within the margin of
   another candidate that has prototypes; accuracy of each margin next to full re-ranking, and linker
   throughput (``nlp.pipe`` over the NCBI test docs, gold spans) name-only vs context with the margin.

The CPU is small and shared: the caps above keep a run near an hour. Results:
benchmarks/results/context_train.json, rendered into docs/context.md.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from common import BC5CDR, MEDIC, NCBI, minilm_path
from context_ncbi import (EXAMPLE_NAMES, K, OUT, evaluate_set, load_set, pivot_lines, splice_docs,
                          start, throughput, tune_on_dev)
from results_io import table, write_results

WORK = OUT / "context_train"
VARIANTS = {
    "supervised": {"source": "supervised", "mask_probability": 0.0},
    "self-supervised": {"source": "self", "mask_probability": 0.5},
    "both": {"source": "both", "mask_probability": 0.5},
    # KRISSBERT's mention-to-mention positives: other annotated mentions of the concept, in their contexts
    "contexts": {"source": "supervised", "mask_probability": 0.0, "contexts_per_mention": 2},
}
ONE_SENSE = "margin 0.0, one sense per document"


def train_docs() -> List[Any]:
    return load_set(NCBI["train"]) + load_set(BC5CDR["train"], types=["Disease"])


def train_variants(base_model: str, kb: Any, only: Sequence[str], overrides: Dict[str, Any], *,
                   work: Path = WORK, extra: Optional[Dict[str, Any]] = None) -> Dict[str, Dict[str, Any]]:
    """Train (or reuse) the variants ``only`` from ``base_model`` with the context config under
    ``overrides``, each in ``work/<variant>``; returns model paths and training figures (``extra``
    is recorded with them)."""
    from spacy_sapbert.context.train import context_config, train_context

    docs = train_docs()
    out: Dict[str, Dict[str, Any]] = {}
    for name, options in VARIANTS.items():
        if name not in only:
            continue
        folder = work / name
        model = folder / "run" / "model"
        summary = folder / "train_summary.json"
        if not summary.is_file():
            resume = (folder / "run" / "run.json").is_file()
            t = time.time()
            result = train_context(docs, kb, base_model, folder, config=context_config(overrides=overrides),
                                   resume=resume, **options)
            meta = json.loads((folder / "run" / "pairs" / "meta.json").read_text(encoding="utf8"))
            summary.write_text(json.dumps({
                "steps": result.steps, "pairs_seen": result.pairs_seen, "final_loss": result.final_loss,
                "train_minutes": round(result.train_seconds / 60, 1), "wall_minutes": round((time.time() - t) / 60, 1),
                "pairs": meta["n_pairs"], "mentions": meta["n_mentions"], "concepts": meta["n_concepts"],
                "masked": meta["masked"], **options, **(extra or {})}, indent=2), encoding="utf8")
        out[name] = {"model": str(model), **json.loads(summary.read_text(encoding="utf8"))}
        print(f"[train] {name}: {out[name]}", flush=True)
    return out


def cap_mentions(docs: List[Any], kb: Any, cap: int) -> List[Any]:
    """The documents with at most ``cap`` mentions per gold concept (the first ones, in reading order)."""
    from dataclasses import replace

    from spacy_sapbert.mentions.metrics import resolve_gold_id

    seen: Dict[Any, int] = {}
    out = []
    for d in docs:
        kept = []
        for m in d.mentions:
            key = resolve_gold_id(kb, m.ids[0]) if len(m.ids) == 1 else None
            seen[key] = seen.get(key, 0) + 1
            if key is not None and seen[key] <= cap:
                kept.append(m)
        out.append(replace(d, mentions=kept))
    return out


def score_encoder(label: str, ctx_enc: Any, sets: Dict[str, Any], kb: Any, dictionary: Any, dense: Any,
                  margins: List[float], *, query_cache: Optional[Dict[str, List[str]]] = None,
                  batch_size: int = 64, k: int = K, step: float = 0.1,
                  example_names: bool = False) -> Tuple[Dict[str, Any], Any]:
    """Prototypes of the train sets, NCBI-dev weights, NCBI test and BC5CDR dev rows of one context encoder
    (full re-ranking and each shortcut margin; ``k`` name candidates; with ``example_names``, the stores
    hold the example mentions' names and an "example names (no context)" system is scored too):
    ``(figures, the NCBI prototype store)``."""
    from dataclasses import replace

    from spacy_sapbert.context import ContextWeights, build_prototypes

    names = dense.encoder if example_names else None
    ncbi_store = build_prototypes(sets["ncbi_protos"], kb, ctx_enc, show_progress=False, name_encoder=names)
    tuned, tuning = tune_on_dev(sets["ncbi_dev"], kb, dense, ctx_enc, ncbi_store, batch_size=batch_size, k=k,
                                step=step)
    print(f"[{label}] tuned on NCBI dev: {tuning['best']} acc@1 {tuning['best_acc@1']:.4f}", flush=True)
    weights = {label: tuned, **{f"{label}, margin {m}": replace(tuned, margin=m) for m in margins}}
    if 0.0 in margins:  # the linker's defaults: ties re-ranked, one sense per document
        weights[f"{label}, {ONE_SENSE}"] = replace(tuned, margin=0.0, one_sense_per_document=True)
    if example_names:
        weights[EXAMPLE_NAMES] = ContextWeights(context=0.0, fallback=0.0, example_names=True)
    rows: List[List[Any]] = []
    own: Dict[str, Any] = {}
    evaluate_set("NCBI-disease test", sets["ncbi_test"], kb, dictionary, dense, ctx_enc, ncbi_store, weights,
                 rows, own, query_cache, batch_size, k=k)
    bc5_store = build_prototypes(sets["bc5_protos"], kb, ctx_enc, show_progress=False, name_encoder=names)
    evaluate_set("BC5CDR-disease dev", sets["bc5_dev"], kb, dictionary, dense, ctx_enc, bc5_store, weights, rows,
                 own, query_cache, batch_size, k=k)
    return {"rows": rows, "tuning": tuning, **own,
            "prototypes": {"ncbi": ncbi_store.meta["n_prototypes"], "bc5cdr": bc5_store.meta["n_prototypes"]}}, ncbi_store


def evaluate_encoder(label: str, ctx_enc: Any, sets: Dict[str, Any], kb: Any, dictionary: Any, dense: Any,
                     margins: List[float]) -> Dict[str, Any]:
    """:func:`score_encoder`, saved to WORK/eval_<label>.json (a rerun reuses it); the NCBI store is
    saved for the throughput run."""
    saved = WORK / f"eval_{label}.json"
    if saved.is_file():
        return json.loads(saved.read_text(encoding="utf8"))
    t = time.time()
    out, ncbi_store = score_encoder(label, ctx_enc, sets, kb, dictionary, dense, margins,
                                    example_names=True)  # the example names alone, beside context
    ncbi_store.to_disk(WORK / f"store_{label}", overwrite=True)
    out["seconds"] = round(time.time() - t, 1)
    saved.write_text(json.dumps(out, indent=1), encoding="utf8")
    return out


def kept_rows(results: Dict[str, Dict[str, Any]]) -> List[List[Any]]:
    """Every encoder's rows, the name-only rows once (they repeat for every encoder); a name-only row that
    differs from the first (an encoder evaluated in another session, e.g. with float16-rounded weights)
    is kept as "name-only (<encoder> run)"."""
    first: Dict[Any, List[Any]] = {}
    kept = []
    for label, v in results.items():
        for r in v["rows"]:
            if r[2] == "name-only":
                key = tuple(r[:4])
                if key not in first:
                    first[key] = r
                elif first[key][5:] == r[5:]:
                    continue
                else:
                    r = [*r[:2], f"name-only ({label} run)", *r[3:]]
            kept.append(r)
    return kept


def rerank_share(docs: List[Any], dense: Any, store: Any, margins: List[float], k: int = K,
                 example_names: bool = False) -> Dict[str, float]:
    """Share of NCBI test mentions (as written) whose context each margin encodes (after example names,
    with them); ``ONE_SENSE``: margin 0, the first of a document's mentions written alike only."""
    from spacy_sapbert.context.rerank import needs_context, with_example_names_many
    from spacy_sapbert.evaluation.context import mention_keys
    from spacy_sapbert.evaluation.preprocess import InputOptions, mention_queries

    queries = [q for q, _ in mention_queries(docs, InputOptions())]
    ranked = [list(r.concepts) for r in dense.rank(queries, k)]
    if example_names and store.has_names:
        ranked = with_example_names_many(ranked, dense.encoder.encode(queries, batch_size=256), store)
    n = max(1, len(ranked))
    share = {str(m): sum(needs_context(r, store, m) for r in ranked) / n for m in [None, *margins]}
    keys = mention_keys(docs, queries)
    share[ONE_SENSE] = len({keys[i] for i, r in enumerate(ranked) if needs_context(r, store, 0.0)}) / n
    return share


START, END = "<!-- context_train: rendered from benchmarks/results/context_train.json -->", "<!-- /context_train -->"


def render_docs(results: Path) -> None:
    """The figures of ``results`` into docs/context.md: accuracy per encoder (full re-ranking) and the
    shortcut's accuracy, share of mentions re-ranked and throughput per margin."""
    data = json.loads(results.read_text(encoding="utf8"))
    rows = data["tables"]["strict_acc"]["rows"]
    fig = data["figures"]
    picked = fig["picked_on_ncbi_dev"]
    lines = ["", f"Command: `{data['command']}` (commit {data['git_commit']}, {data['date']}).", "",
             *pivot_lines([r for r in rows if ", margin" not in r[2]]), "",
             "Dev strict acc@1 (NCBI dev, tuned weights): " + ", ".join(
                 f"{k} {100 * v['tuning']['best_acc@1']:.1f}" for k, v in fig["encoders"].items())
             + f"; picked: **{picked}**. Training: " + "; ".join(
                 f"{k} {v['steps']} steps, {v['pairs_seen']} pairs, {v['train_minutes']} min" for k, v in
                 fig["training"].items()) + ".", "",
             "The shortcut (`context_margin`) with the picked encoder, NCBI test as written:", "",
             "| margin | mentions re-ranked | strict acc@1 | ambiguous acc@1 | throughput vs name-only |",
             "|---|---|---|---|---|"]
    acc = {(r[2], r[3]): r[5] for r in rows if r[0] == "NCBI-disease test" and r[1] == "as written"}
    share, tp = fig["rerank_share"], fig["throughput_mentions_per_s"]
    for margin, system in [("None", f"context ({picked})"), *[(m, f"context ({picked}, margin {m})") for m in tp]]:
        ratio = f"{tp[margin]['ratio']:.2f}" if margin in tp else "–"
        lines.append(f"| {'none (every mention)' if margin == 'None' else margin} | {100 * share[margin]:.0f}% | "
                     f"{100 * acc[(system, 'full')]:.1f} | {100 * acc[(system, 'ambiguous')]:.1f} | {ratio} |")
    lines += ["", f"Name-only: {100 * acc[('name-only', 'full')]:.1f} / {100 * acc[('name-only', 'ambiguous')]:.1f}. "
              f"A margin of {share['margin bound']} or more never changes the first concept "
              f"({100 * share[str(share['margin bound'])]:.0f}% of mentions re-ranked).", ""]
    lines += [f"- {note}" for note in data["notes"]] + [""]
    splice_docs(lines, START, END)


def main() -> None:
    from dataclasses import replace

    from spacy_sapbert.context import ContextEncoder, ContextWeights, PrototypeStore
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.baselines import DenseEncoder, Dictionary
    from spacy_sapbert.kb.build import build_kb

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=minilm_path())
    parser.add_argument("--minutes", type=float, default=6.0, help="training minutes per variant")
    parser.add_argument("--prototypes-per-concept", type=int, default=1)
    parser.add_argument("--bc5cdr-docs", type=int, default=30)
    parser.add_argument("--margins", default="0.0,0.05", help="shortcut margins besides the lossless bound")
    parser.add_argument("--train-only", action="store_true")
    parser.add_argument("--render-only", action="store_true", help="only write the figures into docs/context.md")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="trained variants to train and report")
    parser.add_argument("--encoders", default="", help="evaluate only these (comma-separated), write nothing else")
    args = parser.parse_args()
    if not start(args.render_only, "context_train", render_docs):
        return
    kb = build_kb([(MEDIC, "medic")])
    wanted = ([e for e in args.encoders.split(",") if e and e != "untrained"] if args.encoders
              else [v for v in args.variants.split(",") if v])
    trained = train_variants(args.model, kb, wanted, {
        "training.max_minutes": args.minutes, "training.batch_size": 32, "training.sub_batch": 32,
        "training.lr": 3e-5, "training.device": "cpu", "training.checkpoint_every": 20})
    if args.train_only:
        return
    dictionary = Dictionary.from_kb(kb)
    name_enc = Encoder.load(args.model, pooling="mean", max_length=25, device="cpu")
    dense = DenseEncoder(name_enc, dictionary, name="base MiniLM mean", batch_size=256, cache_dir=OUT / "cache")
    cap = args.prototypes_per_concept
    sets = {"ncbi_protos": cap_mentions(load_set(NCBI["train"]), kb, cap),
            "ncbi_dev": load_set(NCBI["dev"]),
            "ncbi_test": load_set(NCBI["test"]),
            "bc5_protos": cap_mentions(load_set(BC5CDR["train"], types=["Disease"]), kb, cap),
            "bc5_dev": load_set(BC5CDR["dev"], types=["Disease"], limit=args.bc5cdr_docs)}
    margins = [float(m) for m in args.margins.split(",") if m.strip()]
    figures: Dict[str, Any] = {"training": {k: {kk: vv for kk, vv in v.items() if kk != "model"}
                                            for k, v in trained.items()}}
    paths = {"untrained": None, **{name: v["model"] for name, v in trained.items()}}
    results = {}
    for label in (args.encoders.split(",") if args.encoders else paths):
        enc = (ContextEncoder.load(args.model, pooling="mean", max_length=64, device="cpu") if paths[label] is None
               else ContextEncoder.from_disk(paths[label], device="cpu"))
        results[label] = evaluate_encoder(label, enc, sets, kb, dictionary, dense, margins)
    if args.encoders:
        return
    figures["encoders"] = {k: {kk: vv for kk, vv in v.items() if kk != "rows"} for k, v in results.items()}
    best = max(results, key=lambda k: (results[k]["tuning"]["best_acc@1"], k == "untrained"))
    w = ContextWeights(**{"context": results[best]["tuning"]["best"]["context_weight"],
                          "definition": results[best]["tuning"]["best"]["definition_weight"],
                          "fallback": results[best]["tuning"]["best"]["context_fallback"]})
    store = PrototypeStore.from_disk(WORK / f"store_{best}", kb=kb, device="cpu")
    bound = round(2 * (w.context + w.definition) / max(w.name, 1e-9), 4)
    figures["picked_on_ncbi_dev"] = best
    figures["rerank_share"] = {"margin bound": bound,
                               **rerank_share(sets["ncbi_test"], dense, store, [*margins, bound])}
    tp = {}
    for m in margins:
        tp[str(m)] = throughput(args.model, kb, OUT / "cache", store, sets["ncbi_test"], replace(w, margin=m))
        print(f"throughput margin {m}: {tp[str(m)]}", flush=True)
    figures["throughput_mentions_per_s"] = tp
    kept = kept_rows(results)
    path = write_results("context_train", {
        "strict_acc": table(["dataset", "setting", "system", "subset", "n", "strict acc@1", "strict acc@5"], kept),
        "shortcut": table(["margin", "share of NCBI test mentions re-ranked", "name-only mentions/s",
                           "context mentions/s", "ratio"],
                          [[m, figures["rerank_share"].get(m), tp[m]["name-only"], tp[m]["context"], tp[m]["ratio"]]
                           for m in tp])},
        notes=[f"context encoders trained {args.minutes:g} min each on 2 shared CPU cores (load 13-19): "
               + ", ".join(f"{k} {v['steps']} steps" for k, v in trained.items())
               + " of batch 32, far from converged; base all-MiniLM-L6-v2 name encoder, no fine-tuning",
               f"prototypes: at most {cap} train mentions per concept (the same cap for every encoder); "
               f"BC5CDR-disease dev: the first {args.bc5cdr_docs} documents",
               "weights tuned on NCBI dev per encoder; 'margin m' rows: the context_margin shortcut, 'margin "
               "bound' = 2 * (context + definition weight) / name weight never changes the first concept",
               "throughput: nlp.pipe over the NCBI test docs (gold spans); name-only and context passes run one "
               "after the other on a shared machine: ratios are indicative"],
        figures=figures)
    print("written", path, flush=True)
    render_docs(path)


if __name__ == "__main__":
    main()
