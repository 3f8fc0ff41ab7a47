"""The load path of a saved ONNX pipeline, part by part: KB lookups, ONNX Runtime sessions, hnsw checks and storage.

Reads a pipeline ``link_ncbi.py`` saved (``--pipeline``, default its work folder's ``nlp_sapbert``: MEDIC, 75k names,
hnsw, ONNX MiniLM) and the NCBI-disease test mentions beside it (``texts.json``, ``spans.json``). Prints JSON; writes
no results file (docs/footprint.md quotes it). Each part alternates the variants it compares in one process or in
adjacent processes, so that the load of the shared machine falls on all of them alike; the load average is printed.

- ``kb``: microseconds a ``KnowledgeBase.row_of_name`` call over the test mentions (the KB memory-mapped as the
  linker opens it), this checkout against ``--baseline`` (another checkout), alternated.
- ``onnx``: per ``SessionOptions`` variant, in a fresh process each: session creation seconds, resident memory
  it adds (after creation, and the peak after encoding), seconds to encode the test mentions (batches of 128 as the
  linker sends them), and the largest difference of the vectors from the default's. ``offline-*`` variants load a
  graph that ONNX Runtime optimised and saved beforehand at the level named.
- ``ef``: per hnsw query depth, the share of test mentions whose top-1 / top-5 concepts equal the exact
  search's over the same vectors, and the milliseconds of a search of them all.
- ``pipeline``: warm ``spacy.load`` and one linking pass over the test documents' gold spans, the pipeline as
  saved against a copy whose ``model.onnx`` is the graph optimised offline ("extended"), loaded with optimisation
  off, alternated in one process; and whether both give the same ``kb_ents``.
- ``overlap``: warm ``spacy.load`` as the linker loads today (the KB and index opened in a second thread while the
  encoder loads) against the same load with that thread's work run first in the calling thread (as before
  2026-11-28), alternated in one process; and whether both give the same ``kb_ents`` over the test documents.
- ``batch``: one linking pass over the test documents' gold spans (the encoder's cache emptied before each) at
  linker ``batch_size`` 16, 32, 64 and 128, alternated in one process (the order flips every round), with the
  runtime ``--runtime`` (auto: ONNX Runtime; torch).
- ``hnsw``: seconds of ``check_hnsw_file`` and of hnswlib's ``load_index`` on the index file, this checkout
  against ``--baseline``, alternated.
- ``memory``: in a fresh process (``import spacy`` and scispaCy's abbreviation detector first, as both linkers of
  ``link_ncbi.py`` hold them), the resident MB the pipeline's load adds and one linking pass of the test documents'
  gold spans adds after it, by mapping (``/proc/self/smaps``: anonymous memory, the heap, each shared library, each
  of the pipeline's files); the largest ``--top`` of each.
- ``external``: two copies of the pipeline, one whose encoder graph holds its weights (exports before 2026-12-03)
  and one that keeps them in a file of their own (ONNX's external data, ``model.onnx.data``, today's exports: ONNX
  Runtime maps it instead of copying the weights out of the graph), the latter with weight pre-packing on and off; per variant, in fresh processes alternated over ``--rounds``: the cold load,
  the median of 5 warm loads, one linking pass over the test documents' gold spans, the resident MB after it, the peak
  with the 5 reloads, whether it links each mention to the same concepts as the weights-inside copy, and the largest
  difference of a ``kb_ents`` score from it.
- ``storage``: the same graph (M 32, ef_construction 200, ef_search 200) held as hnswlib holds it (float32 vectors,
  the index file as saved) and as faiss's HNSW holds it with its vectors in float32, float16 or 8 bits per dimension
  (``IndexHNSWFlat``, ``IndexHNSWSQ``), built here from the index's own vectors (seconds on the machine's cores);
  per variant, in fresh processes alternated over ``--rounds``: resident MB its library's import adds, seconds to
  read the file, resident MB that adds, a
  single-threaded search of the test mentions 70 names deep (the linker's depth for k 10 on MEDIC) in ms, the
  share whose top-1 name / top-5 names equal the exact search's, and the largest error of a returned score
  (faiss's files are read with ``faiss.read_index``, which is fine for a study but not for a file from elsewhere).

- ``arena`` (2026-12-04): per encoder graph of the pipeline (``model.onnx``; ``model.int8.onnx`` of ``--int8-pipeline``)
  and batch shape (rows x word pieces, ``--shapes``), in a fresh process each: the resident MB that running the
  session's batches of that shape adds after its creation (ONNX Runtime's CPU arena, which grows in powers of two)
  and the microseconds per token slot (3 warm-up runs, then 20).
- ``int8-weights`` (2026-12-04): the int8 graph of ``--int8-pipeline`` as it is written today (weights in
  ``model.int8.onnx.data``) against the same graph re-saved with its weights inside, in fresh processes alternated over
  ``--rounds``: session creation seconds, resident MB the session adds, the peak after 60 batches of 64 random rows of
  4-25 word pieces, and their seconds. ``--graph``: another int8 graph with its weights beside it (a re-ranker's
  ``model.int8.onnx``).
- ``rerank-weights`` (2026-12-04): two re-ranker folders (``--rerankers``: one exported before, its int8 weights
  inside the graph, one exported since, with them beside it) scoring the same 200 mentions x 4 names alternated in one
  process over ``--rounds``: seconds, and the largest difference of their logits.
- ``normcheck`` (2026-12-04): the unit-length check of the float16 hnsw graph's vectors (``vectors.f16.npy``) through
  numpy's float16 cast against faiss's float16 decoder, alternated in one process over ``--rounds``: seconds, and
  whether both give the same norms.
- ``spin`` (2026-12-05): one linking pass over the test documents' gold spans with the encoder's ONNX Runtime
  threads spinning between batches (ONNX Runtime's default) and sleeping (``OnnxEncoder(spinning=False)``, what a
  saved pipeline's linker loads since then), alternated in one process over ``--rounds``: seconds of the pass, of its
  encoding and of its index searches, of encoding the distinct mention texts 5 times in batches of 64 (bulk
  encoding), and whether both give the same ``kb_ents``.

    python benchmarks/studies/load_path.py kb --baseline ../main --pipeline WORK/link_ncbi/nlp_sapbert
    python benchmarks/studies/load_path.py onnx --pipeline WORK/link_ncbi/nlp_sapbert --out CACHE/load_path --rounds 3
    python benchmarks/studies/load_path.py ef --pipeline WORK/link_ncbi/nlp_sapbert
    python benchmarks/studies/load_path.py pipeline --pipeline WORK/link_ncbi/nlp_sapbert --out CACHE/load_path
    python benchmarks/studies/load_path.py overlap --pipeline WORK/link_ncbi/nlp_sapbert --rounds 10
    python benchmarks/studies/load_path.py batch --pipeline WORK/link_ncbi/nlp_sapbert --rounds 7 --runtime torch
    python benchmarks/studies/load_path.py hnsw --baseline ../main --pipeline WORK/link_ncbi/nlp_sapbert --rounds 5
    python benchmarks/studies/load_path.py memory --pipeline WORK/link_ncbi/nlp_sapbert
    python benchmarks/studies/load_path.py external --pipeline WORK/link_ncbi/nlp_sapbert --out CACHE/load_path --rounds 4
    python benchmarks/studies/load_path.py storage --pipeline WORK/link_ncbi/nlp_sapbert --out CACHE/load_path --rounds 3
    python benchmarks/studies/load_path.py arena --pipeline WORK/link_ncbi/nlp_sapbert --int8-pipeline WORK/link_ncbi/nlp_sapbert_int8
    python benchmarks/studies/load_path.py int8-weights --int8-pipeline WORK/link_ncbi/nlp_sapbert_int8 --out CACHE/load_path --rounds 2
    python benchmarks/studies/load_path.py int8-weights --graph RERANKER/model.int8.onnx --out CACHE/load_path --rounds 3
    python benchmarks/studies/load_path.py normcheck --pipeline WORK/link_ncbi/nlp_sapbert --rounds 5
    python benchmarks/studies/load_path.py spin --pipeline WORK/link_ncbi/nlp_sapbert --rounds 9
    python benchmarks/studies/load_path.py rerank-weights --pipeline WORK/link_ncbi/nlp_sapbert --rerankers OLD NEW --rounds 20
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common  # noqa: E402  (puts this checkout first on sys.path)

WORK = common.OUTPUT / "link_ncbi"
# variant -> (graph: "model" or "offline-<level>", load level, extra SessionOptions)
VARIANTS: Dict[str, Any] = {
    "all (ORT defaults)": ("model", "all", {}),
    "extended": ("model", "extended", {}),
    "basic": ("model", "basic", {}),
    "offline-extended, load disabled": ("offline-extended", "disable", {}),
    "offline-extended, load all": ("offline-extended", "all", {}),
    "offline-basic, load all": ("offline-basic", "all", {}),
    "all, no cpu mem arena": ("model", "all", {"enable_cpu_mem_arena": False}),
    "all, no mem pattern": ("model", "all", {"enable_mem_pattern": False}),
    "all, no weight prepacking": ("model", "all", {"session.disable_prepacking": "1"}),
    "all, 1 intra-op thread": ("model", "all", {"intra_op_num_threads": 1}),
}


def _slug(variant: str) -> str:
    return re.sub(r"\W+", "_", variant).strip("_")


def _mentions(pipeline: Path) -> List[str]:
    from spacy_sapbert.kb.concept import normalize_name

    spans = json.loads((pipeline.parent / "spans.json").read_text(encoding="utf8"))
    return [normalize_name(text[s:e]) for text, found in spans.items() for s, e in found]


def kb_worker(pipeline: Path, rounds: int, code: str) -> None:
    """``row_of_name`` over the test mentions with the package of checkout ``code``: print the figures as JSON."""
    sys.path.insert(0, code)
    from spacy_sapbert.kb import KnowledgeBase

    kb = KnowledgeBase.from_disk(pipeline / "sapbert_linker" / "kb")
    texts = _mentions(pipeline)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        found = sum(kb.row_of_name(text) >= 0 for text in texts)
        times.append((time.perf_counter() - t0) / len(texts) * 1e6)
    print(json.dumps({"module": sys.modules["spacy_sapbert"].__file__, "mentions": len(texts),
                      "distinct": len(set(texts)), "kb_names": found, "row_of_name_us": statistics.median(times)}))


def _offline(folder: Path, level: str, out: Path) -> Path:
    """The encoder's graph optimised by ONNX Runtime at ``level`` and saved to ``out`` (once), its weights inside."""
    import onnxruntime as ort

    from spacy_sapbert.encoding.onnx_export import DATA_FILE, ONNX_FILE

    target = out / f"model.{level}.onnx"
    if not target.exists():
        source = folder / ONNX_FILE
        if (folder / DATA_FILE).is_file():  # ONNX Runtime's optimised copy would point at the weights' file
            import onnx

            source = out / "model.inline.onnx"
            onnx.save_model(onnx.load(str(folder / ONNX_FILE)), str(source))
        options = ort.SessionOptions()
        options.graph_optimization_level = _level(level)
        options.optimized_model_filepath = str(target)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    return target


