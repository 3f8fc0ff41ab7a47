"""Input handling options (stated in every report): case, punctuation folding, abbreviations.

- ``lowercase``: mentions are normalised with :func:`normalize_name` (NFKC, lowercase, whitespace
  folded), as KB names always are. ``False`` keeps the mention's case (NFKC and whitespace only);
  the KB's names stay lowercase, so only case-insensitive systems are unaffected.
- ``fold_punctuation``: every punctuation character becomes a space, then whitespace is folded; it is
  applied to mentions *and* dictionary names (as BioSyn / SapBERT preprocessing does).
- ``resolve_abbreviations``: the definitions each document's text makes, found as the linker finds them
  (scispaCy's detector and its additions: :mod:`spacy_sapbert.mentions.abbreviations`); a short form inside a
  mention is replaced by its long form (``"WD"`` → ``"wilson disease"``).
- ``abbreviation_table``: a table (:mod:`spacy_sapbert.mentions.abbreviation_table`) whose long form replaces a
  mention that is one of its short forms and in which the document's own definitions replaced nothing, as the
  linker's ``abbreviation_table`` does.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..kb.concept import normalize_name
from ..base.util import get_logger
from ..mentions.abbreviation_table import AbbreviationTable
from ..mentions.abbreviations import definitions, make_detector
from ..mentions.datasets import Document

logger = get_logger("evaluation.preprocess")

_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class InputOptions:
    """How mentions (and dictionary names) are prepared before any system sees them."""

    lowercase: bool = True
    fold_punctuation: bool = False
    resolve_abbreviations: bool = False
    backoff: bool = False
    abbreviation_table: Optional[str] = None  # a file of spacy-sapbert mine-abbreviations, or a TSV

    def describe(self) -> str:
        """One line for report tables, e.g. ``lowercase, no punctuation folding, ...``."""
        return ", ".join(
            [
                "lowercase" if self.lowercase else "case kept",
                "punctuation folded" if self.fold_punctuation else "punctuation kept",
                "abbreviations resolved (scispaCy)" if self.resolve_abbreviations else "abbreviations as written",
                "dictionary back-off (training mentions as aliases)" if self.backoff else "no back-off",
            ]
            + ([f"abbreviation table {Path(self.abbreviation_table).name}"] if self.abbreviation_table else [])
        )

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _fold(text: str) -> str:
    return "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)


def make_preprocessor(*, lowercase: bool = True, fold_punctuation: bool = False) -> Callable[[str], str]:
    """The string function applied to mentions (and, with ``fold_punctuation``, to names)."""

    def prep(text: str) -> str:
        out = normalize_name(text) if lowercase else _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip()
        if fold_punctuation:
            out = _WS.sub(" ", _fold(out)).strip()
        return out

    return prep


def abbreviation_map(docs: Sequence[Document], *, batch_size: int = 32) -> Dict[str, Dict[str, str]]:
    """``{doc_id: {short_form: long_form}}``: the definitions each document's text makes, found as the linker's
    ``resolve_abbreviations`` finds them (:func:`spacy_sapbert.mentions.abbreviations.definitions`)."""
    import spacy

    nlp = spacy.blank("en")
    detector = make_detector(nlp.vocab)
    texts = [(d.text, d.doc_id) for d in docs if d.text]
    out: Dict[str, Dict[str, str]] = {}
    for doc, doc_id in nlp.pipe(texts, as_tuples=True, batch_size=batch_size):
        pairs = out.setdefault(doc_id, {})
        for short, long_text in definitions(doc, lambda: detector):
            pairs.setdefault(short.text, long_text)
    return out


def expand_abbreviations(text: str, pairs: Dict[str, str]) -> str:
    """Replace each short form that stands as a whole word in ``text`` by its long form
    (longest short forms first, one pass)."""
    if not pairs:
        return text
    keys = sorted(pairs, key=lambda s: (-len(s), s))
    pattern = re.compile(r"(?<!\w)(" + "|".join(re.escape(k) for k in keys) + r")(?!\w)")
    return pattern.sub(lambda m: pairs[m.group(1)], text)


def mention_queries(docs: Sequence[Document], options: InputOptions) -> List[Tuple[str, str]]:
    """For every mention of ``docs`` (reading order): ``(query, as_written)``, where ``query`` is
    the string the systems receive after abbreviation expansion and preprocessing."""
    prep = make_preprocessor(lowercase=options.lowercase, fold_punctuation=options.fold_punctuation)
    abbrs = abbreviation_map(docs) if options.resolve_abbreviations else {}
    table = AbbreviationTable.from_disk(options.abbreviation_table) if options.abbreviation_table else None
    out: List[Tuple[str, str]] = []
    n_expanded = n_table = 0
    for doc in docs:
        pairs = abbrs.get(doc.doc_id, {})
        for m in doc.mentions:
            text = expand_abbreviations(m.text, pairs) if pairs else m.text
            n_expanded += text != m.text
            if table is not None:
                found = table.text_for(m.text, text)
                n_table += found != text
                text = found
            out.append((prep(text), m.text))
    if options.resolve_abbreviations:
        logger.info("abbreviations expanded in %d of %d mentions", n_expanded, len(out))
    if table is not None:
        logger.info("the abbreviation table replaced %d of %d mentions", n_table, len(out))
    return out


__all__ = ["InputOptions", "make_preprocessor", "abbreviation_map", "expand_abbreviations", "mention_queries"]
