"""``spacy-sapbert``: one typer app; each module adds its commands to it."""
from __future__ import annotations

import signal
import sys
from typing import Any, List, NoReturn, Optional

from ..errors import Errors, MissingExtraError, SapbertError
from ..base.extras import extra_for, missing_message
# Imported in the order the commands are listed by --help: the life cycle of a linker.
from . import kb, index, link, corpus, abbreviations, context, context_train, hybrid, rerank, train, evaluate, calibrate, ner, assets, verify  # noqa: F401,I001  (register commands)
from ._app import app

# What an interrupted command leaves behind (E500); every other command writes atomically.
KEPT = {
    "build-index": "no index written; the encoded chunks are kept in the work folder, rerun to resume",
    "link-corpus": "the shards finished so far are kept in the output folder, rerun the same command to resume",
    "download-umls": "partial download kept, rerun to resume",
    "pretrain": "the checkpoints written so far are kept, rerun with --resume to continue",
    "finetune": "the checkpoints written so far are kept, rerun with --resume to continue",
    "train-context": "the checkpoints written so far are kept, rerun with --resume to continue",
    "train-reranker": "the checkpoints written so far are kept, rerun with --resume to continue",
    "train-ner": "what spacy train wrote so far is kept in the output folder",
}
NOTHING_WRITTEN = "nothing written (outputs are replaced only when complete)"


class Interrupted(BaseException):
    """SIGINT or SIGTERM, raised in the main thread so that ``finally`` blocks and atomic outputs
    clean up; :func:`main` turns it into exit status 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum: int, frame: Any) -> NoReturn:
    raise Interrupted(signum)


def _command_name(argv: List[str]) -> Optional[str]:
    names = {command.name for command in app.registered_commands}
    return next((arg for arg in argv if arg in names), None)


def _exit_interrupted(signum: int, argv: List[str]) -> NoReturn:
    command = _command_name(argv) or ""
    kept = KEPT.get(command, NOTHING_WRITTEN)
    if command == "link" and not any(a in ("-o", "--output") or a.startswith(("-o", "--output=")) for a in argv):
        kept = "the JSON lines printed so far cover only part of the input"
    print(Errors.E500.format(signal=signal.Signals(signum).name, kept=kept), file=sys.stderr)
    sys.exit(128 + signum)


def main() -> None:
    """Console entry point: coded errors are printed as one line and exit with status 1; usage errors
    print click's usage line and exit 2, and so does a missing extra (E820-E822: the line names the extra to
    install); SIGINT / SIGTERM exit 130 / 143 saying what was kept."""
    import logging
    import os

    # Only our own logger: the root logger (spaCy's, nmslib's) is left as the user set it.
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    package_logger = logging.getLogger("spacy_sapbert")
    if not package_logger.handlers:
        package_logger.addHandler(handler)
    package_logger.setLevel(os.environ.get("SPACY_SAPBERT_LOG_LEVEL", "INFO").upper())
    argv = sys.argv[1:]
    # A signal the caller ignores (SIGINT for `cmd &` in a script, `nohup`) stays ignored.
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in (signal.SIGINT, signal.SIGTERM)
                if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        status = app(standalone_mode=False)
    except Interrupted as err:
        _exit_interrupted(err.signum, argv)
    except KeyboardInterrupt:  # raised by code that installed its own SIGINT handler
        _exit_interrupted(signal.SIGINT, argv)
    except MissingExtraError as err:  # an optional part of the package is not installed: the extra to install
        print(f"Error: {err}", file=sys.stderr)
        sys.exit(2)
    except SapbertError as err:
        print(f"Error: {err}", file=sys.stderr)
        sys.exit(1)
    except ModuleNotFoundError as err:  # an import of an extra's package that no check asked for first
        if extra_for(err.name) is None:
            raise
        command = _command_name(argv) or "This command"
        print(f"Error: {missing_message(f'`{command}`', err.name or '', str(err))}", file=sys.stderr)
        sys.exit(2)
    except MemoryError as err:  # a low `ulimit -v`, a huge input: a coded line, not a traceback
        print(f"Error: {Errors.E561.format(detail=str(err) or 'MemoryError')}", file=sys.stderr)
        sys.exit(1)
    except Exception as err:  # typer's own (vendored) click exceptions, and click's
        _exit_click_error(err)
        raise
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
    if isinstance(status, int) and status:  # typer returns the code of typer.Exit / ctx.exit(n)
        if status == 130:  # typer turned a KeyboardInterrupt into Exit(130)
            _exit_interrupted(signal.SIGINT, argv)
        sys.exit(status)


def _exit_click_error(err: Exception) -> None:
    """Show a usage error (``Usage: ...`` + hint + ``Error: ...``) and exit with its status (2)."""
    import click
    from typer._click.exceptions import ClickException
    from typer.exceptions import Abort

    if isinstance(err, (ClickException, click.exceptions.ClickException)):
        err.show()
        sys.exit(err.exit_code)
    if isinstance(err, (Abort, click.exceptions.Abort)):
        print("Aborted.", file=sys.stderr)
        sys.exit(1)


__all__ = ["app", "main", "Interrupted"]
