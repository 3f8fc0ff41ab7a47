"""Safe outputs: the marker file that says spacy-sapbert wrote a folder, the lock beside an output,
recovery after a kill, and the checks a command makes before it writes anything.

:func:`spacy_sapbert.base.util.atomic_dir` uses these for every output folder; the CLI calls
:func:`check_output` first, so a bad output path fails before any work is done. See
``docs/robustness.md``.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Iterable, Optional, Tuple, Union

from ..about import __version__
from ..errors import ConfigError, Errors, Warnings

PathLike = Union[str, "os.PathLike[str]"]
MARKER_FILE = ".spacy_sapbert.json"
# Files that mark a folder written by spacy-sapbert before the marker existed (W500).
LEGACY_FILES = {
    "kb.json": "a knowledge base",
    "index_meta.json": "an index",
    "sapbert_encoder.json": "an encoder",
    "pairs.bin": "training pairs",
    "state.json": "a training checkpoint",
    "metrics.json": "an evaluation report",
}

logger = logging.getLogger("spacy_sapbert.base.outputs")


class FileLock:
    """An exclusive ``flock`` on ``lock_file``, taken without waiting (``busy`` is the error raised
    when another process holds it). The file is removed on release; a process that opened it just
    before sees it is gone and takes the new one, so two holders never coexist."""

    def __init__(self, lock_file: PathLike, busy: str) -> None:
        self.lock_file = Path(lock_file)
        self.busy = busy
        self._fd: Optional[int] = None

    def acquire(self) -> "FileLock":
        while True:
            try:
                fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as err:
                raise ConfigError(Errors.E510.format(path=self.lock_file.parent, reason=err.strerror or err)) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ConfigError(self.busy) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.lock_file).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return self
            os.close(fd)  # its holder removed it meanwhile: lock the new file instead

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.lock_file)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "FileLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def output_lock(path: Path) -> FileLock:
    """The lock beside an output ``NAME``: ``.NAME.lock`` (E504 while another process holds it)."""
    lock_file = path.with_name(f".{path.name}.lock")
    return FileLock(lock_file, Errors.E504.format(path=path, lock=lock_file))


def check_parent(path: PathLike) -> None:
    """E505 when an existing parent of ``path`` is a file (``-o somefile/sub``); E510 for a path the
    system refuses (a name too long, no permission to look)."""
    try:
        Path(path).exists()
        for parent in Path(path).parents:
            if parent.exists():
                if not parent.is_dir():
                    raise ConfigError(Errors.E505.format(path=path, parent=parent))
                return
            if parent.is_symlink():  # a dangling link: mkdir would fail on it
                raise ConfigError(Errors.E505.format(path=path, parent=parent))
    except OSError as err:
        raise ConfigError(Errors.E510.format(path=path, reason=err.strerror or err)) from None


def check_folder_path(path: PathLike, *, what: str = "a file, not a folder") -> None:
    """E505 when a parent of ``path`` is a file, E502 when ``path`` itself is one (``what`` says so): for a folder
    that is written later, checked before the work that fills it."""
    check_parent(path)
    if Path(path).exists() and not Path(path).is_dir():
        raise ConfigError(Errors.E502.format(path=path, what=what))


def check_replaceable(path: Path, *, warn: bool = True) -> None:
    """An existing output may be replaced if it carries the marker, is empty, or looks like an output
    written before the marker existed (W500); anything else is E501 (E502 for a file or a link)."""
    if path.is_symlink():
        raise ConfigError(Errors.E502.format(path=path, what="a symbolic link, not a folder"))
    if not path.is_dir():
        raise ConfigError(Errors.E502.format(path=path, what="a file, not a folder"))
    if (path / MARKER_FILE).is_file() or not any(path.iterdir()):
        return
    evidence = legacy_evidence(path)
    if not evidence:
        raise ConfigError(Errors.E501.format(path=path, marker=MARKER_FILE))
    if warn:
        logger.warning(Warnings.W500.format(path=path, marker=MARKER_FILE, evidence=evidence))


def legacy_evidence(path: Path) -> str:
    """What makes ``path`` look like a spacy-sapbert output without the marker ('' if nothing)."""
    found = [f"{what} ({name})" for name, what in LEGACY_FILES.items() if (path / name).is_file()]
    config = path / "config.cfg"
    if (path / "meta.json").is_file() and config.is_file():
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if "sapbert_linker" in config.read_text(encoding="utf8"):
                found.append("a spaCy pipeline with a sapbert_linker (config.cfg)")
    return ", ".join(found)


def write_marker(folder: Path) -> None:
    """The marker every output folder carries: what wrote it, and which version."""
    text = json.dumps({"written_by": "spacy-sapbert", "version": __version__}, indent=2, sort_keys=True)
    (folder / MARKER_FILE).write_text(text + "\n", encoding="utf8")


def recover(path: Path) -> None:
    """Undo what a killed writer left (call it holding :func:`output_lock`): restore ``.NAME.old`` when
    ``NAME`` is missing (killed between the two renames), remove it otherwise, and remove stale
    ``.NAME.XXXXXXXX.tmp`` folders."""
    old = path.with_name(f".{path.name}.old")
    if old.is_dir() and not old.is_symlink():
        if not path.exists() and not path.is_symlink():
            os.replace(old, path)
            logger.warning(Warnings.W501.format(path=path, old=old))
        else:
            shutil.rmtree(old, ignore_errors=True)
    stale = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")  # mkdtemp's random part: 8 characters
    if path.parent.is_dir():
        for entry in path.parent.iterdir():
            if stale.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
                logger.info("removing %s, left by an interrupted run", entry)
                shutil.rmtree(entry, ignore_errors=True)


def replace_dir(tmp: Path, path: Path) -> None:
    """Move the finished ``tmp`` to ``path``. An existing ``path`` is swapped with ``tmp`` in one atomic
    step where the system can (Linux ``renameat2(RENAME_EXCHANGE)``), else renamed to ``.NAME.old``
    first and removed last; either way a kill at any point leaves the old or the new output (or
    ``.NAME.old``, which :func:`recover` restores)."""
    if not path.exists():
        os.replace(tmp, path)
        return
    if exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # now the old output; a kill here leaves a stale .tmp
        return
    old = path.with_name(f".{path.name}.old")
    if old.exists():
        shutil.rmtree(old)
    os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux's ``renameat2(RENAME_EXCHANGE)``; False where the C library
    or the file system does not offer it."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def check_output(
    path: PathLike,
    *,
    overwrite: bool = False,
    inputs: Iterable[Tuple[str, Optional[PathLike]]] = (),
    folder: bool = True,
) -> None:
    """Check an output path before any work: its parents are folders (E505), it does not hold or
    equal an input (``(what, path)`` pairs; E503), and an existing output may be replaced (E003 without
    ``overwrite``; E501/E502). ``folder=False`` for a single output file (E502 when it is a folder)."""
    path = Path(path)
    check_parent(path)
    out = path.resolve()
    for what, given in inputs:
        if given is None or not Path(given).exists():
            continue  # a hub id or a missing file cannot lie inside an output folder
        resolved = Path(given).resolve()
        if resolved == out or out in resolved.parents:
            raise ConfigError(Errors.E503.format(path=path, what=what, input=given))
    if not folder:
        if path.is_dir():
            raise ConfigError(Errors.E502.format(path=path, what="a folder, not a file"))
        return
    if path.exists() or path.is_symlink():
        if not overwrite:
            raise ConfigError(Errors.E003.format(path=path))
        check_replaceable(path, warn=False)


__all__ = ["MARKER_FILE", "FileLock", "output_lock", "check_parent", "check_folder_path", "check_replaceable",
           "check_output", "write_marker", "recover", "replace_dir", "exchange"]
