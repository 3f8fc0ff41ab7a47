"""Line reading shared by the readers: coded errors for missing files and bad UTF-8, a byte
progress bar, line numbers for error messages."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator, Set, Tuple, Union

from tqdm import tqdm

from ..errors import DataFormatError, Errors, MissingInputError
from .util import PathLike, ensure_path, folder_contents


def as_set(values: Union[str, Iterable[str]]) -> Set[str]:
    """A set of option values; a single string is one value (not a set of characters)."""
    return {values} if isinstance(values, str) else set(values)


def require_file(path: PathLike, what: str, hint: str) -> Path:
    path = ensure_path(path)
    if path.is_dir():
        raise MissingInputError(Errors.E511.format(what=what, path=path, files=folder_contents(path), hint=hint))
    if not path.is_file():
        raise MissingInputError(Errors.E001.format(what=what, path=path, hint=hint))
    return path


def iter_lines(path: PathLike, *, show_progress: bool = False, desc: str = "") -> Iterator[Tuple[int, str]]:
    """Yield ``(line_number, line)`` (1-based, line ending removed). The file is read as bytes and
    decoded line by line, so a bad byte is reported with its line (``Errors.E004``)."""
    path = ensure_path(path)
    if path.is_dir():
        raise MissingInputError(Errors.E511.format(what="Input", path=path, files=folder_contents(path),
                                                   hint="this input is read from one file of its format."))
    bar = tqdm(total=path.stat().st_size, unit="B", unit_scale=True, desc=desc or path.name,
               disable=not show_progress, leave=False)
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                bar.update(len(raw))
                try:
                    line = raw.decode("utf8")
                except UnicodeDecodeError:
                    raise DataFormatError(Errors.E004.format(path=path, line=lineno)) from None
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                yield lineno, line.rstrip("\r\n")
    finally:
        bar.close()


__all__ = ["as_set", "iter_lines", "require_file"]
