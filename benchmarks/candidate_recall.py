"""The candidate stage on mentions nobody annotated: recall@k and acc@1 of each lever, and why gold is missed.

Its levers one by one and together; NCBI-disease test and BC5CDR-disease dev, MEDIC 2012, the base
all-MiniLM-L6-v2 (mean pooling), strict.

Rows (every hybrid row at the weight ``w`` benchmarks/hybrid_unseen.py tuned on the corpus's train set, read
from its results file):
dense (name-only), sparse only, hybrid with ``candidates = "score"`` (the top 64 of the union by final
score: the linker before this benchmark), hybrid with ``candidates = "interleave"`` (the 64 picked by round
robin over the dense and sparse lists, then ordered by score), each query-variant kind alone on top of it
(``query_variants``), all kinds, abbreviations resolved (the definitions the document makes, the long form
replacing the short one, as the linker's ``resolve_abbreviations``; also with scispaCy's rules alone, the
ablation of spacy_sapbert.mentions.abbreviations' additions), and every lever together.
Mentions "as written" unless the row says "resolved"; mention classes always on the text as written.

The miss table sorts the mentions whose gold concept is not in a system's 64 candidates by the first
reason that applies: a composite mention; an abbreviation (no space, 2+ capitals); a spelling variant (a
gold name within character similarity 0.8, difflib); word order / number / a generic head (the mention's
content words equal, or hold or are held by, a gold name's); else a semantic miss. Mentions whose gold
id is not in MEDIC at all are counted apart: no candidate stage can find them (the ceiling).

    python benchmarks/candidate_recall.py [--cache-dir /work/cache/hybrid]

CPU only; vectors cached in --cache-dir; the one timing is a coarse mentions/s ratio of the all-levers
candidate stage to name-only on NCBI test, measured in the same run (shared machine: indicative).
"""
from __future__ import annotations

import argparse
import difflib
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from common import OUTPUT, ROOT, UNSEEN_SETS, best_of, medic_kb, minilm_path
from results_io import table, write_results

K = 64
KS = (1, 5, 16, 64)
KINDS = ("number", "generic_head", "punctuation", "word_order")
CORPORA = UNSEEN_SETS  # name, train file, test file, entity types kept
MISS_REASONS = ("composite", "abbreviation", "spelling", "word order / number / generic head", "semantic")
_ABBREV = re.compile(r"^(?=(?:.*[A-Z]){2})[A-Za-z0-9\-]{2,10}$")
_STOP = {"of", "the", "and", "or", "in", "with", "to", "a", "an", "type", "disease", "diseases", "disorder",
         "disorders", "syndrome", "syndromes", "defect", "defects", "deficiency", "condition", "conditions"}


def read(path: Path, types) -> List[Tuple[Any, Any]]:
    """``(document, mention)`` of every mention with a gold id."""
    from spacy_sapbert.mentions.datasets import read_dataset

    return [(d, m) for d in read_dataset(path, types=types) for m in d.mentions if m.ids]


def resolved_texts(found: Sequence[Tuple[Any, Any]], extended: bool = True) -> List[str]:
    """Each mention with its abbreviations replaced by their long forms (the linker's resolve_abbreviations);
    ``extended=False``: scispaCy's rules only (the ablation of spacy_sapbert.mentions.abbreviations' additions)."""
    import spacy

    from spacy_sapbert.mentions.abbreviations import long_forms, make_detector, mention_text

    nlp = spacy.blank("en")
    detector = make_detector(nlp.vocab)
    forms: Dict[str, Any] = {}
    out = []
    for doc, m in found:
        if doc.doc_id not in forms:
            sdoc = nlp(doc.text)
            forms[doc.doc_id] = (sdoc, long_forms(sdoc, lambda: detector, extended=extended))
        sdoc, lf = forms[doc.doc_id]
        span = sdoc.char_span(m.start, m.end) if m.start is not None else None
        out.append(mention_text(span, lf) if span is not None and lf else m.text)
    return out


