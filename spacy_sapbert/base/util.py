"""Small shared helpers: logging, seeding, atomic writes, device resolution, hashing."""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterator, Optional, Union

from ..errors import ConfigError, Errors
from .outputs import check_parent, check_replaceable, output_lock, recover, replace_dir, write_marker

if TYPE_CHECKING:  # for annotations only
    import torch

PathLike = Union[str, "os.PathLike[str]"]

logger = logging.getLogger("spacy_sapbert")


def get_logger(name: str) -> logging.Logger:
    """A child of the package logger (``spacy_sapbert.<name>``); never configures handlers."""
    return logger.getChild(name)


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and (when installed) torch. Prefer passing a ``random.Random`` /
    ``numpy.random.Generator`` around; this only pins libraries that use global state."""
    random.seed(seed)
    import numpy

    numpy.random.seed(seed % (2**32))
    try:
        import torch  # lazy: torch
    except ImportError:  # the [train] extra is not installed
        return
    torch.manual_seed(seed)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def ensure_path(path: PathLike) -> Path:
    return path if isinstance(path, Path) else Path(path)


def folder_contents(path: PathLike, limit: int = 6) -> str:
    """A folder's first entries by name, for a message: ``a.txt, b/, c.txt, ... (12 entries)`` or ``nothing``."""
    try:
        entries = sorted(ensure_path(path).iterdir(), key=lambda p: p.name)
    except OSError as err:
        return f"unreadable: {err.strerror or err}"
    names = [p.name + ("/" if p.is_dir() else "") for p in entries[:limit]]
    if len(entries) > limit:
        names.append(f"... ({len(entries)} entries)")
    return ", ".join(names) or "nothing"


@contextlib.contextmanager
def atomic_write(
    path: PathLike, mode: str = "w", encoding: Optional[str] = "utf8"
) -> Iterator[IO]:
    """Write ``path`` through a temporary file in the same folder, renamed into place on success.

    On an exception the temporary file is removed and ``path`` is left as it was. A parent that is
    a file (E505) or a ``path`` that is a folder (E502) is a coded error.
    """
    path = ensure_path(path)
    check_parent(path)
    if path.is_dir():
        raise ConfigError(Errors.E502.format(path=path, what="a folder, not a file"))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
    kwargs = {} if "b" in mode else {"encoding": encoding}
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it gets the marker file and replaces ``path``.

    Safe for users' folders: an existing ``path`` is replaced only with ``overwrite`` (else E003,
    before any work) and only if spacy-sapbert wrote it (its marker), it is empty, or it looks like
    an older output (W500); otherwise E501/E502. A lock beside ``path`` keeps out a second writer
    (E504); what a killed writer left (``.NAME.old``, stale ``.NAME.*.tmp``) is restored or removed
    first. On an exception the temporary folder is removed and ``path`` is untouched.
    """
    path = ensure_path(path)
    check_parent(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(Errors.E510.format(path=path.parent, reason=err.strerror or err)) from None
    with output_lock(path):
        recover(path)
        if path.exists() or path.is_symlink():
            if not overwrite:
                raise ConfigError(Errors.E003.format(path=path))
            check_replaceable(path)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the folder the usual mode
        try:
            yield tmp
            write_marker(tmp)
            replace_dir(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def file_sha256(path: PathLike, chunk_size: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk_size), b""):
            h.update(block)
    return h.hexdigest()


DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(device: str = "auto") -> "torch.device":  # noqa: F821
    """``auto`` → ``cuda`` when a GPU is visible, else ``cpu``; ``cuda`` without a GPU is an error.

    Accepts ``cpu``, ``cuda``, ``cuda:N``. Mixed precision and distributed training are *not*
    decided here: they are explicit flags of their own.
    """
    import torch  # lazy: torch

    name = device.strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ConfigError(
                Errors.E002.format(
                    what="device (no CUDA GPU is visible)", value=device, choices="auto, cpu"
                )
            )
        return torch.device(name)
    raise ConfigError(Errors.E002.format(what="device", value=device, choices=", ".join(DEVICE_CHOICES) + ", cuda:N"))


def device_is_cpu(device: str = "auto") -> bool:
    """Whether :func:`resolve_device` gives the CPU, without importing torch where that is certain:
    ``cpu``, or ``auto`` with a torch build that has no GPU support (CPU wheel), read from its
    ``version.py``. Otherwise torch is imported and asked."""
    name = device.strip().lower()
    if name == "cpu":
        return True
    if name == "auto" and "torch" not in sys.modules and not _torch_build_has_gpu():
        return True
    return resolve_device(device).type == "cpu"


def _torch_build_has_gpu() -> bool:
    import importlib.util
    import re

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return False  # no torch at all: nothing can run on a GPU
    try:
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf8")
    except OSError:
        return True  # unknown build: ask torch
    found = {key: value for key, value in
             re.findall(r"^(cuda|hip)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", text, flags=re.MULTILINE)}
    return set(found) != {"cuda", "hip"} or any(value != "None" for value in found.values())


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB.

    Reads ``VmHWM`` from ``/proc/self/status`` on Linux: ``ru_maxrss`` of a child started by
    fork+exec inherits its parent's peak there, so it would report the parent's figure.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
