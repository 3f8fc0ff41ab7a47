"""The bytes of a saved ``sapbert_linker``: its folder as one msgpack map ``{relative name: bytes}``.

``to_bytes`` packs what ``SapbertLinker.to_disk`` writes; ``from_bytes`` unpacks it into a fresh
folder. A pipeline's bytes are passed around like any file, so unpacking trusts nothing: a key is
written only when it is one of the names ``to_disk`` can write (``encoder/NAME``, ``kb/NAME``,
``index/NAME``, ``prototypes/NAME``, ``prototypes/encoder/NAME`` (the context encoder) with NAME made of letters, digits, ``_``, ``-`` and ``.``, not
starting with a dot, or the ``.spacy_sapbert.json`` marker of a written folder, ``resources.json`` and ``calibration.json``).
Anything else (``..``, an absolute path, another top-level folder, a deeper path, a value that is
not bytes) is refused with E550 before a single file is written.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict

from .errors import DataFormatError, Errors

PARTS = ("encoder", "kb", "index", "prototypes")
TOP_FILES = ("resources.json", "calibration.json")  # the pointer of a linker whose KB and index are kept outside
# NAME: letters, digits, "_", "-", "." (not first), or the marker file every written folder carries
_NAME = re.compile(r"^((encoder|kb|index|prototypes|prototypes/encoder)/([A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}|\.spacy_sapbert\.json)"
                   r"|resources\.json|calibration\.json)$")


def pack_folder(folder: Path) -> bytes:
    """The regular files below ``folder`` (symbolic links are not followed) as msgpack bytes."""
    import srsly

    files: Dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            files[path.relative_to(folder).as_posix()] = path.read_bytes()
    return srsly.msgpack_dumps(files)


def checked_files(data: bytes) -> Dict[str, bytes]:
    """The ``{name: bytes}`` map of ``data``, every name checked against the allow-list (E550)."""
    import srsly

    try:
        files = srsly.msgpack_loads(data)
    except Exception as err:  # msgpack raises several unrelated exception types
        raise DataFormatError(Errors.E550.format(what=f"the data is not a msgpack map ({type(err).__name__})")) from None
    if not isinstance(files, dict):
        raise DataFormatError(Errors.E550.format(what=f"the data is a msgpack {type(files).__name__}, not a map"))
    for name, content in files.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise DataFormatError(Errors.E550.format(
                what=f"the file name {name!r} is not one that to_disk writes (allowed: "
                     f"{', '.join([p + '/NAME' for p in PARTS] + list(TOP_FILES))}; no '..', absolute paths or sub-folders)"))
        if not isinstance(content, bytes):
            raise DataFormatError(Errors.E550.format(what=f"the content of {name!r} is {type(content).__name__}, not bytes"))
    return files


def unpack_folder(data: bytes, folder: Path) -> None:
    """Write the files of ``data`` below the (empty) ``folder``; nothing is written if any name is refused."""
    files = checked_files(data)
    for name, content in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as fh:  # never follows or replaces an existing entry
            fh.write(content)


__all__ = ["pack_folder", "unpack_folder", "checked_files", "PARTS"]
