"""Training speed on this machine: pairs/s of the self-alignment step, by forward layout and precision.

    python benchmarks/studies/train_speed.py [--steps 30] [--batch-size 64] [--threads 2]

Each setting trains ``--steps`` steps (after 3 warm-up steps) of the real recipe on the MEDIC synonym
pairs with the offline MiniLM, from the same start, in this process: one padded pass over each batch
(``sub_batch 0``) or length-sorted sub-batches of 32 names, each in fp32 or with ``--amp bf16``
(CPU autocast: fast only on CPUs with bf16 instructions, such as AVX512-BF16 or AMX).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, results_io

from common import DATA, medic_kb, minilm_path  # noqa: E402
from results_io import table, write_results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=64, help="pairs per step")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    from spacy_sapbert.training.config import load_config
    from spacy_sapbert.training.pairs import write_kb_pairs
    from spacy_sapbert.training.trainer import Trainer

    torch.set_num_threads(args.threads)
    kb = medic_kb(args.data)
    base = minilm_path()
    print(f"# train_speed: {os.cpu_count()} CPUs, torch {torch.__version__}, {args.threads} threads, "
          f"{args.batch_size} pairs/step, {args.steps} steps")
    print("| forward | precision | s/step | pairs/s | vs one padded pass, fp32 |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        pairs = write_kb_pairs(kb, Path(tmp) / "pairs", max_pairs_per_concept=20)
        reference = None
        rows = []
        for sub_batch, amp in ((0, "none"), (32, "none"), (0, "bf16"), (32, "bf16")):
            config = load_config(None, {"model.pooling": "mean", "training.batch_size": args.batch_size,
                                        "training.lr": 5e-5, "training.device": "cpu", "training.amp": amp,
                                        "training.sub_batch": sub_batch})
            trainer = Trainer(config, kb, pairs, base, Path(tmp) / f"run_{sub_batch}_{amp}")
            for step in range(3):
                trainer.step(trainer.batches.batch(0, step), step)
            start = time.perf_counter()
            for step in range(3, 3 + args.steps):
                trainer.step(trainer.batches.batch(0, step), step)
            per_step = (time.perf_counter() - start) / args.steps
            reference = reference or per_step
            layout = "one padded pass" if sub_batch == 0 else f"sub-batches of {sub_batch}, sorted by length"
            print(f"| {layout} | {'fp32' if amp == 'none' else 'bf16 autocast'} | {per_step:.3f} | "
                  f"{args.batch_size / per_step:.0f} | {reference / per_step:.2f}x |", flush=True)
            rows.append([layout, "fp32" if amp == "none" else "bf16 autocast", round(per_step, 3),
                         round(args.batch_size / per_step), round(reference / per_step, 2)])
    columns = ["forward", "precision", "s/step", "pairs/s", "speed-up vs one padded pass, fp32"]
    notes = [f"{args.steps} steps of {args.batch_size} MEDIC pairs each (after 3 warm-up steps), offline MiniLM, "
             f"mean pooling, same start, torch {torch.__version__} on {args.threads} threads."]
    print(f"results: {write_results('train_speed', {'training step time': table(columns, rows)}, notes=notes)}")


if __name__ == "__main__":
    main()
