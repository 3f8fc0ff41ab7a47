"""``spacy-sapbert``: one typer app; each module adds its commands to it."""
from __future__ import annotations

import sys

from ..errors import SapbertError
# Imported in the order the commands are listed by --help: the life cycle of a linker.
from . import kb, index, link, context, train, evaluate, ner, assets  # noqa: F401,I001  (register commands)
from ._app import app


def main() -> None:
    """Console entry point: coded errors are printed as one line and exit with status 1."""
    import logging
    import os

    # Only our own logger: the root logger (spaCy's, nmslib's) is left as the user set it.
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    package_logger = logging.getLogger("spacy_sapbert")
    if not package_logger.handlers:
        package_logger.addHandler(handler)
    package_logger.setLevel(os.environ.get("SPACY_SAPBERT_LOG_LEVEL", "INFO").upper())
    try:
        app(standalone_mode=False)
    except SapbertError as err:
        print(f"Error: {err}", file=sys.stderr)
        sys.exit(1)
    except SystemExit:
        raise
    except Exception as err:  # click usage errors etc.
        import click

        if isinstance(err, click.exceptions.ClickException):
            err.show()
            sys.exit(err.exit_code)
        if isinstance(err, click.exceptions.Abort):
            print("Aborted.", file=sys.stderr)
            sys.exit(1)
        raise


__all__ = ["app", "main"]
