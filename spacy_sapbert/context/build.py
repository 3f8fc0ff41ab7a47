"""Build a :class:`PrototypeStore` from annotated documents (and, optionally, KB definitions).

Documents come as :class:`~spacy_sapbert.mentions.datasets.Document` lists: PubTator and JSONL
(``{"context", "start", "end", "mention", "ids"}``) through the mention readers, spaCy DocBins
(``doc.ents`` or ``doc.spans[key]`` with ``kb_id_``) through :func:`~spacy_sapbert.mentions.docbin.read_docbin`. Every mention
with one id in the KB becomes one prototype (its context vector); composite mentions are skipped
(W601); a few ids missing from the KB are skipped with a warning (W600), all of them missing is
an error (E604), documents without any id are an error (E603).

A definition prototype is the concept's canonical name in its definition
(``<ENT> name </ENT> definition``), encoded like a mention: ``definitions="missing"`` adds it for
concepts without example mentions, ``"all"`` for every concept with a definition.

With a ``name_encoder`` (the linker's), each example mention's text, normalised as the linker
normalises a mention, is also encoded as a name: the store's example names (``example_names`` in
the linker).
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ..base.util import PathLike, ensure_path, get_logger
from ..errors import ConfigError, EmptyResultError, Errors, Warnings
from ..kb.concept import normalize_name
from ..mentions.datasets import read_dataset
from ..mentions.docbin import read_docbin
from ..mentions.metrics import resolve_gold_id
from .context_encoder import ContextEncoder, MentionInText
from .store import DEFINITION, EXAMPLE, PrototypeStore

logger = get_logger("context.build")

DOC_FORMATS = ("auto", "pubtator", "jsonl", "docbin")
DEFINITION_MODES = ("none", "missing", "all")


def read_documents(path: PathLike, *, format: str = "auto", types: Optional[Sequence[str]] = None) -> List[Any]:
    """Annotated documents from a PubTator file, a JSONL mention file or a spaCy DocBin."""
    path = ensure_path(path)
    if format not in DOC_FORMATS:
        raise ConfigError(Errors.E612.format(value=format, path=path, choices=", ".join(DOC_FORMATS)))
    if format == "docbin" or (format == "auto" and path.suffix == ".spacy"):
        return read_docbin(path, types=types)
    if format == "auto":
        format = "jsonl" if path.suffix in (".jsonl", ".json") else "pubtator"
    return read_dataset(path, format=format, types=list(types) if types else None)


def collect_examples(docs: Sequence[Any], kb: Any, *, what: str = "the documents"
                     ) -> Tuple[List[MentionInText], List[str], Dict[str, int]]:
    """``(mentions in text, concept ids, counts)`` of the mentions usable as prototypes."""
    counts = {"mentions": 0, "no_id": 0, "composite": 0, "unknown_id": 0, "no_offsets": 0, "used": 0}
    unknown: List[str] = []
    mentions: List[MentionInText] = []
    concepts: List[str] = []
    for doc in docs:
        for m in doc.mentions:
            counts["mentions"] += 1
            if not m.ids:
                counts["no_id"] += 1
                continue
            if m.composite or len(m.ids) != 1:
                counts["composite"] += 1
                continue
            if m.start is None or m.end is None or not doc.text or not 0 <= m.start < m.end <= len(doc.text):
                counts["no_offsets"] += 1
                continue
            cid = resolve_gold_id(kb, m.ids[0])
            if cid is None:
                counts["unknown_id"] += 1
                unknown.append(m.ids[0])
                continue
            mentions.append((doc.text, m.start, m.end))
            concepts.append(cid)
    counts["used"] = len(mentions)
    with_id = counts["mentions"] - counts["no_id"]
    if with_id == 0:
        raise EmptyResultError(Errors.E603.format(what=what))
    if not mentions and counts["unknown_id"]:
        raise EmptyResultError(Errors.E604.format(n=counts["unknown_id"], examples=", ".join(sorted(set(unknown))[:5])))
    if counts["unknown_id"]:
        warnings.warn(Warnings.W600.format(n=counts["unknown_id"], total=with_id,
                                           examples=", ".join(sorted(set(unknown))[:5])))
    if counts["composite"]:
        warnings.warn(Warnings.W601.format(n=counts["composite"]))
    return mentions, concepts, counts


def definition_mentions(kb: Any, mode: str, have_examples: Sequence[str]) -> Tuple[List[MentionInText], List[str]]:
    """``(<ENT> name </ENT> definition, concept id)`` for the concepts ``mode`` asks for."""
    if mode not in DEFINITION_MODES:
        raise ConfigError(Errors.E002.format(what="definitions mode", value=mode, choices=", ".join(DEFINITION_MODES)))
    if mode == "none":
        return [], []
    skip = set(have_examples) if mode == "missing" else set()
    mentions: List[MentionInText] = []
    concepts: List[str] = []
    for cid in kb.concept_ids:
        if cid in skip:
            continue
        entity = kb.cui_to_entity[cid]
        definition = (entity.definition or "").strip()
        name = (entity.canonical_name or "").strip()
        if not definition or not name:
            continue
        text = f"{name} {definition}"
        mentions.append((text, 0, len(name)))
        concepts.append(cid)
    return mentions, concepts


def build_prototypes(docs: Sequence[Any], kb: Any, encoder: ContextEncoder, *, definitions: str = "none",
                     batch_size: int = 64, show_progress: bool = True, what: str = "the documents",
                     name_encoder: Any = None) -> PrototypeStore:
    """Encode every usable mention of ``docs`` (and definitions, as ``definitions`` says); with
    ``name_encoder``, the example mentions' names too (see the module doc)."""
    mentions, concepts, counts = collect_examples(docs, kb, what=what)
    def_mentions, def_concepts = definition_mentions(kb, definitions, concepts)
    logger.info("prototypes: %d example mentions of %d concepts, %d definitions", len(mentions),
                len(set(concepts)), len(def_mentions))
    vectors = encoder.encode(mentions + def_mentions, batch_size=batch_size, show_progress=show_progress)
    kinds = [EXAMPLE] * len(mentions) + [DEFINITION] * len(def_mentions)
    names = None
    if name_encoder is not None:
        texts = [normalize_name(text[start:end]) for text, start, end in mentions]
        names = numpy.zeros((len(kinds), name_encoder.dim), dtype=numpy.float32)
        if texts:
            names[: len(texts)] = name_encoder.encode(texts, batch_size=max(batch_size, 128),
                                                      show_progress=show_progress)
    return PrototypeStore.from_rows(vectors, concepts + def_concepts, kinds, encoder=encoder,
                                    kb_checksum=kb.checksum, names=names, name_encoder=name_encoder,
                                    extra={"counts": counts, "definitions": definitions})


__all__ = ["build_prototypes", "read_documents", "collect_examples", "definition_mentions",
           "DOC_FORMATS", "DEFINITION_MODES"]
