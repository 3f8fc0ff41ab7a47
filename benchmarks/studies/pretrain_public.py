"""Self-alignment pretraining of the offline MiniLM on public synonyms, then fine-tuning on NCBI-disease.

    python benchmarks/studies/pretrain_public.py      # the defaults: ~50 min on 2 idle cores with AVX512-BF16

What it does (every figure printed comes from this run; the machine may be shared, see the header):

1. Pretraining KB: MEDIC + DO (MeSH xrefs mapped, so DO synonyms join their MEDIC concept) + MeSH
   descriptor names + HPO (UMLS xrefs) + drug synonyms (a small reader here: the file is
   ``canonical, mesh_id, drugbank_id, variant``). Evaluation dictionary: MEDIC alone.
   ``--link-sources 1`` (a probe, off by default) gives a DO or HPO concept the id of the one MEDIC
   concept it is (by UMLS CUI -> MeSH from DO's cross-references, else by names that match one MEDIC
   concept only), so the sources' synonyms of one disease become synonyms of one concept, as UMLS
   CUIs make them.
2. Baselines on NCBI-disease dev and test (mention-only, no back-off, composite mentions kept: right if
   any part is predicted): the base model ([CLS] and mean pooling) and char-3gram tf-idf, strict and
   lenient acc@1/@5 (``spacy_sapbert.mentions.metrics``). Test is also scored with abbreviations
   resolved (scispaCy's detector on each abstract; what the linker does by default, and what the
   SapBERT/BioSyn preprocessing does), as a separate, labelled column.
3. Pretraining with the chosen recipe (InfoNCE over in-batch negatives, 256 pairs per step, lr 1e-4:
   the best of the recipe probes in docs/history.md) for ``--minutes`` of training time or one epoch,
   in ``--segments`` parts (resumed from checkpoints); after each part the model is evaluated: the
   learning curve.
4. Ablation: the same recipe with the online miner switched the other way (off when the recipe mines,
   on when it does not) for ``--ablation-minutes``, against the main run's curve point at the same budget.
5. Fine-tuning the self-aligned model on NCBI-disease *train* mentions (dev for early stopping:
   the best dev checkpoint is kept) for ``--finetune-epochs`` (``--finetune-minutes`` caps it); test is
   only ever evaluated. ``--finetune-loss infonce --finetune-mining 0`` probes InfoNCE for this stage.

Models and the JSON report go to ``benchmarks/output/pretrain_public/`` (git-ignored).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io

from common import DATA, NCBI, OUTPUT, medic_kb, minilm_path  # noqa: E402
from results_io import table, write_results  # noqa: E402


def read_drugs(path: Path) -> Iterator[Any]:
    """drug_synonyms.tsv → one concept per DrugBank id (else MeSH id, else canonical name)."""
    from spacy_sapbert.kb import Concept

    groups: Dict[str, List[str]] = {}
    with open(path, encoding="utf8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            cid = row["drugbank_id"] or row["mesh_id"] or f"DRUG:{row['canonical']}"
            names = groups.setdefault(cid, [row["canonical"]])
            if row["variant"] and row["variant"] not in names:
                names.append(row["variant"])
    for cid, names in groups.items():
        yield Concept(concept_id=cid, canonical_name=names[0], aliases=tuple(names[1:]))


def do_cui_to_mesh(path: Path) -> Dict[str, set]:
    """UMLS CUI -> MeSH ids, from the DO terms that cross-reference both (``UMLS_CUI:`` and ``MESH:``)."""
    from spacy_sapbert.kb.readers import read_obo

    def by_term(prefix: str) -> Dict[str, set]:
        out: Dict[str, set] = {}
        for c in read_obo(path, map_xrefs=(prefix,), keep_unmapped=False):
            out.setdefault(c.alt_ids[0], set()).add(c.concept_id)  # the OBO id is the first alternate id
        return out

    mesh = by_term("MESH")
    out: Dict[str, set] = {}
    for term, cuis in by_term("UMLS_CUI").items():
        for cui in cuis:
            out.setdefault(cui, set()).update(mesh.get(term, ()))
    return out


def link_to_medic(concepts: Iterator[Any], medic, cui_to_mesh: Dict[str, set]) -> Tuple[List[Any], int]:
    """Give a concept of another source the id of the one MEDIC concept it is (UMLS stands in for
    this with CUIs): through ``cui_to_mesh`` when its id is a CUI that maps to exactly one MEDIC
    concept, else when its names match the names of exactly one MEDIC concept (normalised); the names
    win over a DO MeSH cross-reference that names another concept (60 in DO 2016: "alcohol dependence"
    is cross-referenced to Pharyngeal Neoplasms). Its own id is kept as an alternate id. Returns the
    concepts and how many changed id."""
    from dataclasses import replace

    out, linked = [], 0
    for c in concepts:
        target = {m for m in cui_to_mesh.get(c.concept_id, ()) if m in medic.cui_to_entity}
        if len(target) != 1:
            target = set()
            for name in (c.canonical_name, *c.aliases):
                target.update(medic.alias_to_cuis.get(name, ()))
        if len(target) == 1 and c.concept_id not in target:
            (mesh,) = target
            c = replace(c, concept_id=mesh, alt_ids=(c.concept_id, *c.alt_ids))
            linked += 1
        out.append(c)
    return out, linked


def build_kbs(data: Path, sources: Sequence[str], link: bool = False):
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.readers import read_obo, read_tsv

    medic = medic_kb(data)
    parts = {"medic": medic}
    cui_to_mesh = do_cui_to_mesh(data / "doid" / "doid_2016-09-01.obo") if link else {}

    def read(name: str, concepts: Iterator[Any]):
        if link:
            concepts, n = link_to_medic(concepts, medic, cui_to_mesh)
            print(f"--link-sources: {n} {name} concepts took the id of a MEDIC concept", flush=True)
        return KnowledgeBase.from_concepts(concepts, source=name)

    if "do" in sources:
        parts["do"] = read("do", read_obo(data / "doid" / "doid_2016-09-01.obo", map_xrefs=("MESH",)))
    if "mesh" in sources:
        parts["mesh"] = KnowledgeBase.from_concepts(read_tsv(data / "mesh" / "mesh_descriptors.tsv"), source="mesh")
    if "hpo" in sources:
        parts["hpo"] = read("hpo", read_obo(data / "hpo" / "hp.obo", map_xrefs=("UMLS",)))
    if "drugs" in sources:
        parts["drugs"] = KnowledgeBase.from_concepts(read_drugs(data / "drugs" / "drug_synonyms.tsv"), source="drugs")
    merged = KnowledgeBase.merge([parts[s] for s in ["medic", *[s for s in sources if s != "medic"]] if s in parts])
    return medic, merged


class Evaluator:
    """Strict and lenient acc@1/@5 on NCBI dev and test against the MEDIC dictionary."""

    def __init__(self, medic, splits: Dict[str, Sequence[Any]], queries: Dict[str, Sequence[str]] = None) -> None:
        """``splits``: name → mentions; ``queries``: name → the strings to link instead of the
        mentions' text (abbreviations resolved), else each mention's text."""
        from spacy_sapbert.evaluation.baselines import Dictionary
        from spacy_sapbert.mentions.metrics import resolve_gold
        from spacy_sapbert.kb import normalize_name

        queries = queries or {}
        self.dictionary = Dictionary.from_kb(medic)
        self.splits = {
            name: ([normalize_name(q) for q in queries.get(name, [m.text for m in ms])],
                   [resolve_gold(medic, m.ids) for m in ms])
            for name, ms in splits.items()
        }

    def _score(self, system) -> Dict[str, Any]:
        from spacy_sapbert.mentions.metrics import score

        out = {}
        for name, (queries, golds) in self.splits.items():
            res = score(golds, system.rank(queries, 5), (1, 5))
            out[name] = {"strict@1": res["strict"]["acc@1"], "strict@5": res["strict"]["acc@5"],
                         "lenient@1": res["lenient"]["acc@1"], "lenient@5": res["lenient"]["acc@5"]}
        return out

    def model(self, path: str, pooling: str, cache_dir: Any = None) -> Dict[str, Any]:
        from spacy_sapbert.encoding.torch_encoder import Encoder
        from spacy_sapbert.evaluation.baselines import DenseEncoder

        enc = Encoder.load(path, pooling=pooling, max_length=25, device="cpu", cache_size=0)
        t = time.time()
        result = self._score(DenseEncoder(enc, self.dictionary, batch_size=256, show_progress=False,
                                          cache_dir=cache_dir))
        result["eval_seconds"] = round(time.time() - t, 1)
        return result

    def tfidf(self) -> Dict[str, Any]:
        from spacy_sapbert.evaluation.baselines import TfidfCharNgrams

        return self._score(TfidfCharNgrams(self.dictionary))


def fmt(row: Dict[str, Any]) -> str:
    cells = []
    for split in ("dev", "test"):
        r = row[split]
        cells.append(f"{100 * r['strict@1']:5.1f} {100 * r['strict@5']:5.1f} {100 * r['lenient@1']:5.1f} {100 * r['lenient@5']:5.1f}")
    if "test_abbr" in row:
        cells.append(f"{100 * row['test_abbr']['strict@1']:5.1f} {100 * row['test_abbr']['strict@5']:5.1f}")
    return " | ".join(cells)


def write_report_results(report: Dict[str, Any], rows: Dict[str, Dict[str, Any]], out: Path) -> Path:
    """The score table (acc in %) as ``benchmarks/results/pretrain_public.json`` (a run with another ``--out``,
    e.g. a recipe probe, as ``pretrain_public_<out folder name>.json``)."""
    splits = [("dev", ("strict@1", "strict@5", "lenient@1", "lenient@5")),
              ("test", ("strict@1", "strict@5", "lenient@1", "lenient@5")), ("test_abbr", ("strict@1", "strict@5"))]
    columns = ["system"] + [f"{'test, abbr. resolved' if split == 'test_abbr' else split} {m}"
                            for split, ms in splits for m in ms]
    cells = [[name] + [round(100 * row[split][m], 1) if split in row else None for split, ms in splits for m in ms]
             for name, row in rows.items()]
    notes = [f"machine: {report['machine']}", "NCBI-disease dev/test against MEDIC, mention only, no back-off, "
             "composite mentions kept (right if any part is predicted); protocols: see docs/evaluation.md."]
    figures = {k: report[k] for k in ("pretrain", "ablation", "finetune", "peak_rss_mb", "total_minutes") if k in report}
    name = "pretrain_public" if out.name == "pretrain_public" else f"pretrain_public_{out.name}"
    return write_results(name, {"NCBI-disease, MEDIC (acc in %)": table(columns, cells)}, notes=notes,
                         figures={k: {kk: vv for kk, vv in v.items() if not isinstance(vv, dict)}
                                  if isinstance(v, dict) else v for k, v in figures.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=15.0,
                    help="pretraining budget (training time; one epoch of the pairs ends it earlier)")
    ap.add_argument("--segments", type=int, default=3, help="learning-curve points")
    ap.add_argument("--ablation-minutes", type=float, default=5.0, help="the same recipe with the miner toggled (0: skip)")
    ap.add_argument("--finetune-minutes", type=float, default=60.0,
                    help="fine-tuning time cap (0: skip); --finetune-epochs is the budget that normally ends it")
    ap.add_argument("--sources", default="medic,do,mesh,hpo", help="of medic,do,mesh,hpo,drugs")
    ap.add_argument("--link-sources", type=int, default=0,
                    help="1: DO and HPO concepts that are one MEDIC concept (by CUI->MeSH from DO's xrefs, or by "
                         "names matching one MEDIC concept only) take its id, so their synonyms become its synonyms")
    ap.add_argument("--pooling", default="mean")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--batch-size", type=int, default=256, help="pairs per pretraining step")
    ap.add_argument("--pairs-per-concept", type=int, default=20)
    ap.add_argument("--batching", default="random")
    ap.add_argument("--loss", default="infonce", help="pretraining loss: infonce | multi_similarity | triplet")
    ap.add_argument("--temperature", type=float, default=0.05, help="infonce temperature (all-MiniLM-L6-v2's own: scale 20)")
    ap.add_argument("--mining", type=int, default=0, help="1: online hard-pair miner on during pretraining (0: off)")
    ap.add_argument("--hard-negatives", type=int, default=0,
                    help="> 0: per KB pair of a batch, add this many pairs of dictionary hard negatives (names of other "
                         "concepts among the anchor name's --hn-top-k nearest in the pretraining KB)")
    ap.add_argument("--hn-top-k", type=int, default=10)
    ap.add_argument("--hn-every", type=int, default=600, help="pretraining steps between re-mining")
    ap.add_argument("--finetune-lr", type=float, default=1e-4)
    ap.add_argument("--finetune-batch-size", type=int, default=64, help="task pairs per fine-tuning step")
    ap.add_argument("--finetune-pairs-per-mention", type=int, default=5)
    ap.add_argument("--finetune-epochs", type=int, default=9, help="epochs over the task pairs (or --finetune-minutes)")
    ap.add_argument("--finetune-seed", type=int, default=42, help="training.seed of the fine-tuning run")
    ap.add_argument("--finetune-batching", default="random")
    ap.add_argument("--finetune-loss", default="multi_similarity",
                    help="fine-tuning loss: multi_similarity | infonce | triplet")
    ap.add_argument("--finetune-temperature", type=float, default=0.05, help="infonce temperature when fine-tuning")
    ap.add_argument("--finetune-mining", type=int, default=1, help="0: online hard-pair miner off when fine-tuning")
    ap.add_argument("--finetune-hard-negatives", type=int, default=1,
                    help="> 0: per pair of a batch, add this many pairs of dictionary hard negatives (names of other "
                         "concepts among the mention's --finetune-hn-top-k nearest, re-mined every epoch)")
    ap.add_argument("--finetune-hn-top-k", type=int, default=10)
    ap.add_argument("--finetune-hn-every", type=int, default=339,
                    help="steps between re-mining (0: every epoch; 339 = 3 epochs with the defaults)")
    ap.add_argument("--finetune-dev-every", type=int, default=339,
                    help="> 0: the trainer scores NCBI dev every N steps (113 = one epoch with the defaults) and keeps "
                         "the best model (0: only the segment ends are compared); shares the dictionary vectors "
                         "with hard-negative mining when both fall on the same step")
    ap.add_argument("--amp", default="bf16", help="training precision: bf16 (CPU autocast; 1.7-1.9x faster per step on CPUs "
                    "with AVX512-BF16/AMX, slow elsewhere) or none (fp32). Evaluation always runs in fp32.")
    ap.add_argument("--warmup-steps", type=int, default=12, help="pretraining warm-up (12 x 256 pairs)")
    ap.add_argument("--finetune-segments", type=int, default=1,
                    help="> 1: evaluate after each part and keep the best on dev (early stopping)")
    ap.add_argument("--finetune-more", type=float, default=0.0,
                    help="after a full run: only resume its fine-tuning for this many more minutes and evaluate")
    ap.add_argument("--pretrained", type=Path, default=None,
                    help="a self-aligned model folder from an earlier run: skip pretraining and the ablation, "
                         "fine-tune this one (recipe search for the fine-tuning step)")
    ap.add_argument("--base-cls", action="store_true", help="also evaluate the base model with [CLS] pooling")
    ap.add_argument("--out", type=Path, default=OUTPUT / "pretrain_public")
    ap.add_argument("--fresh", action="store_true", help="delete --out first (else only the base model's cached vectors are kept)")
    ap.add_argument("--threads", type=int, default=2,
                    help="torch threads for this run (use 1 on a CPU shared with other jobs)")
    args = ap.parse_args()

    import torch

    from spacy_sapbert.mentions.datasets import iter_mentions, read_pubtator
    from spacy_sapbert.training.config import load_config
    from spacy_sapbert.training.run import dev_set, finetune, pretrain
    from spacy_sapbert.base.util import peak_rss_mb

    torch.set_num_threads(args.threads)
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    for stale in () if args.finetune_more else ("pretrain", "ablation_no_mining", "ablation_mining", "finetune"):
        if (args.out / stale).exists():
            shutil.rmtree(args.out / stale)
    args.out.mkdir(parents=True, exist_ok=True)
    base = minilm_path()
    report: Dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()},
                              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                                         f"torch {torch.__version__}, {torch.get_num_threads()} threads"}
    print(f"# pretrain_public: {report['machine']}", flush=True)

    t0 = time.time()
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    medic, kb = build_kbs(DATA, sources, link=bool(args.link_sources))
    splits = {name: [m for m in iter_mentions(read_pubtator(NCBI[name])) if m.ids] for name in ("train", "dev", "test")}
    print(f"pretraining KB: {len(kb)} concepts, {len(kb.names)} names ({'+'.join(sources)}); "
          f"MEDIC: {len(medic)} concepts, {len(medic.names)} names; NCBI mentions "
          + ", ".join(f"{k} {len(v)}" for k, v in splits.items()) + f" ({time.time() - t0:.0f} s)", flush=True)
    # the linker's default setting: a short form is linked through its long form in the same abstract
    from spacy_sapbert.evaluation.preprocess import InputOptions, mention_queries

    test_docs = [d for d in read_pubtator(NCBI["test"])]
    abbr = [q for (q, _), m in zip(mention_queries(test_docs, InputOptions(resolve_abbreviations=True)),
                                   iter_mentions(test_docs)) if m.ids]
    ev = Evaluator(medic, {"dev": splits["dev"], "test": splits["test"], "test_abbr": splits["test"]},
                   {"test_abbr": abbr})
    rows: Dict[str, Dict[str, Any]] = {}

    def show(name: str, row: Dict[str, Any]) -> None:
        rows[name] = row
        print(f"{name:<44} {fmt(row)}", flush=True)
        (args.out / "report.json").write_text(json.dumps({**report, "rows": rows}, indent=2), encoding="utf8")

    def metrics(run: Path) -> List[Dict[str, Any]]:
        """The rows of a run's ``metrics.jsonl``."""
        return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]

    def throughput(run: Path) -> float:
        rows_ = [r for r in metrics(run) if "loss" in r]
        return rows_[-1]["pairs_seen"] / max(rows_[-1]["train_seconds"], 1e-9)

    def best_dev_step(run: Path) -> Any:
        """The step of the best dev acc@1 in a run's metrics (the first of equal ones: the model kept)."""
        rows_ = [r for r in metrics(run) if "dev_acc@1" in r]
        return max(rows_, key=lambda r: (r["dev_acc@1"], -r["step"]))["step"] if rows_ else None

    def ft_config(minutes: float):
        return load_config(None, {
            "model.pooling": args.pooling, "training.lr": args.finetune_lr, "training.batch_size": args.finetune_batch_size,
            "training.max_minutes": minutes, "training.checkpoint_every": 200, "training.log_every": 10,
            "training.device": "cpu", "training.warmup_steps": 0, "training.amp": args.amp,
            "training.batching": args.finetune_batching, "pairs.max_pairs_per_concept": args.finetune_pairs_per_mention,
            "training.epochs": args.finetune_epochs, "training.seed": args.finetune_seed,
            "training.hard_negatives": args.finetune_hard_negatives,
            "training.hard_negative_top_k": args.finetune_hn_top_k, "training.hard_negative_every": args.finetune_hn_every,
            "loss.name": args.finetune_loss, "miner.enabled": bool(args.finetune_mining),
            **({"loss.temperature": args.finetune_temperature} if args.finetune_loss == "infonce" else {}),
            **({"training.eval_every": args.finetune_dev_every} if args.finetune_dev_every else {}),
        }, task="finetune")

    ft_dev = dev_set(medic, splits["dev"]) if args.finetune_dev_every else None

    if args.finetune_more > 0:
        old = json.loads((args.out / "report.json").read_text(encoding="utf8"))
        rows.update(old.pop("rows"))
        report.update({k: v for k, v in old.items() if k not in ("args", "machine")})
        ft = args.out / "finetune"
        res = finetune(medic, splits["train"], str(args.out / "pretrain" / "model"), ft, resume=True,
                       config=ft_config(args.finetune_minutes + args.finetune_more))
        row = ev.model(str(res.model_path), args.pooling)
        point = {"minutes": round(res.train_seconds / 60, 1), "steps": res.steps, "pairs_seen": res.pairs_seen,
                 "n_pairs": json.loads((ft / "pairs" / "meta.json").read_text())["n_pairs"],
                 "pairs_per_s": round(throughput(ft), 1), **row}
        report.setdefault("finetune_curve", []).append(point)
        if row["dev"]["strict@1"] > report["finetune"]["dev"]["strict@1"]:
            report["finetune"] = point
        show(f"+ fine-tuned on NCBI train {point['minutes']:.0f} min", row)
        print(f"fine-tuning: best on dev after {report['finetune']['minutes']} min: test strict@1 "
              f"{100 * report['finetune']['test']['strict@1']:.1f}; peak RSS {peak_rss_mb():.0f} MB", flush=True)
        print(f"results: {write_report_results(report, rows, args.out)}")
        return

    print(f"{'system':<44} dev: strict@1 @5 lenient@1 @5 | test: strict@1 @5 lenient@1 @5 "
          "| test, abbreviations resolved: strict@1 @5", flush=True)
    show("char-3gram tf-idf", ev.tfidf())
    vectors = args.out / "base_vectors"  # the base model's dictionary vectors, reused by reruns
    if args.base_cls or args.pooling == "cls":
        show("MiniLM base, [CLS]", ev.model(base, "cls", vectors))
    if args.pooling == "mean":
        show("MiniLM base, mean", ev.model(base, "mean", vectors))

    def config(minutes: float, mining: bool, extra: Dict[str, Any] = None):
        return load_config(None, {
            "model.pooling": args.pooling, "pairs.max_pairs_per_concept": args.pairs_per_concept,
            "training.lr": args.lr, "training.batch_size": args.batch_size, "training.batching": args.batching,
            "training.max_minutes": minutes, "training.epochs": 1, "training.checkpoint_every": 200,
            "training.log_every": 10, "training.device": "cpu", "training.warmup_steps": args.warmup_steps,
            "training.amp": args.amp, "miner.enabled": mining, "loss.name": args.loss,
            "loss.temperature": args.temperature, "training.hard_negatives": args.hard_negatives,
            "training.hard_negative_top_k": args.hn_top_k, "training.hard_negative_every": args.hn_every,
            **(extra or {})})

    curve = []
    run = args.out / "pretrain"
    pretrained = run / "model"
    if args.pretrained is not None:
        pretrained = args.pretrained
        args.segments = args.ablation_minutes = 0
        print(f"fine-tuning the self-aligned model {pretrained} (its scores: the report of the run that made it)",
              flush=True)
    for i in range(1, args.segments + 1):
        minutes = args.minutes * i / args.segments
        started = time.time()
        res = pretrain(kb, base, run, config=config(minutes, bool(args.mining)), resume=i > 1)
        point = {"minutes": round(res.train_seconds / 60, 1), "steps": res.steps, "pairs_seen": res.pairs_seen,
                 "n_pairs": json.loads((run / "pairs" / "meta.json").read_text())["n_pairs"],
                 "loss": res.final_loss, "pairs_per_s": round(throughput(run), 1),
                 "wall_minutes": round((time.time() - started) / 60, 1)}
        result = ev.model(str(res.model_path), args.pooling)
        curve.append({**point, **result})
        report["curve"] = curve
        show(f"self-aligned {point['minutes']:.0f} min, {res.pairs_seen} pairs", result)
    if curve:
        report["pretrain"] = curve[-1]
        print(f"pretraining pairs: {curve[-1]['n_pairs']} (1 epoch = {curve[-1]['n_pairs'] / max(curve[-1]['pairs_per_s'], 1e-9) / 60:.0f} min "
              f"at {curve[-1]['pairs_per_s']} pairs/s); peak RSS {peak_rss_mb():.0f} MB", flush=True)

    if args.ablation_minutes > 0:
        abl = args.out / ("ablation_no_mining" if args.mining else "ablation_mining")
        if abl.exists():
            shutil.rmtree(abl)
        abl.mkdir()
        shutil.copytree(run / "pairs", abl / "pairs")
        res = pretrain(kb, base, abl, config=config(args.ablation_minutes, not args.mining))
        row = ev.model(str(res.model_path), args.pooling)
        report["ablation"] = {"mining": not args.mining, "minutes": round(res.train_seconds / 60, 1),
                              "pairs_seen": res.pairs_seen, "pairs_per_s": round(throughput(abl), 1), **row}
        show(f"mining {'on' if not args.mining else 'off'} {res.train_seconds / 60:.0f} min, {res.pairs_seen} pairs", row)

    if args.finetune_minutes > 0:
        ft = args.out / "finetune"
        if ft.exists():
            shutil.rmtree(ft)
        best = None
        for i in range(1, args.finetune_segments + 1):
            cfg = ft_config(args.finetune_minutes * i / args.finetune_segments)
            started = time.time()
            res = finetune(medic, splits["train"], str(pretrained), ft, config=cfg, resume=i > 1, dev=ft_dev)
            row = ev.model(str(res.model_path), args.pooling)
            point = {"minutes": round(res.train_seconds / 60, 1), "steps": res.steps, "pairs_seen": res.pairs_seen,
                     "best_dev_step": best_dev_step(ft),
                     "n_pairs": json.loads((ft / "pairs" / "meta.json").read_text())["n_pairs"],
                     "pairs_per_s": round(throughput(ft), 1), "wall_minutes": round((time.time() - started) / 60, 1),
                     **row}
            report.setdefault("finetune_curve", []).append(point)
            show(f"+ fine-tuned on NCBI train {point['minutes']:.0f} min", row)
            if best is None or row["dev"]["strict@1"] > best["dev"]["strict@1"]:
                best = point
        report["finetune"] = best
        print(f"fine-tuning: {best['steps']} steps in {best['minutes']} min ({best['pairs_seen']} pairs, "
              f"{best['n_pairs']} per epoch); the model scored is the best dev point, step {best['best_dev_step']}: "
              f"test strict@1 {100 * best['test']['strict@1']:.1f}", flush=True)
    report["peak_rss_mb"] = round(peak_rss_mb())
    report["total_minutes"] = round((time.time() - t0) / 60, 1)
    (args.out / "report.json").write_text(json.dumps({**report, "rows": rows}, indent=2), encoding="utf8")
    print(f"peak RSS {report['peak_rss_mb']} MB; total {report['total_minutes']} min; report {args.out / 'report.json'}")
    print(f"results: {write_report_results(report, rows, args.out)}")


if __name__ == "__main__":
    sys.exit(main())
