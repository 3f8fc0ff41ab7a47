#!/usr/bin/env python
"""Package a saved pipeline as an installable wheel, offline.

Runs ``python -m spacy package INPUT WORK --name NAME --version VERSION --build none`` (spaCy
writes the package source with the meta and requirements; the ``spacy-sapbert`` plugin is listed
because the ``sapbert_linker`` factory comes from its entry point), then
``python -m build --no-isolation --wheel`` in that folder (no network: the build backend of the
current environment is used). The wheel lands in ``--dist``; its path is printed.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", type=Path, help="saved pipeline folder (nlp.to_disk)")
    parser.add_argument("--name", required=True, help="package name without the language prefix")
    parser.add_argument("--version", required=True)
    parser.add_argument("--work", type=Path, default=Path("packages/src"), help="folder for the package source")
    parser.add_argument("--dist", type=Path, default=Path("packages/dist"), help="folder for the wheel")
    args = parser.parse_args(argv)
    if not (args.input / "config.cfg").exists():
        print(f"No saved pipeline at {args.input}: run the pipeline-assembly step first.", file=sys.stderr)
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "spacy", "package", str(args.input), str(args.work), "--name", args.name,
           "--version", args.version, "--build", "none", "--force"]
    if subprocess.call(cmd) != 0:
        return 1
    lang = __import__("json").loads((args.input / "meta.json").read_text())["lang"]
    full = f"{lang}_{args.name}"
    src = args.work / f"{full}-{args.version}"
    build_dir = args.work / "build_out"
    shutil.rmtree(build_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(build_dir.resolve()), "."]
    if subprocess.call(cmd, cwd=src) != 0:
        print("Building the wheel failed; `pip install build` (in requirements-dev.txt) and retry.", file=sys.stderr)
        return 1
    wheels = sorted(build_dir.glob(f"{full}-{args.version}-*.whl"))
    if len(wheels) != 1:
        print(f"Expected one wheel in {build_dir}, found {[w.name for w in wheels]}", file=sys.stderr)
        return 1
    args.dist.mkdir(parents=True, exist_ok=True)
    target = args.dist / f"{full}-{args.version}-py3-none-any.whl"
    shutil.move(str(wheels[0]), str(target))
    shutil.rmtree(build_dir, ignore_errors=True)
    print(f"Wheel: {target} ({target.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
