"""NCBI-disease test with MEDIC 2012: every system side by side, in the reference settings.

    .venv/bin/python benchmarks/studies/evaluate_ncbi.py [--model PATH] [--e2e] [--quick]

Runs configs/evaluate.cfg with the offline all-MiniLM-L6-v2 as the base encoder ([CLS]) in
these settings, each written to benchmarks/output/eval_ncbi/<setting>/ (report.md, metrics.json,
errors, plot, config.cfg to rerun it):

- ``reference``: non-composite mentions, lowercase, no back-off (the issue's reference setting)
- ``backoff``: the same, NCBI train + dev mentions added to MEDIC as aliases
- ``all_mentions``: composite mentions kept (right if any part is predicted)
- ``abbreviations``: reference + scispaCy abbreviation resolution in context
- with ``--e2e``: the reference setting also end to end through spaCy pipelines (nel_micro_f)

Then prints one summary table next to the reference numbers from the issue, and the exact-match
tie analysis that explains the gap (see docs/history.md). Name vectors are cached in
benchmarks/output/cache, so only the first run encodes MEDIC. The machine is shared (2 CPU cores,
six engineers): timings are indicative only.
"""
from __future__ import annotations

import argparse
import json
import time
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io

from common import MEDIC, NCBI, OUTPUT, ROOT, minilm_path  # noqa: E402
from results_io import table, write_results  # noqa: E402
from spacy_sapbert.evaluation.run import evaluate  # noqa: E402
from spacy_sapbert.evaluation.settings import load_config, settings_from_config  # noqa: E402

REFERENCE = {  # from the issue: NCBI test, non-composite, raw lowercased, MEDIC 2012
    "reference": {"exact match": (52.0, None, None), "char-3gram tf-idf": (66.5, 75.1, None),
                  "base MiniLM [CLS]": (69.6, 78.5, None)},
    "backoff": {"exact match": (72.5, None, 75.0), "char-3gram tf-idf": (81.9, None, 84.4),
                "base MiniLM [CLS]": (84.8, None, 87.3)},
}
SETTINGS = {
    "reference": {},
    "backoff": {"evaluate.input.backoff": True},
    "all_mentions": {"evaluate.exclude_composite": False},
    "abbreviations": {"evaluate.input.resolve_abbreviations": True},
}


def run(name: str, overrides: dict, out_root: Path) -> dict:
    config = load_config(ROOT / "configs" / "evaluate.cfg", overrides)
    settings = settings_from_config(config, "configs/evaluate.cfg")
    t = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = evaluate(settings, config_text=config.to_str(), output=out_root / name, overwrite=True)
    print(f"[{name}] {time.time() - t:.0f} s -> {out_root / name}/report.md", flush=True)
    return result


def tie_analysis(out_root: Path) -> str:
    """Exact match, reference setting: how ambiguous exact hits are resolved moves strict acc@1."""
    from spacy_sapbert.mentions.datasets import iter_mentions, read_pubtator
    from spacy_sapbert.mentions.metrics import resolve_gold
    from spacy_sapbert.kb import normalize_name
    from spacy_sapbert.kb.build import build_kb

    kb = build_kb([(MEDIC, "medic")])
    ms = [m for m in iter_mentions(read_pubtator(NCBI["test"]))
          if m.ids and not m.composite]
    by_id = by_canon = ambiguous = 0
    for m in ms:
        gold = resolve_gold(kb, m.ids).ids
        q = normalize_name(m.text)
        if q not in kb.alias_to_cuis:
            continue
        cids = sorted(kb.alias_to_cuis[q])
        ambiguous += len(cids) > 1
        canon = [c for c in cids if normalize_name(kb.cui_to_entity[c].canonical_name) == q]
        by_id += cids[0] in gold
        by_canon += (canon or cids)[0] in gold
    n = len(ms)
    return (f"exact match, {n} non-composite mentions, {ambiguous} exact hits on an ambiguous name: strict acc@1 "
            f"{100 * by_id / n:.1f} with ties by concept id (ours), {100 * by_canon / n:.1f} when the concept "
            f"whose preferred name equals the mention wins the tie")


def summary_rows(results: dict) -> list:
    """One row per setting, mode and system: strict/lenient acc in %, filtered subsets, the issue's reference."""
    rows = []
    for name, result in results.items():
        subsets = result["counts"]["subsets"]
        for mode, systems in result["results"].items():
            for system, sc in systems.items():
                full = sc["full"]
                ref = REFERENCE.get(name, {}).get(system)
                ref_txt = " / ".join("–" if v is None else f"{v:.1f}" for v in ref) if ref and mode == "mention_only" else ""
                cells = [round(100 * full["strict"]["acc@1"], 1), round(100 * full["strict"]["acc@5"], 1),
                         None if not full["lenient"] else round(100 * full["lenient"]["acc@1"], 1),
                         None if not full["lenient"] else round(100 * full["lenient"]["acc@5"], 1)]
                for sub in ("filtered", "filtered_lev0.2"):
                    s = sc.get(sub)
                    cells.append(None if s is None else f"{100 * s['strict']['acc@1']:.1f} ({subsets[sub]})")
                label = system if mode == "mention_only" else f"{system} [e2e, nel_micro_f " \
                    f"{100 * result['nel'][system]['nel_micro_f']:.1f}]"
                rows.append([name, label, full["n"]] + cells + [ref_txt])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model under test (model folder or pipeline), e.g. a self-aligned MiniLM")
    parser.add_argument("--e2e", action="store_true", help="also run the reference setting end to end")
    parser.add_argument("--quick", action="store_true", help="only the reference and back-off settings")
    parser.add_argument("--output", default=str(OUTPUT / "eval_ncbi"))
    args = parser.parse_args()

    base = {"evaluate.systems.base_encoder": minilm_path(),
            "evaluate.systems.base_encoder_name": "base MiniLM [CLS]", "evaluate.systems.base_pooling": "cls"}
    if args.model:
        base.update({"evaluate.systems.model": args.model, "evaluate.systems.model_name": f"model ({Path(args.model).name})"})
    out_root = Path(args.output)
    names = ["reference", "backoff"] if args.quick else list(SETTINGS)
    results = {name: run(name, {**base, **SETTINGS[name]}, out_root) for name in names}
    if args.e2e:
        results["reference_e2e"] = run("reference_e2e", {**base, "evaluate.modes": ["mention_only", "end_to_end"]}, out_root)
    columns = ["setting", "system", "n", "strict @1", "strict @5", "lenient @1", "lenient @5", "filtered @1 (n)",
               "filtered-lev0.2 @1 (n)", "reference (strict @1 / @5 / lenient @1)"]
    rows = summary_rows(results)
    lines = ["| " + " | ".join(columns) + " |", "|---|---|---:|" + "---:|" * 7]
    lines += ["| " + " | ".join("–" if c is None else f"{c:.1f}" if isinstance(c, float) else str(c) for c in row) + " |"
              for row in rows]
    summary = "\n".join(lines)
    analysis = tie_analysis(out_root)
    print(summary)
    print()
    print(analysis)
    (out_root / "summary.md").write_text(summary + "\n\n" + analysis + "\n", encoding="utf8")
    path = write_results("evaluate_ncbi", {"NCBI-disease test, MEDIC 2012 (acc in %)": table(columns, rows)},
                         notes=[analysis, "Protocols: see docs/evaluation.md; base encoder all-MiniLM-L6-v2 ([CLS])."])
    print(f"results: {path}")
    (out_root / "summary.json").write_text(json.dumps({k: v["results"] for k, v in results.items()}, indent=1),
                                           encoding="utf8")


if __name__ == "__main__":
    main()
