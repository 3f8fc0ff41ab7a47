"""Abbreviations inside mentions: their long forms, and a mention's text with each short form replaced by its
long form, which is what the linker encodes (``resolve_abbreviations``).

Definitions ("long form (SF)", and "SF (long form)" where the parenthesis holds more than two words, as scispaCy
reads them) are found by scispaCy's detector (Schwartz & Hearst 2003: the short form's
characters in order in the long form, the first at a word's start) with three additions (``extended=False``: none):

- the long form stays in the short form's sentence (scispaCy's window of words may reach back over a full stop:
  "... in myotonic dystrophy. Myotonic dystrophy (DM)" gave "dystrophy. Myotonic dystrophy") and starts where
  the characters matched start (scispaCy's could start a token late after a hyphen: "cell prolymphocytic
  leukaemia" for "T-cell prolymphocytic leukaemia (T-PLL)");
- a short form the tokenizer split at hyphens or slashes ("A-T", "T-PLL": spaCy's tokens "A", "-", "T" are each
  shorter than the 2 characters scispaCy asks of every word) is judged on its whole text, which must hold a
  capital ("w/v" and "i.v." are not taken);
- where Schwartz & Hearst find no long form, initials in another order ("myotonic dystrophy (DM)", "congenital
  myotonic dystrophy (CDM)"): when the short form is 2-6 capital letters and they are, as a multiset, the
  initials of the words right before the parenthesis (one word per letter, none a stop word), those words are
  the long form.

A short form "defined" as itself ("myotonic (myotonic myotonic myotonic)") is dropped: it resolves nothing and
would keep its text from a later definition. Every occurrence of a defined short form in the document is then
resolved, as scispaCy does."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

from spacy.matcher import Matcher
from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

LongForms = Dict[int, Tuple[int, str]]
_SENTENCE_ENDS = frozenset({".", "!", "?", ";"})


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


def long_forms(doc: Doc, get_detector: Callable[[], Any], *, extended: bool = True) -> LongForms:
    """Short-form start token → (end token, long form text), from ``doc._.abbreviations`` when an
    ``abbreviation_detector`` ran before us and found some, else from :func:`definitions` with the detector
    ``get_detector()`` returns (see :func:`make_detector`; asked for only then), run here without touching the doc.
    ``extended=False``: scispaCy's rules only (the module docstring's additions off)."""
    found = _from_doc(doc)
    if found:
        return found
    pairs = definitions(doc, get_detector, extended=extended)
    if not pairs:
        return found
    matcher = Matcher(doc.vocab)
    for i, (short, _) in enumerate(pairs):
        matcher.add(str(i), [[{"ORTH": token.text} for token in short]])
    for key, start, end in matcher(doc):
        found[start] = (end, pairs[int(doc.vocab.strings[key])][1])
    return found


def definitions(doc: Doc, get_detector: Callable[[], Any], *, extended: bool = True) -> List[Tuple[Span, str]]:
    """The abbreviations the document defines, in reading order: ``(short form span, long form text)``, one per
    short form and per long form (the first definition wins, as in scispaCy). See the module docstring;
    ``extended=False``: scispaCy's rules only."""
    from scispacy.abbreviation import filter_matches, find_abbreviation  # lazy: scispacy

    detector = get_detector()
    inside = [(m, s + 1, e - 1) for m, s, e in detector.matcher(doc)]
    candidates = filter_matches(inside, doc)
    if extended:
        taken = {(short.start, short.end) for _, short in candidates}
        candidates += [pair for m, s, e in inside if (s, e) not in taken for pair in _joined_candidate(doc, s, e)]
        candidates.sort(key=lambda pair: pair[1].start)
    out: List[Tuple[Span, str]] = []
    seen_short, seen_long = set(), set()
    for long_candidate, short_candidate in candidates:
        if extended:
            long_candidate = _this_sentence(long_candidate)
            short, long = short_candidate, _schwartz_hearst(long_candidate, short_candidate)
            long_text = long.text if long is not None else _initials_long_form(long_candidate, short)
        else:
            short, long = find_abbreviation(long_candidate, short_candidate)
            long_text = long.text if long is not None else None
        if long_text and long_text.lower() == short.text.lower():  # a word "defined" as itself defines nothing
            continue
        if long_text and long_text not in seen_long and short.text not in seen_short:
            seen_long.add(long_text)
            seen_short.add(short.text)
            out.append((short, long_text))
    return out


def _this_sentence(window: Span) -> Span:
    """The part of a long-form window after its last sentence end: scispaCy's window of up to
    ``min(|SF| + 5, 2 |SF|)`` words reaches back over a full stop ("... dystrophy. Myotonic dystrophy (DM)")."""
    for token in reversed(window):
        if token.text in _SENTENCE_ENDS:
            return window.doc[token.i + 1:window.end]
    return window


def _schwartz_hearst(window: Span, short: Span) -> Optional[Span]:
    """scispaCy's ``find_abbreviation`` on a copy of the window whose every token is followed by a space, the long
    form it finds mapped back onto the document. scispaCy matches characters on the tokens joined by spaces but maps
    the match back through the text's own spacing, which puts the start a token late after a hyphen
    ("T-cell prolymphocytic leukaemia (T-PLL)" gave "cell prolymphocytic leukaemia")."""
    from scispacy.abbreviation import find_abbreviation  # lazy: scispacy

    if not len(window):
        return None
    spaced = Doc(window.doc.vocab, words=[token.text for token in window], spaces=[True] * len(window))
    _, long = find_abbreviation(spaced[:], short)
    return None if long is None else window.doc[window.start + long.start:window.end]


def _joined_candidate(doc: Doc, start: int, end: int) -> List[Tuple[Span, Span]]:
    """scispaCy's candidate for the parenthesis ``doc[start:end]`` when its tokens are one word of the text
    ("A-T"): the word holds a capital and passes scispaCy's short-form tests as a whole, the long-form window is
    scispaCy's."""
    short = doc[start:end]
    if not 1 < len(short) <= 8 or start <= 1 or any(token.whitespace_ for token in short[:-1]):
        return []
    text = short.text
    if not 2 <= len(text) < 10 or not text[0].isalpha() or sum(c.isalpha() for c in text) < len(text) / 2 \
            or not any(c.isupper() for c in text):
        return []
    length = sum(len(token) for token in short)
    max_words = min(length + 5, length * 2)
    return [(doc[max(start - max_words - 1, 0):start - 1], short)]


def _initials_long_form(long_candidate: Span, short: Span) -> Optional[str]:
    """The words right before the parenthesis whose initials are the short form's capitals in another order
    ("myotonic dystrophy (DM)"), else None."""
    letters = short.text
    if not 2 <= len(letters) <= 6 or not letters.isalpha() or not letters.isupper():
        return None
    words: List[Any] = []
    for token in reversed(long_candidate):
        if len(words) == len(letters) or not token.is_alpha:
            break
        words.append(token)
    if len(words) != len(letters) or any(token.is_stop for token in words):
        return None
    if Counter(token.text[0].lower() for token in words) != Counter(letters.lower()):
        return None
    return long_candidate.doc[words[-1].i:words[0].i + 1].text


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
    return "".join(parts).rstrip()  # as span.text: no whitespace after the last token


__all__ = ["make_detector", "long_forms", "definitions", "mention_text"]
