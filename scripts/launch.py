#!/usr/bin/env python
"""Run a ``spacy-sapbert`` command on N GPUs: ``torchrun`` (DDP) when N > 1, a plain process otherwise.

``python scripts/launch.py --gpus 4 -- pretrain KB --base-model M --output OUT ...`` runs
``python -m torch.distributed.run --standalone --nproc_per_node 4 -m spacy_sapbert pretrain ...
--distributed``; with ``--gpus 1`` (or 0 for CPU) it runs ``python -m spacy_sapbert pretrain ...``.
On several machines run the same command on each with ``--nnodes M --rdzv-endpoint HOST:PORT`` (a
host all nodes reach, e.g. the first node): torchrun's c10d rendezvous then joins M x N processes.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def build_command(gpus: int, args: list, *, nnodes: int = 1, rdzv_endpoint: str = "", rdzv_id: str = "sapbert") -> list:
    if nnodes > 1:
        return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}",
                f"--nproc_per_node={max(gpus, 1)}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}",
                f"--rdzv-id={rdzv_id}", "-m", "spacy_sapbert", *args, "--distributed"]
    if gpus > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}",
                "-m", "spacy_sapbert", *args, "--distributed"]
    return [sys.executable, "-m", "spacy_sapbert", *args]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=1, help="number of GPUs (processes); 0 = CPU")
    parser.add_argument("--nnodes", type=int, default=1, help="machines taking part (each runs this same command)")
    parser.add_argument("--rdzv-endpoint", default="", help="HOST:PORT every node reaches (with --nnodes > 1)")
    parser.add_argument("--rdzv-id", default="sapbert", help="a name for the job, the same on every node")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    parser.add_argument("--resume-if-exists", type=Path, default=None,
                        help="add --resume when this run folder already holds a run (run.json): an interrupted "
                             "run continues from its last checkpoint")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the spacy-sapbert command and its arguments")
    ns = parser.parse_args(argv)
    args = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    if not args:
        parser.error("give the spacy-sapbert command after --")
    if ns.nnodes > 1 and not ns.rdzv_endpoint:
        print(f"--nnodes {ns.nnodes} (vars.nnodes) needs --rdzv-endpoint HOST:PORT (vars.rdzv_endpoint): a host "
              "and free port every node reaches, e.g. the first node's.", file=sys.stderr)
        return 1
    if ns.gpus > 1:
        import torch

        visible = torch.cuda.device_count()
        if visible < ns.gpus:
            print(f"--gpus {ns.gpus} (vars.gpus) but {visible} CUDA GPU(s) are visible: lower vars.gpus "
                  f"(e.g. --vars.gpus {visible}).", file=sys.stderr)
            return 1
    if ns.resume_if_exists is not None and (ns.resume_if_exists / "run.json").is_file():
        args = [*args, "--resume"]
    cmd = build_command(ns.gpus, args, nnodes=ns.nnodes, rdzv_endpoint=ns.rdzv_endpoint, rdzv_id=ns.rdzv_id)
    print(" ".join(cmd), flush=True)
    if ns.dry_run:
        return 0
    os.execv(cmd[0], cmd)
    return 0  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