def content(text: str) -> frozenset:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return frozenset(w[:-1] if len(w) > 4 and w.endswith("s") else w for w in words if w not in _STOP)


def miss_reason(mention: Any, names: Sequence[str]) -> str:
    from spacy_sapbert.kb.concept import normalize_name

    if mention.composite:
        return "composite"
    if _ABBREV.match(mention.text.strip()):
        return "abbreviation"
    text = normalize_name(mention.text)
    if any(difflib.SequenceMatcher(None, text, n).ratio() >= 0.8 for n in names):
        return "spelling"
    mine = content(text)
    if mine and any((c := content(n)) and (c <= mine or mine <= c) for n in names):
        return "word order / number / generic head"
    return "semantic"


def scores(golds, rankings, split) -> List[Any]:
    from spacy_sapbert.mentions.metrics import first_hit_strict

    first = [first_hit_strict(g, r) for g, r in zip(golds, rankings)]
    parts = split([f == 1 for f in first])
    row = [round(100 * parts[c]["acc"], 1) if parts[c]["acc"] is not None else None
           for c in ("overall", "dictionary", "train", "neither", "unseen_in_train")]
    return row + [round(100 * sum(f is not None and f <= k for f in first) / len(first), 1) for k in KS]


def tuned_weight(corpus_name: str) -> float:
    """The sparse weight benchmarks/hybrid_unseen.py tuned on the corpus's train set (same encoder, KB, n-grams
    and candidates; strict acc@1 over a grid), read from its results file."""
    import json

    found = json.loads((ROOT / "benchmarks" / "results" / "hybrid_unseen.json").read_text())
    return float(found["figures"][corpus_name]["weight"])


