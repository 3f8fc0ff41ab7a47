"""HPO cross-lingual linking: translated HPO names (fr, es, pt, de, it) linked to English HPO names.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/hpo_crosslingual.py [--train-minutes 22] [--quick]

Data: ``../shared/data/hpo/hp.obo`` (English names, the dictionary) and the HPO translation project's
Babelon files in ``../shared/data/hpo_translations`` (fr, es, pt: OFFICIAL labels, fr also its OFFICIAL
synonyms; de, it: OFFICIAL and CANDIDATE labels, mostly machine translations, de also its synonyms).

A seeded sample of HPO terms (--concepts, default 5,000 of 19,034: the CPU budget), split by concept,
seeded (seed 0): 70% train, 10% dev, 20% test. The queries are the
translated names of the *test* concepts; they are held out of the dictionary, which holds every English
name plus the translated names of the train and dev concepts (one KB, one index per encoder). Settings,
both searched on the same index through the language restriction (``ConceptIndex.search(languages=)``):

- cross-lingual: a mention in language L, only the English names searched (``languages=["en"]``);
- monolingual: the names in L and English searched (``languages=[L, "en"]``): the other concepts'
  names in L compete with the English names of the right one.

Systems, side by side: exact match and char-3gram tf-idf (``evaluation.baselines``) over the same
names, the offline all-MiniLM-L6-v2 (mean pooling, max_length 25, exact search) and the same MiniLM
after cross-lingual self-alignment (``pretrain`` with ``pairs.cross_lingual = true``) on the pairs of
the *train* concepts only (CPU, 2 threads, 1 epoch, at most ``--train-minutes`` of training, pairs
capped per concept). Strict acc@1/@5 (a prediction is one concept; ties by concept id). The dev split
is not used (no tuning). KBs, indexes and the trained model are cached in
benchmarks/output/hpo_crosslingual: a rerun resumes. Results: benchmarks/results/hpo_crosslingual.json.
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

import numpy as np

from common import DATA, OUTPUT, minilm_path
from results_io import portable_command, table, write_results

from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.evaluation.baselines import Dictionary, ExactMatch, TfidfCharNgrams
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.kb import Concept, KnowledgeBase, normalize_name, read_obo
from spacy_sapbert.kb.readers import read_babelon

OUT = OUTPUT / "hpo_crosslingual"
LANGS = ("fr", "es", "pt", "de", "it")
BOTH = ("OFFICIAL", "CANDIDATE")
FILES: Dict[str, List[Tuple[str, Tuple[str, ...]]]] = {
    "fr": [("hp-fr.babelon.tsv", ("OFFICIAL",)), ("hp-fr.synonyms.tsv", ("OFFICIAL",))],
    "es": [("hp-es.babelon.tsv", ("OFFICIAL",))],
    "pt": [("hp-pt.babelon.tsv", ("OFFICIAL",))],
    "de": [("hp-de.babelon.tsv", BOTH), ("hp-de.synonyms.tsv", BOTH)],
    "it": [("hp-it.babelon.tsv", BOTH)],
}
SEED = 0
KS = (1, 5)


def split_ids(ids: Sequence[str], seed: int = SEED) -> Dict[str, str]:
    """concept id -> train / dev / test (70 / 10 / 20 %, seeded permutation of the sorted ids)."""
    order = np.random.default_rng(seed).permutation(len(ids))
    n_train, n_dev = int(0.7 * len(ids)), int(0.1 * len(ids))
    parts = {}
    for rank, i in enumerate(order.tolist()):
        parts[ids[i]] = "train" if rank < n_train else "dev" if rank < n_train + n_dev else "test"
    return parts


def translations(en_kb: KnowledgeBase) -> Dict[str, Dict[str, List[str]]]:
    """language -> concept id (resolved in the English KB) -> translated names, in file order."""
    out: Dict[str, Dict[str, List[str]]] = {}
    for lang, files in FILES.items():
        by_id = out.setdefault(lang, {})
        for name, statuses in files:
            for c in read_babelon(DATA / "hpo_translations" / name, statuses=statuses):
                cid = en_kb.resolve_id(c.concept_id)
                if cid is not None:
                    names = by_id.setdefault(cid, [])
                    names.extend(n for n in c.names() if n not in names)
    return out


def build_kb(english: Sequence[Concept], trans: Dict[str, Dict[str, List[str]]], keep, path: Path, *,
             all_english: bool) -> KnowledgeBase:
    """English concepts (all, or those ``keep`` accepts) + the translations of the concepts ``keep``
    accepts, every name tagged with its language; cached."""
    if (path / "kb.json").is_file():
        return KnowledgeBase.from_disk(path)
    concepts = [c for c in english if all_english or keep(c.concept_id)]
    for lang, by_id in trans.items():
        for cid, names in by_id.items():
            if keep(cid):
                concepts.append(Concept(concept_id=cid, canonical_name=names[0], aliases=tuple(names[1:]),
                                        languages=((lang,),) * len(names)))
    kb = KnowledgeBase.from_concepts(concepts, source=path.name)
    kb.to_disk(path, overwrite=True)
    return KnowledgeBase.from_disk(path)


def queries(trans: Dict[str, Dict[str, List[str]]], parts: Dict[str, str], split: str, limit: int = 0
            ) -> Dict[str, List[Tuple[str, str]]]:
    """language -> [(normalised translated name, gold id)] of the concepts of ``split`` (deduplicated)."""
    out = {}
    for lang, by_id in trans.items():
        items = sorted({(normalize_name(n), cid) for cid, names in by_id.items() if parts.get(cid) == split
                        for n in names if normalize_name(n)})
        if limit:
            items = [items[i] for i in np.random.default_rng(SEED).permutation(len(items))[:limit].tolist()]
        out[lang] = items
    return out


def accuracy(ranked: Sequence[Sequence[str]], golds: Sequence[str]) -> Dict[str, float]:
    """Strict acc@k: the gold concept among the first k concepts."""
    n = max(1, len(golds))
    return {f"acc@{k}": round(sum(g in list(r)[:k] for r, g in zip(ranked, golds)) / n, 4) for k in KS}


def dictionary(kb: KnowledgeBase, langs: Sequence[str]) -> Dictionary:
    """The KB's name rows in ``langs`` (the language restriction's mask) as a baseline Dictionary."""
    mask = kb.row_language_mask(langs)
    ptr, idx = kb.row_concept_csr()
    ids = kb.concept_ids
    rows = np.flatnonzero(mask).tolist()
    return Dictionary([kb.names[r] for r in rows], [tuple(ids[int(j)] for j in idx[ptr[r]:ptr[r + 1]]) for r in rows])


def load_index(kb: KnowledgeBase, enc: Encoder, path: Path) -> ConceptIndex:
    if (path / "index_meta.json").is_file():
        return ConceptIndex.from_disk(path, kb)
    index = ConceptIndex.build(kb, enc, kind="exact", batch_size=128, work_dir=path.with_name(path.name + ".work"))
    index.to_disk(path)
    return index


def dense_ranked(index: ConceptIndex, vectors: np.ndarray, langs: Sequence[str]) -> List[List[str]]:
    return [[c for c, _ in r] for r in index.search(vectors, max(KS), languages=list(langs))]


ALIGNED = "MiniLM cross-lingual aligned"


def aligned_name(epochs: int) -> str:
    return "aligned" if epochs == 1 else f"aligned_{epochs}ep"


def align(train_kb: KnowledgeBase, base: str, args, epochs: int = 1) -> Tuple[Path, Dict[str, Any]]:
    """Cross-lingual self-alignment of the base on the train concepts' translation pairs (resumes). A run of
    ``epochs`` > 1 starts from a copy of the ``epochs - 1`` run's folder and continues it (same pairs, same
    order), so every epoch count's model is kept and reported."""
    from spacy_sapbert.training.config import load_config
    from spacy_sapbert.training.run import pretrain

    out = OUT / aligned_name(epochs)
    if epochs > 1 and not (out / "run.json").is_file():
        shutil.copytree(OUT / aligned_name(epochs - 1), out, ignore=shutil.ignore_patterns("model", "train_info.json"))
    config = load_config(overrides={
        "model.pooling": "mean", "model.max_length": 25,
        "pairs.cross_lingual": True, "pairs.max_pairs_per_concept": args.pairs_per_concept, "pairs.seed": SEED,
        "training.batch_size": args.batch_size, "training.epochs": epochs, "training.max_minutes": args.train_minutes,
        "training.lr": args.lr, "training.device": "cpu", "training.checkpoint_every": 100,
        "training.seed": SEED, "training.log_every": 20,
    })
    info_file = out / "train_info.json"
    if not ((out / "model" / "config.json").is_file() and info_file.is_file() and not args.resume_training):
        result = pretrain(train_kb, base, out, config=config, resume=(out / "run.json").is_file())
        for old in (f"{aligned_name(epochs)}_index", f"{aligned_name(epochs)}_index.work"):  # a new model: encode again
            shutil.rmtree(OUT / old, ignore_errors=True)
        from spacy_sapbert.training.pairs import PairSet

        info_file.write_text(json.dumps({
            "steps": result.steps, "pairs_seen": result.pairs_seen, "train_seconds": round(result.train_seconds, 1),
            "final_loss": result.final_loss, "pairs": len(PairSet(out / "pairs"))}), encoding="utf8")
    info = json.loads(info_file.read_text(encoding="utf8"))
    info.update(config=config.to_dict())
    return out / "model", info


