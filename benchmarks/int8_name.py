"""The int8 name encoder: accuracy and speed of ONNX Runtime's int8 copy against its float32 export.

The dynamic int8 copy of the name encoder against the float32 ONNX export it was made from (docs/linker.md,
"int8 name encoder").

The linker: ``sapbert_linker`` with the offline all-MiniLM-L6-v2 (mean pooling, max_length 25), MEDIC 2012 as the
KB (exact index), gold mention spans, defaults otherwise (abbreviations resolved, k = 10, KB names reuse the
index's vectors). Corpora: NCBI-disease test (960 mentions) and BC5CDR-disease dev.

Accuracy: strict acc@1 (the top concept is one of the gold ids; a composite mention is right when any part is;
mentions without a gold id in the KB count as wrong), for

- fp32: float32 ONNX encoder, float32 index (the default CPU pipeline);
- int8 queries: the int8 encoder over the same float32 index (what ``export-onnx --quantize`` gives a saved
  pipeline: the index is not rebuilt);
- int8 both: the KB names encoded by the int8 encoder too (an index rebuilt with it).

Variants of the quantization (``quantize_export`` options): ``plain`` (QInt8 weights, per tensor), and with
``--variants`` more (per_channel, reduce_range, MatMul only). Speed: mentions/s linking both corpora through the
pipeline (``nlp.pipe`` over the gold docs, everything the call does, a fresh encoder so its cache starts empty;
the index as a user gets it, kind auto: hnswlib for the 76k MEDIC names; time inside the encoder recorded too),
fp32 and int8 alternated ``--repeats`` times in the same process, the best run of each kept; the machine's load
average is recorded with them (it is shared).

    python benchmarks/int8_name.py [--cache-dir /work/cache/int8_name] [--repeats 3] [--variants plain,per_channel]
                                   [--both plain]   # variants whose KB names are also encoded by int8

Name vectors are cached (the float32 ones in the evaluation's vector cache under --fp32-cache, the int8 ones
per variant under --cache-dir), so a rerun encodes nothing but the mentions.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from common import BC5CDR, NCBI, OUTPUT, medic_kb, minilm_path
from results_io import table, write_results

VARIANTS: Dict[str, Dict[str, Any]] = {
    "plain": {},
    "per_channel": {"per_channel": True},
    "reduce_range": {"reduce_range": True},
    "per_channel+reduce_range": {"per_channel": True, "reduce_range": True},
    "matmul_only": {"op_types": ["MatMul"]},
}


def corpora() -> Dict[str, Any]:
    from spacy_sapbert.mentions.datasets import read_dataset

    return {"NCBI-disease test": read_dataset(NCBI["test"]),
            "BC5CDR-disease dev": read_dataset(BC5CDR["dev"], types=["Disease"])}


def export_folder(work: Path, model: str) -> Path:
    """The encoder folder with its float32 ONNX export (written once)."""
    from spacy_sapbert.encoding.onnx_encoder import export_is_current, export_onnx
    from spacy_sapbert.encoding.torch_encoder import Encoder

    folder = work / "fp32"
    encoder = Encoder.load(model, pooling="mean", max_length=25, device="cpu", precision="fp32")
    if not export_is_current(folder, encoder.fingerprint, encoder.pooling):
        encoder.to_disk(folder)
        export_onnx(encoder, folder)
    return folder


def variant_folder(work: Path, fp32: Path, name: str) -> Path:
    from spacy_sapbert.encoding.onnx_encoder import INT8_FILE, quantize_export, recorded_export

    folder = work / name
    options = VARIANTS[name]
    if recorded_export(folder).get("int8") != INT8_FILE or not (folder / INT8_FILE).is_file():
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(fp32, folder, ignore=shutil.ignore_patterns("model.int8.onnx"))
        quantize_export(folder, **options)
    return folder


def name_vectors(encoder: Any, kb: Any, cache_dir: Path, tag: str):
    from spacy_sapbert.evaluation.cache import VectorCache, encoder_key

    cache = VectorCache(cache_dir, encoder_key(encoder) + tag, dim=encoder.dim)
    return cache.get(encoder, list(kb.names), batch_size=256, show_progress=False)


def exact_index(kb: Any, vectors: Any, encoder: Any):
    from spacy_sapbert.index import ConceptIndex

    return ConceptIndex.from_vectors(kb, vectors, encoder, kind="exact", show_progress=False)


def pipeline(kb: Any, encoder: Any, vectors: Any, model: str, index: Any = None):
    """A blank pipeline with the linker over ``index`` (default: an exact one of ``vectors``)."""
    import spacy

    index = exact_index(kb, vectors, encoder) if index is None else index
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": model, "pooling": "mean", "device": "cpu",
                                                    "threshold": -1.0, "max_length": 25,
                                                    "precision": "int8" if encoder.precision == "int8" else "auto"})
    linker.set_resources(encoder, index)
    return nlp


def gold_sets(kb: Any, sets: Dict[str, Any]) -> Dict[str, Tuple[List[Any], List[Any], List[Any]]]:
    """Per corpus: spaCy docs with the gold spans, where each mention's span is, its gold ids."""
    import spacy

    from spacy_sapbert.mentions.datasets import iter_mentions
    from spacy_sapbert.mentions.metrics import resolve_gold
    from spacy_sapbert.evaluation.pipeline import gold_docs

    blank = spacy.blank("en")
    out = {}
    for name, docs in sets.items():
        keep = [d for d in docs if d.mentions]
        sdocs, where = gold_docs(blank, keep)
        golds = [resolve_gold(kb, m.ids) if m.ids else None for m in iter_mentions(keep)]
        pairs = [(w, g) for w, g in zip(where, golds) if g is not None]  # BC5CDR's -1 mentions: no gold
        out[name] = (sdocs, [w for w, _ in pairs], [g for _, g in pairs])
    return out