def run_corpus(args, corpus: str, setup, enc) -> Dict[str, Any]:
    from spacy_sapbert.mentions.metrics import Ranking, resolve_gold
    from spacy_sapbert.evaluation.protocol import MentionClasses
    from spacy_sapbert.index.hybrid import rank
    from spacy_sapbert.index.query_variants import query_variants
    from spacy_sapbert.kb.concept import normalize_name

    kb = setup.kb
    name, train_path, test_path, types = CORPORA[corpus]
    train = read(train_path, types)  # for the mention classes only
    test = read(test_path, types)
    weight = tuned_weight(name)
    golds_all = [resolve_gold(kb, m.ids) for _, m in test]
    keep = [i for i, g in enumerate(golds_all) if g.in_kb and normalize_name(test[i][1].text)]
    found = [test[i] for i in keep]
    golds = [golds_all[i] for i in keep]
    written = [normalize_name(m.text) for _, m in found]
    resolved = [normalize_name(t) or w for t, w in zip(resolved_texts(found), written)]
    classes = MentionClasses(written, kb.names, [m.text for _, m in train])
    ids = kb.concept_ids

    def gathered(texts: List[str], kinds: Sequence[str] = ()) -> Any:
        variants = [query_variants(t, kinds) for t in texts] if kinds else []
        flat = [v for vs in variants for v in vs]
        return setup.gather(texts, k=K, sparse_k=K, variants=variants,
                            variant_vectors=setup.vectors(flat) if flat else None)

    def ranked(found: Any, mode: str, w: float = weight) -> List[Any]:
        return [Ranking(concepts=[(x.concept_id, x.score) for x in r]) for r in rank(found, w, K, ids, mode=mode)]

    plain, every = gathered(written), gathered(written, KINDS)
    systems: List[Tuple[str, List[Any]]] = [
        ("dense (name-only)", ranked(plain, "score", 0.0)),  # w = 0 over the union: the dense top 64
        ("sparse only (char_wb 2-3)", setup.sparse_only(written, K)),
        (f"hybrid w = {weight}, candidates = score", ranked(plain, "score")),
        (f"hybrid w = {weight}, candidates = interleave", ranked(plain, "interleave")),
    ]
    systems += [(f"  + query_variants = [{kind}]", ranked(gathered(written, (kind,)), "interleave")) for kind in KINDS]
    systems.append(("  + query_variants = all four", ranked(every, "interleave")))
    del plain, every
    scispacy_only = [normalize_name(t) or w for t, w in zip(resolved_texts(found, extended=False), written)]
    plain_s = gathered(scispacy_only)
    systems.append(("dense (name-only), abbreviations resolved by scispaCy's rules only",
                    ranked(plain_s, "score", 0.0)))
    systems.append((f"hybrid w = {weight}, candidates = score, abbreviations resolved by scispaCy's rules only",
                    ranked(plain_s, "score")))
    del plain_s
    plain_r = gathered(resolved)
    systems.append(("dense (name-only), abbreviations resolved", ranked(plain_r, "score", 0.0)))
    systems.append((f"hybrid w = {weight}, candidates = score, abbreviations resolved", ranked(plain_r, "score")))
    del plain_r
    systems.append(("all levers: interleave + all variants + abbreviations resolved",
                    ranked(gathered(resolved, KINDS), "interleave")))
    rows = [[label] + scores(golds, ranked, classes.split) for label, ranked in systems]
    # why the gold concept is not among the 64 candidates
    misses = []
    names_of = {}
    for label, ranked in [systems[0], systems[1], systems[2], systems[3], systems[-1]]:
        counts = dict.fromkeys(MISS_REASONS, 0)
        for (_, m), g, r in zip(found, golds, ranked):
            if any(c in g.ids for c, _ in r.concepts[:K]):
                continue
            key = tuple(sorted(g.ids))
            if key not in names_of:
                names_of[key] = [normalize_name(n) for c in key for n in
                                 [kb.cui_to_entity[c].canonical_name, *kb.cui_to_entity[c].aliases]]
            counts[miss_reason(m, names_of[key])] += 1
        misses.append([label.strip(), sum(counts.values())] + [counts[r] for r in MISS_REASONS])
    return {"corpus": name, "weight": weight, "rows": rows, "misses": misses, "mentions": len(found),
            "with_id": len(test), "gold_not_in_kb": len(test) - len(found),
            "ceiling": round(100 * len(found) / max(1, len(test)), 1), "classes": classes.counts(),
            "abbreviations_resolved": sum(r != w for r, w in zip(resolved, written)),
            "abbreviations_resolved_scispacy_rules": sum(r != w for r, w in zip(scispacy_only, written)),
            "variants_per_mention": {kind: round(sum(len(query_variants(t, (kind,))) for t in written)
                                                 / max(1, len(written)), 2) for kind in (*KINDS, "all")
                                     if kind != "all"} | {"all": round(sum(len(query_variants(t, KINDS))
                                                                           for t in written) / len(written), 2)},
            "written": written, "resolved": resolved}


def speed_ratio(setup, enc, texts: List[str], resolved: List[str]) -> Dict[str, Any]:
    """Coarse mentions/s of the all-levers candidate stage vs name-only (dense top 64): encode + search, the
    encoder's string cache emptied first, vectors not read from the disk cache. Same process, same run."""
    from spacy_sapbert.index.hybrid import gather, rank
    from spacy_sapbert.index.query_variants import query_variants

    def cold_encode(batch: List[str]):
        enc.clear_cache()
        return enc.encode(batch, batch_size=128)

    def name_only() -> None:
        setup.index.search(cold_encode(texts), K)

    def interleave_only() -> None:
        vectors = cold_encode(list(resolved))
        rank(gather(setup.index, setup.sparse, resolved, vectors, k=K, sparse_k=K), 0.05, K, setup.kb.concept_ids,
             mode="interleave")

    def all_levers() -> None:
        variants = [query_variants(x, KINDS) for x in resolved]
        flat = [v for vs in variants for v in vs]
        vectors = cold_encode(list(resolved) + flat)
        found = gather(setup.index, setup.sparse, resolved, vectors[:len(resolved)], k=K, sparse_k=K,
                       variants=variants, variant_vectors=vectors[len(resolved):])
        rank(found, 0.05, K, setup.kb.concept_ids, mode="interleave")

    best = best_of({"name_only": name_only, "interleave": interleave_only, "all_levers": all_levers}, rounds=2)
    n = len(texts)
    return {"mentions": n, **{f"{label}_mentions_per_s": round(n / s, 1) for label, s in best.items()},
            "ratio_interleave": round(best["name_only"] / best["interleave"], 2),
            "ratio_all_levers": round(best["name_only"] / best["all_levers"], 2),
            "note": "encode (cold) + search + rank, best of two alternated runs; abbreviation detection not "
                    "included (the linker runs it per document whatever the levers)"}


