"""Spelling changes of a normalised name or mention (:func:`~spacy_sapbert.kb.concept.normalize_name`) that keep
its meaning: a word's number, and punctuation. Shared by the training generators that turn dictionary names
into what text writes (:mod:`spacy_sapbert.kb.variants`) and the query-side variants that go the other
way (:mod:`spacy_sapbert.index.query_variants`)."""
from __future__ import annotations

import re
from typing import List

WORD = re.compile(r"^[a-z]+$")
# endings left as they are: Latin/Greek singulars and plurals, "-y" nouns whose "-ies" plural ``y_plural`` decides
_NO_PLURAL = ("ss", "us", "is", "ia", "ae", "um", "osis", "itis", "emia", "oma", "ism", "y", "i")


def toggle_number(word: str, *, y_plural: bool = False) -> str:
    """The word's plural if it looks singular, its singular if it looks plural; "" when unsure.
    ``y_plural``: also "artery" → "arteries" (a consonant before the "y", five letters or more)."""
    if not WORD.match(word) or len(word) < 4:
        return ""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if y_plural and word.endswith("y") and len(word) > 4 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(_NO_PLURAL):
        return ""
    if word.endswith(("ch", "sh", "x")):
        return word + "es"
    return word + "s"


def punctuation_variants(text: str) -> List[str]:
    """Hyphens as spaces and dropped ("non-hodgkin" → "non hodgkin", "nonhodgkin"), "'s" dropped, a "(...)"
    part dropped."""
    out: List[str] = []
    if "-" in text:
        out += [text.replace("-", " "), text.replace("-", "")]
    if "'s" in text:
        out.append(text.replace("'s", ""))
    if "(" in text:
        out.append(re.sub(r"\s*\([^)]*\)", "", text))
    return out


__all__ = ["WORD", "toggle_number", "punctuation_variants"]