def _level(name: str) -> Any:
    import onnxruntime as ort

    return {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[name]


def onnx_worker(pipeline: Path, variant: str, graph: str, out: Path) -> None:
    """One variant in this fresh process: print its figures as JSON; save its vectors to ``out``."""
    import numpy
    import onnxruntime as ort

    from spacy_sapbert.base.util import peak_rss_mb
    from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder

    folder = pipeline / "sapbert_linker" / "encoder"
    texts = sorted(set(_mentions(pipeline)), key=lambda text: (len(text), text))
    _, level, extra = VARIANTS[variant]
    from spacy_sapbert.base.processes import ProcessSession
    from spacy_sapbert.encoding.files import read_settings
    from spacy_sapbert.encoding.tokenizer_file import pad_token_id, truncating_rows

    rows = OnnxEncoder.__new__(OnnxEncoder)  # only its batch builder, run with the session made below
    tokenize = truncating_rows(folder, int(read_settings(folder)["max_length"]))
    rows.pad_id = pad_token_id(folder)
    token_rows = tokenize(texts)
    before = common.memory_mb()["rss"]
    options = ort.SessionOptions()
    options.graph_optimization_level = _level(level)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    for key, value in extra.items():
        if key.startswith("session."):
            options.add_session_config_entry(key, value)
        else:
            setattr(options, key, value)
    options.enable_profiling = True  # its Session events: model loading and session initialisation
    options.profile_file_prefix = str(out / f"profile.{os.getpid()}")
    t0 = time.perf_counter()
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    create_s = time.perf_counter() - t0
    profile = Path(session.end_profiling())
    phases = {e["name"]: e["dur"] / 1e6 for e in json.loads(profile.read_text()) if e.get("cat") == "Session"}
    profile.unlink()
    after_create = common.memory_mb()["rss"]
    rows._sessions = ProcessSession(lambda threads: session, 0)  # the session made above, as the encoder holds it
    t1 = time.perf_counter()
    vectors = numpy.concatenate([OnnxEncoder._encode_batch(rows, token_rows[i:i + 128])
                                 for i in range(0, len(token_rows), 128)])
    encode_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    for i in range(0, len(token_rows), 128):
        OnnxEncoder._encode_batch(rows, token_rows[i:i + 128])
    encode2_s = time.perf_counter() - t2
    numpy.save(out / f"vectors.{_slug(variant)}.npy", vectors)
    print(json.dumps({"create_s": create_s, "model_loading_s": phases.get("model_loading_uri", float("nan")),
                      "session_initialization_s": phases.get("session_initialization", float("nan")),
                      "encode_s": min(encode_s, encode2_s), "texts": len(texts),
                      "rss_added_mb": after_create - before, "peak_mb": peak_rss_mb(),
                      "file": _slug(variant)}))


def part_onnx(pipeline: Path, rounds: int, out: Path) -> Dict[str, Any]:
    """The variants in fresh processes, alternated; the optimised graphs and the vectors go to ``out``."""
    import numpy

    out.mkdir(parents=True, exist_ok=True)
    folder = pipeline / "sapbert_linker" / "encoder"
    graphs = {"model": str(folder / "model.onnx")}
    for graph, _, _ in VARIANTS.values():
        if graph.startswith("offline-"):
            graphs[graph] = str(_offline(folder, graph.split("-", 1)[1], out))
    figures: Dict[str, List[Dict[str, Any]]] = {name: [] for name in VARIANTS}
    for _ in range(rounds):
        for name, (graph, _, _) in VARIANTS.items():
            done = subprocess.run([sys.executable, __file__, "onnx-worker", "--pipeline", str(pipeline), "--variant",
                                   name, "--graph", graphs[graph], "--out", str(out)],
                                  capture_output=True, text=True, check=True)
            figures[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    reference = numpy.load(out / f"vectors.{figures['all (ORT defaults)'][0]['file']}.npy")
    result = {}
    for name, runs in figures.items():
        vectors = numpy.load(out / f"vectors.{runs[0]['file']}.npy")
        result[name] = {key: round(statistics.median(r[key] for r in runs), 3)
                        for key in ("create_s", "model_loading_s", "session_initialization_s", "encode_s",
                                    "rss_added_mb", "peak_mb")}
        result[name]["max_abs_diff"] = float(numpy.abs(vectors - reference).max())
    result["graph_mb"] = {graph: round(Path(path).stat().st_size / 2**20, 1) for graph, path in graphs.items()}
    return result


def _hnsw_file(pipeline: Path) -> Tuple[Path, int, int, int]:
    """The pipeline's hnsw index file, its names, dimensions and recorded size (from ``index_meta.json``)."""
    folder = pipeline / "sapbert_linker" / "index"
    meta = json.loads((folder / "index_meta.json").read_text(encoding="utf8"))
    return folder / str(meta["file"]), int(meta["n_names"]), int(meta["dim"]), int(meta["file_size"])


def hnsw_worker(pipeline: Path, rounds: int, code: str) -> None:
    """``check_hnsw_file`` and hnswlib's ``load_index`` with the package of checkout ``code``: print JSON."""
    sys.path.insert(0, code)
    import hnswlib

    from spacy_sapbert.index.hnsw_file import check_hnsw_file

    path, n, dim, _ = _hnsw_file(pipeline)
    check, load = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        check_hnsw_file(path, n=n, dim=dim)
        check.append(time.perf_counter() - t0)
        index = hnswlib.Index(space="ip", dim=dim)
        t1 = time.perf_counter()
        index.load_index(str(path), max_elements=n)
        load.append(time.perf_counter() - t1)
        del index
    print(json.dumps({"module": sys.modules["spacy_sapbert"].__file__, "check_hnsw_file_s": statistics.median(check),
                      "load_index_s": statistics.median(load)}))


def part_ef(pipeline: Path, rounds: int, efs: List[int]) -> Dict[str, Any]:
    """Per query depth ``ef``: top-1 and top-5 concepts of the test mentions (encoded) as the exact search over the
    index's own vectors gives them, and milliseconds a search of all of them (median of ``rounds``)."""
    import numpy

    from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.index.backends import ExactBackend
    from spacy_sapbert.kb import KnowledgeBase

    kb = KnowledgeBase.from_disk(pipeline / "sapbert_linker" / "kb")
    index = ConceptIndex.from_disk(pipeline / "sapbert_linker" / "index", kb)
    texts = sorted(set(_mentions(pipeline)))
    queries = OnnxEncoder(pipeline / "sapbert_linker" / "encoder").encode(texts, batch_size=128)
    hnsw = index._backend
    exact = ExactBackend(hnsw.vectors(list(range(len(index)))))
    index._backend = exact
    truth = index.search(queries, 10)
    index._backend = hnsw
    out: Dict[str, Any] = {"queries": len(texts), "saved_ef_search": hnsw.ef_search}
    for ef in efs:
        hnsw.set_ef(ef)
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            found = index.search(queries, 10)
            times.append(time.perf_counter() - t0)
        top1 = numpy.mean([[c for c, _ in f[:1]] == [c for c, _ in t[:1]] for f, t in zip(found, truth)])
        top5 = numpy.mean([[c for c, _ in f[:5]] == [c for c, _ in t[:5]] for f, t in zip(found, truth)])
        out[f"ef={ef}"] = {"top1_as_exact": round(float(top1), 4), "top5_as_exact": round(float(top5), 4),
                           "search_ms": round(1e3 * statistics.median(times), 1)}
    return out


def _resident_by_mapping() -> Dict[str, float]:
    """Resident MB of this process per mapping: ``[anon]``, ``[heap]``, ``lib:<file name>`` for a shared library,
    else the mapped file's path (``/proc/self/smaps``; empty where there is none)."""
    out: Dict[str, float] = {}
    smaps = Path("/proc/self/smaps")
    if not smaps.exists():
        return out
    name = "[anon]"
    for line in smaps.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and "-" in parts[0] and ":" in parts[3]:  # a mapping's header line
            name = parts[5] if len(parts) >= 6 else "[anon]"
            if ".so" in Path(name).name:
                name = "lib:" + Path(name).name
        elif parts and parts[0] == "Rss:":
            out[name] = out.get(name, 0.0) + int(parts[1]) / 1024
    return out


def _added(after: Dict[str, float], before: Dict[str, float], top: int) -> Dict[str, Any]:
    grown = {k: v - before.get(k, 0.0) for k, v in after.items()}
    largest = sorted(grown.items(), key=lambda kv: -kv[1])[:top]
    return {"total_mb": round(sum(grown.values()), 1), "largest_mb": {k: round(v, 1) for k, v in largest}}


def memory_worker(pipeline: Path, top: int) -> None:
    """The load's and one linking pass's resident memory by mapping, in this fresh process: print JSON."""
    import scispacy.abbreviation  # noqa: F401  (registers the factory; both linkers of link_ncbi hold it)
    import spacy

    floor = spacy.blank("en")
    floor.add_pipe("abbreviation_detector")
    before = _resident_by_mapping()
    nlp = spacy.load(pipeline)
    loaded = _resident_by_mapping()
    texts = _gold_spans(pipeline)
    nlp.add_pipe("load_path_gold_spans", first=True)
    list(nlp.pipe(texts, batch_size=128))
    linked = _resident_by_mapping()
    print(json.dumps({"before_mb": round(sum(before.values()), 1), "load": _added(loaded, before, top),
                      "linking pass": _added(linked, loaded, top)}))


def part_memory(pipeline: Path, top: int) -> Dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "memory-worker", "--pipeline", str(pipeline), "--top", str(top)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


STORAGE = ("hnswlib float32", "faiss float32", "faiss float16", "faiss 8-bit")
STORAGE_DEPTH = 70


def storage_worker(pipeline: Path, variant: str, out: Path) -> None:
    """One storage variant in this fresh process: read its file, search the test mentions; print JSON."""
    import numpy

    queries, truth = numpy.load(out / "queries.npy"), numpy.load(out / "truth.npy")
    vectors = numpy.load(out / "vectors.npy", mmap_mode="r")
    start = common.memory_mb()["rss"]
    if variant == "hnswlib float32":
        import hnswlib
    else:
        import faiss
    before = common.memory_mb()["rss"]
    t0 = time.perf_counter()
    if variant == "hnswlib float32":
        path, n, dim, _ = _hnsw_file(pipeline)
        index = hnswlib.Index(space="ip", dim=dim)
        index.load_index(str(path), max_elements=n)
        load_s = time.perf_counter() - t0
        added = common.memory_mb()["rss"] - before
        index.set_ef(200)
        index.set_num_threads(1)
        t1 = time.perf_counter()
        rows, dist = index.knn_query(queries, k=STORAGE_DEPTH)
        scores = 1.0 - dist
    else:
        index = faiss.read_index(str(out / f"{_slug(variant)}.faiss"))
        load_s = time.perf_counter() - t0
        added = common.memory_mb()["rss"] - before
        index.hnsw.efSearch = 200
        faiss.omp_set_num_threads(1)
        t1 = time.perf_counter()
        scores, rows = index.search(queries, STORAGE_DEPTH)
    search_ms = 1e3 * (time.perf_counter() - t1)
    true_scores = numpy.einsum("qd,qkd->qk", queries, numpy.asarray(vectors[rows.ravel()]).reshape(*rows.shape, -1))
    print(json.dumps({"variant": variant, "library_mb": before - start, "load_s": load_s, "rss_added_mb": added,
                      "search_ms": search_ms,
                      "top1_as_exact": float(numpy.mean(rows[:, 0] == truth[:, 0])),
                      "top5_as_exact": float(numpy.mean([set(r[:5]) == set(t[:5]) for r, t in zip(rows, truth)])),
                      "max_score_error": float(numpy.abs(scores - true_scores).max())}))


def part_storage(pipeline: Path, rounds: int, out: Path) -> Dict[str, Any]:
    """The storage variants (:data:`STORAGE`), each in fresh processes alternated over ``rounds``: medians."""
    import faiss
    import numpy

    from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import KnowledgeBase

    out.mkdir(parents=True, exist_ok=True)
    kb = KnowledgeBase.from_disk(pipeline / "sapbert_linker" / "kb")
    index = ConceptIndex.from_disk(pipeline / "sapbert_linker" / "index", kb)
    vectors = numpy.ascontiguousarray(index._backend.vectors(list(range(len(index)))), dtype=numpy.float32)
    queries = OnnxEncoder(pipeline / "sapbert_linker" / "encoder").encode(sorted(set(_mentions(pipeline))),
                                                                        batch_size=128).astype(numpy.float32)
    numpy.save(out / "vectors.npy", vectors)
    numpy.save(out / "queries.npy", queries)
    numpy.save(out / "truth.npy", numpy.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :STORAGE_DEPTH])
    built: Dict[str, Any] = {}
    for variant in STORAGE[1:]:
        t0 = time.perf_counter()
        if variant == "faiss float32":
            graph = faiss.IndexHNSWFlat(vectors.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
        else:
            kind = faiss.ScalarQuantizer.QT_fp16 if variant == "faiss float16" else faiss.ScalarQuantizer.QT_8bit
            graph = faiss.IndexHNSWSQ(vectors.shape[1], kind, 32, faiss.METRIC_INNER_PRODUCT)
            graph.train(vectors)
        graph.hnsw.efConstruction = 200
        graph.add(vectors)
        path = out / f"{_slug(variant)}.faiss"
        faiss.write_index(graph, str(path))
        built[variant] = {"build_s": round(time.perf_counter() - t0, 1), "file_mb": round(path.stat().st_size / 2**20, 1)}
    built[STORAGE[0]] = {"build_s": None, "file_mb": round(_hnsw_file(pipeline)[3] / 2**20, 1)}
    runs: Dict[str, List[Dict[str, Any]]] = {variant: [] for variant in STORAGE}
    for r in range(rounds):
        for variant in (STORAGE if r % 2 == 0 else STORAGE[::-1]):
            done = subprocess.run([sys.executable, __file__, "storage-worker", "--pipeline", str(pipeline),
                                   "--variant", variant, "--out", str(out)], capture_output=True, text=True, check=True)
            runs[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {"names": len(index), "queries": len(queries), "build_threads": faiss.omp_get_max_threads(),
            "variants": {variant: {**built[variant], **{key: round(statistics.median(run[key] for run in found), 6)
                                                        for key in found[0] if key != "variant"}}
                         for variant, found in runs.items()}}


def _with_optimized_graph(pipeline: Path, out: Path) -> Path:
    """A copy of ``pipeline`` (under ``out``, once) that runs the encoder's graph optimised offline at the
    "extended" level with optimisation off at load: the graph written over the copy's ``model.onnx`` (its record in
    ``onnx_export.json`` updated), the session's level set by this script (:data:`LOAD_LEVEL`)."""
    from spacy_sapbert.encoding.onnx_export import DATA_FILE, ONNX_FILE

    def rewrite(folder: Path) -> List[str]:
        optimised = _offline(folder, "extended", out)  # reads the graph with its weights, wherever they are
        shutil.copyfile(optimised, folder / ONNX_FILE)
        (folder / DATA_FILE).unlink(missing_ok=True)  # the optimised graph holds its weights
        return [ONNX_FILE]

    return _encoder_graph_copy(pipeline, out / f"{pipeline.name}_optimized", rewrite)


def _encoder_graph_copy(pipeline: Path, copy: Path, rewrite: Any) -> Path:
    """``copy`` of ``pipeline`` (made once, through a temporary folder): ``rewrite(encoder_folder)`` rewrites its
    encoder's graph files and returns their names, which ``onnx_export.json`` then records instead of the graph's."""
    from spacy_sapbert.base.integrity import file_records
    from spacy_sapbert.encoding.onnx_export import DATA_FILE, EXPORT_FILE, ONNX_FILE, recorded_export

    if not copy.exists():
        tmp = copy.parent / f"{copy.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(pipeline, tmp)
        folder = tmp / "sapbert_linker" / "encoder"
        written = rewrite(folder)
        record = recorded_export(folder)
        record["files"] = {name: value for name, value in record["files"].items() if name not in (ONNX_FILE, DATA_FILE)}
        record["files"].update(file_records(folder, written))
        (folder / EXPORT_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))
        tmp.rename(copy)
    return copy


def _on_every_session(edit: Any) -> None:
    """Make every ONNX Runtime session this process opens from now on run ``edit(options)`` on its
    ``SessionOptions`` first (the last ``edit`` given replaces the one before)."""
    import onnxruntime as ort

    made = getattr(ort.InferenceSession, "_load_path_made", ort.InferenceSession.__init__)
    ort.InferenceSession._load_path_made = made

    def init(self, path, sess_options=None, *args, **kwargs):
        if sess_options is not None:
            edit(sess_options)
        made(self, path, sess_options, *args, **kwargs)

    ort.InferenceSession.__init__ = init


def _session_level(level: str) -> None:
    """Make every ONNX Runtime session this process opens from now on use graph optimisation ``level``."""
    _on_every_session(lambda options: setattr(options, "graph_optimization_level", _level(level)))


def _gold_spans(pipeline: Path) -> List[str]:
    """The test texts beside ``pipeline``; registers the component ``load_path_gold_spans`` that sets their gold
    spans as the doc's entities."""
    import spacy

    texts = json.loads((pipeline.parent / "texts.json").read_text(encoding="utf8"))
    spans = json.loads((pipeline.parent / "spans.json").read_text(encoding="utf8"))

    def gold(doc):
        found = [doc.char_span(s, e, label="Disease", alignment_mode="expand") for s, e in spans[doc.text]]
        doc.ents = spacy.util.filter_spans([f for f in found if f is not None])
        return doc

    if "load_path_gold_spans" not in spacy.registry.factories:
        spacy.Language.component("load_path_gold_spans", func=gold)
    return texts


def part_pipeline(pipeline: Path, rounds: int, out: Path) -> Dict[str, Any]:
    """``spacy.load`` (warm: every file read once before) and one linking pass over the test documents' gold spans,
    the pipeline as saved (``model.onnx``) and its copy with the optimised graph, alternated in this process."""
    import spacy

    texts = _gold_spans(pipeline)
    pipelines = {"model.onnx": (pipeline, "all"),
                 "optimised offline": (_with_optimized_graph(pipeline, out), "disable")}
    for path, level in pipelines.values():
        _session_level(level)
        spacy.load(path)
    loads: Dict[str, List[float]] = {name: [] for name in pipelines}
    links: Dict[str, List[float]] = {name: [] for name in pipelines}
    kb_ids: Dict[str, Any] = {}
    for _ in range(rounds):
        for name, (path, level) in pipelines.items():
            _session_level(level)
            t0 = time.perf_counter()
            nlp = spacy.load(path)
            loads[name].append(time.perf_counter() - t0)
            nlp.add_pipe("load_path_gold_spans", first=True)
            t0 = time.perf_counter()
            docs = list(nlp.pipe(texts, batch_size=128))
            links[name].append(time.perf_counter() - t0)
            kb_ids[name] = [[(e.kb_id_, e._.kb_ents) for e in doc.ents] for doc in docs]
    return {name: {"warm_load_s": round(statistics.median(loads[name]), 3),
                   "warm_load_min_s": round(min(loads[name]), 3), "link_s": round(statistics.median(links[name]), 3), "link_min_s": round(min(links[name]), 3)}
            for name in pipelines} | {"same_kb_ents": kb_ids["model.onnx"] == kb_ids["optimised offline"]}


EXTERNAL = {"weights inside the graph": (False, False), "external data": (True, False),
            "external data, no prepacking": (True, True)}


def _with_weights(pipeline: Path, out: Path, external: bool) -> Path:
    """A copy of ``pipeline`` (under ``out``, once) whose encoder ``model.onnx`` holds its weights (``external``
    False: the layout of exports before 2026-12-03) or keeps them in ``model.onnx.data`` beside it (ONNX's external
    data, today's exports), whichever layout the pipeline was saved with; ``onnx_export.json`` records the files."""
    import onnx

    from spacy_sapbert.encoding.onnx_export import DATA_FILE, ONNX_FILE

    def rewrite(folder: Path) -> List[str]:
        model = onnx.load(str(folder / ONNX_FILE))  # with its external data, if any
        (folder / DATA_FILE).unlink(missing_ok=True)
        onnx.save_model(model, str(folder / ONNX_FILE), save_as_external_data=external, all_tensors_to_one_file=True,
                        location=DATA_FILE, size_threshold=1024)
        return [ONNX_FILE] + ([DATA_FILE] if external else [])

    return _encoder_graph_copy(pipeline, out / f"{pipeline.name}_{'external' if external else 'inside'}", rewrite)


def external_worker(pipeline: Path, variant: str) -> None:
    """One ``external`` variant in this fresh process (``pipeline``: the copy the variant loads); prints JSON."""
    import spacy

    from spacy_sapbert.base.util import peak_rss_mb

    if EXTERNAL[variant][1]:
        _on_every_session(lambda options: options.add_session_config_entry("session.disable_prepacking", "1"))
    t0 = time.perf_counter()
    nlp = spacy.load(pipeline)
    cold_s = time.perf_counter() - t0
    texts = _gold_spans(pipeline)
    nlp.add_pipe("load_path_gold_spans", first=True)
    t0 = time.perf_counter()
    docs = list(nlp.pipe(texts, batch_size=128))
    link_s = time.perf_counter() - t0
    rss_mb = common.memory_mb()["rss"]
    warm = []
    for _ in range(5):
        t0 = time.perf_counter()
        spacy.load(pipeline)
        warm.append(time.perf_counter() - t0)
    kb_ents = [[(e.kb_id_, e._.kb_ents) for e in doc.ents] for doc in docs]
    print(json.dumps({"cold_load_s": cold_s, "warm_load_s": statistics.median(warm), "link_s": link_s,
                      "rss_after_link_mb": rss_mb, "peak_with_reloads_mb": peak_rss_mb(), "kb_ents": kb_ents}))


def part_external(pipeline: Path, rounds: int, out: Path) -> Dict[str, Any]:
    """The :data:`EXTERNAL` variants in fresh processes, alternated (the order flips every round): medians."""
    out.mkdir(parents=True, exist_ok=True)
    copies = {external: _with_weights(pipeline, out, external) for external in (False, True)}
    for name in ("texts.json", "spans.json"):  # the worker reads them beside the pipeline it loads
        shutil.copyfile(pipeline.parent / name, out / name)
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name in EXTERNAL}
    for r in range(rounds):
        for name in (list(EXTERNAL) if r % 2 == 0 else list(EXTERNAL)[::-1]):
            path = copies[EXTERNAL[name][0]]
            done = subprocess.run([sys.executable, __file__, "external-worker", "--pipeline", str(path),
                                   "--variant", name], capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    reference = runs["weights inside the graph"][0]["kb_ents"]

    def agreement(found: List[Dict[str, Any]]) -> Dict[str, Any]:
        ids = [[[c for c, _ in ents] for _, ents in doc] for doc in reference]
        scores = [s for doc in reference for _, ents in doc for _, s in ents]
        return {"same_concepts": all([[[c for c, _ in ents] for _, ents in doc] for doc in r["kb_ents"]] == ids
                                     for r in found),
                "largest_score_difference": max(abs(a - b) for r in found for a, b in zip(
                    scores, [s for doc in r["kb_ents"] for _, ents in doc for _, s in ents]))}

    return {name: {key: round(statistics.median(r[key] for r in found), 3) for key in found[0] if key != "kb_ents"}
            | agreement(found) for name, found in runs.items()} | {
        "graph_mb": {("external" if external else "inside"): round((path / "sapbert_linker/encoder/model.onnx").stat(
            ).st_size / 2**20, 1) for external, path in copies.items()}}


class _InCallingThread:
    """A stand-in for the one-thread pool of ``linker/storage.py``: runs what it is given at once, in this thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> "_InCallingThread":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    def submit(self, fn: Any, *args: Any) -> Any:
        from concurrent.futures import Future

        done: Any = Future()
        done.set_result(fn(*args))
        return done


def part_overlap(pipeline: Path, rounds: int) -> Dict[str, Any]:
    """Warm ``spacy.load`` with the KB and index opened beside the encoder (today) and one after the other,
    alternated in this process (the order flips every round), and the ``kb_ents`` of both over the test texts."""
    import spacy

    from spacy_sapbert.linker import storage

    texts = _gold_spans(pipeline)
    ways = {"overlapped (today)": storage.ThreadPoolExecutor, "one after the other": _InCallingThread}
    spacy.load(pipeline)  # every file read once
    loads: Dict[str, List[float]] = {name: [] for name in ways}
    ents: Dict[str, Any] = {}
    try:
        for r in range(rounds):
            for name in (list(ways) if r % 2 == 0 else list(reversed(ways))):
                storage.ThreadPoolExecutor = ways[name]
                t0 = time.perf_counter()
                nlp = spacy.load(pipeline)
                loads[name].append(time.perf_counter() - t0)
                if name not in ents:
                    nlp.add_pipe("load_path_gold_spans", first=True)
                    ents[name] = [[(e.kb_id_, e._.kb_ents) for e in d.ents] for d in nlp.pipe(texts[:20])]
    finally:
        storage.ThreadPoolExecutor = ways["overlapped (today)"]
    return {name: {"warm_load_s": round(statistics.median(loads[name]), 3),
                   "warm_load_min_s": round(min(loads[name]), 3)} for name in ways} | {"same_kb_ents": ents["overlapped (today)"] == ents["one after the other"]}


def part_batch(pipeline: Path, rounds: int, runtime: str) -> Dict[str, Any]:
    """Seconds of one linking pass (median, min) at each encoder batch size, alternated in this process."""
    import spacy

    texts = _gold_spans(pipeline)
    nlp = spacy.load(pipeline, config={"components": {"sapbert_linker": {"runtime": runtime}}})
    nlp.add_pipe("load_path_gold_spans", first=True)
    linker = nlp.get_pipe("sapbert_linker")
    sizes = [16, 32, 64, 128]
    list(nlp.pipe(texts, batch_size=128))
    passes: Dict[int, List[float]] = {size: [] for size in sizes}
    for r in range(rounds):
        for size in (sizes if r % 2 else list(reversed(sizes))):
            linker.cfg["batch_size"] = size
            linker.clear_cache()
            t0 = time.perf_counter()
            list(nlp.pipe(texts, batch_size=128))
            passes[size].append(time.perf_counter() - t0)
    return {"runtime": type(linker.encoder).__name__,
            **{f"batch_size {size}": {"link_s": round(statistics.median(v), 3), "link_min_s": round(min(v), 3)}
               for size, v in passes.items()}}


BULK_REPEATS = 5


def part_spin(pipeline: Path, rounds: int) -> Dict[str, Any]:
    """One linking pass over the test documents' gold spans with the encoder's session threads spinning between batches
    (ONNX Runtime's default) and sleeping (the linker's since 2026-12-05), alternated in this process (the order flips
    every round): seconds of the pass, of its encoding and of its index searches, of encoding the distinct mention
    texts :data:`BULK_REPEATS` times in batches of 64 (bulk encoding, as ``build-index``; medians), and whether both
    give the same ``kb_ents``."""
    import spacy

    from spacy_sapbert.base.processes import ProcessSession
    from spacy_sapbert.encoding.cached import CachedEncoder

    texts = _gold_spans(pipeline)
    nlp = spacy.load(pipeline)
    nlp.add_pipe("load_path_gold_spans", first=True)
    linker = nlp.get_pipe("sapbert_linker")
    encoder, backend = linker.encoder, type(linker.index._backend)
    sessions = {}
    for name, spinning in (("spinning", True), ("sleeping", False)):
        encoder.spinning = spinning
        sessions[name] = ProcessSession(encoder._make_session, encoder.threads)
    spent = {"encode": 0.0, "search": 0.0}

    def timed(owner: Any, method: str, key: str) -> None:
        inner = getattr(owner, method)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - t0
        setattr(owner, method, wrapper)

    timed(CachedEncoder, "encode", "encode")
    timed(backend, "_knn", "search")
    passes: Dict[str, Dict[str, List[float]]] = {name: {"pass": [], "encode": [], "search": [], "bulk_encode": []}
                                                 for name in sessions}
    mentions = sorted({e.text for doc in nlp.pipe(texts, batch_size=128) for e in doc.ents})
    kb_ents: Dict[str, Any] = {}
    for r in range(rounds + 1):
        for name in (list(sessions) if r % 2 else list(reversed(list(sessions)))):
            encoder._sessions = sessions[name]
            linker.clear_cache()
            spent.update(encode=0.0, search=0.0)
            t0 = time.perf_counter()
            docs = list(nlp.pipe(texts, batch_size=128))
            if r:  # the first round warms both sessions up
                passes[name]["pass"].append(time.perf_counter() - t0)
                passes[name]["encode"].append(spent["encode"])
                passes[name]["search"].append(spent["search"])
            kb_ents[name] = [[(e.kb_id_, e._.kb_ents) for e in doc.ents] for doc in docs]
            t0 = time.perf_counter()
            for _ in range(BULK_REPEATS):  # encoding batch after batch, as build-index does
                encoder.encode(mentions, batch_size=64, use_cache=False)
            if r:
                passes[name]["bulk_encode"].append(time.perf_counter() - t0)
    return {"encoder": f"{type(encoder).__name__} ({encoder.precision})",
            **{name: {f"{key}_s": round(statistics.median(v), 4) for key, v in found.items()}
               for name, found in passes.items()},
            "same_kb_ents": kb_ents["spinning"] == kb_ents["sleeping"]}


ARENA_SHAPES = ["64x25", "30x25", "64x12", "16x25", "32x12", "12x64", "6x128"]


def _encoder_session(graph: Path) -> Any:
    """A session over ``graph`` with the options the linker's ONNX encoder gives its own."""
    from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder

    encoder = OnnxEncoder.__new__(OnnxEncoder)  # only _make_session's options, not a whole folder's checks
    encoder.folder, encoder.graph_file, encoder.precision = graph.parent, graph.name, "fp32"
    return encoder._make_session(0)


def _random_batch(rows: int, length: int, seed: int) -> Dict[str, Any]:
    import numpy

    ids = numpy.random.default_rng(seed).integers(1000, 20000, (rows, length))
    return {"input_ids": ids, "attention_mask": numpy.ones_like(ids)}


def arena_worker(graph: Path, shape: str) -> None:
    """One ``arena`` graph and shape in this fresh process; prints JSON."""
    rows, length = (int(x) for x in shape.split("x"))
    session = _encoder_session(graph)
    before = common.memory_mb()["rss"]
    feed = _random_batch(rows, length, 0)
    for _ in range(3):
        session.run(None, feed)
    t0 = time.perf_counter()
    for _ in range(20):
        session.run(None, feed)
    per_token_us = (time.perf_counter() - t0) / 20 / (rows * length) * 1e6
    print(json.dumps({"arena_mb": round(common.memory_mb()["rss"] - before, 1), "us_per_token": round(per_token_us, 1)}))


def part_arena(pipeline: Path, int8_pipeline: Path, shapes: List[str]) -> Dict[str, Any]:
    graphs = {"float32": pipeline / "sapbert_linker/encoder/model.onnx"}
    if (int8_pipeline / "sapbert_linker/encoder/model.int8.onnx").is_file():
        graphs["int8"] = int8_pipeline / "sapbert_linker/encoder/model.int8.onnx"
    out: Dict[str, Any] = {}
    for shape in shapes:
        for name, graph in graphs.items():
            done = subprocess.run([sys.executable, __file__, "arena-worker", "--graph", str(graph), "--shape", shape],
                                  capture_output=True, text=True, check=True)
            rows, length = (int(x) for x in shape.split("x"))
            out[f"{name} {shape} ({rows * length} slots)"] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def int8_weights_worker(graph: Path) -> None:
    """One ``int8-weights`` variant (the graph file to load) in this fresh process; prints JSON."""
    from spacy_sapbert.base.util import peak_rss_mb

    before = common.memory_mb()["rss"]
    t0 = time.perf_counter()
    session = _encoder_session(graph)
    session_s = time.perf_counter() - t0
    added = common.memory_mb()["rss"] - before
    t0 = time.perf_counter()
    for i in range(60):
        batch = _random_batch(64, 4 + i % 22, i)  # and zeros for any other input (a re-ranker's token_type_ids)
        session.run(None, {x.name: batch.get(x.name, batch["attention_mask"] * 0) for x in session.get_inputs()})
    print(json.dumps({"session_s": session_s, "session_added_mb": added, "peak_mb": peak_rss_mb(),
                      "encode_s": time.perf_counter() - t0}))


def part_int8_weights(int8_pipeline: Path, rounds: int, out: Path, graph: str = "") -> Dict[str, Any]:
    import onnx

    source = Path(graph) if graph else int8_pipeline / "sapbert_linker/encoder/model.int8.onnx"
    inside = out / "int8_weights_inside" / "model.int8.onnx"
    inside.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(onnx.load(str(source)), str(inside))  # the external data read in, saved inside the graph
    graphs = {"weights in model.int8.onnx.data (since 2026-12-04)": source, "weights inside the graph": inside}
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name in graphs}
    for r in range(rounds):
        for name in (list(graphs) if r % 2 == 0 else list(graphs)[::-1]):
            done = subprocess.run([sys.executable, __file__, "int8-weights-worker", "--graph", str(graphs[name])],
                                  capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {name: {key: round(statistics.median(r[key] for r in found), 3) for key in found[0]}
            for name, found in runs.items()}


def part_rerank_weights(pipeline: Path, folders: List[str], rounds: int) -> Dict[str, Any]:
    """Two re-ranker folders' int8 graphs (``--rerankers OLD NEW``: weights inside, weights beside) scoring the same
    groups (each of 200 distinct test mentions with 4 names of random test words) alternated in one process."""
    import random

    from spacy_sapbert.rerank.model import OnnxCrossEncoder

    words = " ".join(json.loads((pipeline.parent / "texts.json").read_text(encoding="utf8"))).split()
    rng = random.Random(0)
    groups = [(m, [" ".join(rng.sample(words, rng.randint(1, 4))) for _ in range(4)])
              for m in sorted(set(_mentions(pipeline)))[:200]]
    models = {folder: OnnxCrossEncoder(folder) for folder in folders}
    logits = {folder: model.score_groups(groups) for folder, model in models.items()}  # also a warm-up
    times: Dict[str, List[float]] = {folder: [] for folder in models}
    for r in range(rounds):
        for folder in (list(models) if r % 2 == 0 else list(models)[::-1]):
            t0 = time.perf_counter()
            models[folder].score_groups(groups)
            times[folder].append(time.perf_counter() - t0)
    first, *rest = logits.values()
    return {"groups": len(groups), "largest_logit_difference": max(
                float(abs(a - b).max()) for other in rest for a, b in zip(first, other)),
            **{folder: {"median_s": round(statistics.median(t), 3), "min_s": round(min(t), 3),
                        "graph_files": sorted(models[folder].meta["onnx_files"])} for folder, t in times.items()}}


def part_normcheck(pipeline: Path, rounds: int) -> Dict[str, Any]:
    import faiss
    import numpy

    from spacy_sapbert.base.integrity import unit_norm_problem

    vectors = numpy.load(pipeline / "sapbert_linker/index/vectors.f16.npy")
    quantizer = faiss.ScalarQuantizer(vectors.shape[1], faiss.ScalarQuantizer.QT_fp16)
    ways = {"numpy's float16 cast": lambda b: numpy.asarray(b, dtype=numpy.float32),
            "faiss's float16 decoder": lambda b: quantizer.decode(numpy.ascontiguousarray(b).view(numpy.uint8))}
    times: Dict[str, List[float]] = {name: [] for name in ways}
    for r in range(rounds):
        for name in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
            t0 = time.perf_counter()
            assert unit_norm_problem(vectors, rows_per_block=1024, to_float32=ways[name]) is None
            times[name].append(time.perf_counter() - t0)
    blocks = [vectors[i:i + 1024] for i in range(0, len(vectors), 1024)]
    same = all(numpy.array_equal(ways["numpy's float16 cast"](b), ways["faiss's float16 decoder"](b)) for b in blocks)
    return {"rows": len(vectors), "dim": int(vectors.shape[1]), "same_float32_values": same,
            **{name: {"median_s": round(statistics.median(t), 4)} for name, t in times.items()}}


def _alternate(part: str, pipeline: Path, rounds: int, baseline: str) -> Dict[str, Any]:
    """``part``'s worker for this checkout and ``baseline`` (another checkout), alternated in adjacent processes."""
    codes = {"this checkout": str(common.ROOT), **({"baseline": baseline} if baseline else {})}
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name in codes}
    for _ in range(rounds):
        for name, code in codes.items():
            done = subprocess.run([sys.executable, __file__, f"{part}-worker", "--pipeline", str(pipeline),
                                   "--code", code, "--rounds", str(rounds)],
                                  capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {name: {key: (round(statistics.median(r[key] for r in found), 4) if key.endswith("_s") or
                         key.endswith("_us") else value) for key, value in found[0].items()}
            for name, found in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["kb", "onnx", "hnsw", "ef", "pipeline", "overlap", "batch", "storage", "memory",
                                         "external", "onnx-worker", "kb-worker", "hnsw-worker", "storage-worker", "memory-worker",
                                         "external-worker", "arena", "arena-worker", "int8-weights",
                                         "int8-weights-worker", "normcheck", "rerank-weights", "spin"])
    parser.add_argument("--top", type=int, default=8, help="memory: the largest mappings shown")
    parser.add_argument("--ef", type=int, nargs="+", default=[70, 100, 150, 200, 400],
                        help="ef: query depths (hnswlib searches at least as deep as the names asked: 70 for MEDIC)")
    parser.add_argument("--pipeline", type=Path, default=WORK / "nlp_sapbert")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variant", default="all (ORT defaults)")
    parser.add_argument("--runtime", default="auto", choices=["auto", "torch"], help="batch: the encoder's runtime")
    parser.add_argument("--graph", default="")
    parser.add_argument("--int8-pipeline", type=Path, default=WORK / "nlp_sapbert_int8",
                        help="arena, int8-weights: the pipeline after `export-onnx --quantize`")
    parser.add_argument("--shapes", nargs="+", default=ARENA_SHAPES, help="arena: batch shapes, rows x word pieces")
    parser.add_argument("--shape", default="64x25", help=argparse.SUPPRESS)
    parser.add_argument("--rerankers", nargs=2, default=[], help="rerank-weights: two re-ranker folders")
    parser.add_argument("--out", type=Path, default=WORK / "load_path", help="onnx: where its graphs and vectors go")
    parser.add_argument("--code", default="", help="the checkout a kb or hnsw worker runs")
    parser.add_argument("--baseline", default="", help="kb, hnsw: another checkout to compare with, e.g. ../main")
    args = parser.parse_args()
    if args.part == "onnx-worker":
        onnx_worker(args.pipeline, args.variant, args.graph, args.out)
        return
    if args.part == "external-worker":
        external_worker(args.pipeline, args.variant)
        return
    if args.part == "arena-worker":
        arena_worker(Path(args.graph), args.shape)
        return
    if args.part == "int8-weights-worker":
        int8_weights_worker(Path(args.graph))
        return
    if args.part == "memory-worker":
        memory_worker(args.pipeline, args.top)
        return
    if args.part == "storage-worker":
        storage_worker(args.pipeline, args.variant, args.out)
        return
    if args.part in ("kb-worker", "hnsw-worker"):
        (kb_worker if args.part == "kb-worker" else hnsw_worker)(args.pipeline, args.rounds, args.code)
        return
    load = os.getloadavg()
    figures = (part_onnx(args.pipeline, args.rounds, args.out) if args.part == "onnx" else
               part_ef(args.pipeline, args.rounds, args.ef) if args.part == "ef" else
               part_pipeline(args.pipeline, args.rounds, args.out) if args.part == "pipeline" else
               part_overlap(args.pipeline, args.rounds) if args.part == "overlap" else
               part_batch(args.pipeline, args.rounds, args.runtime) if args.part == "batch" else
               part_spin(args.pipeline, args.rounds) if args.part == "spin" else
               part_storage(args.pipeline, args.rounds, args.out) if args.part == "storage" else
               part_memory(args.pipeline, args.top) if args.part == "memory" else
               part_external(args.pipeline, args.rounds, args.out) if args.part == "external" else
               part_arena(args.pipeline, args.int8_pipeline, args.shapes) if args.part == "arena" else
               part_int8_weights(args.int8_pipeline, args.rounds, args.out, args.graph) if args.part == "int8-weights" else
               part_normcheck(args.pipeline, args.rounds) if args.part == "normcheck" else
               part_rerank_weights(args.pipeline, args.rerankers, args.rounds) if args.part == "rerank-weights" else
               _alternate(args.part, args.pipeline, args.rounds, args.baseline))
    result = {"part": args.part, "load_average_before": [round(x, 2) for x in load], "figures": figures,
              "load_average_after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