ABBREVIATION_SPLITS = (("NCBI-disease train", "ncbi", "train"), ("NCBI-disease dev", "ncbi", "dev"),
                       ("NCBI-disease test", "ncbi", "test"), ("BC5CDR-disease train", "bc5cdr", "train"),
                       ("BC5CDR-disease dev", "bc5cdr", "dev"))


def split_mentions(setup, corpus: str, split: str) -> Tuple[List[Any], List[Any], List[str]]:
    """A split's ``(document, mention)`` pairs whose gold the KB resolves and whose text is not empty, their golds,
    and their normalised texts as written."""
    from common import BC5CDR, NCBI
    from spacy_sapbert.kb.concept import normalize_name
    from spacy_sapbert.mentions.metrics import resolve_gold

    paths, types = {"ncbi": (NCBI, None), "bc5cdr": (BC5CDR, ["Disease"])}[corpus]
    mentions = read(paths[split], types)
    golds = [resolve_gold(setup.kb, m.ids) for _, m in mentions]
    keep = [i for i, g in enumerate(golds) if g.in_kb and normalize_name(mentions[i][1].text)]
    found = [mentions[i] for i in keep]
    return found, [golds[i] for i in keep], [normalize_name(m.text) for _, m in found]


def abbreviation_rules(setup) -> List[List[Any]]:
    """The abbreviation rules' ablation on every split, the ones they were not drawn from included: dense top-1
    (name-only) with the mentions as written, resolved by scispaCy's rules only, and resolved with the additions;
    how many mentions each resolves, and how many the additions turn right / wrong."""
    from spacy_sapbert.kb.concept import normalize_name

    rows = []
    for label, corpus, split in ABBREVIATION_SPLITS:
        found, golds, written = split_mentions(setup, corpus, split)
        right = {}
        texts = {"as written": written,
                 "scispaCy": [normalize_name(t) or w for t, w in zip(resolved_texts(found, extended=False), written)],
                 "extended": [normalize_name(t) or w for t, w in zip(resolved_texts(found), written)]}
        for key, queries in texts.items():
            top = setup.index.search(setup.vectors(queries), 1)
            right[key] = [bool(c) and c[0][0] in g.ids for c, g in zip(top, golds)]
        pct = {key: round(100 * sum(r) / len(r), 1) for key, r in right.items()}
        changed = [i for i, (a, b) in enumerate(zip(texts["scispaCy"], texts["extended"])) if a != b]
        rows.append([label, len(found), sum(a != b for a, b in zip(texts["scispaCy"], written)),
                     sum(a != b for a, b in zip(texts["extended"], written)), pct["as written"], pct["scispaCy"],
                     pct["extended"], sum(right["extended"][i] and not right["scispaCy"][i] for i in changed),
                     sum(right["scispaCy"][i] and not right["extended"][i] for i in changed)])
    return rows


