"""Mention-like training pairs, measured alone: self-alignment with and without them, acc@1 by mention class.

Self-alignment pretraining of the offline MiniLM on MEDIC's synonyms for a fixed number of steps with and
without ``[pairs.mention_like]``, then strict acc@1 on NCBI-disease test and BC5CDR-disease dev split by the
protocol's three mention classes.

    python benchmarks/mention_pairs.py [--steps 80] [--batch-size 32] [--threads 1] [--candidates shortlist|all] [--hybrid]
    # or the three parts side by side, the last one to finish writes the results:
    python benchmarks/mention_pairs.py --part base & python benchmarks/mention_pairs.py --part synonyms_only &
    python benchmarks/mention_pairs.py --part with_mention_like

- Dictionary and pretraining KB: MEDIC (06 Jul 2012). Base: all-MiniLM-L6-v2, mean pooling.
- Both runs: the same recipe and step budget (InfoNCE over in-batch negatives, temperature 0.05, lr 1e-4,
  no miner, ``--batch-size`` pairs a step, ``--steps`` steps, seed 42); the only difference is the
  pair set: MEDIC synonym pairs (20 per concept at most), or the same pairs followed by the
  mention-like pairs (every generator, 2 variants per name, typo rate 0.1, abbreviations mined from the
  NCBI-disease *train* and BC5CDR *train* abstracts only), shuffled together. A step budget (not minutes)
  keeps the comparison fair on a shared machine.
- ``--hybrid`` (needs ``--candidates all``): each encoder also as the linker's hybrid stage (measured with lever 1
  of the issue: dense + w * sparse over the char n-gram tf-idf of every MEDIC name, the linker's ``k``,
  ``sparse_k`` and ``candidates`` at their defaults), ``w`` tuned for that encoder on the set's *train* split
  (``spacy_sapbert.evaluation.hybrid.tune_weight``, the tuner behind ``tune-hybrid``), a row of its own.
- ``--part finetune``: the base model fine-tuned on the NCBI-disease *train* mentions (``configs/finetune.cfg``,
  lr ``--lr``, ``--finetune-steps`` steps of ``--batch-size`` pairs, ``--finetune-seed``, no dev evaluation) with and without
  ``[pairs.mention_like]`` (each distinct train mention's variants as extra training mentions, abbreviations mined
  from the NCBI-disease train abstracts), two rows more; their BC5CDR-disease dev columns measure transfer (that
  set's "train" class is BC5CDR train, which they never saw).
- Evaluation: mention only (the gold span's text, normalised), exact search over a fixed shortlist of
  MEDIC names chosen once for all systems (``--candidates shortlist``, the trainer's dev-evaluation
  shortlist: a seeded sample of names, up to 5 names of each gold concept, each mention's 10 nearest names by
  char-3gram tf-idf; optimistic against the full search, which ``--candidates all`` runs when the CPU allows),
  strict acc@1 (a prediction is one concept; composite gold: any part). Classes
  (``spacy_sapbert.mentions.metrics.mention_classes``): "dictionary" (a MEDIC name), "train" (a
  mention of the set's train split, not a name), "neither".

Models go to ``benchmarks/output/mention_pairs/`` (git-ignored); dictionary vectors to ``--cache``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import BC5CDR, DATA, NCBI, OUTPUT, ROOT, bc5cdr_file, medic_kb, minilm_path, ncbi_file
from results_io import table, write_results  # noqa: E402

SETS = ("NCBI-disease test", "BC5CDR-disease dev")
CLASSES = ("overall", "dictionary", "train", "neither")
TYPES = ["Disease", "SpecificDisease", "DiseaseClass", "Modifier", "CompositeMention"]


def eval_sets(data: Path) -> Dict[str, Tuple[List[Any], List[str]]]:
    """Set name → (mentions with gold ids, normalised train-split mention texts)."""
    from spacy_sapbert.mentions.datasets import iter_mentions, read_dataset
    from spacy_sapbert.kb import normalize_name

    def mentions(path: Path) -> List[Any]:
        return [m for m in iter_mentions(read_dataset(path, types=TYPES)) if m.ids]

    out = {}
    for name, test, train in ((SETS[0], ncbi_file("test", data), ncbi_file("train", data)),
                              (SETS[1], bc5cdr_file("dev", data), bc5cdr_file("train", data))):
        out[name] = (mentions(test), [normalize_name(m.text) for m in mentions(train)])
    return out


def candidates(medic: Any, sets: Dict[str, Tuple[List[Any], List[str]]], args: argparse.Namespace) -> Any:
    """The names searched: all MEDIC names (``--candidates all``), or a fixed shortlist chosen once for every
    system (the trainer's dev-evaluation shortlist: a seeded sample of ``--sample-names`` names, up to
    ``--gold-names`` names of each gold concept, each distinct mention's ``--shortlist-k`` nearest names by
    char-3gram tf-idf), as a ``Dictionary``."""
    import numpy as np

    from spacy_sapbert.evaluation.baselines import Dictionary
    from spacy_sapbert.training.dev_eval import DevEvaluator, DevSet

    if args.candidates == "all":
        return Dictionary.from_kb(medic)
    mentions = [(m.text, tuple(m.ids)) for ms, _train in sets.values() for m in ms]
    rows = DevEvaluator(DevSet(kb=medic, mentions=mentions), sample_names=args.sample_names,
                        shortlist_k=args.shortlist_k, gold_names=args.gold_names, seed=0).rows
    rows = np.asarray(rows, dtype=np.int64)
    return Dictionary([medic.names[int(r)] for r in rows], [medic.concepts_of_row(int(r)) for r in rows])


def split_scores(model: str, medic: Any, sets: Dict[str, Tuple[List[Any], List[str]]], dictionary: Any,
                 cache: Path) -> Dict[str, Any]:
    """Strict acc@1 per set and mention class of ``model`` (mean pooling) over the ``dictionary``'s names."""
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.baselines import DenseEncoder
    from spacy_sapbert.mentions.metrics import class_split, first_hit_strict, mention_classes, resolve_gold
    from spacy_sapbert.kb import normalize_name

    enc = Encoder.load(model, pooling="mean", max_length=25, device="cpu", cache_size=0)
    started = time.time()
    system = DenseEncoder(enc, dictionary, batch_size=256, show_progress=False, cache_dir=cache)
    out: Dict[str, Any] = {}
    for name, (mentions, train) in sets.items():
        queries = [normalize_name(m.text) for m in mentions]
        rankings = system.rank(queries, 1)
        hits = [first_hit_strict(resolve_gold(medic, m.ids), r) == 1 for m, r in zip(mentions, rankings)]
        out[name] = class_split(hits, mention_classes(queries, list(medic.names), train))
    out["eval_seconds"] = round(time.time() - started, 1)
    return out


