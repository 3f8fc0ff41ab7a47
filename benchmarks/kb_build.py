"""Building and loading knowledge bases: time, peak RAM, size on disk; scispaCy's jsonl KB as the baseline.

For each source (../shared/data: umls_sample, medic, hpo, doid; and a synthetic MRCONSO with
``--rows`` rows, default 5M) it measures, each step in its own subprocess so peak RAM is per step:
build time and peak RAM (read + build + write), on-disk size, load time (``KnowledgeBase.from_disk``
plus one name lookup and one concept), the time to iterate all names, and, as the baseline on the
same concepts, scispaCy's ``linking_utils.KnowledgeBase`` loading our scispaCy jsonl export.

    python benchmarks/kb_build.py                 # everything (the 5M synthetic run takes minutes)
    python benchmarks/kb_build.py --rows 200000   # a smaller synthetic run
    python benchmarks/kb_build.py --skip-synthetic

Generated files go to benchmarks/output/ (git-ignored).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from common import DATA, OUTPUT, ROOT, dir_mb, medic_file
from results_io import table, write_results
from spacy_sapbert.base.util import peak_rss_mb

OUT = OUTPUT / "kb_build"


# ---------------------------------------------------------------- steps (run in subprocesses)
def step_build(fmt: str, source: str, out: str, jsonl: str) -> Dict[str, Any]:
    from spacy_sapbert.kb.build import build_kb
    from spacy_sapbert.kb.readers import write_jsonl

    start = time.perf_counter()
    kb = build_kb([(source, fmt)], out, overwrite=True)
    seconds = time.perf_counter() - start
    peak = peak_rss_mb()
    write_jsonl(kb, jsonl)
    stats = kb.stats()
    return {"build_s": seconds, "build_peak_mb": peak, "concepts": stats["concepts"], "names": stats["names"],
            "ambiguous_names": stats["ambiguous_names"]}


def step_load(out: str) -> Dict[str, Any]:
    from spacy_sapbert.kb import KnowledgeBase

    base = peak_rss_mb()
    start = time.perf_counter()
    kb = KnowledgeBase.from_disk(out)
    names = kb.names
    probe = names[len(names) // 2]
    cuis = kb.alias_to_cuis[probe]
    kb.cui_to_entity[sorted(cuis)[0]]
    load_s = time.perf_counter() - start
    load_peak = peak_rss_mb()
    start = time.perf_counter()
    n = sum(1 for _ in names)
    iter_s = time.perf_counter() - start
    return {"load_s": load_s, "load_peak_mb": load_peak, "python_baseline_mb": base, "iter_names_s": iter_s,
            "iterated": n, "iter_peak_mb": peak_rss_mb()}


def step_scispacy(jsonl: str) -> Dict[str, Any]:
    from scispacy.linking_utils import KnowledgeBase as SciKB

    base = peak_rss_mb()
    start = time.perf_counter()
    kb = SciKB(jsonl)
    seconds = time.perf_counter() - start
    return {"scispacy_load_s": seconds, "scispacy_peak_mb": peak_rss_mb(), "python_baseline_mb": base,
            "scispacy_concepts": len(kb.cui_to_entity)}


# ---------------------------------------------------------------- synthetic MRCONSO
_SYLLABLES = ["ab", "ac", "al", "an", "ar", "bi", "ca", "ce", "co", "da", "de", "di", "el", "en", "er", "fa", "ga",
              "ha", "he", "id", "in", "is", "ka", "la", "le", "li", "lo", "ma", "me", "mi", "mo", "na", "ne", "ni",
              "no", "ob", "om", "on", "or", "os", "pa", "pe", "po", "ra", "re", "ri", "ro", "sa", "se", "si", "ta",
              "te", "ti", "to", "ul", "un", "ur", "va", "ve", "xi", "yo", "za"]


def make_synthetic(folder: Path, rows: int, seed: int = 0) -> Dict[str, int]:
    """MRCONSO.RRF + MRSTY.RRF in the standard layout, sorted by CUI: ~2.5 rows per CUI, 85% ENG,
    3% suppressible, 2% of names shared with another CUI (ambiguous)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(50000)]
    sabs = ["MSH", "SNOMEDCT_US", "MDR", "NCI", "RXNORM", "ICD10CM", "LNC", "HPO"]
    tuis = ["T047", "T191", "T033", "T121", "T109", "T061", "T023", "T184"]
    n = cui_no = 0
    recent: List[str] = []
    with open(folder / "MRCONSO.RRF", "w", encoding="utf8") as con, open(folder / "MRSTY.RRF", "w", encoding="utf8") as sty:
        while n < rows:
            cui_no += 1
            cui = f"C{cui_no:07d}"
            tui = rng.choice(tuis)
            sty.write(f"{cui}|{tui}|A1.2|Type {tui}|AT{cui_no:08d}|256|\n")
            for k in range(min(rng.randint(1, 4), rows - n)):
                n += 1
                if recent and rng.random() < 0.02:
                    text = rng.choice(recent)
                else:
                    text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 5)))
                    if rng.random() < 0.5:
                        text = text.title()
                    recent = (recent + [text])[-1000:]
                lat = "ENG" if rng.random() < 0.85 else rng.choice(["FRE", "GER", "SPA"])
                suppress = "N" if rng.random() < 0.97 else rng.choice(["O", "E", "Y"])
                ts, stt, ispref = ("P", "PF", "Y") if k == 0 else ("S", rng.choice(["PF", "VO"]), "N")
                con.write(f"{cui}|{lat}|{ts}|L{n:08d}|{stt}|S{n:08d}|{ispref}|A{n:08d}||{n}||"
                          f"{rng.choice(sabs)}|PT|{n}|{text}|0|{suppress}|256|\n")
    return {"rows": n, "cuis": cui_no}


