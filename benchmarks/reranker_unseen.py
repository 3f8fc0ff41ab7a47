"""The cross-encoder re-ranker on mentions nobody annotated: NCBI-disease test and BC5CDR-disease dev.

NCBI-disease test (re-ranker trained on NCBI train, its combination tuned on NCBI dev) and BC5CDR-disease dev
(trained on BC5CDR train less a held-out tenth of its documents, tuned on that tenth), MEDIC 2012 as the KB,
the base all-MiniLM-L6-v2 as the name encoder (mean pooling, exact search) and as the re-ranker's starting
point. CPU only. Nothing is tuned on the reported test sets.

Rows: the name encoder alone (dense top-1); its top ``k`` re-ranked by the int8 re-ranker alone for every mention
(``reranker_dense_weight`` 0, margin 1); the re-ranker combined with the dense score (order by re-ranker logit +
``dense_weight`` x cosine) at the weight and margin tuned on the held-out data; and the linker's defaults (margin
0.05, dense weight 30, mentions that are a KB name left out, its ``reranker_window``). The trigger table's rows
"..., window W" score each ``reranker_window`` W with logits of its own, the candidates read a batch of their own as
the linker reads them (the int8 graph's logits depend on the batch).
Columns: strict acc@1 overall and per class of the protocol (a dictionary name / a train mention / neither;
"seen in train" / "unseen in train": a train mention or not; "neither" is the refined subset), candidate
recall@1/5/16/64 of the dense stage (the re-ranker's ceiling is recall@k), the mentions/s of dense + re-ranking
(everything each encodes or scores; the re-ranking's time per pair timed in the same run on 40 mentions) and its
ratio to the name encoder alone in the same run (noisy on a shared machine). Mentions as written (normalised like KB
names), composite mentions left out. Rows "margin m" re-rank only mentions whose two best dense scores lie within m.
``--rerank-k K [K ...]``: the candidates re-ranked at evaluation (the linker's ``reranker_k``; default ``--k``, the
training groups' size); the first fills the sets' tables, and with more than one a table of re-ranked candidates
gives, per K, the held-out data's acc@1 at the defaults and tuned, and the reported set's at both.

    python benchmarks/reranker_unseen.py [--sets ncbi bc5cdr] [--max-steps 250] [--pseudo-mentions 1000]
    python benchmarks/reranker_unseen.py --max-margin 0.2 --use ncbi=RUN/model bc5cdr=RUN/model   # no training
    python benchmarks/reranker_unseen.py --max-margin 0.2 --rerank-k 4 16 8 2 --use ...   # re-ranked candidates
    python benchmarks/reranker_unseen.py --together --use ncbi=RUN/model --cache CACHE   # all levers at once
    python benchmarks/reranker_unseen.py --speed --use ncbi=RUN/model --speed-kb KB --speed-index INDEX   # speed
    python benchmarks/reranker_unseen.py --mention-like 2 --epochs 3 --max-margin 0.2 --rerank-k 4   # ablation
    python benchmarks/reranker_unseen.py --layers 3 2 --epochs 3 --max-margin 0.2 --rerank-k 4   # ablation
    python benchmarks/reranker_unseen.py --layers 2 --layers-lr 1e-4 --distill 0.5 --epochs 3 ...   # distilled

``--together`` (results ``reranker_together``): the levers at once through ``spacy-sapbert evaluate``'s systems, on
both sets: name-only; hybrid (the weight benchmarks/hybrid_unseen.py tuned on the train split, candidates
interleave, sparse_k 64); hybrid + the NCBI re-ranker at the dense weight and margin tuned above (read from
results/reranker_unseen.json); and both with all four query-variant kinds. Columns as above, in two groups:
mentions as written, and with abbreviations resolved from the same document (the linker's default).

``--speed`` (results ``reranker_speed``): mentions/s of name-only, hybrid, and each + the NCBI re-ranker at the
linker's defaults through ``sapbert_linker`` on NCBI test (gold spans, an hnsw index built with ``build-index
--sparse``), alternated in one process, with the index's stored vectors read from its file (today) and through
hnswlib (before); a cProfile of where a hybrid + re-ranker pass spends its time. ``--speed-margins M ...`` (results
``reranker_speed_margins``): the re-ranker rows also at each ``reranker_margin`` M, with the texts and pairs it
scores a pass; ``--speed-windows W ...`` the same at each ``reranker_window`` W (1: all ``reranker_k`` candidates);
``--speed-precisions P ...`` at each ``reranker_precision`` P, alone and with each window. ``--reranker-precision
float32`` scores the accuracy tables with the float32 graph (its logits in stores of their own).
``--speed-corpus`` (results ``reranker_cache``): name-only + the re-ranker over all 793 NCBI documents in ``nlp.pipe``
batches of 128 and 16, the re-ranker's cache of logits on and off (texts and pairs scored, mentions/s, same kb_ents).

``--mention-like N`` (results ``reranker_mention_like``): each set's re-ranker trained twice, the second time also on
up to N mention-like variants of each training mention and pseudo-mention (``train-reranker --mention-like``), for the
first's number of steps; both evaluated as above. ``--layers N [N ...]`` (results ``reranker_layers``): the same
with a re-ranker started from the base's first N transformer layers for each N (``train-reranker --layers``), at
``--layers-lr`` when given (results ``reranker_layers_lrLR``); their speed through the linker: ``--speed
--speed-also RUN/model ...``. With ``--distill W`` each shallower re-ranker is distilled from the full-depth one
trained first (``train-reranker --teacher FOLDER --distill W``; results ``reranker_layers[_lrLR]_distillW``).

Work files (re-ranker runs, candidate logits) go to --output (default benchmarks/output/reranker_unseen/), name vectors
to --cache; a rerun resumes unfinished training runs and reuses finished ones. ``--train-only`` stops after training.
"""
from __future__ import annotations

import argparse
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from common import BC5CDR, MEDIC, NCBI, OUTPUT, ROOT, minilm_path
from results_io import table, write_results

# title, training file, tuning file (None: a held-out tenth of the training documents), test file, entity types
SETS = {
    "ncbi": ("NCBI-disease test", NCBI["train"], NCBI["dev"], NCBI["test"], None),
    "bc5cdr": ("BC5CDR-disease dev", BC5CDR["train"], None, BC5CDR["dev"], ["Disease"]),
}
HOLDOUT_EVERY = 10  # BC5CDR: every 10th training document (by position) is held out for tuning
RECALL_KS = (1, 5, 16, 64)
COLUMNS = ["system", "n", "overall", "dictionary name", "train mention", "neither", "seen in train",
           "unseen in train", "recall@1", "recall@5", "recall@16", "recall@64", "mentions/s", "x name-only"]
DENSE_WEIGHTS = (0.0, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 50.0, 75.0, 100.0)
MARGINS = (0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 1.0)


def _pct(value: Any) -> Any:
    return None if value is None else round(100 * value, 1)


def split_docs(key: str, train_path: Path, tune_path: Any, types: Any) -> Tuple[List[Any], List[Any]]:
    """Training documents and tuning documents of a set (never its test file)."""
    from spacy_sapbert.mentions.datasets import read_dataset

    docs = read_dataset(train_path, types=types)
    if tune_path is not None:
        return docs, read_dataset(tune_path, types=types)
    kept = [d for i, d in enumerate(docs) if i % HOLDOUT_EVERY]
    return kept, [d for i, d in enumerate(docs) if not i % HOLDOUT_EVERY]


def mentions_of(docs: Sequence[Any], kb: Any) -> List[Any]:
    """``(normalised text, gold ids)`` of the non-composite mentions whose gold the KB resolves."""
    from spacy_sapbert.mentions.datasets import select_mentions
    from spacy_sapbert.mentions.metrics import resolve_gold
    from spacy_sapbert.kb.concept import normalize_name

    chosen, _ = select_mentions(list(docs), exclude_composite=True)
    out = []
    for d in chosen:
        for m in d.mentions:
            gold = resolve_gold(kb, m.ids)
            text = normalize_name(m.text)
            if gold.ids and text:
                out.append((text, gold.ids))
    return out


def run_name(key: str, args: Any, mention_like: int = 0, max_steps: Optional[int] = None, layers: int = 0,
             lr: Optional[float] = None, distill: float = 0.0) -> str:
    steps = args.max_steps if max_steps is None else max_steps
    return (f"{key}_k{args.k}_e{args.epochs}_s{steps}_p{args.pseudo_mentions}_lr{lr or args.lr:g}"
            f"_b{args.batch_mentions}" + (f"_ml{mention_like}" if mention_like else "")
            + (f"_L{layers}" if layers else "") + (f"_d{distill:g}" if distill else ""))


def train(key: str, docs: Sequence[Any], kb: Any, index: Any, encoder: Any, model: str, args: Any,
          mention_like: int = 0, max_steps: Optional[int] = None, layers: int = 0,
          lr: Optional[float] = None, distill: float = 0.0, teacher: Optional[Path] = None) -> Tuple[Path, Any]:
    """The run folder's re-ranker, trained (or resumed) when it is not there yet; the training summary or None.
    ``mention_like``: the run's variants per mention (train-reranker --mention-like); ``max_steps``: instead of
    ``--max-steps``; ``layers``: the base's first layers kept (train-reranker --layers; 0: all); ``lr``: instead of
    ``--lr``; ``distill`` and ``teacher``: distilled from that re-ranker folder (train-reranker --teacher --distill)."""
    from spacy_sapbert.rerank import RerankerSettings, train_reranker

    given = dict(item.split("=", 1) for item in args.use)
    if key in given:  # a re-ranker trained before: copied, its int8 graph exported again with this checkout's settings
        import shutil

        from spacy_sapbert.rerank import CrossEncoder, export_int8

        target = args.output / f"{key}_given_{Path(given[key]).parent.name}" / "model"
        if not (target / "sapbert_reranker.json").is_file():
            shutil.copytree(given[key], target.with_name("model.tmp"), dirs_exist_ok=True)
            export_int8(CrossEncoder.from_disk(target.with_name("model.tmp")), target.with_name("model.tmp"))
            target.with_name("model.tmp").rename(target)
        return target, None
    run = args.output / run_name(key, args, mention_like, max_steps, layers, lr, distill)
    if (run / "model" / "sapbert_reranker.json").is_file():
        return run / "model", None
    settings = RerankerSettings(k=args.k, pseudo_mentions=args.pseudo_mentions, mention_like=mention_like,
                                layers=layers, epochs=args.epochs, batch_mentions=args.batch_mentions, lr=lr or args.lr,
                                max_steps=args.max_steps if max_steps is None else max_steps, checkpoint_every=25,
                                distill=distill)
    summary = train_reranker(docs, kb, index, encoder, run, base=model, settings=settings,
                             resume=(run / "run.json").is_file(), device="cpu", teacher=teacher)
    summary["model"] = str(Path(summary["model"]).resolve().relative_to(ROOT))  # no path of this machine in results
    return run / "model", summary