FINETUNED = "fine-tuned on NCBI-disease train mentions"  # --part finetune's rows start so
HYBRID = " | hybrid"  # a system's hybrid row: its dense row's name + this + the weights


def train_golds(data: Path, medic: Any) -> Dict[str, Tuple[List[str], List[Any]]]:
    """Set name -> (normalised train-split mention texts, their golds): what the hybrid weight is tuned on."""
    from spacy_sapbert.kb import normalize_name
    from spacy_sapbert.mentions.datasets import iter_mentions, read_dataset
    from spacy_sapbert.mentions.metrics import resolve_gold

    out = {}
    for name, train in ((SETS[0], ncbi_file("train", data)), (SETS[1], bc5cdr_file("train", data))):
        found = [m for m in iter_mentions(read_dataset(train, types=TYPES)) if m.ids]
        out[name] = ([normalize_name(m.text) for m in found], [resolve_gold(medic, m.ids) for m in found])
    return out


def hybrid_scores(model: str, medic: Any, sets: Dict[str, Tuple[List[Any], List[str]]],
                  tuning: Dict[str, Tuple[List[str], List[Any]]], cache: Path) -> Dict[str, Any]:
    """Strict acc@1 per set and mention class of ``model``'s hybrid stage over every MEDIC name, its sparse weight
    tuned on each set's train split (the linker's ``k`` / ``sparse_k`` / ``candidates`` defaults)."""
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.hybrid import HybridSetup, tune_weight
    from spacy_sapbert.kb import normalize_name
    from spacy_sapbert.linker.settings import DEFAULT_CONFIG
    from spacy_sapbert.mentions.metrics import class_split, first_hit_strict, mention_classes, resolve_gold

    k, sparse_k, mode = DEFAULT_CONFIG["k"], DEFAULT_CONFIG["sparse_k"], DEFAULT_CONFIG["candidates"]
    enc = Encoder.load(model, pooling="mean", max_length=25, device="cpu", cache_size=0)
    started = time.time()
    setup = HybridSetup(enc, medic, cache_dir=cache, batch_size=256)
    out: Dict[str, Any] = {"weights": {}}
    for name, (mentions, train) in sets.items():
        train_queries, train_gold = tuning[name]
        weight, _grid = tune_weight(setup, setup.gather(train_queries, k=k, sparse_k=sparse_k), train_gold,
                                    candidates=mode, k=k)
        queries = [normalize_name(m.text) for m in mentions]
        rankings = setup.rank(setup.gather(queries, k=k, sparse_k=sparse_k), weight, k, mode=mode)
        hits = [first_hit_strict(resolve_gold(medic, m.ids), r) == 1 for m, r in zip(mentions, rankings)]
        out[name] = class_split(hits, mention_classes(queries, list(medic.names), train))
        out["weights"][name] = weight
    out["eval_seconds"] = round(time.time() - started, 1)
    return out


