"""PubTator → spaCy ``DocBin`` for training a Disease/Chemical NER with ``spacy train``.

The PubTator files are read with :func:`spacy_sapbert.mentions.datasets.read_pubtator` (one
reader for training and evaluation). Each document's text (title + " " + abstract) is tokenised
with the target pipeline's tokenizer and every gold mention becomes an entity span with a label
from ``label_map`` (NCBI's ``SpecificDisease``/``DiseaseClass``/``Modifier``/``CompositeMention``
and BC5CDR's ``Disease`` → ``Disease``; ``Chemical`` → ``Chemical``).

Mentions whose character offsets do not fall on token boundaries are handled by ``misaligned``:
``skip`` (default: drop the mention), ``expand`` (grow the span to the covering tokens) or
``contract`` (shrink it to the tokens fully inside; dropped if none). Overlapping mentions keep
the longest (then the first). Every such case is counted and reported in one warning per file,
never dropped silently.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..base.util import PathLike, atomic_write, ensure_path, get_logger
from ..errors import ConfigError, EmptyResultError, Errors, Warnings
from ..mentions.datasets import read_pubtator

logger = get_logger("ner.convert")

DEFAULT_LABEL_MAP: Dict[str, str] = {
    "Disease": "Disease",
    "SpecificDisease": "Disease",
    "DiseaseClass": "Disease",
    "Modifier": "Disease",
    "CompositeMention": "Disease",
    "Chemical": "Chemical",
}
MISALIGNED_CHOICES = ("skip", "expand", "contract")


@dataclass
class ConversionStats:
    """What a conversion did, per file and in total."""

    docs: int = 0
    mentions: int = 0
    entities: int = 0
    misaligned: int = 0
    misaligned_kept: int = 0
    overlapping: int = 0
    unmapped_types: Dict[str, int] = field(default_factory=dict)
    labels: Dict[str, int] = field(default_factory=dict)

    def add(self, other: "ConversionStats") -> None:
        self.docs += other.docs
        self.mentions += other.mentions
        self.entities += other.entities
        self.misaligned += other.misaligned
        self.misaligned_kept += other.misaligned_kept
        self.overlapping += other.overlapping
        for src, dst in ((other.unmapped_types, self.unmapped_types), (other.labels, self.labels)):
            for key, value in src.items():
                dst[key] = dst.get(key, 0) + value

    def to_dict(self) -> Dict[str, object]:
        return {
            "docs": self.docs,
            "mentions": self.mentions,
            "entities": self.entities,
            "misaligned": self.misaligned,
            "misaligned_kept": self.misaligned_kept,
            "overlapping": self.overlapping,
            "unmapped_types": dict(sorted(self.unmapped_types.items())),
            "labels": dict(sorted(self.labels.items())),
        }


def _blank(lang: str):
    import spacy

    try:
        spacy.util.get_lang_class(lang)
    except ImportError:
        raise ConfigError(
            Errors.E002.format(what="spaCy language code", value=lang, choices="a code spaCy knows, e.g. en")
        ) from None
    return spacy.blank(lang)


def pubtator_to_docs(
    path: PathLike,
    nlp=None,
    *,
    label_map: Optional[Mapping[str, str]] = None,
    misaligned: str = "skip",
) -> Tuple[list, ConversionStats]:
    """Read one PubTator file and return ``(docs, stats)``: spaCy ``Doc`` objects whose
    ``doc.ents`` are the gold mentions (``doc.user_data["doc_id"]`` holds the PMID)."""
    from spacy.util import filter_spans

    if misaligned not in MISALIGNED_CHOICES:
        raise ConfigError(
            Errors.E002.format(what="misaligned mode", value=misaligned, choices=", ".join(MISALIGNED_CHOICES))
        )
    label_map = dict(DEFAULT_LABEL_MAP if label_map is None else label_map)
    if not label_map:
        raise ConfigError(Errors.E440.format())
    nlp = _blank("en") if nlp is None else nlp
    path = ensure_path(path)
    stats = ConversionStats()
    examples: List[str] = []
    docs = []
    for document in read_pubtator(path):
        doc = nlp.make_doc(document.text)
        doc.user_data["doc_id"] = document.doc_id
        spans = []
        for mention in document.mentions:
            stats.mentions += 1
            label = label_map.get(mention.type or "")
            if label is None:
                key = mention.type or "<none>"
                stats.unmapped_types[key] = stats.unmapped_types.get(key, 0) + 1
                continue
            span = doc.char_span(mention.start, mention.end, label=label, alignment_mode="strict")
            if span is None:
                stats.misaligned += 1
                if len(examples) < 3:
                    examples.append(f"{document.doc_id}:{mention.start}-{mention.end} '{mention.text}'")
                if misaligned != "skip":
                    span = doc.char_span(mention.start, mention.end, label=label, alignment_mode=misaligned)
                    if span is not None and len(span) > 0:
                        stats.misaligned_kept += 1
                    else:
                        span = None
            if span is not None:
                spans.append(span)
        kept = filter_spans(spans)
        stats.overlapping += len(spans) - len(kept)
        doc.ents = kept
        for span in kept:
            stats.labels[span.label_] = stats.labels.get(span.label_, 0) + 1
        stats.entities += len(kept)
        stats.docs += 1
        docs.append(doc)
    if stats.misaligned:
        action = {"skip": "skipped", "expand": "expanded to token boundaries",
                  "contract": "contracted to token boundaries"}[misaligned]
        warnings.warn(
            Warnings.W440.format(
                path=path, n=stats.misaligned, total=stats.mentions, action=action,
                kept=stats.misaligned_kept, examples="; ".join(examples),
            ),
            stacklevel=2,
        )
    if stats.overlapping:
        warnings.warn(Warnings.W441.format(path=path, n=stats.overlapping), stacklevel=2)
    if stats.unmapped_types:
        found = ", ".join(f"{k} ({v})" for k, v in sorted(stats.unmapped_types.items()))
        warnings.warn(
            Warnings.W442.format(path=path, found=found, known=", ".join(sorted(label_map))), stacklevel=2
        )
    logger.info("%s: %d docs, %d of %d mentions as entities", path, stats.docs, stats.entities, stats.mentions)
    return docs, stats


def convert_pubtator(
    inputs: Sequence[PathLike],
    output: PathLike,
    *,
    lang: str = "en",
    label_map: Optional[Mapping[str, str]] = None,
    misaligned: str = "skip",
    nlp=None,
) -> ConversionStats:
    """Convert PubTator files into one ``.spacy`` DocBin at ``output`` (written atomically).

    Returns the summed :class:`ConversionStats`. Raises :class:`EmptyResultError` when the inputs
    hold no entity at all (a wrong ``label_map`` or the wrong files)."""
    from spacy.tokens import DocBin

    if not inputs:
        raise ConfigError(Errors.E441.format())
    nlp = _blank(lang) if nlp is None else nlp
    total = ConversionStats()
    db = DocBin(store_user_data=True)
    for path in inputs:
        docs, stats = pubtator_to_docs(path, nlp, label_map=label_map, misaligned=misaligned)
        for doc in docs:
            db.add(doc)
        total.add(stats)
    if total.entities == 0:
        raise EmptyResultError(
            Errors.E442.format(
                inputs=", ".join(str(p) for p in inputs),
                known=", ".join(sorted(DEFAULT_LABEL_MAP if label_map is None else label_map)),
            )
        )
    with atomic_write(output, "wb") as fh:
        fh.write(db.to_bytes())
    return total


__all__ = [
    "DEFAULT_LABEL_MAP",
    "MISALIGNED_CHOICES",
    "ConversionStats",
    "pubtator_to_docs",
    "convert_pubtator",
]
