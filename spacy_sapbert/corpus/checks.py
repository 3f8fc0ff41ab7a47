"""What link-corpus checks before any work: the output folder neither is, holds nor lies inside an input
or the pipeline (so ``--overwrite`` cannot delete them, and a rerun never reads its own rows), and every
document of every shard reads, with an id no other document has.

Reading every document first costs one pass over the inputs (link-corpus reads their bytes for the
sha256 anyway) and means a bad line in the last shard stops the run before an hour of linking, not
after. Duplicate ids are found with 64-bit digests of the ids (8 bytes a document: PubMed's 36 M ids in
~300 MB, twice that while they are put together), then confirmed on the ids themselves, so a digest
collision is never reported as a duplicate.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy

from ..errors import ConfigError, DataFormatError, Errors
from ..base.util import PathLike
from .readers import Shard, iter_documents


def check_paths(output: PathLike, pipeline: Optional[PathLike], inputs: Iterable[PathLike],
                shards: Sequence[Shard]) -> None:
    """E503 when ``output`` is or holds the pipeline folder, an input as given or a shard file (links
    followed); E710 when it lies inside one of them."""
    out = Path(output).resolve()
    things: List[Tuple[str, PathLike]] = [("the pipeline", pipeline)] if pipeline and Path(pipeline).exists() else []
    things += [("the input", given) for given in inputs] + [("the input", shard.path) for shard in shards]
    for what, given in things:
        resolved = Path(given).resolve()
        if resolved == out or out in resolved.parents:
            raise ConfigError(Errors.E503.format(path=output, what=what, input=given))
        if resolved in out.parents:
            raise ConfigError(Errors.E710.format(path=output, what=what, input=given))


def _digest(doc_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf8"), digest_size=8).digest(), "little")


def scan_shards(shards: Sequence[Shard], *, id_field: str = "id", text_field: str = "text") -> List[int]:
    """Read every document of ``shards`` (the first bad one is its coded error) and check that no two share
    an id (E712, naming both places). Returns the documents per shard."""
    counts: List[int] = []
    digests: List[numpy.ndarray] = []
    for shard in shards:
        found = numpy.fromiter((_digest(doc_id) for _, doc_id, _ in
                                iter_documents(shard, id_field=id_field, text_field=text_field)), dtype=numpy.uint64)
        counts.append(len(found))
        digests.append(found)
    every = numpy.concatenate(digests) if digests else numpy.empty(0, dtype=numpy.uint64)
    del digests
    every.sort()  # in place
    twice = every[1:][every[1:] == every[:-1]]
    if len(twice):
        _raise_duplicate(shards, {int(d) for d in twice}, id_field, text_field)
    return counts


def _raise_duplicate(shards: Sequence[Shard], suspects: Set[int], id_field: str, text_field: str) -> None:
    """E712 for the first id seen twice among those whose digest came twice (none: a digest collision)."""
    first: Dict[str, str] = {}
    for shard in shards:
        for where, doc_id, _ in iter_documents(shard, id_field=id_field, text_field=text_field):
            if _digest(doc_id) not in suspects:
                continue
            if doc_id in first:
                raise DataFormatError(Errors.E712.format(doc_id=doc_id, first=first[doc_id], second=where))
            first[doc_id] = where


__all__ = ["check_paths", "scan_shards"]
