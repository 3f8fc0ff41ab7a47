"""The bytes of a saved ``sapbert_linker``: its folder as one msgpack map ``{relative name: bytes}``.

``to_bytes`` packs what ``SapbertLinker.to_disk`` writes; ``from_bytes`` unpacks it into a fresh
folder. A pipeline's bytes are passed around like any file, so unpacking trusts nothing: a key is
written only when it is one of the names ``to_disk`` can write (``encoder/NAME``, ``kb/NAME``,
``index/NAME``, ``prototypes/NAME``, ``prototypes/encoder/NAME`` (the context encoder), ``reranker/NAME`` with NAME made of letters, digits, ``_``, ``-`` and ``.``, not
starting with a dot, or the ``.spacy_sapbert.json`` marker of a written folder, ``resources.json``,
``calibration.json`` and ``abbreviations.json``).
Anything else (``..``, an absolute path, another top-level folder, a deeper path, a value that is
not bytes, a name ending in a newline) is refused with E550 before a single file is written, and so are more
than :data:`MAX_FILES` files and a JSON or text file over :data:`MAX_TEXT_BYTES` (parsed whole at load).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict

from ..errors import DataFormatError, Errors

PARTS = ("encoder", "kb", "index", "prototypes", "reranker")
# top-level files: the pointer of a linker whose KB and index are kept outside, its calibration, its abbreviation table
TOP_FILES = ("resources.json", "calibration.json", "abbreviations.json")
# NAME: letters, digits, "_", "-", "." (not first), or the marker file every written folder carries
# (matched with fullmatch: "$" alone would also accept a name ending in "\n")
_NAME = re.compile(r"((encoder|kb|index|prototypes|prototypes/encoder|reranker)/([A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}|\.spacy_sapbert\.json)"
                   r"|resources\.json|calibration\.json|abbreviations\.json)")
MAX_FILES = 4096  # to_disk writes a few dozen
MAX_TEXT_BYTES = 256 << 20  # .json / .txt files are parsed whole: tokenizer.json of a large vocabulary is ~20 MB


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
    if len(files) > MAX_FILES:
        raise DataFormatError(Errors.E550.format(what=f"it holds {len(files):,} files, more than the {MAX_FILES:,} "
                                                      "a saved linker can have"))
    for name, content in files.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise DataFormatError(Errors.E550.format(
                what=f"the file name {name!r} is not one that to_disk writes (allowed: "
                     f"{', '.join([p + '/NAME' for p in PARTS] + list(TOP_FILES))}; no '..', absolute paths or sub-folders)"))
        if not isinstance(content, bytes):
            raise DataFormatError(Errors.E550.format(what=f"the content of {name!r} is {type(content).__name__}, not bytes"))
        if name.endswith((".json", ".txt")) and len(content) > MAX_TEXT_BYTES:
            raise DataFormatError(Errors.E550.format(what=f"{name!r} has {len(content):,} bytes, more than the "
                                                          f"{MAX_TEXT_BYTES:,} a metadata or text file may have"))
    if files and not any(name.startswith("index/") or name == "resources.json" for name in files):
        raise DataFormatError(Errors.E550.format(what="it has files but no index/ (nor resources.json): an "
                                                      "incomplete linker, which would leave the previous KB and index "
                                                      "in place"))
    return files


def unpack_folder(data: bytes, folder: Path) -> None:
    """Write the files of ``data`` below the (empty) ``folder``; nothing is written if any name is refused."""
    files = checked_files(data)
    for name, content in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as fh:  # never follows or replaces an existing entry
            fh.write(content)


__all__ = ["pack_folder", "unpack_folder", "checked_files", "PARTS", "MAX_FILES", "MAX_TEXT_BYTES"]
