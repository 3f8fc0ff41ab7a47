"""Where an encoder misses on NCBI-disease (MEDIC dictionary, mentions as written, strict acc@1).

    python benchmarks/ncbi_misses.py MODEL [--against OTHER_MODEL] [--split test|dev] [--pooling mean]

Prints the strict@1 misses by kind: ``short form`` (5 characters or less, no space: ``dm``, ``fap``),
``name of another concept`` (the mention is verbatim a MEDIC name, of a concept that is not gold), and
``other``, with the most frequent strings of each kind; and the misses among the mentions that appear
verbatim, with the same gold, among the train mentions (what fine-tuning could have memorised). With
``--against``, also the mentions that one model gets right and the other misses, grouped by string:
where two models differ.
Model folders as ``benchmarks/pretrain_public.py`` writes them, or a Hugging Face folder.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Sequence

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SPLITS = {"train": "NCBItrainset_corpus.txt", "dev": "NCBIdevelopset_corpus.txt", "test": "NCBItestset_corpus.txt"}


def top_concepts(model: str, pooling: str, dictionary, queries: Sequence[str]) -> List[str]:
    """The best concept for each query (ties by concept id, as the metrics rank them)."""
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.baselines import DenseEncoder

    enc = Encoder.load(model, pooling=pooling, max_length=25, device="cpu", cache_size=0)
    ranked = DenseEncoder(enc, dictionary, batch_size=256, show_progress=False).rank(queries, 1)
    return [r.concepts[0][0] if r.concepts else "" for r in ranked]


def kind(query: str, names: Dict[str, bool]) -> str:
    if len(query) <= 5 and " " not in query:
        return "short form"
    return "name of another concept" if query in names else "other"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--against", default=None, help="a second model: list where the two differ")
    ap.add_argument("--split", default="test", choices=sorted(SPLITS))
    ap.add_argument("--pooling", default="mean")
    ap.add_argument("--show", type=int, default=12, help="strings listed per group")
    args = ap.parse_args()

    from spacy_sapbert.evaluation.baselines import Dictionary
    from spacy_sapbert.mentions.datasets import iter_mentions, read_pubtator
    from spacy_sapbert.mentions.metrics import resolve_gold
    from spacy_sapbert.kb import KnowledgeBase, normalize_name
    from spacy_sapbert.kb.readers import read_medic

    medic = KnowledgeBase.from_concepts(read_medic(DATA / "medic" / "medic_06Jul2012.txt"), source="medic")
    mentions = [m for m in iter_mentions(read_pubtator(DATA / "ncbi_disease" / SPLITS[args.split])) if m.ids]
    queries = [normalize_name(m.text) for m in mentions]
    golds = [resolve_gold(medic, m.ids).ids for m in mentions]
    dictionary = Dictionary.from_kb(medic)
    names = {name: True for name in medic.names}
    train = {(normalize_name(m.text), frozenset(resolve_gold(medic, m.ids).ids))
             for m in iter_mentions(read_pubtator(DATA / "ncbi_disease" / SPLITS["train"])) if m.ids}
    seen = [(q, frozenset(g)) in train for q, g in zip(queries, golds)]

    def report(model: str) -> List[bool]:
        tops = top_concepts(model, args.pooling, dictionary, queries)
        right = [t in g for t, g in zip(tops, golds)]
        misses: Dict[str, Counter] = {}
        for q, ok in zip(queries, right):
            if not ok:
                misses.setdefault(kind(q, names), Counter())[q] += 1
        print(f"{model}: {args.split} strict@1 {100 * sum(right) / len(right):.1f} ({sum(right)} of {len(right)}); "
              f"misses {len(right) - sum(right)}: " + ", ".join(f"{k} {sum(c.values())}" for k, c in sorted(misses.items())))
        for k, c in sorted(misses.items()):
            print(f"  {k}: " + "; ".join(f"{q} x{n}" for q, n in c.most_common(args.show)))
        missed_seen = Counter(q for q, ok, s in zip(queries, right, seen) if s and not ok)
        print(f"  seen in train with the same gold: {sum(seen)} mentions, {sum(missed_seen.values())} missed: "
              + "; ".join(f"{q} x{n}" for q, n in missed_seen.most_common(args.show)))
        return right

    first = report(args.model)
    if args.against:
        second = report(args.against)
        for label, pick in ((f"right with {args.model} only", (True, False)),
                            (f"right with {args.against} only", (False, True))):
            diff: Counter = Counter(q for q, a, b in zip(queries, first, second) if (a, b) == pick)
            print(f"{label}: {sum(diff.values())} mentions: "
                  + "; ".join(f"{q} x{n}" for q, n in diff.most_common(args.show)))


if __name__ == "__main__":
    sys.exit(main())
