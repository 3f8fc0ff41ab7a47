#!/usr/bin/env python
"""Put the project's figures into one markdown report and print it.

Inputs (each optional except the evaluation folder): the NER dev scores (``train-ner --metrics``),
the ``spacy-sapbert evaluate`` report folder (its report.md is included as written), the raw-text
end-to-end figures (scripts/e2e_eval.py) and the linked sample (scripts/link_sample.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional


def _load(path: Optional[Path]):
    if path is None or not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf8"))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--title", default="spacy-sapbert project report")
    parser.add_argument("--ner", type=Path, help="NER dev scores JSON")
    parser.add_argument("--evaluation", type=Path, required=True, help="spacy-sapbert evaluate report folder")
    parser.add_argument("--e2e", type=Path, help="scripts/e2e_eval.py JSON")
    parser.add_argument("--sample", type=Path, help="scripts/link_sample.py JSON")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    from spacy_sapbert.base.util import atomic_write

    report_md = args.evaluation / "report.md"
    if not report_md.exists():
        print(f"No evaluation report at {report_md}: run the evaluate step first.", file=sys.stderr)
        return 1
    out = [f"# {args.title}", ""]
    ner = _load(args.ner)
    if ner:
        out += [f"## NER on the dev sets ({ner['docs']} docs, {ner['gold_entities']} gold entities; exact spans, spaCy scorer)",
                "", "| label | P | R | F1 |", "|---|---:|---:|---:|"]
        for label, s in ner["ents_per_type"].items():
            out.append(f"| {label} | {100 * s['p']:.1f} | {100 * s['r']:.1f} | {100 * s['f']:.1f} |")
        out += [f"| **all** | {100 * ner['ents_p']:.1f} | {100 * ner['ents_r']:.1f} | {100 * ner['ents_f']:.1f} |", ""]
    e2e = _load(args.e2e)
    if e2e:
        out += [f"## End to end on raw text: {e2e['data']} ({e2e['docs']} docs; the pipeline's own NER, label {e2e['label']})",
                "", "| measure | P | R | F1 |", "|---|---:|---:|---:|"]
        for key, name in (("ner", "NER (exact span)"), ("e2e", "NER + linking (exact span and concept)")):
            s = e2e[key]
            out.append(f"| {name} | {100 * s['p']:.1f} | {100 * s['r']:.1f} | {100 * s['f']:.1f} |")
        if e2e.get("nel_micro_f") is not None:
            out.append(f"| spaCy nel_micro (spans the NER got right) | {100 * e2e['nel_micro_p']:.1f} | "
                       f"{100 * e2e['nel_micro_r']:.1f} | {100 * e2e['nel_micro_f']:.1f} |")
        out.append("")
    sample = _load(args.sample)
    if sample:
        out += [f"## Sample text linked by the installed package `{sample['package']}`", "", f"> {sample['text']}", "",
                "| entity | label | kb_id | name | kb_ents (top 3) |", "|---|---|---|---|---|"]
        for e in sample["entities"]:
            top = ", ".join(f"{c} {s:.2f}" for c, s in e["kb_ents"][:3])
            out.append(f"| {e['text']} | {e['label']} | {e['kb_id'] or '–'} | {e['canonical_name']} | {top} |")
        out.append("")
    body = report_md.read_text(encoding="utf8").replace("\n# ", "\n## ")
    if body.startswith("# "):
        body = "#" + body
    out += [body]
    text = "\n".join(out)
    with atomic_write(args.output) as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
