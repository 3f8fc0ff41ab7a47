#!/usr/bin/env python
"""End-to-end evaluation of an installed pipeline on raw PubTator text: its own NER finds the
spans, its linker links them (nothing from the gold annotation is given to the pipeline).

Reported (NCBI-disease: only ``--label`` entities are scored; the corpus has no chemicals):
- ``ner``: exact-span precision / recall / F1 against the gold mentions;
- ``e2e``: a prediction is right when its span is exact AND its ``kb_id_`` is a gold id of that
  mention (composite gold ``A|B``: any part; ids compared after ``kb.resolve_id``, so alternate
  ids such as ``OMIM:`` spellings count) — precision / recall / F1 over mentions;
- ``nel_micro_f``: spaCy's ``Scorer.score_links`` on the same predictions (it only scores
  predicted entities whose span matches a gold entity; composite gold takes the part predicted,
  else its first part).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scripts folder, also when loaded by path
from with_site import add_site  # noqa: E402


def _prf(tp: int, n_pred: int, n_gold: int) -> Dict[str, float]:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"p": round(p, 4), "r": round(r, 4), "f": round(f, 4), "tp": tp, "predicted": n_pred, "gold": n_gold}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="installed package name (or a pipeline folder)")
    parser.add_argument("data", type=Path, help="PubTator file, e.g. the NCBI-disease test set")
    parser.add_argument("--site", type=Path, default=None, help="pip --target folder to put on sys.path")
    parser.add_argument("--label", default="Disease", help="the NER label scored against the gold mentions")
    parser.add_argument("--output", type=Path, required=True, help="JSON metrics file")
    args = parser.parse_args(argv)
    if args.site is not None and not add_site(args.site):
        return 1
    import spacy
    from spacy.scorer import Scorer
    from spacy.training import Example

    from spacy_sapbert.mentions.datasets import read_pubtator
    from spacy_sapbert.base.util import atomic_write

    nlp = spacy.load(args.name)
    kb = nlp.get_pipe("sapbert_linker").kb
    docs = read_pubtator(args.data)

    def canon(cid: str) -> str:
        return kb.resolve_id(cid) or cid

    n_gold = n_pred = ner_tp = e2e_tp = 0
    examples = []
    for document, pred in zip(docs, nlp.pipe([d.text for d in docs], batch_size=16)):
        gold: Dict[Tuple[int, int], Tuple[str, ...]] = {}
        for m in document.mentions:
            gold[(m.start, m.end)] = tuple(canon(i) for i in m.ids)
        preds = [e for e in pred.ents if e.label_ == args.label]
        n_gold += len(gold)
        n_pred += len(preds)
        ref = nlp.make_doc(document.text)
        ref_ents = []
        for (s, e), ids in gold.items():
            hit = next((p for p in preds if (p.start_char, p.end_char) == (s, e)), None)
            kb_id = ids[0] if ids else "NIL"
            if hit is not None:
                ner_tp += 1
                if hit.kb_id_ and canon(hit.kb_id_) in ids:
                    e2e_tp += 1
                    kb_id = canon(hit.kb_id_)
            span = ref.char_span(s, e, label=args.label, kb_id=kb_id, alignment_mode="expand")
            if span is not None:
                ref_ents.append(span)
        ref.ents = spacy.util.filter_spans(ref_ents)
        pred_doc = nlp.make_doc(document.text)
        pred_doc.ents = [pred_doc.char_span(p.start_char, p.end_char, label=p.label_,
                                            kb_id=canon(p.kb_id_) if p.kb_id_ else "NIL") for p in preds]
        examples.append(Example(pred_doc, ref))
    links = Scorer.score_links(examples, negative_labels=["NIL"])
    result = {
        "package": args.name,
        "data": str(args.data),
        "docs": len(docs),
        "label": args.label,
        "ner": _prf(ner_tp, n_pred, n_gold),
        "e2e": _prf(e2e_tp, n_pred, n_gold),
        "nel_micro_p": links.get("nel_micro_p"),
        "nel_micro_r": links.get("nel_micro_r"),
        "nel_micro_f": links.get("nel_micro_f"),
    }
    with atomic_write(args.output) as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    print(f"End to end on {args.data} ({len(docs)} docs, {n_gold} gold mentions, raw text):")
    print(f"  NER ({args.label}, exact span): P {result['ner']['p']:.3f} R {result['ner']['r']:.3f} F1 {result['ner']['f']:.3f}")
    print(f"  NER + linking (exact span, right concept): P {result['e2e']['p']:.3f} R {result['e2e']['r']:.3f} "
          f"F1 {result['e2e']['f']:.3f}")
    if links.get("nel_micro_f") is not None:
        print(f"  spaCy nel_micro_f (on spans the NER got right): {links['nel_micro_f']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
