"""The int8 name encoder: accuracy and speed of ONNX Runtime's int8 copy against its float32 export.

The int8 copy of the name encoder against the float32 ONNX export it was made from (docs/linker.md,
"int8 name encoder"), for several int8 recipes, one of which is chosen on held-back data.

The linker: ``sapbert_linker`` with the offline all-MiniLM-L6-v2 (mean pooling, max_length 25), MEDIC 2012 as the
KB (exact index), gold mention spans, defaults otherwise (abbreviations resolved, k = 10, KB names reuse the
index's vectors). Corpora: the selection sets NCBI-disease dev (787 mentions) and a sample of BC5CDR-disease train
(250 of its 500 documents, seed 0), and the reported sets NCBI-disease test (960 mentions) and BC5CDR-disease dev.

Accuracy: strict acc@1 (the top concept is one of the gold ids; a composite mention is right when any part is;
mentions without a gold id in the KB count as wrong), for

- fp32: float32 ONNX encoder, float32 index (the default CPU pipeline);
- int8 queries: the int8 encoder over the same float32 index (what ``export-onnx --quantize`` gives a saved
  pipeline: the index is not rebuilt);
- int8 both: the KB names encoded by the int8 encoder too (an index rebuilt with it).

Each set is linked by a fresh encoder (its cache empty: with dynamic quantization a mention's vector depends on
its batch mates, so a vector cached from another set's batch would differ). The recipe is chosen on the
selection sets only: the smallest worst loss against float32 over the two, ties broken by the share of mentions
whose top concept stays the float32 one; the reported sets are then read for every recipe (an ablation).

Recipes (``--variants``): ``dynamic`` and ``dynamic-pc-l0`` are the package's
(:mod:`spacy_sapbert.encoding.int8_recipes`); the others are ablations built here: dynamic quantization with
per_channel / reduce_range / MatMul only / other layers left float32, and ``static*``: ONNX Runtime's static
quantization (QDQ, per-channel weights, int8 activations with per-tensor scales calibrated on 320 KB names,
MinMax or Percentile). ``batch dependence``: the largest cosine distance between a name's int8 vector encoded
alone and within a batch of 64 names (0 for float32 up to float error).

Speed (``--speed`` variants): mentions/s linking the reported corpora through the pipeline (``nlp.pipe`` over the
gold docs, everything the call does, a fresh encoder so its cache starts empty; the index as a user gets it, kind
auto: hnswlib for the 76k MEDIC names; time inside the encoder recorded too), fp32 and int8 alternated
``--repeats`` times in the same process, the best run of each kept; the machine's load average is recorded with
them (it is shared).

    python benchmarks/int8_name.py [--cache-dir /work/cache/int8_name] [--repeats 3]
        [--variants dynamic,dynamic-pc-l0,...] [--speed dynamic,dynamic-pc-l0] [--both dynamic-pc-l0]

Name vectors are cached (the float32 ones in the evaluation's vector cache under --fp32-cache, the int8 ones
per variant under --cache-dir), so a rerun encodes nothing but the mentions.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from common import BC5CDR, NCBI, OUTPUT, medic_kb, minilm_path
from results_io import table, write_results

SELECTION = ("NCBI-disease dev", "BC5CDR-disease train sample")
REPORTED = ("NCBI-disease test", "BC5CDR-disease dev")
DEFAULT_VARIANTS = ("dynamic,per_channel,reduce_range,matmul_only,dynamic-pc-l0,pc_l5,pc_l0_l5,pc_attention_out_fp32,"
                    "pc_ffn_out_fp32,pc_symmetric_activations,static_minmax,static_percentile")


def variants() -> Dict[str, Any]:
    """Every recipe this benchmark knows: the package's and the ablations (an Int8Recipe, or a dict for static)."""
    from spacy_sapbert.encoding.int8_recipes import RECIPES, Int8Recipe

    out: Dict[str, Any] = dict(RECIPES)
    for name, options in {"per_channel": {"per_channel": True}, "reduce_range": {"reduce_range": True},
                          "per_channel+reduce_range": {"per_channel": True, "reduce_range": True},
                          "matmul_only": {"op_types": ("MatMul",)},
                          "pc_l5": {"per_channel": True, "float_layers": (5,)},
                          "pc_l0_l5": {"per_channel": True, "float_layers": (0, 5)}}.items():
        out[name] = Int8Recipe(name, **options)
    out["pc_attention_out_fp32"] = {"dynamic": True, "per_channel": True, "exclude": "attention/output/dense"}
    out["pc_ffn_out_fp32"] = {"dynamic": True, "per_channel": True, "exclude": "/output/dense", "not": "attention"}
    out["pc_symmetric_activations"] = {"dynamic": True, "per_channel": True, "extra": {"ActivationSymmetric": True}}
    out["static_minmax"] = {"static": "MinMax"}
    out["static_percentile"] = {"static": "Percentile"}
    return out


