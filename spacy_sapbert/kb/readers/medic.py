"""CTD MEDIC in the BioSyn / NCBI-disease dictionary format: ``ID[|ALT...]||name[|synonym...]``.

Id normalisation (``normalize_medic_id``), chosen so that NCBI-disease and BC5CDR gold ids match
concept ids as they are: MeSH ids lose a ``MESH:`` prefix (``MESH:D008107`` -> ``D008107``),
unprefixed numbers are OMIM ids (``215600`` -> ``OMIM:215600``), ``OMIM:`` ids stay. The first id of a
line is the concept id; the other ids, and the other spellings of every id (``MESH:D008107``,
``215600``), are alternate ids, so ``kb.resolve_id`` maps any of them to the concept. An id that is
itself the first id of another line stays that line's concept. Blank lines and ``#`` lines are skipped.
"""
from __future__ import annotations

from typing import Iterator, Tuple

from ...errors import DataFormatError, EmptyResultError, Errors
from ...base.util import PathLike
from ..concept import Concept
from ...base.lines import iter_lines, require_file


def normalize_medic_id(raw: str) -> str:
    """``MESH:D001`` -> ``D001``; ``123`` -> ``OMIM:123``; anything else unchanged (stripped)."""
    value = raw.strip()
    if value.upper().startswith("MESH:"):
        return value[5:]
    if value.isdigit():
        return f"OMIM:{value}"
    return value


def _spellings(norm: str) -> Tuple[str, ...]:
    if norm.startswith("OMIM:"):
        return (norm, norm[5:])
    return (norm, f"MESH:{norm}")


def read_medic(path: PathLike, *, show_progress: bool = False) -> Iterator[Concept]:
    """One concept per line; see the module doc for ids."""
    path = require_file(path, "MEDIC file", "pass the MEDIC dictionary (ID[|ALT]||name|synonyms) file.")
    count = 0
    for lineno, line in iter_lines(path, show_progress=show_progress):
        if not line.strip() or line.startswith("#"):
            continue
        left, sep, right = line.partition("||")
        if not sep:
            raise DataFormatError(Errors.E011.format(path=path, line=lineno, what="no '||' between ids and names",
                                                     fix="Each line must be ID[|ALT...]||name[|synonym...]."))
        ids = [normalize_medic_id(x) for x in left.split("|") if x.strip()]
        names = [n.strip() for n in right.split("|") if n.strip()]
        if not ids or not names:
            raise DataFormatError(Errors.E011.format(path=path, line=lineno,
                                                     what="no id" if not ids else "no name",
                                                     fix="Each line must be ID[|ALT...]||name[|synonym...]."))
        alt_ids = tuple(dict.fromkeys(s for i in ids for s in _spellings(i) if s != ids[0]))
        aliases = tuple(dict.fromkeys(n for n in names[1:] if n != names[0]))
        count += 1
        yield Concept(concept_id=ids[0], canonical_name=names[0], aliases=aliases, alt_ids=alt_ids)
    if count == 0:
        raise EmptyResultError(Errors.E007.format(what=path, filters="none (the file has no concept lines)"))


__all__ = ["read_medic", "normalize_medic_id"]