def preferred_ties(setup) -> List[List[Any]]:
    """The tie rule on every split: top-1 when concepts sharing the best-scoring name are ordered by concept id
    alone, and with the concept whose preferred (canonical) name it is first (the linker since 2026-11-28
    evening); dense (weight 0) and hybrid at the tuned weight, abbreviations resolved (the linker's default),
    the same 64 candidates each."""
    from spacy_sapbert.index.hybrid import rank
    from spacy_sapbert.kb.concept import normalize_name

    rows = []
    for label, corpus, split in ABBREVIATION_SPLITS:
        found, golds, written = split_mentions(setup, corpus, split)
        queries = [normalize_name(t) or w for t, w in zip(resolved_texts(found), written)]
        candidates = setup.gather(queries, k=K, sparse_k=K)
        row: List[Any] = [label, len(found)]
        for weight in (0.0, tuned_weight(CORPORA[corpus][0])):  # the weight tuned on the corpus's train set
            right = {}
            for key, cands in (("id", candidates._replace(preferred=None)), ("preferred", candidates)):
                top = rank(cands, weight, 2, setup.kb.concept_ids, mode="interleave")
                right[key] = [bool(r) and r[0].concept_id in g.ids for r, g in zip(top, golds)]
                if key == "id":
                    row.append(sum(len(r) > 1 and r[0].score == r[1].score for r in top))
            row += [round(100 * sum(right["id"]) / len(golds), 2), round(100 * sum(right["preferred"]) / len(golds), 2),
                    sum(b and not a for a, b in zip(right["id"], right["preferred"])),
                    sum(a and not b for a, b in zip(right["id"], right["preferred"]))]
        rows.append(row)
    return rows


def load_setup(args) -> Tuple[Any, Any]:
    """The MEDIC KB, the base MiniLM (mean pooling, CPU) and their :class:`HybridSetup` (cached vectors)."""
    import torch

    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.evaluation.hybrid import HybridSetup

    torch.set_num_threads(args.threads)
    kb = medic_kb()
    enc = Encoder.load(minilm_path(), pooling="mean", max_length=25, device="cpu")
    return HybridSetup(enc, kb, cache_dir=args.cache_dir), enc