# ---------------------------------------------------------------- driver
def run_step(script: str, *args: str) -> Dict[str, Any]:
    """``python script STEP ARGS`` in a fresh process (so its peak RSS is its own); the step prints its
    figures as JSON on its last stdout line."""
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"step {args[0]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run(*args: str) -> Dict[str, Any]:
    return run_step(__file__, *args)


def measure(label: str, fmt: str, source: Path) -> Dict[str, Any]:
    out, jsonl = OUT / f"{label}.kb", OUT / f"{label}.jsonl"
    row: Dict[str, Any] = {"source": label}
    row.update(_run("_build", fmt, str(source), str(out), str(jsonl)))
    row["disk_mb"] = dir_mb(out)
    row["jsonl_mb"] = jsonl.stat().st_size / 1e6
    row.update(_run("_load", str(out)))
    row.update(_run("_scispacy", str(jsonl)))
    print(f"  {label}: built in {row['build_s']:.1f}s, loads in {row['load_s']*1000:.1f} ms "
          f"(scispaCy jsonl: {row['scispacy_load_s']:.2f}s)", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows of the synthetic MRCONSO")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path, default=OUT / "results.json")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"kb_build benchmark, {os.cpu_count()} CPUs (shared machine: timings are noisy)", flush=True)
    plan = [("umls_sample", "umls", args.data / "umls_sample"),
            ("medic", "medic", medic_file(args.data)),
            ("hpo", "obo", args.data / "hpo" / "hp.obo"),
            ("doid", "obo", args.data / "doid" / "doid_2016-09-01.obo")]
    rows = []
    for label, fmt, source in plan:
        if not source.exists():
            print(f"  {label}: {source} missing, skipped")
            continue
        rows.append(measure(label, fmt, source))
    if not args.skip_synthetic:
        folder = OUT / f"synthetic_{args.rows}"
        if not (folder / "MRCONSO.RRF").exists():
            start = time.perf_counter()
            info = make_synthetic(folder, args.rows)
            print(f"  generated {info['rows']:,} MRCONSO rows ({info['cuis']:,} CUIs) in {time.perf_counter()-start:.0f}s", flush=True)
        else:
            print(f"  reusing {folder / 'MRCONSO.RRF'} (delete it to regenerate; seed 0, deterministic)", flush=True)
        rows.append(measure(f"synthetic_{args.rows}", "umls", folder))
    header = ("| source | concepts | names | ambiguous | build s | build peak MB | disk MB | load ms | load peak MB "
              "| iterate names s | scispaCy jsonl load s | scispaCy peak MB |")
    print()
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for r in rows:
        print(f"| {r['source']} | {r['concepts']:,} | {r['names']:,} | {r['ambiguous_names']:,} | {r['build_s']:.1f} "
              f"| {r['build_peak_mb']:.0f} | {r['disk_mb']:.1f} | {r['load_s']*1000:.1f} | {r['load_peak_mb']:.0f} "
              f"| {r['iter_names_s']:.2f} | {r['scispacy_load_s']:.2f} | {r['scispacy_peak_mb']:.0f} |")
    print("\nPeak MB is the whole process (Python + imports ~ "
          f"{rows[0]['python_baseline_mb']:.0f} MB before loading). load ms = from_disk + one name lookup + one concept.")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2))
    columns = ["source", "concepts", "names", "ambiguous names", "build s", "build peak MB", "on disk MB", "load ms",
               "load peak MB", "iterate all names s", "scispaCy jsonl load s", "scispaCy peak MB"]
    cells = [[r["source"], r["concepts"], r["names"], r["ambiguous_names"], round(r["build_s"], 1),
              round(r["build_peak_mb"]), round(r["disk_mb"], 1), round(r["load_s"] * 1000, 1),
              round(r["load_peak_mb"]), round(r["iter_names_s"], 2), round(r["scispacy_load_s"], 2),
              round(r["scispacy_peak_mb"])] for r in rows]
    notes = ["build: read + build + write the KB folder; load: KnowledgeBase.from_disk plus one name lookup and one "
             "concept; peak MB: the whole process (Python + imports about "
             f"{rows[0]['python_baseline_mb']:.0f} MB before loading); scispaCy: scispacy.linking_utils.KnowledgeBase "
             "opening our jsonl export of the same concepts (its only load path).",
             "Each step runs in its own subprocess; the synthetic MRCONSO (seed 0, ~2.5 rows per CUI, 85 % English, "
             "3 % suppressible, 2 % shared names) is generated into benchmarks/output/.",
             "Shared machine (other jobs running): timings are noisy."]
    path = write_results("kb_build", {"KB build and load": table(columns, cells)}, notes=notes)
    print(f"results: {args.json}, {path}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        step, rest = sys.argv[1], sys.argv[2:]
        result = {"_build": step_build, "_load": step_load, "_scispacy": step_scispacy}[step](*rest)
        print(json.dumps(result))
    else:
        main()
