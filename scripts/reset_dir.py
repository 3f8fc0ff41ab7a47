#!/usr/bin/env python
"""Remove output folders of a project step before it runs again (a fresh run, not a resume).

Only paths inside the current folder (the project) are accepted.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    root = Path.cwd().resolve()
    for raw in paths:
        path = Path(raw)
        resolved = path.resolve() if not path.is_symlink() else path.parent.resolve() / path.name
        if resolved == root or root not in resolved.parents:
            print(f"Refusing to remove {raw}: not a path inside the project folder {root}.", file=sys.stderr)
            return 1
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