def hybrid_name(name: str, result: Dict[str, Any]) -> str:
    weights = ", ".join(f"{s.split()[0]} {w:g}" for s, w in result["weights"].items())
    return f"{name}{HYBRID} (w tuned on train: {weights})"


def pretrain_config(args: argparse.Namespace, mention_like: bool) -> Any:
    from spacy_sapbert.training.config import load_config

    raw = [str(NCBI["train"]), str(BC5CDR["train"])]
    return load_config(None, {
        "model.pooling": "mean", "pairs.max_pairs_per_concept": 20, "training.lr": args.lr,
        "training.batch_size": args.batch_size, "training.max_steps": args.steps, "training.epochs": 1,
        "training.checkpoint_every": 10_000, "training.log_every": 20, "training.device": "cpu",
        "training.amp": "none", "training.seed": 42, "loss.name": "infonce", "loss.temperature": 0.05,
        "miner.enabled": False, "pairs.mention_like.enabled": mention_like,
        "pairs.mention_like.max_per_name": args.max_per_name, "pairs.mention_like.typo_rate": args.typo_rate,
        "pairs.mention_like.raw_text": raw if mention_like else [],
        **({"pairs.mention_like.generators": args.generators.split(",")} if args.generators else {}),
    })


def finetune_config(args: argparse.Namespace, mention_like: bool) -> Any:
    from spacy_sapbert.training.config import load_config

    return load_config(ROOT / "configs" / "finetune.cfg", {
        "model.pooling": "mean", "training.lr": args.lr, "training.batch_size": args.batch_size,
        "training.max_steps": args.finetune_steps, "training.epochs": 1000, "training.eval_every": 0,
        "training.checkpoint_every": 10_000, "training.patience": 0, "training.device": "cpu",
        "training.seed": args.finetune_seed,
        "pairs.mention_like.enabled": mention_like, "pairs.mention_like.max_per_name": args.max_per_name,
        "pairs.mention_like.typo_rate": args.typo_rate,
        "pairs.mention_like.raw_text": [str(NCBI["train"])] if mention_like else []})


def run_figures(res: Any, run: Path, started: float) -> Dict[str, Any]:
    """What the results file records of one training run (its ``TrainResult``, its pair set's meta)."""
    meta = json.loads((run / "pairs" / "meta.json").read_text(encoding="utf8"))
    return {"steps": res.steps, "pairs_seen": res.pairs_seen, "n_pairs": meta["n_pairs"], "final_loss": res.final_loss,
            "train_minutes": round(res.train_seconds / 60, 1), "wall_minutes": round((time.time() - started) / 60, 1),
            "mention_like_counts": (meta.get("mention_like") or {}).get("counts")}


def rows_of(systems: Dict[str, Dict[str, Any]]) -> List[List[Any]]:
    """One row per system: strict acc@1 (%) overall and per class for each set, with the class sizes in the header."""
    rows = []
    for name, res in systems.items():
        row: List[Any] = [name]
        for s in SETS:
            row += [None if res[s][c]["acc"] is None else round(100 * res[s][c]["acc"], 1) for c in CLASSES]
        rows.append(row)
    return rows


def columns_of(systems: Dict[str, Dict[str, Any]]) -> List[str]:
    first = next(iter(systems.values()))
    return ["system"] + [f"{s} {c} (n={first[s][c]['n']})" for s in SETS for c in CLASSES]


