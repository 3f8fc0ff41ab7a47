#!/usr/bin/env python
"""Preflight of the ``umls`` workflows: say what is missing before hours of work start.

Checks, in order: the release name (vars.umls_release), the UTS API key (environment variable
UMLS_API_KEY, or a terminal to type it into; not needed when assets/umls is already complete), and
the GPUs (vars.gpus CUDA devices must be visible; vars.gpus 0 runs on the CPU, which is only
sensible for tiny KBs). Every problem is printed; the exit status is 1 if there is any.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", required=True)
    parser.add_argument("--umls-dir", type=Path, default=Path("assets/umls"))
    parser.add_argument("--gpus", type=int, default=1)
    args = parser.parse_args(argv)
    from spacy_sapbert.assets.umls import API_KEY_ENV, MANIFEST_NAME, check_release
    from spacy_sapbert.errors import ConfigError, Errors

    problems = []
    try:
        check_release(args.release)
    except ConfigError as err:
        problems.append(f"vars.umls_release: {err}")
    done = (args.umls_dir / MANIFEST_NAME).exists()
    if not done and not os.environ.get(API_KEY_ENV, "").strip() and not (sys.stdin and sys.stdin.isatty()):
        problems.append(Errors.E401.format(env=API_KEY_ENV))
    if args.gpus > 0:
        import torch

        visible = torch.cuda.device_count()
        if visible < args.gpus:
            problems.append(f"vars.gpus is {args.gpus} but {visible} CUDA GPU(s) are visible. Pretraining on UMLS "
                            f"needs a GPU: run on a GPU machine, or pass --vars.gpus {visible} "
                            f"({'0 with --vars.device cpu --vars.amp none: CPU, days for UMLS' if visible == 0 else 'the GPUs you have'}).")
    if problems:
        print("The umls workflow cannot start:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print(f"UMLS {args.release.upper()}: {'already downloaded' if done else 'API key available'}; "
          f"{args.gpus} GPU(s) requested and visible.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
