"""How long the README's two commands take on a fresh clone: ``make test`` and ``make demo``, end to end.

Each with the virtual environment created from nothing, timed end to end.

The repository's committed HEAD is cloned into ``--work`` (beside a link to ``../shared``, which both commands
read), so nothing of this checkout (its ``.venv``, its demo outputs) is reused. Each step's wall time, exit code
and the machine's mean 1-minute load average while it ran (sampled every 10 s: the 2 cores are shared, so a
reader sees what else ran) go into ``benchmarks/results/setup_times.json``; steps not rerun keep their last row,
so the two commands can be timed at different moments. The README's summary table is rendered from that file.

    python benchmarks/setup_times.py --steps test          # ~10 min
    python benchmarks/setup_times.py --steps demo          # 15-30 min
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUTPUT, ROOT
from results_io import RESULTS_DIR, git_commit, table, write_results  # noqa: E402

NAME = "setup_times"
COLUMNS = ["command", "minutes", "exit code", "mean load avg while running", "commit", "date"]


def _clone(work: Path) -> Path:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shared = (ROOT.parent / "shared").resolve()
    if not shared.is_dir():
        raise SystemExit(f"{shared} not found: both commands read ../shared/data")
    (work / "shared").symlink_to(shared)
    clone = work / "main"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    return clone


def _timed(cmd: List[str], cwd: Path, log: Path) -> Dict[str, Any]:
    loads: List[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(10):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    with log.open("w", encoding="utf8") as out:
        rc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return {"seconds": seconds, "rc": rc, "load": (sum(loads) / len(loads)) if loads else os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", nargs="+", choices=("test", "demo"), default=["test", "demo"])
    ap.add_argument("--work", type=Path, default=OUTPUT / "setup_times")
    args = ap.parse_args()
    path = RESULTS_DIR / f"{NAME}.json"
    rows: Dict[str, List[Any]] = {}
    if path.exists():
        for row in json.loads(path.read_text(encoding="utf8"))["tables"]["fresh clone"]["rows"]:
            rows[row[0]] = row
    commit = git_commit()
    for step in args.steps:
        clone = _clone(args.work)
        result = _timed(["make", step], clone, args.work / f"make_{step}.log")
        print(f"make {step}: {result['seconds'] / 60:.1f} min, exit {result['rc']}, mean load {result['load']:.1f}")
        rows[f"make {step}"] = [f"make {step}", round(result["seconds"] / 60, 1), result["rc"], round(result["load"], 1),
                                commit, time.strftime("%Y-%m-%d", time.gmtime())]
    ordered = [rows[k] for k in ("make test", "make demo") if k in rows]
    write_results(NAME, {"fresh clone": table(COLUMNS, ordered)},
                  command="python benchmarks/setup_times.py --steps " + " ".join(args.steps),
                  notes=["each command on a fresh clone of the committed HEAD, .venv created from nothing (pip from "
                         "the registries); the load average column says what else ran on the 2 cores"])
    return 0 if all(r[2] == 0 for r in ordered) else 1


if __name__ == "__main__":
    sys.exit(main())