def write(systems: Dict[str, Dict[str, Any]], figures: Dict[str, Any], command: str, extra_notes: Sequence[str] = ()) -> Path:
    search = (f"exact search over a fixed shortlist of {figures['candidate_names']} MEDIC names (the same for every "
              "system: a seeded sample of names, up to 5 names of each gold concept, each mention's 10 nearest names "
              "by char-3gram tf-idf; optimistic against a full-dictionary search)"
              if figures.get("candidates") == "shortlist" else "exact search over every MEDIC name")
    notes = [f"strict acc@1 in %, mention only, {search}; classes: dictionary = the "
             "normalised mention is a MEDIC name, train = a mention of the set's train split (not a name), neither = "
             "the rest. Both pretraining runs: the same recipe and number of steps; abbreviations mined from NCBI "
             "train + BC5CDR train abstracts only.",
             "2-core CPU: the minutes in the figures are indicative only.", *extra_notes]
    if any(HYBRID in k for k in systems):
        notes.insert(1, "'| hybrid' rows: the same encoder as the linker's hybrid stage over every MEDIC name "
                        "((dense + w * sparse) / (1 + w), char_wb 2-3-gram tf-idf; the linker's k, sparse_k and "
                        "candidates at their defaults), w tuned for that encoder on the set's train split "
                        "(NCBI-disease train, BC5CDR-disease train), never on the scored set.")
    if any(k.startswith(FINETUNED) for k in systems):
        notes.insert(1, "'fine-tuned' rows: the base model fine-tuned on the NCBI-disease train mentions (configs/"
                        "finetune.cfg: multi-similarity loss, 20 dictionary names per mention; the same steps, lr and "
                        "batch with and without the mention-like pairs, abbreviations mined from NCBI train "
                        "abstracts); their BC5CDR-disease dev columns measure transfer (its 'train' class is BC5CDR "
                        "train, which they never saw).")
    return write_results("mention_pairs", {"MEDIC self-alignment with and without mention-like pairs (strict acc@1, %)":
                                           table(columns_of(systems), rows_of(systems))},
                         command=command, notes=notes, figures=figures)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=80, help="pretraining steps of each run (the fixed budget)")
    ap.add_argument("--batch-size", type=int, default=32, help="pairs per step")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--max-per-name", type=int, default=2)
    ap.add_argument("--typo-rate", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--candidates", default="shortlist", choices=("shortlist", "all"),
                    help="names searched: a fixed shortlist (the same for every system; fits a shared CPU) or all")
    ap.add_argument("--sample-names", type=int, default=2000, help="shortlist: seeded sample of MEDIC names")
    ap.add_argument("--gold-names", type=int, default=5, help="shortlist: names per gold concept (0 = all)")
    ap.add_argument("--shortlist-k", type=int, default=10, help="shortlist: each mention's nearest names by tf-idf")
    ap.add_argument("--out", type=Path, default=OUTPUT / "mention_pairs")
    ap.add_argument("--cache", type=Path, default=OUTPUT / "cache" / "mention_pairs")
    ap.add_argument("--fresh", action="store_true", help="retrain even when a run's model is there")
    ap.add_argument("--finetune-steps", type=int, default=300, help="--part finetune: steps of each fine-tuning run")
    ap.add_argument("--finetune-seed", type=int, default=42,
                    help="--part finetune: training.seed of both runs (rows of another seed than 42 are named by it)")
    ap.add_argument("--part", default="all",
                    choices=("all", "base", "synonyms_only", "with_mention_like", "finetune", "collect"),
                    help="run one part only (parts run side by side merge their reports; the results file is "
                         "written once all three systems are there); collect: only merge and write")
    ap.add_argument("--generators", default="", help="with_mention_like: only these generators (comma-separated; "
                    "default all), a run and row of their own")
    ap.add_argument("--note", action="append", default=[], help="a line for the results file's notes (repeatable)")
    ap.add_argument("--hybrid", action="store_true",
                    help="also score each encoder as the linker's hybrid stage, the weight tuned on each set's train "
                         "split (needs --candidates all)")
    args = ap.parse_args()
    if args.hybrid and args.candidates != "all":
        ap.error("--hybrid searches every MEDIC name (the sparse index has no shortlist): add --candidates all")
    command = "python benchmarks/mention_pairs.py " + " ".join(sys.argv[1:])
    if args.part == "collect":
        command = ("python benchmarks/mention_pairs.py --part P for P in base, synonyms_only, with_mention_like (side "
                   "by side; the same --steps, --batch-size, --threads), then python benchmarks/mention_pairs.py --part "
                   "collect")
        sys.exit(0 if collect(args, {}, {}, command) else 1)

    import torch

    from spacy_sapbert.training.run import pretrain

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    base = minilm_path()
    medic = medic_kb()
    sets = eval_sets(DATA)
    dictionary = candidates(medic, sets, args)
    print(f"{len(dictionary.names)} candidate names ({args.candidates}) of {len(medic.names)}", flush=True)
    report_path = args.out / f"report_{args.part}{'_' + args.generators.replace(',', '_') if args.generators else ''}.json"  # one per part: parts may run side by side
    report: Dict[str, Any] = json.loads(report_path.read_text()) if report_path.is_file() and not args.fresh else {}
    systems: Dict[str, Dict[str, Any]] = report.setdefault("systems", {})
    figures: Dict[str, Any] = report.setdefault("figures", {"args": {k: str(v) for k, v in vars(args).items()}})
    figures.update(candidates=args.candidates, candidate_names=len(dictionary.names))

    def save() -> None:
        report_path.write_text(json.dumps(report, indent=2), encoding="utf8")

    tuning = train_golds(DATA, medic) if args.hybrid else {}

    def score(name: str, model: str) -> None:
        systems[name] = split_scores(model, medic, sets, dictionary, args.cache)
        save()
        print(name, json.dumps(systems[name]), flush=True)
        if args.hybrid:
            found = hybrid_scores(model, medic, sets, tuning, args.cache)
            systems[hybrid_name(name, found)] = found
            save()
            print(hybrid_name(name, found), json.dumps(found), flush=True)

    name = "MiniLM base (mean)"
    if name not in systems and args.part in ("all", "base"):
        score(name, base)
    for label, on in (("self-aligned on MEDIC synonyms", False), ("self-aligned on MEDIC synonyms + mention-like pairs", True)):
        part = "with_mention_like" if on else "synonyms_only"
        run = args.out / part
        name = f"{label}, {args.steps} steps x {args.batch_size}"
        if on and args.generators:
            label = f"{label} ({args.generators.replace(',', ', ')}, abbreviations)"
            name = f"{label}, {args.steps} steps x {args.batch_size}"
            run = run.with_name(run.name + "_" + args.generators.replace(",", "_"))
        if (name in systems and not args.fresh) or args.part not in ("all", part):
            continue
        if run.exists():
            shutil.rmtree(run)
        started = time.time()
        res = pretrain(medic, base, run, config=pretrain_config(args, on))
        figures[label] = run_figures(res, run, started)
        print(json.dumps(figures[label]), flush=True)
        score(name, str(res.model_path))
    if args.part == "finetune":
        from spacy_sapbert.mentions.datasets import iter_mentions, read_dataset
        from spacy_sapbert.training.run import finetune

        train = [m for m in iter_mentions(read_dataset(ncbi_file("train", DATA), types=TYPES)) if m.ids]
        for label, on in ((FINETUNED, False), (f"{FINETUNED} + mention-like pairs", True)):
            seeded = "" if args.finetune_seed == 42 else f", seed {args.finetune_seed}"
            name = f"{label}, {args.finetune_steps} steps x {args.batch_size}{seeded}"
            run = args.out / (("finetune_mention_like" if on else "finetune") + seeded.replace(", seed ", "_s"))
            if name in systems and not args.fresh:
                continue
            if run.exists():
                shutil.rmtree(run)
            started = time.time()
            res = finetune(medic, train, base, run, config=finetune_config(args, on))
            figures[label + seeded] = run_figures(res, run, started)
            print(json.dumps(figures[label + seeded]), flush=True)
            score(name, str(res.model_path))
    collect(args, systems, figures, command)


def collect(args: argparse.Namespace, systems: Dict[str, Any], figures: Dict[str, Any], command: str) -> bool:
    """Merge the parts' reports (run separately, maybe side by side); write the results file once all three
    systems are there (True)."""
    for other in sorted(args.out.glob("report_*.json")):
        part = json.loads(other.read_text(encoding="utf8"))
        for key, value in part.get("systems", {}).items():
            systems.setdefault(key, value)
        for key, value in part.get("figures", {}).items():
            figures.setdefault(f"args of {other.stem[len('report_'):]}" if key == "args" else key, value)
    dense = [k for k in systems if HYBRID not in k]
    if len(dense) < 3:
        print(f"{len(dense)} of 3 systems scored so far: {sorted(dense)}")
        return False
    order = sorted(dense, key=lambda k: (k.startswith(FINETUNED), not k.startswith("MiniLM"), "+" in k, len(k)))
    ordered = {k: systems[k] for k in sorted(systems, key=lambda k: (order.index(k.split(HYBRID)[0]), HYBRID in k))}
    print(f"results: {write(ordered, figures, command, args.note)}")
    return True


if __name__ == "__main__":
    sys.exit(main())
