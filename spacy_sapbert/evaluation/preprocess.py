"""Input handling options (stated in every report): case, punctuation folding, abbreviations.

- ``lowercase``: mentions are normalised with :func:`normalize_name` (NFKC, lowercase, whitespace
  folded), as KB names always are. ``False`` keeps the mention's case (NFKC and whitespace only);
  the KB's names stay lowercase, so only case-insensitive systems are unaffected.
- ``fold_punctuation``: every punctuation character becomes a space, then whitespace is folded; it is
  applied to mentions *and* dictionary names (as BioSyn / SapBERT preprocessing does).
- ``resolve_abbreviations``: the definitions each document's text makes, found as the linker finds them
  (scispaCy's detector and its additions: :mod:`spacy_sapbert.mentions.abbreviations`); a short form inside a
  mention is replaced by its long form (``"WD"`` → ``"wilson disease"``).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Sequence, Tuple

from ..kb.concept import normalize_name
from ..base.util import get_logger
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

    def describe(self) -> str:
        """One line for report tables, e.g. ``lowercase, no punctuation folding, ...``."""
        return ", ".join(
            [
                "lowercase" if self.lowercase else "case kept",
                "punctuation folded" if self.fold_punctuation else "punctuation kept",
                "abbreviations resolved (scispaCy)" if self.resolve_abbreviations else "abbreviations as written",
                "dictionary back-off (training mentions as aliases)" if self.backoff else "no back-off",
            ]
        )

    def to_dict(self) -> Dict[str, bool]:
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
    out: List[Tuple[str, str]] = []
    n_expanded = 0
    for doc in docs:
        pairs = abbrs.get(doc.doc_id, {})
        for m in doc.mentions:
            text = expand_abbreviations(m.text, pairs) if pairs else m.text
            n_expanded += text != m.text
            out.append((prep(text), m.text))
    if options.resolve_abbreviations:
        logger.info("abbreviations expanded in %d of %d mentions", n_expanded, len(out))
    return out


__all__ = ["InputOptions", "make_preprocessor", "abbreviation_map", "expand_abbreviations", "mention_queries"]
