"""``spacy-sapbert evaluate`` on BC5CDR dev, disease and chemical mentions: every system side by side.

Disease mentions with MEDIC 2012; chemical mentions with MeSH descriptor names plus drug synonyms as the
dictionary.

    .venv/bin/python benchmarks/studies/evaluate_bc5cdr.py [--model PATH] [--only disease|chemical]

Settings per entity type: ``reference`` (non-composite, lowercase, no back-off) and ``backoff``
(BC5CDR train mentions as aliases). The BC5CDR train set is also the "training mentions" of the
filtered subsets. Reports go to benchmarks/output/eval_bc5cdr/<type>_<setting>/.

The chemical dictionary: ``mesh_descriptors.tsv`` (D-ids, preferred names) merged with
``drug_synonyms.tsv`` converted to ``id<TAB>name`` (its MeSH id when it has one, else its DrugBank
id, so that drugs without MeSH id are distractors). BC5CDR also annotates MeSH supplementary
concepts (C-ids), which are not in this dictionary: they are counted as "gold not in KB".
The machine is shared (2 CPU cores, six engineers): timings are indicative only.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io

from common import BC5CDR, DATA, MEDIC, OUTPUT, minilm_path  # noqa: E402
from evaluate_ncbi import run  # noqa: E402  (beside this script)
from results_io import table, write_results  # noqa: E402


def drug_tsv(out: Path) -> Path:
    """drug_synonyms.tsv → ``id<TAB>name`` (canonical first, then variants), written once."""
    path = out / "drug_synonyms_kb.tsv"
    if path.exists():
        return path
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with open(DATA / "drugs" / "drug_synonyms.tsv", encoding="utf8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            cid = (row["mesh_id"] or row["drugbank_id"]).strip()
            if not cid:
                continue
            for name in (row["canonical"], row["variant"]):
                name = " ".join(name.split())
                if name:
                    rows.append(f"{cid}\t{name}")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(dict.fromkeys(rows)) + "\n", encoding="utf8")
    tmp.replace(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model under test (model folder or pipeline)")
    parser.add_argument("--only", choices=["disease", "chemical"])
    parser.add_argument("--no-base", action="store_true", help="skip the base encoder (saves its encoding time)")
    parser.add_argument("--output", default=str(OUTPUT / "eval_bc5cdr"))
    args = parser.parse_args()

    out_root = Path(args.output)
    common = {
        "evaluate.dataset.path": str(BC5CDR["dev"]),
        "evaluate.dataset.train": [str(BC5CDR["train"])],
    }
    if not args.no_base:
        common.update({"evaluate.systems.base_encoder": minilm_path(),
                       "evaluate.systems.base_encoder_name": "base MiniLM [CLS]", "evaluate.systems.base_pooling": "cls"})
    if args.model:
        common.update({"evaluate.systems.model": args.model, "evaluate.systems.model_name": f"model ({Path(args.model).name})"})
    types = {
        "disease": {"evaluate.name": "BC5CDR dev, disease, MEDIC 2012", "evaluate.dataset.types": ["Disease"],
                    "evaluate.kb.sources": [[str(MEDIC), "medic"]]},
        "chemical": {"evaluate.name": "BC5CDR dev, chemical, MeSH descriptors + drug synonyms",
                     "evaluate.dataset.types": ["Chemical"],
                     "evaluate.kb.sources": [[str(DATA / "mesh" / "mesh_descriptors.tsv"), "tsv"],
                                             [str(drug_tsv(out_root)), "tsv"]]},
    }
    lines = ["| type | setting | system | n | not in KB | strict @1 | strict @5 | lenient @1 | filtered @1 (n) | "
             "filtered-lev0.2 @1 (n) |", "|---|---|---|---:|---:|" + "---:|" * 5]
    rows = []
    for etype, block in types.items():
        if args.only and etype != args.only:
            continue
        for setting, extra in (("reference", {}), ("backoff", {"evaluate.input.backoff": True})):
            result = run(f"{etype}_{setting}", {**common, **block, **extra}, out_root)
            c = result["counts"]
            for system, sc in result["results"]["mention_only"].items():
                full = sc["full"]
                cells = [f"{100 * full['strict']['acc@1']:.1f}", f"{100 * full['strict']['acc@5']:.1f}",
                         "–" if not full["lenient"] else f"{100 * full['lenient']['acc@1']:.1f}"]
                for sub in ("filtered", "filtered_lev0.2"):
                    s = sc.get(sub)
                    cells.append("–" if s is None else f"{100 * s['strict']['acc@1']:.1f} ({c['subsets'][sub]})")
                lines.append(f"| {etype} | {setting} | {system} | {full['n']} | {c['gold_not_in_kb']} | " + " | ".join(cells) + " |")
                rows.append([etype, setting, system, full["n"], c["gold_not_in_kb"]]
                            + [float(x) if x.replace(".", "", 1).isdigit() else x for x in cells])
            print("\n".join(lines), flush=True)
    summary = "\n".join(lines)
    (out_root / "summary.md").write_text(summary + "\n", encoding="utf8")
    columns = ["type", "setting", "system", "n", "gold not in KB", "strict @1", "strict @5", "lenient @1",
               "filtered @1 (n)", "filtered-lev0.2 @1 (n)"]
    notes = ["Disease: MEDIC 2012; chemical: MeSH descriptor preferred names + drug synonyms; training mentions = "
             "BC5CDR train; composite mentions excluded. Protocols: see docs/evaluation.md."]
    print(f"results: {write_results('evaluate_bc5cdr', {'BC5CDR dev (acc in %)': table(columns, rows)}, notes=notes)}")


if __name__ == "__main__":
    main()
