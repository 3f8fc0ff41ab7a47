"""Plain TSV: ``concept_id<TAB>name`` per line. The first name of an id is its canonical name,
later lines of the same id add synonyms. Blank lines and lines starting with ``#`` are skipped;
``header=True`` skips the first line."""
from __future__ import annotations

from typing import Dict, Iterator, List

from ...errors import DataFormatError, EmptyResultError, Errors
from ...base.util import PathLike
from ..concept import Concept
from ...base.lines import iter_lines, require_file


def read_tsv(path: PathLike, *, header: bool = False, show_progress: bool = False) -> Iterator[Concept]:
    path = require_file(path, "TSV file", "pass a concept_id<TAB>name file.")
    names: Dict[str, List[str]] = {}
    for lineno, line in iter_lines(path, show_progress=show_progress):
        if (header and lineno == 1) or not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise DataFormatError(Errors.E011.format(
                path=path, line=lineno, what=f"expected 2 non-empty tab-separated columns, found {len(parts)} column(s)",
                fix="Write concept_id<TAB>name, one name per line."))
        names.setdefault(parts[0].strip(), []).append(parts[1].strip())
    if not names:
        raise EmptyResultError(Errors.E007.format(what=path, filters="none (the file has no concept lines)"))
    for cid, ns in names.items():
        unique = list(dict.fromkeys(ns))
        yield Concept(concept_id=cid, canonical_name=unique[0], aliases=tuple(unique[1:]))


__all__ = ["read_tsv"]