def corpora() -> Dict[str, Any]:
    import random

    from spacy_sapbert.mentions.datasets import read_dataset

    train = [d for d in read_dataset(BC5CDR["train"], types=["Disease"]) if d.mentions]
    return {"NCBI-disease dev": read_dataset(NCBI["dev"]),
            "BC5CDR-disease train sample": random.Random(0).sample(train, 250),
            "NCBI-disease test": read_dataset(NCBI["test"]),
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


def variant_folder(work: Path, fp32: Path, name: str, kb: Any) -> Path:
    """The encoder folder with the int8 copy of variant ``name`` (written once; a recorded one is reused)."""
    from spacy_sapbert.encoding.onnx_encoder import INT8_FILE, quantize_export, recorded_export

    folder = work / name
    if recorded_export(folder).get("int8_recipe") == name and (folder / INT8_FILE).is_file():
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(fp32, folder, ignore=shutil.ignore_patterns("model.int8.onnx"))
    spec = variants()[name]
    if not isinstance(spec, dict):
        quantize_export(folder, spec)
    else:
        _ablation(folder, name, spec, kb)
    return folder


def _ablation(folder: Path, name: str, spec: Dict[str, Any], kb: Any) -> None:
    """An int8 copy this benchmark makes itself (options the package's recipes do not offer), recorded as
    ``quantize_export`` records its own, so that ``OnnxEncoder(folder, quantized=True)`` loads it."""
    import json
    import logging
    import random

    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantType, quantize_dynamic, quantize_static

    from spacy_sapbert.base.integrity import file_records
    from spacy_sapbert.encoding.onnx_encoder import EXPORT_FILE, INT8_FILE, ONNX_FILE, recorded_export

    graph = onnx.load(str(folder / ONNX_FILE), load_external_data=False).graph
    exclude = sorted(n.name for n in graph.node if n.op_type == "MatMul" and spec.get("exclude")
                     and spec["exclude"] in n.name and not (spec.get("not") and spec["not"] in n.name))
    out = folder / INT8_FILE
    logging.disable(logging.WARNING)
    try:
        if "static" in spec:
            names = random.Random(0).sample(list(kb.names), 320)
            quantize_static(str(folder / ONNX_FILE), str(out), _Calibration(folder, names),
                            op_types_to_quantize=["MatMul"], per_channel=True, activation_type=QuantType.QInt8,
                            weight_type=QuantType.QInt8,
                            calibrate_method=getattr(CalibrationMethod, spec["static"]))
        else:
            quantize_dynamic(str(folder / ONNX_FILE), str(out), weight_type=QuantType.QInt8,
                             per_channel=spec["per_channel"], nodes_to_exclude=exclude or None,
                             extra_options=spec.get("extra"))
    finally:
        logging.disable(logging.NOTSET)
    recorded = recorded_export(folder)
    files = {**recorded["files"], **file_records(folder, [INT8_FILE])}
    (folder / EXPORT_FILE).write_text(json.dumps({**recorded, "files": files, "int8": INT8_FILE, "int8_recipe": name,
                                                  "int8_options": {**spec, "exclude_nodes": exclude}}, indent=2))


class _Calibration:
    """ONNX Runtime's CalibrationDataReader over names: batches of 32, every row padded to 25 word pieces (the
    Percentile calibrator stacks the batches, so they must share a shape)."""

    def __init__(self, folder: Path, names: Sequence[str]) -> None:
        import numpy

        from spacy_sapbert.encoding.onnx_encoder import _load_tokenizer

        rows = _load_tokenizer(folder, 25)(list(names))
        self.feeds = []
        for start in range(0, len(rows), 32):
            ids = numpy.zeros((32, 25), dtype=numpy.int64)
            mask = numpy.zeros_like(ids)
            for j, row in enumerate(rows[start:start + 32]):
                ids[j, : len(row)], mask[j, : len(row)] = row, 1
            self.feeds.append({"input_ids": ids, "attention_mask": mask})
        self.feeds = iter(self.feeds)

    def get_next(self) -> Any:
        return next(self.feeds, None)


def batch_dependence(encoder: Any, names: Sequence[str]) -> float:
    """The largest cosine distance between a name's vector encoded alone and within one batch of ``names``."""
    import numpy

    together = encoder.encode(list(names), batch_size=len(names), use_cache=False)
    alone = numpy.vstack([encoder.encode([n], batch_size=1, use_cache=False) for n in names])
    return float(numpy.max(1.0 - numpy.sum(together * alone, axis=1)))


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


def top1(nlp: Any, sdocs: Sequence[Any], where: Sequence[Any]) -> List[Any]:
    """The top concept (or None) of each mention, linked through ``nlp``."""
    linked = list(nlp.pipe(copies(sdocs)))
    out = []
    for w in where:
        ents = linked[w[0]].ents[w[1]]._.kb_ents or []
        out.append(ents[0][0] if ents else None)
    return out


def strict_acc1(predicted: Sequence[Any], golds: Sequence[Any]) -> float:
    return sum(p is not None and p in g.ids for p, g in zip(predicted, golds)) / len(golds)


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


def choose(rows: Dict[str, Dict[str, Any]]) -> str:
    """The variant with the smallest worst loss on the selection sets, ties broken by top-1 agreement there."""
    return min(rows, key=lambda v: (-min(rows[v]["delta"][n] for n in SELECTION),
                                    -sum(rows[v]["agree"][n] for n in SELECTION), v))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=OUTPUT / "cache" / "int8_name")
    parser.add_argument("--fp32-cache", type=Path, default=OUTPUT / "cache" / "calibration")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--speed", default="dynamic,dynamic-pc-l0", help="variants whose linking speed is timed")
    parser.add_argument("--both", default="dynamic-pc-l0",
                        help="variants whose KB names are encoded by int8 too (minutes)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print, do not write benchmarks/results")
    args = parser.parse_args()

    from spacy_sapbert.encoding.int8_recipes import NAME_RECIPE
    from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder
    from spacy_sapbert.index import ConceptIndex

    def listed(value: str) -> List[str]:
        return [v.strip() for v in value.split(",") if v.strip()]

    model = minilm_path()
    work = args.cache_dir
    work.mkdir(parents=True, exist_ok=True)
    fp32_folder = export_folder(work, model)
    kb = medic_kb()
    fp32 = OnnxEncoder(fp32_folder)
    fp32_vectors = name_vectors(fp32, kb, args.fp32_cache, "")  # the float32 names (PyTorch or ONNX: same key)
    sets = gold_sets(kb, corpora())
    names = [*SELECTION, *REPORTED]
    probe = random.Random(1).sample(list(kb.names), 64)
    figures: Dict[str, Any] = {"mentions": {n: len(sets[n][2]) for n in names}, "selection_sets": list(SELECTION),
                               "reported_sets": list(REPORTED), "package_recipe": NAME_RECIPE}

    def linked(folder: Path, quantized: bool, vectors: Any) -> Dict[str, List[Any]]:
        # a fresh encoder per set: its cache empty (dynamic int8 vectors depend on their batch mates)
        return {n: top1(pipeline(kb, OnnxEncoder(folder, quantized=quantized), vectors, model), sets[n][0],
                        sets[n][1]) for n in names}

    def acc(predicted: Dict[str, List[Any]]) -> Dict[str, float]:
        return {n: round(100 * strict_acc1(predicted[n], sets[n][2]), 2) for n in names}

    base_top = linked(fp32_folder, False, fp32_vectors)
    base = acc(base_top)
    print(f"fp32: {base}", file=sys.stderr)
    results: Dict[str, Dict[str, Any]] = {}
    folders: Dict[str, Path] = {}
    for variant in listed(args.variants):
        folders[variant] = folder = variant_folder(work, fp32_folder, variant, kb)
        top = linked(folder, True, fp32_vectors)
        got = acc(top)
        results[variant] = {
            "acc": got, "delta": {n: round(got[n] - base[n], 2) for n in names},
            "agree": {n: round(100 * sum(a == b for a, b in zip(top[n], base_top[n])) / len(top[n]), 2)
                      for n in names},
            "batch": round(batch_dependence(OnnxEncoder(folder, quantized=True), probe), 5),
            "bytes": (folder / "model.int8.onnx").stat().st_size}
        print(f"{variant}: {results[variant]}", file=sys.stderr)
    chosen = choose(results)
    figures["chosen"] = chosen
    figures["batch_dependence_fp32"] = round(batch_dependence(fp32, probe), 6)
    acc_rows = [["fp32 (ONNX float32)", "fp32", *[base[n] for n in names], *[0.0] * len(names), 100.0, 0.0,
                 "baseline"]]
    for variant, r in results.items():
        agree = round(sum(r["agree"][n] for n in SELECTION) / len(SELECTION), 2)
        worst = min(r["delta"][n] for n in SELECTION)
        selection = (f"chosen on {' + '.join(SELECTION)} (worst loss {worst})" if variant == chosen
                     else f"ablation (worst loss on the selection sets {worst})")
        acc_rows.append([f"int8 {variant}", "fp32", *[r["acc"][n] for n in names], *[r["delta"][n] for n in names],
                         agree, r["batch"], selection])
        if variant in listed(args.both):
            int8_vectors = name_vectors(OnnxEncoder(folders[variant], quantized=True), kb, work / "vectors",
                                        f"-{variant}")
            both = acc(linked(folders[variant], True, int8_vectors))
            acc_rows.append([f"int8 {variant}", f"int8 {variant}", *[both[n] for n in names],
                             *[round(both[n] - base[n], 2) for n in names], "", r["batch"],
                             "ablation (index rebuilt with int8)"])

    # speed through the pipeline as a user builds it: kind auto (the hnsw graph for MEDIC's 76k names: hnswlib's
    # float32 graph in the runs before 2026-12-01, faiss's float16 graph since)
    speed_rows = []
    speed_index = ConceptIndex.from_vectors(kb, fp32_vectors, fp32, kind="auto", num_threads=2, show_progress=False)
    figures["speed_index_kind"] = speed_index.kind
    all_docs = [d for n in REPORTED for d in sets[n][0]]
    n_mentions = sum(len(d.ents) for d in all_docs)
    for variant in listed(args.speed):
        folder = folders.get(variant) or variant_folder(work, fp32_folder, variant, kb)
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
        # Amdahl: the pipeline's ratio if the encoder were infinitely fast = 1 / (1 - encoder share)
        figures.setdefault("amdahl_bound", {})[variant] = round(fp_s / (fp_s - fp_enc), 2)
    figures["int8_file_bytes"] = {v: r["bytes"] for v, r in results.items()}
    figures["fp32_file_bytes"] = (fp32_folder / "model.onnx").stat().st_size
    tables = {
        "Strict acc@1 (%), MiniLM (mean) + MEDIC, gold spans": table(
            ["query encoder", "index (KB names) encoded by", *names, *[f"delta {n}" for n in names],
             "top-1 as fp32 on the selection sets (%)", "batch dependence (max cosine distance)", "selection"],
            acc_rows),
        "Linking speed through the pipeline, NCBI test + BC5CDR dev (hnsw index of the float32 names)": table(
            ["int8 variant", "mentions", "fp32 mentions/s", "int8 mentions/s", "int8 / fp32",
             "encoder alone int8 / fp32", "fp32 share in the encoder (%)", "load avg min", "load avg max"],
            speed_rows),
    }
    notes = [f"recipe chosen on {' and '.join(SELECTION)} (the smallest worst loss against fp32, ties: top-1 "
             f"agreement): {chosen}; the package's default (export-onnx --quantize) is {NAME_RECIPE}",
             f"best of {args.repeats} runs each, fp32 and int8 alternated in one process; ONNX Runtime with its "
             "default threads; the machine is shared (load averages in the table)",
             "mentions/s counts every gold mention linked (KB names among them take the index's vector, as the "
             "linker does by default); amdahl_bound (figures): the most the pipeline could gain from any encoder "
             "speed-up, 1 / (1 - the encoder's share)"]
    if args.no_write:
        import json

        print(json.dumps(tables, indent=1))
        return
    print(write_results("int8_name", tables, notes=notes, figures=figures))


if __name__ == "__main__":
    main()