def logits_for(reranker: Any, index: Any, encoder: Any, mentions: Sequence[Any], k: int, max_margin: float,
               store: Path, window: float = 1.0, dense: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Dense top-64 of the mentions and the re-ranker's logits of the top ``k`` (those within ``window`` of the best:
    the linker's ``reranker_window``) of every distinct mention text whose two best dense scores lie within
    ``max_margin`` (kept in ``store``, an ``.npz`` keyed by what was scored, so a rerun does not score again), with
    the time each stage took (the re-ranking's per scored pair). ``dense``: an earlier call's result for the same
    mentions, whose dense stage is reused."""
    import json

    import numpy

    from spacy_sapbert.rerank import candidate_logits, needs_rerank, window_size

    texts = [t for t, _ in mentions]
    if dense is None:
        started = time.perf_counter()
        encoder.clear_cache()
        vectors = encoder.encode(texts, batch_size=128)
        ranked = index.search(vectors, max(RECALL_KS))
        dense_s = time.perf_counter() - started
    else:
        vectors, ranked, dense_s = dense["vectors"], dense["ranked"], dense["dense_s"]
    first: Dict[str, int] = {}
    for q, t in enumerate(texts):
        first.setdefault(t, q)
    todo = [q for q in sorted(first.values()) if needs_rerank(ranked[q], max_margin)]
    key = json.dumps([[texts[q] for q in todo], k,
                      [[c for c, _ in ranked[q][:window_size(ranked[q], k, window)]] for q in todo]])
    if store.is_file():
        with numpy.load(store, allow_pickle=False) as data:
            if str(data["key"]) == key:
                flat, pair_s, at, scored = data["logits"], float(data["pair_seconds"]), 0, {}
                for q, n in zip(todo, data["counts"].tolist()):
                    scored[q] = ([c for c, _ in ranked[q][:n]], [v for _, v in ranked[q][:n]],
                                 flat[at: at + n].tolist())
                    at += n
    if not store.is_file() or str(numpy.load(store, allow_pickle=False)["key"]) != key:
        started = time.perf_counter()
        scored = candidate_logits(reranker, index, texts, vectors, ranked, todo, k=k, window=window)
        pairs = sum(len(v[0]) for v in scored.values())
        pair_s = (time.perf_counter() - started) / max(1, pairs)
        numpy.savez(store, key=numpy.array(key), pair_seconds=numpy.array(pair_s),
                    counts=numpy.array([len(scored[q][0]) for q in todo], dtype=numpy.int64),
                    logits=numpy.array([v for q in todo for v in scored[q][2]], dtype=numpy.float64))
    by_text = {texts[q]: scored[q] for q in todo}
    return {"texts": texts, "vectors": vectors, "ranked": ranked, "scored": [by_text.get(t) for t in texts],
            "dense_s": dense_s,
            "pair_s": pair_s, "max_margin": max_margin}


def reranked(parts: Dict[str, Any], margin: float, skip: Optional[Sequence[bool]] = None) -> List[int]:
    """The mentions re-ranked at ``margin`` (as the linker does): a close call with scored candidates, unless
    ``skip[q]`` (the trigger study's rules)."""
    from spacy_sapbert.rerank import needs_rerank

    return [q for q, r in enumerate(parts["ranked"]) if not (skip is not None and skip[q])
            and needs_rerank(r, margin) and parts["scored"][q] and parts["scored"][q][0]]


def apply(parts: Dict[str, Any], dense_weight: float, margin: float,
          skip: Optional[Sequence[bool]] = None) -> Tuple[List[Any], float]:
    """The lists after re-ranking at ``dense_weight`` / ``margin`` (as the linker does), and the share of mentions
    re-ranked; ``skip[q]`` True: mention ``q`` keeps its dense list (the trigger study)."""
    from spacy_sapbert.rerank import combine

    out = list(parts["ranked"])
    done = reranked(parts, margin, skip)
    for q in done:
        out[q] = combine(*parts["scored"][q], dense_weight)
    return out, len(done) / max(1, len(out))


def accuracy(lists: Sequence[Any], golds: Sequence[Any]) -> float:
    return sum(bool(r) and r[0][0] in g for r, g in zip(lists, golds)) / max(1, len(golds))


def tune(parts: Dict[str, Any], golds: Sequence[Any]) -> Dict[str, Any]:
    """The (dense weight, margin) of the grid with the best overall acc@1 on the tuning mentions; ties to the
    smaller margin (fewer mentions re-ranked: faster), then the larger dense weight."""
    grid = []
    for weight in DENSE_WEIGHTS:
        for margin in [m for m in MARGINS if m <= parts["max_margin"]]:
            lists, share = apply(parts, weight, margin)
            grid.append((round(accuracy(lists, golds), 6), -margin, weight, share))
    best = max(grid)
    dense = accuracy(parts["ranked"], golds)
    return {"dense_weight": best[2], "margin": -best[1], "tuning_acc": round(100 * best[0], 1),
            "tuning_dense_acc": round(100 * dense, 1), "tuning_n": len(golds),
            "grid": [[w, -m, round(100 * a, 1), round(100 * sh, 1)] for a, m, w, sh in grid]}


def evaluate_set(key: str, kb: Any, index: Any, encoder: Any, folder: Path, tune_docs: Sequence[Any], test_path: Path,
                 types: Any, args: Any, rerank_k: int) -> Tuple[List[List[Any]], Dict[str, Any]]:
    """Rows of one set's table with the re-ranker re-ordering the top ``rerank_k`` (the linker's ``reranker_k``)
    and what was tuned on the held-out data (also its acc@1 at the linker's defaults: ``tuning_acc_defaults``)."""
    import numpy

    from spacy_sapbert.mentions.datasets import read_dataset
    from spacy_sapbert.evaluation.protocol import MentionClasses
    from spacy_sapbert.kb.concept import normalize_name
    from spacy_sapbert.rerank.apply import DEFAULT_DENSE_WEIGHT, DEFAULT_RERANK_MARGIN, DEFAULT_RERANK_WINDOW
    from spacy_sapbert.rerank import candidate_logits
    from spacy_sapbert.rerank.model import OnnxCrossEncoder

    reranker = OnnxCrossEncoder(folder, threads=args.threads, precision=args.reranker_precision)
    tag = f"{folder.parent.name}_k{rerank_k}" + ("" if args.reranker_precision == "int8" else
                                                  f"_{args.reranker_precision}")
    tuning = mentions_of(tune_docs, kb)
    tune_golds = [g for _, g in tuning]
    tune_parts = logits_for(reranker, index, encoder, tuning, rerank_k, args.max_margin,
                            args.output / f"{key}_{tag}_tune.npz")
    test = mentions_of(read_dataset(test_path, types=types), kb)
    golds = [g for _, g in test]
    parts = logits_for(reranker, index, encoder, test, rerank_k, args.max_margin, args.output / f"{key}_{tag}_test.npz")
    # the linker's reranker_window: each window's logits scored as the linker scores them (a mention's batch holds
    # only the candidates read), for the mentions within the default margin
    windowed: Dict[float, Tuple[Dict[str, Any], Dict[str, Any]]] = {}
    if DEFAULT_RERANK_MARGIN <= args.max_margin:
        for w in sorted(w for w in set(WINDOWS) | {DEFAULT_RERANK_WINDOW} if w < 1):  # 1: tune_parts / parts
            windowed[w] = tuple(logits_for(reranker, index, encoder, ms, rerank_k, DEFAULT_RERANK_MARGIN,
                                           args.output / f"{key}_{tag}_w{w:g}_{split}.npz", window=w, dense=dense)
                                for ms, split, dense in ((tuning, "tune", tune_parts), (test, "test", parts)))
    kb_names = [[kb.row_of_name(t) >= 0 for t in p["texts"]] for p in (tune_parts, parts)]
    defaults = windowed.get(DEFAULT_RERANK_WINDOW, (tune_parts, parts))  # the linker's defaults: window, KB names kept
    chosen = tune(tune_parts, tune_golds)
    at_defaults, _ = apply(defaults[0], DEFAULT_DENSE_WEIGHT, DEFAULT_RERANK_MARGIN, kb_names[0])
    chosen["tuning_acc_defaults"] = round(100 * accuracy(at_defaults, tune_golds), 1)
    # the protocol's classes are the set's: a mention of any training document is a train mention
    train_texts = [normalize_name(m.text) for d in read_dataset(SETS[key][1], types=types) for m in d.mentions]
    classes = MentionClasses(parts["texts"], kb.names, train_texts)
    n = len(test)
    dense_rate = n / parts["dense_s"]
    # the re-ranking's time per pair, measured again in this run (the logits may come from an earlier run's store)
    sample = [q for q, v in enumerate(parts["scored"]) if v][:40]
    started = time.perf_counter()
    timed = candidate_logits(reranker, index, parts["texts"], parts["vectors"], parts["ranked"], sample, k=rerank_k)
    per_pair = (time.perf_counter() - started) / max(1, sum(len(v[0]) for v in timed.values()))

    def row(name: str, lists: List[Any], share: Any, read: float = rerank_k) -> List[Any]:
        """``read``: candidates scored per re-ranked mention (fewer than ``rerank_k`` with a window)."""
        hits = [bool(r) and r[0][0] in g for r, g in zip(lists, golds)]
        split = classes.split(hits)
        seen = [h for h, unseen in zip(hits, classes.unseen_in_train) if not unseen]
        cells = [name, n] + [_pct(split[part]["acc"]) for part in ("overall", "dictionary", "train", "neither")] + \
            [_pct(sum(seen) / len(seen) if seen else None), _pct(split["unseen_in_train"]["acc"])]
        for kk in RECALL_KS:
            cells.append(_pct(numpy.mean([any(c in g for c, _ in r[:kk]) for r, g in zip(lists, golds)]))
                         if share is None else None)
        if share is None:
            return cells + [round(dense_rate, 1), 1.0]
        # what a linker at these settings spends: the dense stage + scoring the pairs of each re-ranked mention
        seconds = parts["dense_s"] + share * n * read * per_pair
        return cells + [round(n / seconds, 1), round(parts["dense_s"] / seconds, 2)]

    rows = [row("name encoder (dense top-1)", parts["ranked"], None)]
    settings = [("re-ranker alone, every mention", 0.0, 1.0, parts, None)] if args.max_margin >= 1 else \
        [(f"re-ranker alone (dense weight 0), margin {args.max_margin:g}", 0.0, args.max_margin, parts, None)]
    if DEFAULT_RERANK_MARGIN <= args.max_margin:
        settings.append((f"linker defaults (dense weight {DEFAULT_DENSE_WEIGHT:g}, margin {DEFAULT_RERANK_MARGIN:g}, "
                         "KB names not re-ranked, " + (f"window {DEFAULT_RERANK_WINDOW:g})"
                                                       if DEFAULT_RERANK_WINDOW < 1 else f"all {rerank_k} read)"),
                         DEFAULT_DENSE_WEIGHT,
                         DEFAULT_RERANK_MARGIN, defaults[1], kb_names[1]))
    for label, weight, margin, these, skip in settings + [
            (f"dense weight {chosen['dense_weight']:g}, margin {chosen['margin']:g} (tuned)", chosen["dense_weight"],
             chosen["margin"], parts, None)]:
        lists, share = apply(these, weight, margin, skip)
        read = [len(these["scored"][q][0]) for q in reranked(these, margin, skip)]
        rows.append(row(f"re-ranked top {rerank_k}: {label}", lists, share,
                        sum(read) / len(read) if read else rerank_k))
        chosen.setdefault("share_reranked", {})[label] = round(100 * share, 1)
    frontier = []  # the margin at the linker's dense weight: held-out and reported acc@1, share re-ranked
    for margin in [m for m in MARGINS if m <= args.max_margin]:
        held, held_share = apply(tune_parts, DEFAULT_DENSE_WEIGHT, margin)
        lists, share = apply(parts, DEFAULT_DENSE_WEIGHT, margin)
        cells = row("", lists, share)
        frontier.append([margin, _pct(accuracy(held, tune_golds)), _pct(held_share)]
                        + [cells[COLUMNS.index(c)] for c in ("overall", "neither", "unseen in train", "seen in train")]
                        + [_pct(share)])
    chosen["margins"] = frontier
    chosen["triggers"] = trigger_rows(kb, tune_parts, parts, tune_golds, row, args.max_margin, windowed)
    chosen["seconds_per_pair"] = round(per_pair, 5)
    chosen["reranker_k"] = rerank_k
    chosen["class_counts"] = classes.counts()
    return rows, chosen


# which close calls are re-ranked, besides the margin alone: the mentions that are a KB name left out (the top
# concept has the name: only a concept whose nearest name is another could be put above it), or only the
# mentions whose best name score is below a bar (within the largest margin scored)
TOP_SCORE_BARS = (0.7, 0.8, 0.9, 0.95)


def candidates_read(parts: Dict[str, Any], margin: float, skip: Optional[Sequence[bool]]) -> int:
    """The (mention, candidate) pairs a rule has the re-ranker read: the scored candidates of each distinct text it
    re-ranks (what one linker batch holding every mention pays)."""
    done: Dict[str, int] = {}
    for q in reranked(parts, margin, skip):
        done.setdefault(parts["texts"][q], len(parts["scored"][q][0]))
    return sum(done.values())


def trigger_rows(kb: Any, tune_parts: Dict[str, Any], parts: Dict[str, Any], tune_golds: Sequence[Any], row: Any,
                 max_margin: float,
                 windowed: Optional[Dict[float, Tuple[Dict[str, Any], Dict[str, Any]]]] = None) -> List[List[Any]]:
    """Rows of the trigger study at the linker's dense weight: each rule's held-out acc@1, share re-ranked and
    candidates read, and the reported set's by class (``row``: :func:`evaluate_set`'s row maker). ``windowed``:
    ``{window: (held-out parts, reported parts)}`` scored with that ``reranker_window`` at the default margin (rows
    "..., window W", KB names not re-ranked)."""
    from spacy_sapbert.rerank.apply import DEFAULT_DENSE_WEIGHT, DEFAULT_RERANK_MARGIN

    def flags(p: Dict[str, Any], rule: Any) -> List[bool]:
        return [rule(t, r) for t, r in zip(p["texts"], p["ranked"])]

    def kb_name(t: str, r: Any) -> bool:
        return kb.row_of_name(t) >= 0

    rules: List[Tuple[str, float, Any, Dict[str, Any], Dict[str, Any]]] = []
    for margin in [m for m in MARGINS if m <= max_margin]:
        rules.append((f"margin {margin:g}", margin, None, tune_parts, parts))
        rules.append((f"margin {margin:g}, not a KB name", margin, kb_name, tune_parts, parts))
    for bar in TOP_SCORE_BARS:
        rules.append((f"margin {max_margin:g}, best name score below {bar:g}", max_margin,
                      lambda t, r, bar=bar: not r or r[0][1] >= bar, tune_parts, parts))
    for w, (held_parts, test_parts) in sorted((windowed or {}).items()):
        rules.append((f"margin {DEFAULT_RERANK_MARGIN:g}, not a KB name, window {w:g}", DEFAULT_RERANK_MARGIN, kb_name,
                      held_parts, test_parts))
    out = []
    for label, margin, rule, held_parts, test_parts in rules:
        held_skip = None if rule is None else flags(held_parts, rule)
        test_skip = None if rule is None else flags(test_parts, rule)
        held, held_share = apply(held_parts, DEFAULT_DENSE_WEIGHT, margin, held_skip)
        lists, share = apply(test_parts, DEFAULT_DENSE_WEIGHT, margin, test_skip)
        cells = row("", lists, share)
        out.append([label, _pct(accuracy(held, tune_golds)), _pct(held_share),
                    candidates_read(held_parts, margin, held_skip)]
                   + [cells[COLUMNS.index(c)] for c in ("overall", "neither", "unseen in train", "seen in train")]
                   + [_pct(share), candidates_read(test_parts, margin, test_skip)])
    return out


# the linker's reranker_window values the trigger study scores beside the default (each with its own logits; the
# rows "margin 0.05, not a KB name" are window 1.0)
WINDOWS = (0.04, 0.06, 0.08, 0.1)
TRIGGER_COLUMNS = ["re-ranked mentions", "held-out: acc@1", "held-out: % re-ranked", "held-out: candidates read",
                   "overall", "neither (refined)", "unseen in train", "seen in train", "% re-ranked",
                   "candidates read"]
MARGIN_COLUMNS = ["reranker_margin", "held-out: acc@1", "held-out: % re-ranked", "overall", "neither (refined)",
                  "unseen in train", "seen in train", "% re-ranked"]
SWEEP_COLUMNS = ["set", "reranker_k", "held-out: acc@1 at the defaults", "held-out: acc@1 tuned",
                 "tuned dense weight / margin", "defaults: overall", "defaults: neither (refined)",
                 "defaults: unseen in train", "defaults: x name-only", "tuned: overall", "tuned: neither (refined)",
                 "tuned: unseen in train", "tuned: x name-only"]


def sweep_row(title: str, rerank_k: int, rows: List[List[Any]], chosen: Dict[str, Any]) -> List[Any]:
    """One line of the re-ranked candidates table from one :func:`evaluate_set` (its rows follow ``COLUMNS``)."""
    defaults = next(r for r in rows if "linker defaults" in str(r[0]))
    tuned = next(r for r in rows if str(r[0]).endswith("(tuned)"))
    at = [COLUMNS.index(column) for column in ("overall", "neither", "unseen in train", "x name-only")]
    return [title, rerank_k, chosen["tuning_acc_defaults"], chosen["tuning_acc"],
            f"{chosen['dense_weight']:g} / {chosen['margin']:g}"] + [r[i] for r in (defaults, tuned) for i in at]


TOGETHER_GROUPS = ("as written", "abbreviations resolved (linker default)",
                   "as written + abbreviation table (mined from train text)")
TOGETHER_CELLS = ("overall", "dictionary name", "train mention", "neither", "unseen in train", "seen in train",
                  "recall@1", "recall@5", "recall@16", "recall@64", "x name-only")
TOGETHER_COLUMNS = ["system"] + [f"{group}: {cell}" for group in TOGETHER_GROUPS for cell in TOGETHER_CELLS]
VARIANT_KINDS = ["number", "generic_head", "punctuation", "word_order"]


def together_settings(key: str, reranker: Path, tuned: Dict[str, Any], resolved: bool, kinds: Sequence[str],
                      args: Any, abbreviation_table: Optional[Path] = None) -> Dict[str, Any]:
    """The ``evaluate`` settings of one together run: the base MiniLM (name-only), + hybrid (the weight tuned on
    the set's train split, candidates interleave, ``kinds`` as query variants), + the re-ranker at the dense
    weight and margin tuned on the held-out data; nothing else (``abbreviation_table``: evaluate's
    input.abbreviation_table)."""
    from thinc.api import Config

    from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

    title, train_path, _tune_path, test_path, types = SETS[key]
    block = {
        "name": f"{title}: levers together", "ks": list(RECALL_KS), "candidate_ks": list(RECALL_KS),
        "cache_dir": str(args.cache or args.output / "cache"), "batch_size": 128, "show_progress": False,
        "dataset": {"path": str(test_path), "types": types, "train": [str(train_path)]},
        "kb": {"sources": [[str(MEDIC), "medic"]]},
        "input": {"resolve_abbreviations": resolved,
                  "abbreviation_table": None if abbreviation_table is None else str(abbreviation_table)},
        "systems": {"base_encoder": minilm_path(), "base_pooling": "mean", "max_length": 25, "device": "cpu",
                    "exact_match": False, "tfidf": False, "scispacy": False,
                    "hybrid": True, "sparse_weight": tuned["sparse_weight"], "sparse_k": max(RECALL_KS),
                    "sparse_ngrams": [2, 3], "candidates": "interleave", "query_variants": list(kinds),
                    "reranker": str(reranker), "reranker_k": tuned["reranker_k"], "reranker_margin": tuned["margin"],
                    "reranker_dense_weight": tuned["dense_weight"]},
    }
    return settings_from_config(merge_config(default_config(), Config({"evaluate": block}), {}))


def together_cells(result: Dict[str, Any], name: str, reference: str) -> List[Any]:
    """One column group of a system: strict acc@1 per class, seen in train, candidate recall@k, speed ratio."""
    split = result["classes"]["mention_only"][name]
    overall, unseen = split["overall"], split["unseen_in_train"]
    n_seen = overall["n"] - unseen["n"]
    seen = (overall["acc"] * overall["n"] - (unseen["acc"] or 0.0) * unseen["n"]) / n_seen if n_seen else None
    recall = result["candidate_recall"]["mention_only"][name]
    speed = result["systems"][name]["mentions_per_s"]
    ref = result["systems"][reference]["mentions_per_s"]
    return [_pct(split[part]["acc"]) for part in ("overall", "dictionary", "train", "neither")] + \
        [_pct(unseen["acc"]), _pct(seen)] + [_pct(recall[f"recall@{k}"]) for k in RECALL_KS] + \
        [round(speed / ref, 2) if speed and ref else None]


def mined_table(key: str, output: Path) -> Path:
    """The abbreviation table `spacy-sapbert mine-abbreviations` makes of the set's training text (NCBI: train +
    dev; BC5CDR: train), raw text only, at its defaults; written under ``output``."""
    from spacy_sapbert.mentions.abbreviation_table import mine
    from spacy_sapbert.mentions.datasets import read_dataset

    sources = sorted({SETS[key][1], SETS[key][2]} - {None})
    path = output / f"{key}_abbreviations.json"
    mine([doc.text for source in sources for doc in read_dataset(source)],
         info={"inputs": [source.name for source in sources]}).to_disk(path)
    return path


def together(args: Any) -> None:
    """The levers together (``--together``): name-only, hybrid, hybrid + re-ranker, and both with query variants,
    through ``spacy-sapbert evaluate``'s systems; mentions as written and with abbreviations resolved."""
    import json
    import warnings

    import torch

    from spacy_sapbert.evaluation.run import evaluate

    torch.set_num_threads(args.threads)
    results = Path(__file__).resolve().parent / "results"
    reranked = json.loads((results / "reranker_unseen.json").read_text(encoding="utf8"))["figures"]
    hybrid = json.loads((results / "hybrid_unseen.json").read_text(encoding="utf8"))["figures"]
    given = dict(item.split("=", 1) for item in args.use)
    tables: Dict[str, Any] = {}
    figures: Dict[str, Any] = {"variant_kinds": VARIANT_KINDS, "k": max(RECALL_KS), "sparse_k": max(RECALL_KS),
                               "candidates": "interleave"}
    for key in args.sets:
        title = SETS[key][0]
        reranker = Path(given.get(key) or given.get("ncbi") or args.output / run_name("ncbi", args) / "model")
        # the dense weight and margin tuned for the candidates re-ranked then (files before 2026-11-29 evening: --k)
        tuned = {"sparse_weight": float(hybrid[title]["weight"]), "dense_weight": float(reranked[key]["dense_weight"]),
                 "margin": float(reranked[key]["margin"]), "reranker_k": int(reranked[key].get("reranker_k", args.k))}
        figures.setdefault("reranker_k", {})[key] = tuned["reranker_k"]
        hyb = f"hybrid (w = {tuned['sparse_weight']:g}, interleave)"
        rr = (f"re-ranker (top {tuned['reranker_k']}, dense weight {tuned['dense_weight']:g}, "
              f"margin {tuned['margin']:g})")
        labels = [("name-only (dense)", "base encoder", False), (hyb, "base encoder + hybrid", False),
                  (f"{hyb} + {rr}", "base encoder + hybrid + re-ranker", False),
                  (f"{hyb} + query variants", "base encoder + hybrid", True),
                  (f"{hyb} + query variants + {rr}", "base encoder + hybrid + re-ranker", True)]
        rows: Dict[str, List[Any]] = {label: [label] for label, _, _ in labels}
        runs: Dict[str, Any] = {}
        table_path = mined_table(key, args.output)
        for resolved, abbreviations in ((False, None), (True, None), (False, table_path)):
            for with_variants in (False, True):
                settings = together_settings(key, reranker, tuned, resolved, VARIANT_KINDS if with_variants else [],
                                             args, abbreviations)
                started = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # W300/W301: gold ids not in MEDIC, counted in the figures
                    result = evaluate(settings)
                tag = (f"{'resolved' if resolved else 'written'}{' + table' if abbreviations else ''}"
                       f"{' + variants' if with_variants else ''}")
                runs[tag] = {"seconds": round(time.perf_counter() - started, 1), "counts": {
                    k: result["counts"][k] for k in ("evaluated", "gold_not_in_kb", "classes")},
                    "mentions_per_s": {n: s.get("mentions_per_s") for n, s in result["systems"].items()},
                    "reordered": {n: s.get("distinct_texts_reordered") for n, s in result["systems"].items()
                                  if "distinct_texts_reordered" in s}}
                for label, name, variants in labels:
                    if variants == with_variants:
                        rows[label] += together_cells(result, name, "base encoder")
                print(title, tag, runs[tag], flush=True)
        tables[f"{title}: the levers together (strict acc@1 and candidate recall, %)"] = \
            table(TOGETHER_COLUMNS, [rows[label] for label, _, _ in labels])
        figures[key] = {"tuned": tuned, "reranker": Path(reranker).parent.name, "runs": runs,
                        "weight_tuned_on": f"{SETS[key][1].name} (benchmarks/hybrid_unseen.py)",
                        "reranker_tuned_on": reranked[key]["tuned_on"] + " (benchmarks/reranker_unseen.py)"}
    if args.no_write:
        print(json.dumps(tables, indent=1))
        return
    write_results("reranker_together", tables, figures=figures, notes=[
        "spacy-sapbert evaluate's systems ([evaluate.systems] hybrid, candidates, query_variants, reranker), MEDIC "
        "2012, the base all-MiniLM-L6-v2 (mean pooling, exact search), CPU. Strict acc@1 in %; evaluate's classes "
        "on the normalised mention each group links (a dictionary name / a train mention of the set's train "
        "file / neither = the refined subset; unseen / seen in train), so resolving abbreviations (or a table) "
        "moves some "
        "mentions between classes (figures.<set>.runs.<group>.counts); composite mentions left out; mentions "
        "whose gold id is not in MEDIC stay in, as misses (counts.gold_not_in_kb).",
        "Three column groups: mentions as written (input.resolve_abbreviations = false), with abbreviations "
        "resolved from the same document (the linker's default: scispaCy's detector with its additions, "
        "spacy_sapbert/mentions/abbreviations.py), and as written with an abbreviation table "
        "(input.abbreviation_table: mined by spacy-sapbert mine-abbreviations' function from the raw text of the "
        "set's train files, NCBI train + dev, BC5CDR train; no test text, no annotation); the abbreviation "
        "detection and the table are outside every system's timing.",
        "recall@k: the candidate stage (a re-ranker's rows show its stage's; it re-orders the top "
        + " / ".join(f"{k} ({key})" for key, k in figures["reranker_k"].items()) + " only). "
        "x name-only: a system's linking mentions/s (everything it encodes or scores, encoder caches emptied) over "
        "name-only's in the same evaluate run, k = 64 (noisy on the shared 2 cores; figures.runs has the rates).",
        "Hybrid weight tuned on the set's train split (benchmarks/hybrid_unseen.py), re-ranker dense weight and "
        "margin tuned on NCBI dev / a held-out tenth of BC5CDR train (benchmarks/reranker_unseen.py; tuned on "
        "the dense lists), the re-ranker trained on NCBI train only (used on BC5CDR too); nothing tuned on the "
        "reported sets."])


SPEED_SYSTEMS = ("name-only (dense)", "hybrid", "name-only + re-ranker", "hybrid + re-ranker")
# cProfile parts of one hybrid + re-ranker pass: (label, file fragment, function)
SPEED_PARTS = (("cross-encoder forward (ONNX Runtime, int8)", "onnxruntime_inference_collection", "run"),
               ("pair tokenisation", "encoding/tokenizer_file.py", "__call__"),
               ("nearest candidate names", "rerank/candidates.py", "nearest_names"),
               ("hybrid candidates (sparse top-k + both scores of every candidate name)", "index/hybrid.py", "gather"),
               ("  of which sparse top-k search", "index/sparse.py", "search"),
               ("  of which sparse scores of the candidate names", "index/sparse.py", "pair_scores"),
               ("  of which dense scores of the candidate names", "index/hybrid.py", "_dense_scores"),
               ("query encoding (name encoder)", "encoding/cached.py", "encode"))


def layers_of(folder: Path) -> int:
    """The transformer layers of a re-ranker folder (its config.json)."""
    import json

    return int(json.loads((folder / "config.json").read_text(encoding="utf8"))["num_hidden_layers"])


def speed_pipelines(kb_dir: Path, index_dir: Path, reranker: Optional[Path], weight: float,
                    also: Sequence[Path] = (), margins: Sequence[float] = (),
                    windows: Sequence[float] = (), precisions: Sequence[str] = ()) -> Dict[str, Any]:
    """The linkers of ``--speed`` sharing one encoder and one index (loaded once): name-only, hybrid
    (``sparse_weight`` = ``weight``, the other hybrid keys at their defaults) and, with a ``reranker`` folder,
    name-only and hybrid each + the re-ranker at the linker's defaults (``reranker_k`` 4, margin 0.05, dense weight
    30); for each folder of ``also``, name-only and hybrid + that re-ranker as well (``"... + re-ranker, N layers"``,
    N from its config); for each of ``margins``, name-only and hybrid + the re-ranker at that ``reranker_margin``
    (``"... + re-ranker, margin M"``), and for each of ``windows`` at that ``reranker_window`` (``"..., window W"``);
    for each of ``precisions`` at that ``reranker_precision`` (``"..., P"``), alone and with each window (``"..., P,
    window W"``); abbreviations not resolved."""
    import spacy

    from spacy_sapbert.rerank.stage import RerankStage

    cfg = {"model": minilm_path(), "pooling": "mean", "max_length": 25, "resolve_abbreviations": False}
    systems = SPEED_SYSTEMS if reranker is not None else SPEED_SYSTEMS[:2]
    weights = dict(zip(SPEED_SYSTEMS, (0.0, weight, 0.0, weight)))
    extra: Dict[str, Path] = {}  # system -> its re-ranker folder
    for folder in also if reranker is not None else ():
        layers = layers_of(folder)
        for name, w in zip(SPEED_SYSTEMS[2:], (0.0, weight)):
            label = f"{name}, {layers} layers"
            if label in weights:
                raise SystemExit(f"--speed-also: two re-rankers of {layers} layers ({folder})")
            extra[label], weights[label] = folder, w
    keys_of: Dict[str, Dict[str, float]] = {}  # system -> its reranker_margin / reranker_window (else the defaults)
    for key, values, word in (("reranker_margin", margins, "margin"), ("reranker_window", windows, "window")):
        for value in values if reranker is not None else ():
            for name, w in zip(SPEED_SYSTEMS[2:], (0.0, weight)):
                label = f"{name}, {word} {value:g}"
                keys_of[label], weights[label] = {key: float(value)}, w
    for precision in precisions if reranker is not None else ():
        for name, w in zip(SPEED_SYSTEMS[2:], (0.0, weight)):
            for window in (None, *windows):
                label = f"{name}, {precision}" + ("" if window is None else f", window {window:g}")
                keys_of[label] = {"reranker_precision": precision,
                                  **({} if window is None else {"reranker_window": float(window)})}
                weights[label] = w
    nlps = {}
    for name in tuple(systems) + tuple(extra) + tuple(keys_of):
        nlp = spacy.blank("en")
        nlp.add_pipe("sapbert_linker", config={**cfg, "sparse_weight": weights[name], **keys_of.get(name, {})})
        nlps[name] = nlp
    first = SPEED_SYSTEMS[3] if reranker is not None else SPEED_SYSTEMS[1]
    loaded = nlps[first].get_pipe("sapbert_linker")
    loaded.initialize(nlp=nlps[first], kb_path=str(kb_dir), index_path=str(index_dir),
                      reranker_path=None if reranker is None else str(reranker), show_progress=False)
    if not hasattr(loaded.index._backend, "_stored_vectors"):  # speed_pass sets how the stored vectors are read
        raise SystemExit(f"--speed-index {index_dir} is not an hnswlib graph (the passes read its stored vectors from "
                         "the file and through hnswlib): build it with `spacy-sapbert build-index --hnsw "
                         "--hnsw-vectors float32 --sparse`")
    stages = {folder: RerankStage(folder) for folder in set(extra.values())}
    by_precision = {loaded.reranker.precision: loaded.reranker} if reranker is not None else {}
    for precision in precisions if reranker is not None else ():
        by_precision.setdefault(precision, RerankStage(reranker, precision=precision))
    for stage in (*stages.values(), *by_precision.values()):
        stage.check(loaded.index.kb, loaded.encoder)
    for name, nlp in nlps.items():
        linker = nlp.get_pipe("sapbert_linker")
        if linker is not loaded:
            linker.set_resources(loaded.encoder, loaded.index, path=str(index_dir))
        if name in extra:
            linker.reranker = stages[extra[name]]  # one re-ranker stage each (one ONNX Runtime session)
        elif name.endswith("+ re-ranker") or name in keys_of:
            linker.reranker = by_precision[linker.cfg["reranker_precision"]]  # one stage (session) a graph
    return nlps


def speed_pass(nlp: Any, docs: Sequence[Tuple[str, List[Tuple[int, int]]]], file_reads: bool,
               batch_size: int = 128) -> Tuple[float, List[Any]]:
    """Seconds of one ``linker.pipe`` over ``docs`` (gold spans set before the clock starts, the linker's caches
    emptied) and every mention's kb_ents. ``file_reads`` False: the index's stored vectors come from hnswlib's
    ``get_items`` (what an index not read from a file does, and every hnsw index did before 2026-11-28)."""
    import spacy

    linker = nlp.get_pipe("sapbert_linker")
    backend = linker.index._backend
    backend._stored = None if file_reads else (backend._source, None)  # (source, None): hnswlib's copy
    backend._stored_vectors()  # the file's reader made (its label map read) before the clock starts
    linker.clear_cache()  # the name encoder's vectors and the re-ranker's logits
    made = []
    for text, spans in docs:
        doc = nlp.make_doc(text)
        found = [doc.char_span(a, b, label="Disease", alignment_mode="expand") for a, b in spans]
        doc.ents = spacy.util.filter_spans([span for span in found if span is not None])
        made.append(doc)
    started = time.perf_counter()
    made = list(linker.pipe(made, batch_size=batch_size))
    seconds = time.perf_counter() - started
    return seconds, [list(ent._.kb_ents) for doc in made for ent in doc.ents]


def pass_counts(calls: Sequence[Tuple[Any, int]]) -> List[int]:
    """``[texts, pairs]`` the cross-encoder read in the recorded ``score_groups`` calls (:func:`scoring_calls`):
    the groups, and their forward rows (a name two candidates share is read once: ``model.group_batches``)."""
    return [sum(len(g) for g, _ in calls), sum(len(set(ns)) for g, _ in calls for _, ns in g)]


def ncbi_reranker(args: Any) -> Path:
    """The NCBI re-ranker folder of a speed run: ``--use ncbi=FOLDER``, else this script's NCBI run."""
    given = dict(item.split("=", 1) for item in args.use)
    return Path(given.get("ncbi") or args.output / run_name("ncbi", args) / "model")


@contextmanager
def scoring_calls(stage: Any) -> Iterator[List[Tuple[Any, int]]]:
    """The ``(groups, batch_size)`` of every ``score_groups`` call of a re-ranker stage's model inside the block
    (none when ``stage`` is None): the method wrapped on the model instance, its own again after the block."""
    calls: List[Tuple[Any, int]] = []
    if stage is None:
        yield calls
        return
    model = stage.model
    real = model.score_groups

    def recording(groups: Any, batch_size: int = 64) -> Any:
        calls.append((groups, batch_size))
        return real(groups, batch_size=batch_size)

    model.score_groups = recording
    try:
        yield calls
    finally:
        del model.score_groups


def speed_profile(nlp: Any, docs: Sequence[Any]) -> List[List[Any]]:
    """Seconds and share of one pass of ``nlp`` (the slowest system) in each of :data:`SPEED_PARTS` (cProfile)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    total = speed_pass(nlp, docs, True)[0]
    prof.disable()
    stats = pstats.Stats(prof).stats  # {(file, line, func): (cc, nc, tt, ct, callers)}
    rows = []
    for label, where, func in SPEED_PARTS:
        seconds = max((ct for (file, _, name), (_, _, _, ct, _) in stats.items() if name == func and where in file),
                      default=0.0)
        rows.append([label, round(seconds, 2), round(100 * seconds / total, 1)])
    return rows + [["the whole pass (profiled)", round(total, 2), 100.0]]


def speed_batching(folder: Path, mentions: Sequence[str], names: Sequence[str], batch_size: int) -> List[List[Any]]:
    """The re-ranker's int8 forward pass over one pass's (mention, name) pairs batched four ways (all but the first
    change scores): seconds, padded tokens, the largest logit change against today's batching (one batch per mention,
    since 2026-11-29; a name two of its candidates share read once, since 2026-12-02), and the distance to the
    PyTorch float32 model's logits."""
    import numpy
    from transformers import AutoTokenizer

    from spacy_sapbert.rerank.model import CrossEncoder, OnnxCrossEncoder, pair_inputs

    enc = OnnxCrossEncoder(folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    lengths = [len(ids) for ids in tokenizer(list(mentions), list(names), truncation=True,
                                             max_length=enc.max_length)["input_ids"]]
    pairs = list(zip(mentions, names))
    first: Dict[Any, int] = {}
    for i, pair in enumerate(pairs):
        first.setdefault(pair, i)
    by_chars = sorted(range(len(pairs)), key=lambda i: (len(mentions[i]) + len(names[i]), i))
    by_tokens = sorted(range(len(pairs)), key=lambda i: (lengths[i], i))
    distinct = sorted(set(first.values()), key=lambda i: (lengths[i], i))
    of_mention: Dict[str, List[int]] = {}  # today: one batch per mention of its distinct pairs
    for i in sorted(set(first.values())):
        of_mention.setdefault(mentions[i], []).append(i)
    plans = {"today: one batch per mention (its distinct pairs)": None,
             "until 2026-11-29: sorted by characters, batches of batch_size": by_chars, "sorted by tokens": by_tokens,
             "sorted by tokens, each distinct pair once": distinct}
    reference = CrossEncoder.from_disk(folder).score(mentions, names, batch_size=batch_size)
    rows, today = [], None
    for label, order in plans.items():
        batches = list(of_mention.values()) if order is None else \
            [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
        logits, padded = numpy.zeros(len(pairs), numpy.float32), 0
        started = time.perf_counter()
        for chunk in batches:
            feed = pair_inputs(tokenizer, [mentions[i] for i in chunk], [names[i] for i in chunk],
                               enc.max_length, enc.inputs, "np")
            feed = {key: numpy.asarray(value, dtype=numpy.int64) for key, value in feed.items()}
            padded += int(feed["input_ids"].size)
            logits[chunk] = enc._sessions.get().run(None, feed)[0]
        seconds = time.perf_counter() - started
        if order is None or order is distinct:  # each pair's logit from its first copy
            logits = logits[[first[pair] for pair in pairs]]
        today = logits if today is None else today
        rows.append([label, round(seconds, 2), padded, round(float(numpy.abs(logits - today).max()), 3),
                     round(float(numpy.abs(logits - reference).mean()), 4),
                     round(float(numpy.corrcoef(logits, reference)[0, 1]), 4)])
    return rows


def speed(args: Any) -> None:
    """``--speed``: mentions/s of name-only, hybrid and each + re-ranker through ``sapbert_linker`` on NCBI test
    (gold spans), each with the index's stored vectors read from its file (today) and through hnswlib (before),
    alternated in one process over ``--rounds`` rounds; medians, ratios to name-only; a cProfile of hybrid +
    re-ranker; whether both reads give the same kb_ents."""
    import json
    import os
    import statistics

    from spacy_sapbert.mentions.datasets import read_pubtator
    from spacy_sapbert.rerank.apply import DEFAULT_RERANK_K, DEFAULT_RERANK_WINDOW
    from spacy_sapbert.rerank.model import DEFAULT_RERANK_PRECISION

    results = Path(__file__).resolve().parent / "results"
    weight = float(json.loads((results / "hybrid_unseen.json").read_text(encoding="utf8"))["figures"]["NCBI-disease test"]["weight"])
    reranker: Optional[Path] = ncbi_reranker(args)
    if args.speed_no_reranker:
        reranker = None
    elif not reranker.is_dir():
        raise SystemExit(f"no re-ranker at {reranker}: train one (this script without --speed), give --use "
                         "ncbi=FOLDER, or time name-only and hybrid alone with --speed-no-reranker")
    nlps = speed_pipelines(args.speed_kb, args.speed_index, reranker, weight, args.speed_also, args.speed_margins,
                           args.speed_windows, args.speed_precisions)
    variants = bool(args.speed_margins or args.speed_windows or args.speed_precisions)  # rows of other settings
    systems = list(nlps)
    profiled = SPEED_SYSTEMS[-1] if reranker is not None else SPEED_SYSTEMS[1]
    docs = [(d.text, [(m.start, m.end) for m in d.mentions]) for d in read_pubtator(NCBI["test"])]
    n = sum(len(spans) for _, spans in docs)
    load = [os.getloadavg()[0]]
    times: Dict[str, List[float]] = {f"{name}|{reads}": [] for name in systems for reads in ("file", "hnswlib")}
    same: Dict[str, Any] = {}
    scored_per_pass: Dict[str, List[int]] = {}  # system -> [mentions re-ranked, pairs scored] in one pass
    for name in systems:  # warm-up, and the two reads' kb_ents side by side
        stage = nlps[name].get_pipe("sapbert_linker").reranker
        with scoring_calls(stage) as calls:
            file_lists = speed_pass(nlps[name], docs, True)[1]
        if stage is not None:
            scored_per_pass[name] = pass_counts(calls)
        lists = {"file": file_lists, "hnswlib": speed_pass(nlps[name], docs, False)[1]}
        ids_equal = [[c for c, _ in a] for a in lists["file"]] == [[c for c, _ in b] for b in lists["hnswlib"]]
        worst = max((abs(x - y) for a, b in zip(lists["file"], lists["hnswlib"]) for (_, x), (_, y) in zip(a, b)),
                    default=0.0)
        same[name] = {"ids_equal": ids_equal, "max_score_diff": worst}
    for r in range(args.rounds):
        for name in systems:
            for reads in (("file", "hnswlib") if r % 2 == 0 else ("hnswlib", "file")):
                times[f"{name}|{reads}"].append(speed_pass(nlps[name], docs, reads == "file")[0])
        load.append(os.getloadavg()[0])
        print("round", r, {k: round(v[-1], 2) for k, v in times.items()}, "load", load[-1], flush=True)
    rate = {k: n / statistics.median(v) for k, v in times.items()}
    rows = []
    for name in systems:
        now, before = rate[f"{name}|file"], rate[f"{name}|hnswlib"]
        rows.append([name, round(now, 1), round(now / rate[f"{systems[0]}|file"], 2), round(before, 1),
                     round(before / rate[f"{systems[0]}|hnswlib"], 2), round(now / before, 2),
                     *scored_per_pass.get(name, [0, 0])])
    with scoring_calls(nlps[profiled].get_pipe("sapbert_linker").reranker) as calls:
        profile = speed_profile(nlps[profiled], docs)
    scored = {"m": [m for g, _ in calls for m, names in g for _ in names],  # the profiled pass's pairs, for the
              "n": [n for g, _ in calls for _, names in g for n in names],  # batching table
              "b": calls[-1][1] if calls else 64}
    load.append(os.getloadavg()[0])
    tables = {"NCBI-disease test through sapbert_linker (gold spans, hnsw index): mentions/s, median of "
              f"{args.rounds} rounds": table(["system", "mentions/s", "x name-only", "mentions/s, hnswlib reads (before)",
                                              "x name-only (before)", "today / before",
                                              "texts re-ranked a pass", "pairs scored a pass"], rows),
              f"where one {profiled} pass spends its time (cProfile, stored vectors read from the file)":
                  table(["part", "seconds", "% of the pass"], profile)}
    if reranker is not None and not variants:  # the batching table: reranker_speed's
        batching = speed_batching(reranker, scored["m"], scored["n"], scored["b"])
        tables[f"the re-ranker's forward pass over those {len(scored['m']):,} pairs batched otherwise (changes "
               "scores)"] = table(["batching", "seconds", "padded tokens", "max |logit - today's|",
                                   "mean |logit - float32|", "correlation with float32"], batching)
    figures = {"mentions": n, "docs": len(docs), "rounds": args.rounds, "sparse_weight": weight,
               "reranker": None if reranker is None else reranker.parent.name,
               "reranker_also": [folder.parent.name for folder in args.speed_also] if reranker is not None else [],
               "reranker_margins": list(args.speed_margins) if reranker is not None else [],
               "reranker_windows": list(args.speed_windows) if reranker is not None else [],
               "reranker_precisions": list(args.speed_precisions) if reranker is not None else [],
               "reranker_trained": None if reranker is None else json.loads(
                   (reranker / "sapbert_reranker.json").read_text(encoding="utf8")).get("trained"),
               "load_average_1min": load,
               "same_kb_ents": same, "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()}}
    print(json.dumps({"tables": tables, "figures": figures}, indent=1))
    if not args.no_write:
        name = args.results if args.results != "reranker_unseen" else \
            "reranker_speed_margins" if variants else "reranker_speed"
        write_results(name, tables, figures=figures,
                      notes=[
            "sapbert_linker.pipe over the 100 NCBI-disease test abstracts with the gold spans set (960 mentions, "
            "abbreviations not resolved), MEDIC 2012, the base all-MiniLM-L6-v2 (mean pooling) over an hnsw index "
            f"with its sparse part (build-index --sparse); hybrid: sparse_weight {weight:g} (tuned on NCBI train, "
            "results hybrid_unseen), sparse_k and candidates at their defaults; "
            + ("re-ranker: the model given with --use ncbi= (figures.reranker: its run folder; "
               "figures.reranker_trained: how it was trained; a pass's cost does not depend on its weights) at the "
               "linker's defaults (reranker_k "
               f"{DEFAULT_RERANK_K}, margin 0.05, dense weight 30, mentions that are a KB name not re-ranked "
               f"(reranker_skip_names, since 2026-12-02), reranker_window {DEFAULT_RERANK_WINDOW:g}, "
               f"reranker_precision {DEFAULT_RERANK_PRECISION} (ONNX Runtime))"
               + ("; rows '..., N layers': the re-rankers given with --speed-also (figures.reranker_also, their "
                  "configs' N transformer layers) at the same defaults" if args.speed_also else "")
               + ("; rows '..., margin M' / '..., window W': the same re-ranker at reranker_margin M "
                  "(--speed-margins) / reranker_window W (--speed-windows; 1: all reranker_k candidates read), the "
                  "other keys at the defaults"
                  + ("; rows '..., P' / '..., P, window W': at reranker_precision P (--speed-precisions; float32: "
                     "the pairs of all mentions batched by length), alone / at reranker_window W"
                     if args.speed_precisions else "") + ". " if variants else ". ")
               if reranker is not None else "no re-ranker in this run (--speed-no-reranker). ")
            + "Texts re-ranked / pairs scored a pass: the distinct mention texts the re-ranker read in one pass "
            "(the linker encodes and ranks each distinct text of a batch once) and their distinct (mention, name) "
            "pairs (a name two candidates share is read once). "
            + "Every pass empties the linker's caches (the name encoder's vectors, the re-ranker's logits); the rates "
            f"are medians over the rounds, the {2 * len(systems)} passes of a round alternated; x name-only: over "
            "name-only read the same way.",
            "hnswlib reads (before): the index's stored name vectors copied through hnswlib's get_items, as every "
            "hnsw index did before 2026-11-28 (and an index never saved still does); today they are read from the "
            "unchanged index file. figures.same_kb_ents: both give the same kb_ents (ids, scores).",
            *(["Batching table: the int8 graph quantizes activations per batch, so a pair's logit depends on its "
               "batch; float32 = the re-ranker's PyTorch model (safetensors) over the same pairs, batches of "
               "batch_size sorted by characters."] if reranker is not None and not variants else []),
            "Shared 2-core machine: figures.load_average_1min (before, after each round, at the end); compare "
            "ratios within this run only."])


def speed_corpus(args: Any) -> None:
    """``--speed-corpus`` (results ``reranker_cache``): name-only + the re-ranker at the linker's defaults over all
    793 NCBI-disease documents (train, dev, test; gold spans) in ``nlp.pipe`` batches of 128 and 16, with the
    re-ranker stage's cache of logits on (the default) and off (``cache_size`` 0): mentions/s, the texts and
    distinct pairs the cross-encoder read in a pass, and whether both give the same kb_ents."""
    import json
    import os
    import statistics

    from spacy_sapbert.mentions.datasets import read_pubtator
    from spacy_sapbert.rerank.apply import DEFAULT_RERANK_K

    reranker = ncbi_reranker(args)
    if not reranker.is_dir():
        raise SystemExit(f"no re-ranker at {reranker}: give --use ncbi=FOLDER")
    nlp = speed_pipelines(args.speed_kb, args.speed_index, reranker, 0.0)["name-only + re-ranker"]
    stage = nlp.get_pipe("sapbert_linker").reranker
    size = stage.cache_size
    docs = [(d.text, [(m.start, m.end) for m in d.mentions]) for split in ("train", "dev", "test")
            for d in read_pubtator(NCBI[split])]
    n = sum(len(spans) for _, spans in docs)
    systems = [(batch, cache) for batch in (128, 16) for cache in (True, False)]
    times: Dict[Tuple[int, bool], List[float]] = {s: [] for s in systems}
    counts: Dict[Tuple[int, bool], List[int]] = {}
    lists: Dict[Tuple[int, bool], List[Any]] = {}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for batch, cache in (systems if r % 2 == 0 else systems[::-1]):
            stage.cache_size = size if cache else 0
            with scoring_calls(stage) as calls:
                seconds, found = speed_pass(nlp, docs, True, batch_size=batch)
            times[(batch, cache)].append(seconds)
            counts[(batch, cache)] = pass_counts(calls)
            lists[(batch, cache)] = found
        load.append(os.getloadavg()[0])
        print("round", r, {f"{b}|{c}": round(v[-1], 2) for (b, c), v in times.items()}, "load", load[-1], flush=True)
    stage.cache_size = size
    rows = []
    for batch, cache in systems:
        rate = n / statistics.median(times[(batch, cache)])
        off = n / statistics.median(times[(batch, False)])
        rows.append([batch, "on" if cache else "off (cache_size 0)", round(rate, 1), round(rate / off, 2),
                     *counts[(batch, cache)], lists[(batch, cache)] == lists[(batch, False)]])
    tables = {f"NCBI-disease train + dev + test through sapbert_linker + re-ranker (gold spans, {n:,} mentions): "
              f"the re-ranker's cache of logits, median of {args.rounds} rounds":
              table(["docs per nlp.pipe batch", "re-ranker cache", "mentions/s", "x cache off",
                     "texts re-ranked a pass", "pairs scored a pass", "same kb_ents as cache off"], rows)}
    figures = {"mentions": n, "docs": len(docs), "rounds": args.rounds, "cache_size": size,
               "reranker": reranker.parent.name, "load_average_1min": load,
               "seconds": {f"{b}|{'on' if c else 'off'}": [round(x, 3) for x in v] for (b, c), v in times.items()}}
    print(json.dumps({"tables": tables, "figures": figures}, indent=1))
    if not args.no_write:
        write_results("reranker_cache", tables, figures=figures, notes=[
            "sapbert_linker.pipe over the 793 NCBI-disease abstracts (train, dev, test) with the gold spans set "
            "(abbreviations not resolved), MEDIC 2012, the base all-MiniLM-L6-v2 (mean pooling) over an hnsw index; "
            f"the re-ranker given with --use ncbi= at the linker's defaults (reranker_k {DEFAULT_RERANK_K}, margin "
            "0.05, dense weight 30, KB names not re-ranked, int8 ONNX Runtime). Cache on: the stage remembers the "
            f"logits of the last {size:,} groups (a mention and its candidates' names) it scored, so a text of a "
            "later batch is not scored again; off: cache_size 0. Every pass starts with both caches of the linker empty; the name "
            "encoder's cache is on in both. Texts / pairs: what the cross-encoder read in one pass.",
            "Shared 2-core machine: figures.load_average_1min; compare ratios within this run only."])


def ablation_runs(args: Any, model: str) -> Dict[str, Any]:
    """What ``--mention-like N`` or ``--layers N [N ...]`` compares: the results name, the first run's label, the
    other runs (the setting each changes, its label), the tables' words and a note on the other runs."""
    if args.mention_like:
        n = args.mention_like
        return {"results": "reranker_mention_like", "figures": {"mention_like": n}, "base": "annotated + KB synonyms",
                "runs": [({"mention_like": n}, f"+ mention-like variants (at most {n} each)")],
                "title": "re-ranker trained with and without mention-like variants",
                "note": f"the second also on up to {n} mention-like variants (word order, number, a dropped generic "
                        "head, punctuation, a typo for a tenth) of each of those mentions, stopped after the first's "
                        "number of steps (the same compute; figures.<set>.<run>.groups)"}
    from spacy_sapbert.rerank.model import base_config

    have = base_config(model).num_hidden_layers
    for n in args.layers:
        base_config(model, n)  # more layers than the base has: refused before any training
    ns = " or ".join(str(n) for n in args.layers)
    lr = getattr(args, "layers_lr", None)  # the shallower runs' learning rate (default: --lr, the first run's)
    distill = getattr(args, "distill", None) or 0.0  # the shallower runs distilled from the first, with this weight
    at = (f", lr {lr:g}" if lr else "") + (f", distilled ({distill:g})" if distill else "")
    return {"results": "reranker_layers" + (f"_lr{lr:g}" if lr else "") + (f"_distill{distill:g}" if distill else ""),
            "figures": {"layers": list(args.layers), "layers_lr": lr or args.lr, "distill": distill},
            "base": f"all {have} layers",
            "runs": [({"layers": n, **({"lr": lr} if lr else {}), **({"distill": distill} if distill else {})},
                      f"first {n} of {have} layers{at}") for n in args.layers],
            "title": f"re-ranker from all the base's layers and from its first {ns}{at}",
            "note": f"the others start from the base's first {ns} transformer layers only (train-reranker --layers)"
                    + (f" at lr {lr:g}" if lr else "")
                    + (f", distilled from the first (train-reranker --teacher FIRST --distill {distill:g}: loss = "
                       f"{1 - distill:g} x the gold name's cross-entropy + {distill:g} x the KL divergence from the "
                       "first's softmax over each group)" if distill else "")
                    + ", on the same groups for the same steps (the linker's speed with each: --speed --speed-also)"}


def ablation(args: Any, kb: Any, index: Any, encoder: Any, model: str) -> None:
    """``--mention-like N`` (results ``reranker_mention_like``) or ``--layers N [N ...]`` (results
    ``reranker_layers``): each set's re-ranker trained with the same settings, seed and number of steps, on the
    annotated mentions + KB synonyms (pseudo-mentions), and again with up to N mention-like variants of each
    (``train-reranker --mention-like N``) or from the base's first N layers (``train-reranker --layers N``, once per
    N); all evaluated like the sets' tables (dense weight and margin tuned for each on the same held-out data)."""
    import json

    runs = ablation_runs(args, model)
    rerank_k = (args.rerank_k or [args.k])[0]
    tables: Dict[str, Any] = {}
    figures: Dict[str, Any] = {**runs["figures"], "reranker_k": rerank_k}
    for key in args.sets:
        title, train_path, tune_path, test_path, types = SETS[key]
        train_docs, tune_docs = split_docs(key, train_path, tune_path, types)
        source = args.trained_on or key  # the set whose train split the re-rankers learn from
        if source != key:
            train_docs, _ = split_docs(source, *[SETS[source][i] for i in (1, 2, 4)])
        base, base_summary = train(source, train_docs, kb, index, encoder, model, args)
        steps = json.loads((base / "sapbert_reranker.json").read_text(encoding="utf8"))["trained"]["steps"]
        folders = [(runs["base"], base, base_summary)]
        for setting, label in runs["runs"]:
            teacher = {"teacher": base} if setting.get("distill") else {}  # distilled from the first run's model
            folders.append((label, *train(source, train_docs, kb, index, encoder, model, args, max_steps=steps,
                                          **setting, **teacher)))
        rows: List[List[Any]] = []
        figures[key] = {"tuned_on": "NCBI dev" if tune_path else f"every {HOLDOUT_EVERY}th BC5CDR train document",
                        "reranker_precision": args.reranker_precision,
                        "trained_on": f"{source} train split"}
        for label, folder, summary in folders:
            set_rows, chosen = evaluate_set(key, kb, index, encoder, folder, tune_docs, test_path, types, args,
                                            rerank_k)
            rows += set_rows[:1] if not rows else []
            rows += [[f"{label}: {r[0].split(': ', 1)[-1]}"] + r[1:] for r in set_rows[1:]]
            groups = json.loads((folder.parent / "examples.json").read_text(encoding="utf8"))
            figures[key][label] = {"run": folder.parent.name, **{k: v for k, v in chosen.items() if k != "grid"},
                                   "groups": groups["n_groups"], "group_settings": groups["settings"],
                                   **({"training": summary} if summary else {})}
        trained = "" if source == key else f", trained on {SETS[source][0].split(' ')[0]} train"
        tables[f"{title}: {runs['title']} (top {rerank_k} re-ranked{trained})"] = table(COLUMNS, rows)
        for r in rows:
            print(title, r)
    if args.no_write:
        print(json.dumps({"tables": tables, "figures": figures}, indent=1))
        return
    write_results(runs["results"], tables, figures=figures, notes=[
        "strict acc@1 in %; columns as in reranker_unseen (classes after normalisation; neither = the refined subset; "
        "recall@k of the dense stage; mentions/s of dense + re-ranking, x name-only its ratio to the dense stage "
        "in the same run, noisy on the shared 2 cores).",
        f"Both re-rankers: base MiniLM, {args.epochs} epoch(s) of {args.batch_mentions} groups of {args.k} on the "
        f"annotated mentions of the train split and {args.pseudo_mentions} KB synonyms as pseudo-mentions, lr "
        f"{args.lr:g}, seed 0 (figures.<set>.trained_on: the set's own train split, or --trained-on's); "
        + runs["note"] + ". Dense weight and margin tuned for each on the held-out data (NCBI dev; every 10th BC5CDR "
        "train document), never the reported set."])


def main() -> None:
    from spacy_sapbert.rerank.model import DEFAULT_RERANK_PRECISION, PRECISION_FILES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=["ncbi", "bc5cdr"])
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=0, help="training steps (0: the epochs decide)")
    parser.add_argument("--pseudo-mentions", type=int, default=1000)
    parser.add_argument("--batch-mentions", type=int, default=8)
    parser.add_argument("--lr", type=float, default=4e-5)
    parser.add_argument("--threads", type=int, default=2, help="torch and ONNX Runtime threads")
    parser.add_argument("--max-margin", type=float, default=1.0,
                        help="score only mentions whose best two dense scores lie within this (1: every mention)")
    parser.add_argument("--rerank-k", type=int, nargs="+", default=None, metavar="K",
                        help="candidates re-ranked at evaluation, the linker's reranker_k (default: --k); the first "
                             "fills each set's table, all of them the table of re-ranked candidates")
    parser.add_argument("--train-only", action="store_true")
    parser.add_argument("--mention-like", type=int, default=0, metavar="N",
                        help="the ablation of train-reranker --mention-like N (results reranker_mention_like): each "
                             "set's re-ranker trained without and with up to N mention-like variants per mention")
    parser.add_argument("--layers", type=int, nargs="+", default=[], metavar="N",
                        help="the ablation of train-reranker --layers N (results reranker_layers): each set's "
                             "re-ranker trained from all the base's layers and from its first N, for each N")
    parser.add_argument("--layers-lr", type=float, default=None, metavar="LR",
                        help="--layers: the shallower re-rankers' learning rate (default: --lr; results "
                             "reranker_layers_lrLR)")
    parser.add_argument("--distill", type=float, default=None, metavar="W",
                        help="--layers: distil each shallower re-ranker from the full-depth one with this weight of "
                             "its soft targets (train-reranker --teacher --distill; results ..._distillW)")
    parser.add_argument("--trained-on", choices=sorted(SETS), default=None,
                        help="--mention-like / --layers: every set's re-rankers are the ones trained on this set's "
                             "train split (default: each set's own)")
    parser.add_argument("--use", nargs="*", default=[], metavar="SET=FOLDER",
                        help="evaluate a re-ranker trained before (its model folder) instead of training one")
    parser.add_argument("--output", type=Path, default=OUTPUT / "reranker_unseen")
    parser.add_argument("--cache", type=Path, default=None, help="name-vector cache folder (default: under --output)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--results", default="reranker_unseen",
                        help="the results file of a run that trains or is given re-rankers (e.g. reranker_margins for "
                             "a run with other re-rankers than the published table's), or of a --speed run (default "
                             "reranker_speed / reranker_speed_margins)")
    parser.add_argument("--speed", action="store_true",
                        help="mentions/s of name-only, hybrid and each + the NCBI re-ranker through the linker on "
                             "NCBI test (results reranker_speed); needs --speed-kb and --speed-index")
    parser.add_argument("--speed-kb", type=Path, default=None, help="--speed: the MEDIC KB folder (build-kb)")
    parser.add_argument("--speed-index", type=Path, default=None,
                        help="--speed: its index folder, an hnswlib graph with the sparse part (build-index --hnsw "
                             "--hnsw-vectors float32 --sparse)")
    parser.add_argument("--rounds", type=int, default=5, help="--speed: timed rounds")
    parser.add_argument("--speed-no-reranker", action="store_true",
                        help="--speed: time name-only and hybrid only (no re-ranker trained here)")
    parser.add_argument("--speed-also", type=Path, nargs="+", default=[], metavar="FOLDER",
                        help="--speed: also time name-only and hybrid + each of these re-rankers (e.g. ones trained "
                             "with --layers), alternated with the others")
    parser.add_argument("--speed-margins", type=float, nargs="+", default=[], metavar="M",
                        help="--speed: also time name-only and hybrid + the re-ranker at each of these "
                             "reranker_margin values (results reranker_speed_margins)")
    parser.add_argument("--speed-windows", type=float, nargs="+", default=[], metavar="W",
                        help="--speed: also time name-only and hybrid + the re-ranker at each of these "
                             "reranker_window values (1: every one of the top reranker_k; results "
                             "reranker_speed_margins unless --results)")
    parser.add_argument("--speed-precisions", nargs="+", default=[], choices=tuple(PRECISION_FILES), metavar="P",
                        help="--speed: also time name-only and hybrid + the re-ranker at each of these "
                             "reranker_precision values, alone and at each --speed-windows value")
    parser.add_argument("--reranker-precision", default=DEFAULT_RERANK_PRECISION, choices=tuple(PRECISION_FILES),
                        help="the re-ranker graph the accuracy tables score with (the linker's reranker_precision; "
                             "float32: the same logit for a pair in any batch)")
    parser.add_argument("--speed-corpus", action="store_true",
                        help="the re-ranker's cache of logits on and off over all NCBI documents (results "
                             "reranker_cache); needs --speed-kb and --speed-index")
    parser.add_argument("--together", action="store_true",
                        help="the levers together through evaluate (results reranker_together): the NCBI re-ranker "
                             "(--use ncbi=FOLDER, else this script's NCBI run) on both sets")
    args = parser.parse_args()
    if args.mention_like and args.layers:
        parser.error("--mention-like and --layers are two ablations: run them one at a time")
    if args.layers_lr is not None and not args.layers:
        parser.error("--layers-lr is the learning rate of --layers' runs: give --layers N")
    if args.distill is not None and (not args.layers or not 0 < args.distill <= 1):
        parser.error("--distill W distils --layers' runs from the full-depth one: give --layers N and W in (0, 1]")
    if args.together:
        together(args)
        return
    if args.speed or args.speed_corpus:
        if args.speed_kb is None or args.speed_index is None:
            parser.error("--speed and --speed-corpus need --speed-kb and --speed-index")
        (speed_corpus if args.speed_corpus else speed)(args)
        return

    import torch

    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.cache import VectorCache, encoder_key
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb.build import build_kb

    torch.set_num_threads(args.threads)
    model = minilm_path()
    kb = build_kb([(MEDIC, "medic")])
    encoder = Encoder.load(model, pooling="mean", max_length=25, device="cpu")
    cache = VectorCache(args.cache or args.output / "cache", encoder_key(encoder), dim=encoder.dim)
    vectors = cache.get(encoder, list(kb.names), batch_size=256, show_progress=True)
    index = ConceptIndex.from_vectors(kb, vectors, encoder, kind="exact")
    if args.mention_like or args.layers:
        ablation(args, kb, index, encoder, model)
        return
    tables: Dict[str, Any] = {}
    figures: Dict[str, Any] = {}
    sweep: List[List[Any]] = []
    for key in args.sets:
        title, train_path, tune_path, test_path, types = SETS[key]
        train_docs, tune_docs = split_docs(key, train_path, tune_path, types)
        folder, summary = train(key, train_docs, kb, index, encoder, model, args)
        if args.train_only:
            print(key, summary)
            continue
        rerank_ks = args.rerank_k or [args.k]
        rows, chosen = evaluate_set(key, kb, index, encoder, folder, tune_docs, test_path, types, args, rerank_ks[0])
        for rk in rerank_ks if len(rerank_ks) > 1 else []:
            k_rows, k_chosen = (rows, chosen) if rk == rerank_ks[0] else \
                evaluate_set(key, kb, index, encoder, folder, tune_docs, test_path, types, args, rk)
            sweep.append(sweep_row(title, rk, k_rows, k_chosen))
        given = any(item.split("=", 1)[0] == key for item in args.use)
        tables[f"{title} (re-ranker {'given with --use' if given else 'trained on its train split'})"] = \
            table(COLUMNS, rows)
        import json

        trained = json.loads((folder / "sapbert_reranker.json").read_text(encoding="utf8")).get("trained")
        figures[key] = {"tuned_on": "NCBI dev" if tune_path else f"every {HOLDOUT_EVERY}th BC5CDR train document",
                        "reranker_precision": args.reranker_precision,
                        **chosen, "reranker_trained": trained, **({"training": summary} if summary else {})}
        for r in rows:
            print(title, r)
        print(key, {k: v for k, v in chosen.items() if k != "grid"})
        tables[f"{title}: reranker_margin at the linker's dense weight (top {rerank_ks[0]})"] = \
            table(MARGIN_COLUMNS, chosen["margins"])
        tables[f"{title}: which close calls are re-ranked, at the linker's dense weight (top {rerank_ks[0]})"] = \
            table(TRIGGER_COLUMNS, chosen["triggers"])
    if sweep:
        tables["re-ranked candidates (reranker_k): held-out tuning data and the reported set"] = \
            table(SWEEP_COLUMNS, sweep)
        for r in sweep:
            print(r)
    if not args.no_write and not args.train_only:
        write_results(args.results, tables, figures=figures, notes=[
            "strict acc@1 in %; classes after normalisation (NFKC, lowercase, whitespace folded); unseen in train = "
            "not a train mention; neither = the refined subset; recall@k of the dense stage; mentions/s of dense + "
            "re-ranking with everything each encodes or scores, x name-only = its ratio to the dense stage alone "
            "in the same run (noisy on the shared 2 cores)",
            (f"re-ranker: base MiniLM, {args.max_steps or args.epochs} {'steps' if args.max_steps else 'epoch(s)'} of "
             f"{args.batch_mentions} groups of {args.k}, {args.pseudo_mentions} KB synonyms as pseudo-mentions, lr "
             f"{args.lr:g}" if not args.use else "re-rankers given with --use (trained before; how: figures.<set>."
             "reranker_trained)") + f"; it re-orders the top {(args.rerank_k or [args.k])[0]} (the sets' tables), "
            + ("int8 ONNX Runtime, each mention's pairs a batch of their own" if args.reranker_precision == "int8"
               else "its float32 graph in ONNX Runtime (reranker_precision float32: the same logit for a pair in any "
                    "batch, so each window's logits are those of all the candidates, cut)")
            + "; dense weight and margin tuned for overall acc@1 on the held-out data (never the "
            "reported set)"])


if __name__ == "__main__":
    main()
