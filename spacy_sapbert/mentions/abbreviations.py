"""Abbreviations inside mentions: their long forms (scispaCy's detector), and a mention's text with
each short form replaced by its long form, which is what the linker encodes (``resolve_abbreviations``)."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Tuple

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

LongForms = Dict[int, Tuple[int, str]]


def make_detector(vocab: Vocab) -> Any:
    """scispaCy's AbbreviationDetector, used only for its matchers (it needs an object with .vocab)."""
    from scispacy.abbreviation import AbbreviationDetector  # lazy: scispacy

    class _VocabOnly:
        def __init__(self, vocab: Vocab) -> None:
            self.vocab = vocab

    return AbbreviationDetector(_VocabOnly(vocab))  # type: ignore[arg-type]


def _from_doc(doc: Doc) -> LongForms:
    found: LongForms = {}
    if Doc.has_extension("abbreviations"):
        for abbr in doc._.abbreviations or ():
            if isinstance(abbr, dict):  # AbbreviationDetector(make_serializable=True)
                found[int(abbr["short_start"])] = (int(abbr["short_end"]), str(abbr["long_text"]))
            elif isinstance(abbr, Span) and abbr._.long_form is not None:
                long_form = abbr._.long_form
                found[abbr.start] = (abbr.end, getattr(long_form, "text", str(long_form)))
    return found


def long_forms(doc: Doc, get_detector: Callable[[], Any]) -> LongForms:
    """Short-form start token → (end token, long form text), from ``doc._.abbreviations`` when an
    ``abbreviation_detector`` ran before us and found some, else from the detector ``get_detector()``
    returns (see :func:`make_detector`; asked for only then), run here without touching the doc."""
    found = _from_doc(doc)
    if found:
        return found
    from scispacy.abbreviation import filter_matches  # lazy: scispacy

    detector = get_detector()
    matches = detector.matcher(doc)
    candidates = filter_matches([(m, s + 1, e - 1) for m, s, e in matches], doc)
    if not candidates:
        return found
    with warnings.catch_warnings():  # scispaCy runs its matcher even when it has no patterns
        warnings.filterwarnings("ignore", message=r"\[W036\]")
        occurrences = detector.find_matches_for(candidates, doc)
    for long_form, shorts in occurrences:
        for short in shorts:
            found[short.start] = (short.end, long_form.text)
    return found


def mention_text(span: Span, forms: LongForms) -> str:
    """The span's text with every abbreviation inside it replaced by its long form."""
    if not forms:
        return span.text
    parts: List[str] = []
    i = span.start
    doc = span.doc
    while i < span.end:
        hit = forms.get(i)
        if hit is not None and hit[0] <= span.end:
            parts.append(hit[1] + doc[hit[0] - 1].whitespace_)
            i = hit[0]
        else:
            parts.append(doc[i].text_with_ws)
            i += 1
    return "".join(parts)


__all__ = ["make_detector", "long_forms", "mention_text"]
