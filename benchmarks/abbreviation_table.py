"""A mined abbreviation table for mentions that are short forms their document does not define.

NCBI-disease test and BC5CDR-disease dev, MEDIC 2012, the base all-MiniLM-L6-v2 (mean pooling), strict. The
table is mined by `spacy-sapbert mine-abbreviations`' library function (:func:`spacy_sapbert.mentions.
abbreviation_table.mine`, its defaults: min count 1, min share 0.5) from raw text only, never from annotations:

- "other documents": the corpus's training text (NCBI train + dev, BC5CDR train), none of the evaluated documents;
- "the linked documents": the evaluated documents' own text (what a user mines from the corpus being linked,
  ``link-corpus`` style; shown apart, it reads the test text).

Each system (dense name-only; hybrid at the weight benchmarks/hybrid_unseen.py tuned on the train set, candidates
interleaved) ranks the mentions as written and with abbreviations resolved (the definitions the document makes,
the linker's ``resolve_abbreviations``), without and with a table; a table replaces a mention only where the
linker would (:meth:`AbbreviationTable.text_for`: the whole mention is a short form, its document resolved
nothing inside it). Columns: strict acc@1 by mention class (classes on the text as written: a dictionary name, a
train mention, neither, unseen in train), candidate recall@k, mentions the table replaced and how many of them the
table turned right / wrong against the same system without it.

With ``--link-ncbi-work WORK`` (the work folder of ``benchmarks/link_ncbi.py --work WORK``: its saved MEDIC pipeline,
hnsw index, ONNX Runtime) the NCBI table is also given to that pipeline's ``sapbert_linker`` (``set_abbreviations``)
and the test set's gold spans are linked through ``nlp.pipe``, abbreviations resolved or not, as link_ncbi scores
them (strict acc@1 / acc@5, all 960 mentions): the linker's own path, not this script's reading of it.

    python benchmarks/abbreviation_table.py [--cache-dir CACHE] [--threads 2] [--link-ncbi-work WORK]
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from candidate_recall import K, KS, CORPORA, load_setup, read, resolved_texts, scores, setup_arguments, tuned_weight
from common import NCBI
from results_io import table, write_results

SOURCES = {"ncbi": [NCBI["train"], NCBI["dev"]], "bc5cdr": [CORPORA["bc5cdr"][1]]}
COLUMNS = ["system", "abbreviations", "table", "n", "overall", "dictionary name", "train mention", "neither",
           "unseen in train"] + [f"recall@{k}" for k in KS] + ["replaced", "turned right", "turned wrong"]


def mined(paths: List[Path]) -> Any:
    """The table mined from the documents of PubTator files ``paths`` (their text only)."""
    from spacy_sapbert.mentions.abbreviation_table import mine
    from spacy_sapbert.mentions.datasets import read_dataset

    texts = [doc.text for path in paths for doc in read_dataset(path)]
    return mine(texts, info={"inputs": [Path(p).name for p in paths]})


def run_corpus(corpus: str, setup: Any) -> Dict[str, Any]:
    from spacy_sapbert.evaluation.protocol import MentionClasses
    from spacy_sapbert.index.hybrid import rank
    from spacy_sapbert.kb.concept import normalize_name
    from spacy_sapbert.mentions.metrics import Ranking, resolve_gold

    kb = setup.kb
    name, train_path, test_path, types = CORPORA[corpus]
    test = read(test_path, types)
    golds_all = [resolve_gold(kb, m.ids) for _, m in test]
    keep = [i for i, g in enumerate(golds_all) if g.in_kb and normalize_name(test[i][1].text)]
    found, golds = [test[i] for i in keep], [golds_all[i] for i in keep]
    classes = MentionClasses([normalize_name(m.text) for _, m in found], kb.names,
                             [m.text for _, m in read(train_path, types)])
    tables = {"none": None, "other documents": mined(SOURCES[corpus]),
              "the linked documents": mined([test_path])}
    raw = {"as written": [m.text for _, m in found], "resolved": resolved_texts(found)}
    weight = tuned_weight(name)
    rows: List[List[Any]] = []
    sizes = {label: len(t) for label, t in tables.items() if t is not None}
    for system, w, mode in (("dense (name-only)", 0.0, "score"), (f"hybrid w = {weight}, interleave", weight,
                                                                     "interleave")):
        for reading, texts in raw.items():
            base: Optional[List[bool]] = None
            for label, abbreviations in tables.items():
                used = texts if abbreviations is None else \
                    [abbreviations.text_for(m.text, t) for (_, m), t in zip(found, texts)]
                queries = [normalize_name(t) or normalize_name(m.text) for (_, m), t in zip(found, used)]
                ranked = [Ranking(concepts=[(c.concept_id, c.score) for c in r]) for r in
                          rank(setup.gather(queries, k=K, sparse_k=K), w, K, kb.concept_ids, mode=mode)]
                right = [bool(r.concepts) and r.concepts[0][0] in g.ids for r, g in zip(ranked, golds)]
                changed = [i for i, (a, b) in enumerate(zip(used, texts)) if a != b]
                if base is None:
                    base = right
                rows.append([system, reading, label, len(found)] + scores(golds, ranked, classes.split)
                            + [len(changed), sum(right[i] and not base[i] for i in changed),
                               sum(base[i] and not right[i] for i in changed)])
    return {"corpus": name, "rows": rows, "table_sizes": sizes, "mentions": len(found),
            "classes": classes.counts()}


def through_pipeline(work: Path, abbreviations: Any) -> List[List[Any]]:
    """NCBI test's gold spans through link_ncbi's saved pipeline, with and without the table (``set_abbreviations``),
    abbreviations resolved or not; scored as link_ncbi scores (its ``_score``)."""
    import json

    import spacy

    import link_ncbi  # noqa: F401  (registers its bench_gold_spans factory)

    texts = json.loads((work / "texts.json").read_text(encoding="utf8"))
    gold = json.loads((work / "gold.json").read_text(encoding="utf8"))
    rows = []
    for resolve in (False, True):
        nlp = spacy.load(work / "nlp_sapbert",
                         config={"components": {"sapbert_linker": {"resolve_abbreviations": resolve}}})
        nlp.add_pipe("bench_gold_spans", first=True, config={"table": str(work / "spans.json")})
        linker = nlp.get_pipe("sapbert_linker")
        for label, given in (("none", None), ("other documents", abbreviations)):
            linker.set_abbreviations(given)
            found = link_ncbi._score(list(nlp.pipe(texts, batch_size=128)), gold, "kb_ents")
            rows.append(["resolved" if resolve else "as written", label, round(100 * found["acc@1"], 1),
                         round(100 * found["acc@5"], 1), found["mentions"]])
    return rows


def main(argv: Optional[List[str]] = None) -> None:
    parser = setup_arguments(__doc__.splitlines()[0])
    parser.add_argument("--link-ncbi-work", type=Path, default=None,
                        help="link_ncbi.py's work folder: also link NCBI test through its saved pipeline")
    args = parser.parse_args(argv)
    setup, _ = load_setup(args)
    parts = [run_corpus(corpus, setup) for corpus in args.corpora]
    tables, notes = {}, []
    if args.link_ncbi_work is not None:
        rows = through_pipeline(args.link_ncbi_work, mined(SOURCES["ncbi"]))
        tables["NCBI-disease test through the saved MEDIC pipeline (link_ncbi's; strict %)"] = table(
            ["abbreviations", "table", "acc@1", "acc@5", "mentions"], rows)
        for row in rows:
            print("pipeline", *row, sep=" | ")
    for part in parts:
        tables[f"{part['corpus']}: abbreviation table (MEDIC, base MiniLM, strict %)"] = table(COLUMNS, part["rows"])
        for row in part["rows"]:
            print(part["corpus"], *row, sep=" | ")
        notes.append(f"{part['corpus']}: {part['mentions']} mentions with gold in MEDIC; classes {part['classes']}; "
                     f"table sizes (short forms kept) {part['table_sizes']}")
    notes.append("tables mined from raw text only (min count 1, min share 0.5): 'other documents' = NCBI train + "
                 "dev text for NCBI test, BC5CDR train text for BC5CDR dev; 'the linked documents' = the evaluated "
                 "documents' own text (a link-corpus user's setting; it reads the test text)")
    notes.append("turned right / wrong: the table's replaced mentions against the same system and reading without it")
    if not args.no_write:
        path = write_results("abbreviation_table", tables, notes=notes,
                             figures={p["corpus"]: {k: v for k, v in p.items() if k != "rows"} for p in parts})
        print(f"results: {path}")


if __name__ == "__main__":
    main()
