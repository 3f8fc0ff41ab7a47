#!/usr/bin/env python
"""Run a command of the ``spacy-sapbert`` CLI with a project-local install folder on the path.

``python scripts/with_site.py packages/site evaluate ...`` = ``PYTHONPATH=packages/site
spacy-sapbert evaluate ...``: weasel runs commands without a shell, so the folder that
``pip install --target packages/site`` filled is put on ``sys.path`` here. Packages installed there
are then found by name (``spacy.load("en_sapbert_demo")``).
"""
from __future__ import annotations

import sys
from pathlib import Path


def add_site(site: Path) -> bool:
    """Put the ``pip install --target`` folder first on ``sys.path``; False (with a message) when it
    does not exist yet."""
    site = Path(site).resolve()
    if not site.is_dir():
        print(f"{site} does not exist: run the install step first.", file=sys.stderr)
        return False
    sys.path.insert(0, str(site))
    return True


def main() -> None:
    if len(sys.argv) < 3:
        print("usage: with_site.py SITE_DIR COMMAND [ARGS...]", file=sys.stderr)
        sys.exit(2)
    if not add_site(Path(sys.argv[1])):
        sys.exit(1)
    sys.argv = ["spacy-sapbert"] + sys.argv[2:]
    from spacy_sapbert.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
