"""Benchmark results as data: the results files that the docs tables are rendered from.

Every benchmark writes ``benchmarks/results/<name>.json`` through :func:`write_results`, and documentation
tables are rendered from those files, never typed by hand.

A results file holds::

    {"benchmark": "umls_scale", "command": "python benchmarks/umls_scale.py --names 1000000",
     "date": "2026-11-26T14:03:11Z", "git_commit": "4d40b82", "machine": {...},
     "notes": ["free text, e.g. what else ran on the machine"],
     "tables": {"<table name>": {"columns": ["system", "recall@1", ...],
                                 "rows": [["hnswlib f32", 0.998, ...], ...]}},
     "figures": {...anything else JSON-able...}}

The file is written atomically (temporary file + rename).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

RESULTS_DIR = Path(__file__).resolve().parent / "results"


_CPU_ID_KEYS = ("cpu family", "model", "stepping", "cpu MHz")


def matmul_gflops(repeats: int = 10) -> Optional[float]:
    """float32 GFLOP/s of a numpy matmul of a MiniLM feed-forward layer's shape (2,048 x 384 by 384 x 1,536) on
    all cores now: a stamp of the host's vector throughput (machines sold under one CPU name differ by 2x here)."""
    try:
        import numpy
    except ImportError:
        return None
    rng = numpy.random.default_rng(0)
    a = rng.random((2048, 384), dtype=numpy.float32)
    b = rng.random((384, 1536), dtype=numpy.float32)
    a @ b  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return round(2 * 2048 * 384 * 1536 * repeats / (time.perf_counter() - start) / 1e9, 1)


def machine_description() -> Dict[str, Any]:
    """CPU model (and, where ``/proc/cpuinfo`` gives them, its family / model / stepping / clock), core count,
    memory, Python version of this machine, and :func:`matmul_gflops`."""
    cpu = platform.processor() or ""
    cpu_id: Dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf8").splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "model name":
                cpu = value
            if key in _CPU_ID_KEYS and key not in cpu_id:
                cpu_id[key] = value
            if not line.strip() and cpu_id:  # the first processor's block only
                break
    except OSError:
        pass
    mem_gb: Optional[float] = None
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf8").splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024 ** 2, 1)
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"cpu": cpu, "cpu_id": cpu_id, "cores": os.cpu_count(), "memory_gb": mem_gb,
            "python": platform.python_version(), "platform": platform.platform(), "load_avg_1min_at_write": load,
            "matmul_gflops_at_write": matmul_gflops()}


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=10)
        # results files written earlier in the same session do not make the code "dirty"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ":(top,exclude)benchmarks/results"], cwd=Path(__file__).parent,
                               capture_output=True, text=True, timeout=10)
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Dict[str, List[Any]]:
    """One table: column names and rows of JSON-able cells (same length as ``columns``)."""
    rows = [list(r) for r in rows]
    for r in rows:
        if len(r) != len(columns):
            raise ValueError(f"row {r!r} has {len(r)} cells, expected {len(columns)} ({list(columns)})")
    return {"columns": list(columns), "rows": rows}


# what a machine path given to these flags reads as in a results file (no machine's folders in the docs)
PLACEHOLDERS = {"--work": "WORK", "--link-ncbi-work": "WORK", "--cache": "CACHE", "--cache-dir": "CACHE",
                "--fp32-cache": "CACHE", "--lean-python": "LEAN/bin/python", "--data": "DATA", "--out": "OUT",
                "--results-dir": "RESULTS"}


def portable_command(argv: Sequence[str], *, quote: bool = False) -> str:
    """``python <script> <args>`` with every absolute path replaced: the value of a flag in
    :data:`PLACEHOLDERS` by its placeholder, any other (``/x/y`` or ``key=/x/y``) by ``PATH``. With ``quote``,
    a word the shell would split or drop (an empty value, a space) is shell-quoted, so the line reruns as is."""
    words = [os.path.relpath(argv[0], Path(__file__).resolve().parents[1])]
    for prev, word in zip(argv, argv[1:]):
        key, sep, value = word.rpartition("=") if "=/" in word else ("", "", word)
        if os.path.isabs(value):
            value = PLACEHOLDERS.get(prev, "PATH") if not sep else "PATH"
        words.append(shlex.quote(key + sep + value) if quote else key + sep + value)
    return "python " + " ".join(words)


def write_results(name: str, tables: Mapping[str, Dict[str, List[Any]]], *, command: Optional[str] = None,
                  notes: Sequence[str] = (), figures: Optional[Mapping[str, Any]] = None,
                  results_dir: Optional[Path] = None) -> Path:
    """Write ``<results_dir>/<name>.json`` atomically and return its path."""
    out_dir = Path(results_dir) if results_dir is not None else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    if command is None:
        command = portable_command(sys.argv)
    doc = {
        "benchmark": name,
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": git_commit(),
        "machine": machine_description(),
        "notes": list(notes),
        "tables": {k: dict(v) for k, v in tables.items()},
        "figures": dict(figures or {}),
    }
    path = out_dir / f"{name}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=_jsonable) + "\n", encoding="utf8")
    os.replace(tmp, path)
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-able: {type(value).__name__}")


__all__ = ["PLACEHOLDERS", "RESULTS_DIR", "machine_description", "git_commit", "portable_command", "table",
           "write_results"]