def recorded_command(argv: Sequence[str]) -> str:
    """This run's command as the results file records it: ``OMP_NUM_THREADS`` (the torch threads) when set,
    then :func:`results_io.portable_command`."""
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + portable_command(argv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concepts", type=int, default=5000,
                        help="seeded sample of HPO terms in the benchmark (0: all 19k; CPU budget)")
    parser.add_argument("--train-minutes", type=float, default=24.0)
    parser.add_argument("--pairs-per-concept", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--epochs", type=int, default=1,
                        help="also train and report the aligned model after 2 .. EPOCHS epochs (each continues the last)")
    parser.add_argument("--resume-training", action="store_true",
                        help="continue the cached training run (e.g. with a larger --train-minutes)")
    parser.add_argument("--only-base", action="store_true", help="build the KBs and the base index, then stop "
                        "(run beside the training to use a second process)")
    parser.add_argument("--quick", action="store_true", help="200 queries per language (smoke run)")
    parser.add_argument("--skip-aligned", action="store_true")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    english = list(read_obo(DATA / "hpo" / "hp.obo", language="en"))
    en_kb = KnowledgeBase.from_concepts(english)
    ids = list(en_kb.concept_ids)
    if args.concepts and args.concepts < len(ids):
        ids = sorted(ids[i] for i in np.random.default_rng(SEED).permutation(len(ids))[:args.concepts].tolist())
        english = [c for c in english if c.concept_id in set(ids)]
    parts = split_ids(ids)
    trans = {lang: {cid: names for cid, names in by_id.items() if cid in parts}
             for lang, by_id in translations(en_kb).items()}
    dict_kb = build_kb(english, trans, lambda cid: parts[cid] != "test", OUT / "dict_kb", all_english=True)
    train_kb = build_kb(english, trans, lambda cid: parts[cid] == "train", OUT / "train_kb",
                        all_english=False)
    test = queries(trans, parts, "test", limit=200 if args.quick else 0)
    counts = {"hpo_terms_sampled": len(ids),
              "concepts": {p: sum(v == p for v in parts.values()) for p in ("train", "dev", "test")},
              "dictionary_names": dict_kb.language_counts(), "train_kb_names": train_kb.language_counts(),
              "test_queries": {lang: len(q) for lang, q in test.items()}}
    print(counts, flush=True)
    base_path = minilm_path()
    models = [("MiniLM base", base_path, OUT / "base_index")]
    if args.only_base:
        load_index(dict_kb, Encoder.load(base_path, pooling="mean", max_length=25, device="cpu", precision="fp32"),
                   OUT / "base_index")
        return
    train_info: Dict[str, Any] = {}
    if not args.skip_aligned:  # first: the slowest step, and the one a rerun most likely resumes
        for epochs in range(1, args.epochs + 1):
            aligned_path, info = align(train_kb, base_path, args, epochs)
            label = ALIGNED if epochs == 1 else f"{ALIGNED}, {epochs} epochs"
            train_info[label] = info
            models.append((label, str(aligned_path), OUT / f"{aligned_name(epochs)}_index"))

    settings = {"cross-lingual": lambda lang: ["en"], "monolingual": lambda lang: [lang, "en"]}
    ranked: Dict[Tuple[str, str, str], List[List[str]]] = {}
    for setting, langs_of in settings.items():
        for lang in LANGS:
            texts = [t for t, _ in test[lang]]
            d = dictionary(dict_kb, langs_of(lang))
            for system in (ExactMatch(d), TfidfCharNgrams(d)):
                ranked[(system.name, setting, lang)] = [[c for c, _ in r.concepts] for r in system.rank(texts, max(KS))]
    for label, path, index_dir in models:
        enc = Encoder.load(path, pooling="mean", max_length=25, device="cpu", precision="fp32")
        index = load_index(dict_kb, enc, index_dir)
        for lang in LANGS:
            vectors = enc.encode([t for t, _ in test[lang]], batch_size=128)
            for setting, langs_of in settings.items():
                ranked[(label, setting, lang)] = dense_ranked(index, vectors, langs_of(lang))

    systems = list(dict.fromkeys(s for s, _, _ in ranked))
    scores = {f"{s} | {setting} | {lang}": accuracy(ranked[(s, setting, lang)], [g for _, g in test[lang]])
              for (s, setting, lang) in ranked}
    tables = {}
    for setting in settings:
        rows = []
        for s in systems:
            row: List[Any] = [s]
            for lang in LANGS:
                acc = scores[f"{s} | {setting} | {lang}"]
                row += [acc["acc@1"], acc["acc@5"]]
            rows.append(row)
        tables[f"{setting}, test concepts, strict"] = table(
            ["system"] + [f"{lang} acc@{k}" for lang in LANGS for k in KS], rows)
        print(setting, rows, flush=True)
    fr_es = {lang: {s: scores[f"{s} | cross-lingual | {lang}"]["acc@1"] for s in systems} for lang in ("fr", "es")}
    baseline = {lang: max(v["char-3gram tf-idf"], v["MiniLM base"]) for lang, v in fr_es.items()}
    target = {label: {lang: round(fr_es[lang][label] - baseline[lang], 4) for lang in fr_es} for label in train_info}
    trained = [f"{label}: {i.get('steps')} steps, {i.get('pairs_seen')} of {i.get('pairs')} pairs, "
               f"{i.get('train_seconds')} s of training" for label, i in train_info.items()]
    write_results("hpo_crosslingual", tables, command=recorded_command(sys.argv), notes=["Shared 2-core machine (other engineers' jobs ran at the same time): timings are indicative.",
                  "Queries: the translated names of the test concepts (held out of the dictionary); strict acc@k.",
                  "Aligned models: all-MiniLM-L6-v2 (mean pooling, max_length 25) trained on cross-lingual "
                  f"pairs of the train concepts, at most {args.pairs_per_concept} pairs per concept, batch "
                  f"{args.batch_size} pairs, lr {args.lr}, --train-minutes {args.train_minutes} per run; every epoch "
                  "count up to --epochs is reported (each run continues the one before; nothing chosen on test): "
                  + "; ".join(trained) + ".",
                  f"A seeded sample of {len(ids)} HPO terms (of 19,034), to fit the encodings and the training in "
                  "the CPU budget of a shared machine; all systems rank the same names."],
                  figures={"counts": counts, "scores": scores, "training": train_info,
                           "aligned_minus_best_baseline_acc1_crosslingual": target,
                           "seconds": round(time.perf_counter() - t0, 1)})


if __name__ == "__main__":
    main()
