"""scispaCy's KB jsonl: one JSON object a line with ``concept_id``, ``canonical_name``, ``aliases``,
``types``, ``definition`` (what ``scispacy.linking_utils.KnowledgeBase`` reads). We read it (an extra
``alt_ids`` list is accepted) and write it (exactly scispaCy's five keys, so scispaCy opens it;
alternate ids are therefore not written)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Iterator, Union

from ...errors import DataFormatError, EmptyResultError, Errors
from ...base.util import PathLike, atomic_write
from ..concept import Concept
from ...base.lines import iter_lines, require_file

if TYPE_CHECKING:  # for annotations only
    from ..store import KnowledgeBase

_FIX = 'Each line must be a JSON object like {"concept_id": "C1", "canonical_name": "name", "aliases": [], "types": [], "definition": null}.'


def _str_list(value, path, lineno, key):
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataFormatError(Errors.E011.format(path=path, line=lineno, what=f"'{key}' is not a list of strings", fix=_FIX))
    return tuple(value)


def read_jsonl(path: PathLike, *, show_progress: bool = False) -> Iterator[Concept]:
    path = require_file(path, "jsonl KB file", "pass a scispaCy-style .jsonl knowledge base.")
    count = 0
    for lineno, line in iter_lines(path, show_progress=show_progress):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise DataFormatError(Errors.E011.format(path=path, line=lineno, what=f"invalid JSON ({err.msg})", fix=_FIX)) from None
        if not isinstance(record, dict):
            raise DataFormatError(Errors.E011.format(path=path, line=lineno, what="not a JSON object", fix=_FIX))
        cid, name = record.get("concept_id"), record.get("canonical_name")
        if not isinstance(cid, str) or not cid or not isinstance(name, str) or not name.strip():
            raise DataFormatError(Errors.E011.format(path=path, line=lineno,
                                                     what="'concept_id' or 'canonical_name' missing or not a string", fix=_FIX))
        definition = record.get("definition")
        aliases = tuple(dict.fromkeys(a for a in _str_list(record.get("aliases"), path, lineno, "aliases") if a != name))
        count += 1
        yield Concept(concept_id=cid, canonical_name=name, aliases=aliases,
                      types=_str_list(record.get("types"), path, lineno, "types"),
                      definition=definition if isinstance(definition, str) and definition else None,
                      alt_ids=_str_list(record.get("alt_ids"), path, lineno, "alt_ids"))
    if count == 0:
        raise EmptyResultError(Errors.E007.format(what=path, filters="none (the file has no concept lines)"))


def write_jsonl(concepts: Union[Iterable[Concept], "KnowledgeBase"], path: PathLike) -> int:  # noqa: F821
    """Write concepts (or every concept of a KB, additions included) as scispaCy jsonl, atomically.
    Returns the number of lines written."""
    items = concepts.cui_to_entity.values() if hasattr(concepts, "cui_to_entity") else concepts
    n = 0
    with atomic_write(path) as fh:
        for c in items:
            fh.write(json.dumps({"concept_id": c.concept_id, "canonical_name": c.canonical_name,
                                 "aliases": list(c.aliases), "types": list(c.types),
                                 "definition": c.definition}, ensure_ascii=False) + "\n")
            n += 1
    return n


__all__ = ["read_jsonl", "write_jsonl"]