def copies(docs: Sequence[Any]) -> List[Any]:
    from spacy.tokens import Doc

    return [Doc(d.vocab).from_bytes(d.to_bytes()) for d in docs]


def strict_acc1(nlp: Any, sdocs: Sequence[Any], where: Sequence[Any], golds: Sequence[Any]) -> float:
    linked = list(nlp.pipe(copies(sdocs)))
    right = 0
    for w, g in zip(where, golds):
        if w is None:
            continue
        ents = linked[w[0]].ents[w[1]]._.kb_ents or []
        right += bool(ents) and ents[0][0] in g.ids
    return right / len(golds)


def timed(nlp: Any, docs: Sequence[Any]) -> Tuple[float, float]:
    """Seconds linking ``docs`` through the pipeline, and the seconds of it spent in the encoder."""
    encoder = nlp.get_pipe("sapbert_linker").encoder
    inner, spent = encoder.encode, [0.0]

    def encode(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    encoder.encode = encode  # this benchmark's pipelines only
    start = time.perf_counter()
    for _ in nlp.pipe(docs):
        pass
    return time.perf_counter() - start, spent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=OUTPUT / "cache" / "int8_name")
    parser.add_argument("--fp32-cache", type=Path, default=OUTPUT / "cache" / "calibration")
    parser.add_argument("--variants", default="plain")
    parser.add_argument("--both", default="plain", help="variants whose KB names are encoded by int8 too (minutes)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print, do not write benchmarks/results")
    args = parser.parse_args()


    from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder

    model = minilm_path()
    work = args.cache_dir
    work.mkdir(parents=True, exist_ok=True)
    fp32_folder = export_folder(work, model)
    kb = medic_kb()
    fp32 = OnnxEncoder(fp32_folder)
    fp32_vectors = name_vectors(fp32, kb, args.fp32_cache, "")  # the float32 names (PyTorch or ONNX: same key)
    sets = gold_sets(kb, corpora())
    names = list(sets)
    acc_rows, speed_rows, figures = [], [], {"mentions": {n: len(sets[n][2]) for n in names}}

    def accuracy(label: str, nlp: Any) -> List[float]:
        values = [round(100 * strict_acc1(nlp, *sets[n]), 2) for n in names]
        print(f"{label}: {values}", file=sys.stderr)
        return values

    base = accuracy("fp32", pipeline(kb, fp32, fp32_vectors, model))
    acc_rows.append(["fp32 (ONNX float32)", "fp32", *base, 0.0, 0.0])
    from spacy_sapbert.index import ConceptIndex

    # speed through the pipeline as a user builds it: kind auto (hnswlib for MEDIC's 76k names)
    speed_index = ConceptIndex.from_vectors(kb, fp32_vectors, fp32, kind="auto", num_threads=2, show_progress=False)
    figures["speed_index_kind"] = speed_index.kind
    all_docs = [d for n in names for d in sets[n][0]]
    n_mentions = sum(len(d.ents) for d in all_docs)
    both = {v.strip() for v in args.both.split(",") if v.strip()}
    for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
        folder = variant_folder(work, fp32_folder, variant)
        int8 = OnnxEncoder(folder, quantized=True)
        q = accuracy(f"{variant}, int8 queries", pipeline(kb, int8, fp32_vectors, model))
        acc_rows.append([f"int8 {variant}", "fp32", *q, round(q[0] - base[0], 2), round(q[1] - base[1], 2)])
        if variant in both:
            int8_vectors = name_vectors(int8, kb, work / "vectors", f"-{variant}")
            b = accuracy(f"{variant}, int8 both", pipeline(kb, OnnxEncoder(folder, quantized=True), int8_vectors, model))
            acc_rows.append([f"int8 {variant}", f"int8 {variant}", *b, round(b[0] - base[0], 2),
                             round(b[1] - base[1], 2)])
        best: Dict[str, Tuple[float, float]] = {}
        loads = []
        for _ in range(args.repeats):
            for label, folder_, quantized in (("fp32", fp32_folder, False), ("int8", folder, True)):
                nlp = pipeline(kb, OnnxEncoder(folder_, quantized=quantized), None, model, index=speed_index)
                seconds, in_encoder = timed(nlp, copies(all_docs))
                best[label] = min(best.get(label, (float("inf"), 0.0)), (seconds, in_encoder))
                loads.append(os.getloadavg()[0])
                print(f"{variant} {label}: {n_mentions / seconds:.0f} mentions/s, {in_encoder:.1f} of {seconds:.1f} s "
                      "in the encoder", file=sys.stderr)
        (fp_s, fp_enc), (q_s, q_enc) = best["fp32"], best["int8"]
        speed_rows.append([variant, n_mentions, round(n_mentions / fp_s, 1), round(n_mentions / q_s, 1),
                           round(fp_s / q_s, 2), round(fp_enc / q_enc, 2), round(100 * fp_enc / fp_s, 1),
                           round(min(loads), 2), round(max(loads), 2)])
        figures.setdefault("int8_file_bytes", {})[variant] = (folder / "model.int8.onnx").stat().st_size
    figures["fp32_file_bytes"] = (fp32_folder / "model.onnx").stat().st_size
    tables = {
        "Strict acc@1 (%), MiniLM (mean) + MEDIC, gold spans": table(
            ["query encoder", "index (KB names) encoded by", *names, f"delta {names[0]}", f"delta {names[1]}"],
            acc_rows),
        "Linking speed through the pipeline, both corpora (hnsw index of the float32 names)": table(
            ["int8 variant", "mentions", "fp32 mentions/s", "int8 mentions/s", "int8 / fp32",
             "encoder alone int8 / fp32", "fp32 share in the encoder (%)", "load avg min", "load avg max"],
            speed_rows),
    }
    notes = [f"best of {args.repeats} runs each, fp32 and int8 alternated in one process; ONNX Runtime with its "
             "default threads; the machine is shared (load averages in the table)",
             "mentions/s counts every gold mention linked (KB names among them take the index's vector, as the "
             "linker does by default)"]
    if args.no_write:
        import json

        print(json.dumps(tables, indent=1))
        return
    print(write_results("int8_name", tables, notes=notes, figures=figures,
                        command=f"python benchmarks/int8_name.py --variants {args.variants} --both {args.both} "
                                f"--repeats {args.repeats}"))


if __name__ == "__main__":
    main()
