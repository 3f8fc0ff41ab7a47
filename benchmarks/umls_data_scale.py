"""KB build, pretraining pairs and the trainer's loader at full UMLS scale (issue 13, item 5).

One command runs every step, each in its own subprocess so that peak RAM is per step:

1. generate a synthetic UMLS META folder: MRCONSO/MRSTY with ``--rows`` rows (``kb_build.make_synthetic``)
   and, in a second folder holding the same MRCONSO, an MRREL of ``--mrrel-rows`` rows (``make_mrrel``:
   has_tradename/tradename_of rows among many other relations, as in a real release);
2. ``build-kb`` on each folder: time, peak RSS, KB size, load time of the written KB;
3. pretraining pairs (``write_kb_pairs``, <= 50 per concept) from the KB: time, peak RSS, pairs;
4. pre-tokenising the KB names (``write_pair_tokens``, the fast tokenizer in batches): time, peak RSS;
5. the trainer's loader, today's (tokenise on the fly) and the pre-tokenised one, each through a torch
   DataLoader with ``num_workers=2``: names/s (a name = one side of a pair, max_length 25).

    python benchmarks/umls_data_scale.py                          # 15M MRCONSO rows, 30M MRREL rows
    python benchmarks/umls_data_scale.py --rows 200000 --mrrel-rows 400000
    python benchmarks/umls_data_scale.py --pairs-only 800000     # pairs from a KB sized for 12M pairs

Generated files go to benchmarks/output/umls_data_scale/ (git-ignored; the generated folders are reused,
seed 0, deterministic); figures to benchmarks/results/umls_data_scale.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from common import OUTPUT, dir_mb, minilm_path
from kb_build import make_synthetic, run_step, step_load
from results_io import table, write_results

from spacy_sapbert.base.util import peak_rss_mb

OUT = OUTPUT / "umls_data_scale"

# Relations of a real MRREL (REL, RELA) with rough shares; the trade-name ones are ~1% of the rows.
_RELATIONS = [("CHD", ""), ("PAR", ""), ("RB", ""), ("RN", ""), ("SIB", ""), ("RO", "has_ingredient"),
              ("RO", "ingredient_of"), ("RN", "inverse_isa"), ("RB", "isa"), ("RO", "mapped_to"),
              ("RO", "has_finding_site"), ("RO", "finding_site_of"), ("RQ", "classified_as"), ("SY", "same_as")]
_TRADENAME = [("RN", "has_tradename"), ("RB", "tradename_of")]
_SABS = ["MSH", "SNOMEDCT_US", "RXNORM", "NCI", "MDR", "LNC", "MTH"]


def make_mrrel(path: Path, rows: int, n_cuis: int, *, tradename_share: float = 0.01, seed: int = 0) -> Dict[str, int]:
    """An MRREL file at ``path`` (standard 16 columns) with ``rows`` rows between CUIs ``C0000001..n_cuis``; each
    trade-name link is written in both directions (has_tradename and tradename_of), as in a release."""
    import numpy as np

    rng = np.random.default_rng(seed)
    written = tradename = 0
    chunk = 500_000
    with open(path, "w", encoding="utf8") as fh:
        while written < rows:
            n = min(chunk, rows - written)
            cui1 = rng.integers(1, n_cuis + 1, size=n).tolist()
            cui2 = rng.integers(1, n_cuis + 1, size=n).tolist()
            kind = rng.integers(0, len(_RELATIONS), size=n).tolist()
            is_trade = (rng.random(n) < tradename_share / 2).tolist()
            sab = rng.integers(0, len(_SABS), size=n).tolist()
            lines: List[str] = []
            for i in range(n):
                rui = written + len(lines) + 1
                if is_trade[i] and len(lines) + 1 < n:
                    a, b = cui1[i], cui2[i]
                    for (rel, rela), (x, y) in zip(_TRADENAME, ((a, b), (b, a))):
                        lines.append(f"C{x:07d}|A{rui:08d}|SCUI|{rel}|C{y:07d}|A{rui + 1:08d}|SCUI|{rela}|"
                                     f"R{rui:09d}||RXNORM|RXNORM||N|N||\n")
                        rui += 1
                    tradename += 2
                else:
                    rel, rela = _RELATIONS[kind[i]]
                    lines.append(f"C{cui1[i]:07d}|A{rui:08d}|SCUI|{rel}|C{cui2[i]:07d}|A{rui + 1:08d}|SCUI|{rela}|"
                                 f"R{rui:09d}||{_SABS[sab[i]]}|{_SABS[sab[i]]}||N|N||\n")
                if len(lines) >= n:
                    break
            fh.write("".join(lines))
            written += len(lines)
    return {"mrrel_rows": written, "tradename_rows": tradename}


def generate(rows: int, mrrel_rows: int) -> Dict[str, Any]:
    """The two META folders (reused when present): ``mrconso_<rows>`` and ``mrrel_<rows>_<mrrel_rows>``."""
    plain = OUT / f"mrconso_{rows}"
    with_rel = OUT / f"mrrel_{rows}_{mrrel_rows}"
    info: Dict[str, Any] = {"plain": str(plain), "with_rel": str(with_rel)}
    if not plain.is_dir():
        start = time.perf_counter()
        partial = plain.with_name(plain.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        info.update(make_synthetic(partial, rows))
        partial.rename(plain)  # complete folders only: a killed run regenerates
        info["generate_mrconso_s"] = time.perf_counter() - start
    n_cuis = sum(1 for _ in open(plain / "MRSTY.RRF", encoding="utf8"))
    info["cuis"] = n_cuis
    if not (with_rel / "MRREL.RRF").is_file():
        with_rel.mkdir(parents=True, exist_ok=True)
        for name in ("MRCONSO.RRF", "MRSTY.RRF"):
            target = with_rel / name
            if not target.exists():
                os.link(plain / name, target)  # same file, no second copy on disk
        start = time.perf_counter()
        tmp = with_rel / "MRREL.RRF.partial"
        info.update(make_mrrel(tmp, mrrel_rows, n_cuis))
        tmp.rename(with_rel / "MRREL.RRF")  # complete files only: a killed run regenerates
        info["generate_mrrel_s"] = time.perf_counter() - start
    return info


# ---------------------------------------------------------------- steps (run in subprocesses)
def step_generate(rows: str, mrrel_rows: str) -> Dict[str, Any]:
    return generate(int(rows), int(mrrel_rows))


def step_build(meta: str, out: str) -> Dict[str, Any]:
    from spacy_sapbert.kb.build import build_kb

    start = time.perf_counter()
    kb = build_kb([(meta, "umls")], out, overwrite=True)
    seconds = time.perf_counter() - start
    stats = kb.stats()
    return {"build_s": seconds, "build_peak_mb": peak_rss_mb(), "concepts": stats["concepts"], "names": stats["names"]}


def step_pairs(kb_path: str, out: str) -> Dict[str, Any]:
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.training.pairs import write_kb_pairs

    kb = KnowledgeBase.from_disk(kb_path)
    start = time.perf_counter()
    pairs = write_kb_pairs(kb, out, max_pairs_per_concept=50, overwrite=True)
    return {"pairs_s": time.perf_counter() - start, "pairs_peak_mb": peak_rss_mb(), "pairs": len(pairs),
            "pair_concepts": pairs.meta["n_concepts"]}


def step_rich_kb(n_concepts: str, names_per_concept: str, out: str) -> Dict[str, Any]:
    """A KB of ``n_concepts`` concepts with ``names_per_concept`` distinct names each (C(n, 2) pairs per
    concept): sized to give the ~12M pairs of UMLS pretraining, which the MRCONSO generator's 1-4 names
    per concept do not reach."""
    from spacy_sapbert.kb import Concept, KnowledgeBase

    rng = random.Random(1)
    syllables = ["ba", "ce", "di", "fo", "gu", "ka", "le", "mi", "no", "pu", "ra", "se", "ti", "vo", "xu", "ze"]
    k = int(names_per_concept)

    def concepts() -> Any:
        for i in range(int(n_concepts)):
            stem = "".join(rng.choice(syllables) for _ in range(4))
            yield Concept(f"R{i:08d}", f"{stem} {i}", tuple(f"{stem} {i} {j}" for j in range(1, k)))

    start = time.perf_counter()
    kb = KnowledgeBase.from_concepts(concepts(), source="synthetic")
    kb.to_disk(out, overwrite=True)
    return {"rich_kb_s": time.perf_counter() - start, "rich_kb_peak_mb": peak_rss_mb(), "concepts": len(kb),
            "names": len(kb.names)}


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path())


def step_tokens(kb_path: str, pairs_path: str, max_length: str) -> Dict[str, Any]:
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.training.pairs import PairSet
    from spacy_sapbert.training.tokens import write_pair_tokens

    kb, pairs, tokenizer = KnowledgeBase.from_disk(kb_path), PairSet(pairs_path), _tokenizer()
    start = time.perf_counter()
    table = write_pair_tokens(pairs, kb, tokenizer, int(max_length), overwrite=True)
    mb = sum(f.stat().st_size for f in table.path.iterdir()) / 1e6
    return {"tokens_s": time.perf_counter() - start, "tokens_peak_mb": peak_rss_mb(), "texts": len(table),
            "tokens": int(table.meta["n_tokens"]), "tokens_mb": mb}


def step_loader(mode: str, kb_path: str, pairs_path: str, max_length: str, batch_size: str, seconds: str) -> Dict[str, Any]:
    """names/s of one way of making the steps' inputs (a step = ``batch_size`` pairs = 2x names):
    ``today``: the trainer before this change (texts, tokenizer, ``sub_batches``, in the training process);
    ``live-N`` / ``table-N``: ``StepInputs`` tokenising on the fly / reading the table, N DataLoader workers
    (0: in the training process)."""
    import numpy as np
    import torch
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.training.batching import EpochBatches
    from spacy_sapbert.training.forward import sub_batches
    from spacy_sapbert.training.loader import LiveTokens, StepInputs, cut_parts
    from spacy_sapbert.training.pairs import PairSet
    from spacy_sapbert.training.tokens import TokenTable

    kb, pairs, tokenizer = KnowledgeBase.from_disk(kb_path), PairSet(pairs_path), _tokenizer()
    length, size = int(max_length), int(batch_size)
    batches = EpochBatches(pairs, kb, size, "random", 42)
    n_steps = batches.n_batches() * 1000  # several epochs when the pair set is small
    if mode == "today":
        def today() -> Any:
            for k in range(n_steps):
                rows = np.asarray(pairs.pairs[batches.batch(*divmod(k, batches.n_batches()))])
                texts = [pairs.text(kb, int(i)) for i in rows[:, 0]] + [pairs.text(kb, int(i)) for i in rows[:, 1]]
                ids = tokenizer(texts, max_length=length, truncation=True)["input_ids"]
                yield sub_batches(ids, 32, tokenizer.pad_token_id, torch.device("cpu"))
        items = today()
    else:
        kind, workers = mode.split("-")
        tokens = LiveTokens(pairs, kb, tokenizer, length) if kind == "live" else TokenTable(pairs, tokenizer, length)
        dataset = StepInputs(pairs, batches, tokens, first_step=0, n_steps=n_steps, pad_id=tokenizer.pad_token_id)
        items = ((cut_parts(ids, lengths, 32), inverse) for ids, lengths, inverse, _ in dataset.iterate(int(workers)))
    for _ in range(4):  # warm up: worker start, the epoch's permutation
        next(items)
    names, start = 0, time.perf_counter()
    while time.perf_counter() - start < float(seconds):
        parts, *_ = next(items)
        names += sum(int(ids.shape[0]) for ids, _ in parts)
    elapsed = time.perf_counter() - start
    return {"mode": mode, "names": names, "seconds": elapsed, "names_per_s": names / elapsed}


# ---------------------------------------------------------------- driver
def _run(*args: str) -> Dict[str, Any]:
    return run_step(__file__, *args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=15_000_000, help="rows of the synthetic MRCONSO")
    parser.add_argument("--mrrel-rows", type=int, default=30_000_000, help="rows of the synthetic MRREL")
    parser.add_argument("--max-length", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=256, help="pairs per step (2 names each)")
    parser.add_argument("--loader-seconds", type=float, default=20.0, help="how long to time each loader")
    parser.add_argument("--loaders", default="today,live-0,live-2,table-0,table-2")
    parser.add_argument("--pairs-only", type=int, default=0, metavar="N",
                        help="only pairs from a KB of N concepts x 6 names (15 pairs each; 800000 -> 12M pairs), "
                        "to benchmarks/results/umls_data_scale_pairs.json")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.pairs_only:
        pairs_only(args.pairs_only)
        return
    print(f"umls_data_scale benchmark, {os.cpu_count()} CPUs (shared machine: timings are noisy)", flush=True)
    gen = _run("_generate", str(args.rows), str(args.mrrel_rows))
    print(f"  data: {gen}", flush=True)
    builds = []
    for label, meta in (("MRCONSO", gen["plain"]), ("MRCONSO + MRREL", gen["with_rel"])):
        out = OUT / f"kb_{Path(meta).name}"
        row: Dict[str, Any] = {"input": label, **_run("_build", meta, str(out))}
        row["disk_mb"] = dir_mb(out)
        row.update(_run("_load", str(out)))
        builds.append(row)
        print(f"  build-kb {label}: {row['build_s']:.0f} s, peak {row['build_peak_mb']:.0f} MB, "
              f"{row['concepts']:,} concepts, {row['names']:,} names; load {row['load_s'] * 1000:.1f} ms", flush=True)
    kb_path = OUT / f"kb_{Path(gen['with_rel']).name}"
    pairs_path = OUT / f"pairs_{Path(gen['with_rel']).name}"
    pairs = _run("_pairs", str(kb_path), str(pairs_path))
    print(f"  pairs: {pairs}", flush=True)
    tokens = _run("_tokens", str(kb_path), str(pairs_path), str(args.max_length))
    print(f"  tokens: {tokens}", flush=True)
    loaders = []
    for mode in args.loaders.split(","):
        loaders.append(_run("_loader", mode, str(kb_path), str(pairs_path), str(args.max_length),
                            str(args.batch_size), str(args.loader_seconds)))
        print(f"  loader {mode}: {loaders[-1]['names_per_s']:,.0f} names/s", flush=True)
    base = next((r["names_per_s"] for r in loaders if r["mode"] == "today"), None)
    tables = {
        "build_kb": table(["input", "MRCONSO rows", "MRREL rows", "concepts", "names", "build s", "build peak MB",
                           "disk MB", "load ms", "load peak MB"],
                          [[r["input"], gen["rows"] if "rows" in gen else args.rows,
                            args.mrrel_rows if "MRREL" in r["input"] else 0, r["concepts"], r["names"],
                            round(r["build_s"], 1), round(r["build_peak_mb"]), round(r["disk_mb"], 1),
                            round(r["load_s"] * 1000, 1), round(r["load_peak_mb"])] for r in builds]),
        "pretraining_data": table(["step", "items", "seconds", "peak MB", "on disk MB"], [
            ["write_kb_pairs (<= 50 per concept)", pairs["pairs"], round(pairs["pairs_s"], 1),
             round(pairs["pairs_peak_mb"]), round(dir_mb(pairs_path) - tokens["tokens_mb"], 1)],
            [f"write_pair_tokens (max_length {args.max_length})", tokens["texts"], round(tokens["tokens_s"], 1),
             round(tokens["tokens_peak_mb"]), round(tokens["tokens_mb"], 1)]]),
        "loader": table(["loader", "names/s", "x today"],
                        [[r["mode"], round(r["names_per_s"]), round(r["names_per_s"] / base, 2) if base else None]
                         for r in loaders]),
    }
    notes = [
        "Synthetic UMLS: benchmarks/kb_build.py's MRCONSO generator (seed 0) and make_mrrel here (~1% trade-name "
        "rows, the rest other relations); build-kb with the default options (ENG, non-suppressed, trade names on).",
        "Peak MB is the peak RSS of the step's own process (Python and imports included).",
        f"Loaders: a step = {args.batch_size} pairs = {2 * args.batch_size} names, max_length {args.max_length}, "
        "all-MiniLM-L6-v2's fast tokenizer, sub-batches of 32; 'today' = the trainer's code before the pre-tokenised "
        "table (in the training process); live-N / table-N = StepInputs tokenising on the fly / reading the table "
        "with N DataLoader workers (0 = in process). Shared 2-core machine: compare within the run.",
    ]
    path = write_results("umls_data_scale", tables, notes=notes,
                         figures={"generate": gen, "build": builds, "pairs": pairs, "tokens": tokens, "loaders": loaders})
    print(f"results: {path}")


def pairs_only(n_concepts: int) -> None:
    kb_path, pairs_path = OUT / f"kb_rich_{n_concepts}", OUT / f"pairs_rich_{n_concepts}"
    kb = _run("_rich_kb", str(n_concepts), "6", str(kb_path))
    pairs = _run("_pairs", str(kb_path), str(pairs_path))
    print(f"  rich KB: {kb}\n  pairs: {pairs}", flush=True)
    rows = [["KB from Concepts (6 names each)", kb["concepts"], round(kb["rich_kb_s"], 1), round(kb["rich_kb_peak_mb"]),
             round(dir_mb(kb_path), 1)],
            ["write_kb_pairs (<= 50 per concept)", pairs["pairs"], round(pairs["pairs_s"], 1),
             round(pairs["pairs_peak_mb"]), round(dir_mb(pairs_path), 1)]]
    notes = ["Synthetic KB sized for ~12M pairs (UMLS pretraining scale): N concepts x 6 distinct names = 15 pairs each.",
             "Peak MB is the peak RSS of the step's own process (Python and imports included)."]
    path = write_results("umls_data_scale_pairs", {"pairs": table(["step", "items", "seconds", "peak MB", "on disk MB"], rows)},
                         notes=notes, figures={"kb": kb, "pairs": pairs})
    print(f"results: {path}")


STEPS = {"_generate": step_generate, "_build": step_build, "_load": step_load, "_pairs": step_pairs,
         "_tokens": step_tokens, "_loader": step_loader, "_rich_kb": step_rich_kb}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        print(json.dumps(STEPS[sys.argv[1]](*sys.argv[2:])))
    else:
        main()