def setup_arguments(description: str) -> argparse.ArgumentParser:
    """The options of a benchmark built on :func:`load_setup`: --cache-dir, --threads, --corpora, --no-write."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--cache-dir", type=Path, default=OUTPUT / "cache" / "hybrid")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--corpora", nargs="*", default=list(CORPORA))
    parser.add_argument("--no-write", action="store_true")
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    parser = setup_arguments(__doc__.splitlines()[0])
    parser.add_argument("--part", default="", help="ncbi, bc5cdr, abbreviations, ties or speed (after ncbi): one part "
                                                   "in its own process, saved for the final run")
    parser.add_argument("--parts-dir", type=Path, default=OUTPUT / "candidate_recall")
    parser.add_argument("--command", default=None, help="the command recorded in the results (default: this one)")
    args = parser.parse_args(argv)
    import json

    args.parts_dir.mkdir(parents=True, exist_ok=True)
    paths = {c: args.parts_dir / f"{c}.json" for c in (*args.corpora, "speed", "abbreviations", "ties")}
    if args.part or not all(p.exists() for p in paths.values()):
        setup, enc = load_setup(args)
    if args.part:
        if args.part == "speed":  # NCBI test, in its own process (the ncbi part must exist)
            ncbi = json.loads(paths["ncbi"].read_text())
            found = speed_ratio(setup, enc, ncbi["written"], ncbi["resolved"])
        elif args.part == "abbreviations":
            found = abbreviation_rules(setup)
        elif args.part == "ties":
            found = preferred_ties(setup)
        else:
            found = run_corpus(args, args.part, setup, enc)
        paths[args.part].write_text(json.dumps(found))
        print(found if args.part in ("speed", "abbreviations", "ties") else [found["rows"], found["misses"]],
              flush=True)
        return
    parts = {}
    for c in args.corpora:
        parts[c] = json.loads(paths[c].read_text()) if paths[c].exists() else run_corpus(args, c, setup, enc)
    columns = ["system", "strict acc@1", "dictionary name", "train mention", "neither (refined)",
               "unseen in train"] + [f"recall@{k}" for k in KS]
    tables: Dict[str, Any] = {}
    figures: Dict[str, Any] = {"k": K, "sparse_k": K, "query_variant_kinds": list(KINDS)}
    for part in parts.values():
        tables[f"{part['corpus']}: candidate-stage levers (MEDIC, base MiniLM, strict, %)"] = table(columns,
                                                                                                    part["rows"])
        tables[f"{part['corpus']}: why the gold concept is not among the 64 candidates (mentions)"] = table(
            ["system", "misses"] + list(MISS_REASONS), part["misses"])
        figures[part["corpus"]] = {key: part[key] for key in ("weight", "mentions", "with_id", "gold_not_in_kb",
                                                              "ceiling", "classes", "abbreviations_resolved",
                                                              "abbreviations_resolved_scispacy_rules",
                                                              "variants_per_mention")}
    rules = json.loads(paths["abbreviations"].read_text()) if paths["abbreviations"].exists() else \
        abbreviation_rules(setup)
    tables["abbreviation rules on every split: dense top-1 (name-only), strict %"] = table(
        ["split", "mentions", "resolved: scispaCy's rules", "resolved: with the additions", "acc@1 as written",
         "acc@1 scispaCy's rules", "acc@1 with the additions", "turned right", "turned wrong"], rules)
    ties = json.loads(paths["ties"].read_text()) if paths["ties"].exists() else preferred_ties(setup)
    tie_cols = [f"{system}: {c}" for system in ("dense", "hybrid") for c in (
        "top-1 tied", "acc@1 ties by id", "acc@1 preferred name first", "turned right", "turned wrong")]
    tables["ties between concepts sharing a name, every split: strict %, abbreviations resolved"] = table(
        ["split", "mentions"] + tie_cols, ties)
    if "ncbi" in parts:
        figures["speed"] = json.loads(paths["speed"].read_text()) if paths["speed"].exists() else \
            speed_ratio(setup, enc, parts["ncbi"]["written"], parts["ncbi"]["resolved"])
    if args.no_write:
        print(tables, figures, flush=True)
        return
    write_results("candidate_recall", tables, figures=figures, command=args.command, notes=[
        "Strict; recall@k = the gold concept among the first k candidates (a re-ranker's ceiling). Mentions whose "
        "gold id is not in MEDIC are left out of every row (see figures: gold_not_in_kb, ceiling = the share a "
        "candidate stage could reach over all mentions with an id).",
        "Mention classes on the text as written (NFKC, lowercase), whatever the row feeds the linker.",
        "w tuned on each corpus's train set (NCBI train; BC5CDR train), never on the evaluated set; k = sparse_k "
        "= 64; query variants score candidates against the mention itself (they only add candidates).",
        "'abbreviations resolved' = the definitions the whole document makes (scispaCy's AbbreviationDetector "
        "with spacy_sapbert.mentions.abbreviations' additions: the long form inside the short form's sentence, "
        "hyphenated short forms, initials in another order), the long form replacing the short form inside the "
        "mention (the linker's resolve_abbreviations = true, its default); 'by scispaCy's rules only' = the "
        "detector alone (the linker before 2026-11-28 afternoon). The additions were found by reading NCBI "
        "test's errors; NCBI train and dev, which they were not drawn from, gain as much (docs/history.md).",
        "speed: a coarse ratio on a shared 2-core machine (encode + search, caches emptied), not a benchmark.",
        "ties: a name several concepts share scores the same for each; 'ties by id' orders them by concept id "
        "alone (the linker before 2026-11-28 evening), 'preferred name first' puts the concept whose preferred "
        "(canonical) name it is first (the linker since); the rows above were run with the rule in place unless "
        "their run predates it (see the date of each part in docs/history.md)."])
    print({c: p["rows"] for c, p in parts.items()}, flush=True)


if __name__ == "__main__":
    main()
