"""Short/long forms mined from raw text: pairs of an abbreviation and a dictionary name.

scispaCy's abbreviation detector (the one the linker uses, :mod:`spacy_sapbert.mentions.abbreviations`) runs
over the titles and abstracts of PubTator files (read with the evaluation reader; their annotations
are not used). A definition "hereditary nonpolyposis colorectal cancer (HNPCC)" gives the pair
("hnpcc", "hereditary nonpolyposis colorectal cancer") when the long form, or one of its punctuation
or number variants, is a name of exactly one concept, and the short form is not a name of any concept
already (an abbreviation that is another concept's name would teach the wrong link). A short form
defined with two different concepts in the texts is dropped.

Only text the user passes is read: never pass the text of a test or dev set you evaluate on.
"""
from __future__ import annotations

import random
import warnings
from bisect import bisect_left
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Sequence, Tuple

from ..base.util import PathLike, get_logger
from ..errors import ConfigError, Errors, SapbertError, Warnings
from ..kb.concept import normalize_name
from ..mentions.abbreviations import long_forms, make_detector
from ..mentions.datasets import read_pubtator
from ..kb.variants import number, punctuation

logger = get_logger("training.abbreviation_pairs")


def read_raw_texts(paths: Sequence[PathLike]) -> List[str]:
    """The documents' texts (title + " " + abstract) of PubTator files, in file order."""
    texts: List[str] = []
    for path in paths:
        if not Path(path).is_file():
            raise ConfigError(Errors.E222.format(path=path, what="no such file"))
        try:
            docs = read_pubtator(path)
        except SapbertError as err:
            raise ConfigError(Errors.E222.format(path=path, what=str(err))) from None
        texts.extend(d.text for d in docs if d.text)
    return texts


def mine_abbreviations(texts: Iterable[str]) -> Counter:
    """``Counter`` of ``(short form, long form)`` (both normalised) defined in ``texts``."""
    import spacy

    nlp = spacy.blank("en")
    detector = make_detector(nlp.vocab)
    found: Counter = Counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[W036\]")
        for doc in nlp.pipe(texts, batch_size=64):
            for start, (end, long_text) in long_forms(doc, lambda: detector).items():
                short, long = normalize_name(doc[start:end].text), normalize_name(long_text)
                if short and long and short != long:
                    found[(short, long)] += 1
    return found


def _concept_of(kb: Any, long: str) -> Tuple[int, str]:
    """``(row, concept)`` of the long form or its first punctuation/number variant that is a name of
    exactly one concept; ``(-1, "")`` when none is."""
    rng = random.Random(0)  # unused by these two generators
    for text in [long, *punctuation(long, rng), *number(long, rng)]:
        row = kb.row_of_name(normalize_name(text))
        if row >= 0:
            owners = kb.concepts_of_row(row)
            return (row, owners[0]) if len(owners) == 1 else (-1, "")
    return -1, ""


def abbreviation_pairs(kb: Any, found: Counter) -> Iterator[Tuple[str, int, int, str]]:
    """``(short form, name row, concept label, "abbreviation")`` from :func:`mine_abbreviations`'s counts:
    the long form resolved to one concept (:func:`_concept_of`), the short form no KB name, one concept
    per short form (a short form defined as two concepts is left out). Sorted by short form."""
    by_short: Dict[str, Dict[str, int]] = {}
    for (short, long), _n in sorted(found.items()):
        if kb.row_of_name(short) >= 0:
            continue
        row, cid = _concept_of(kb, long)
        if row >= 0:
            by_short.setdefault(short, {}).setdefault(cid, row)
    concept_ids = kb.concept_ids
    for short, targets in sorted(by_short.items()):
        if len(targets) == 1:
            ((cid, row),) = targets.items()
            yield short, row, bisect_left(concept_ids, cid), "abbreviation"


def raw_text_pairs(kb: Any, paths: Sequence[PathLike]) -> List[Tuple[str, int, int, str]]:
    """:func:`abbreviation_pairs` of the PubTator files ``paths``; warns (W200) when they give none."""
    if not paths:
        return []
    found = mine_abbreviations(read_raw_texts(paths))
    pairs = list(abbreviation_pairs(kb, found))
    if not pairs:
        warnings.warn(Warnings.W200.format(paths=", ".join(str(p) for p in paths), n=len(found)))
    logger.info("%d abbreviation pairs from %d short/long forms in %s", len(pairs), len(found), list(paths))
    return pairs


__all__ = ["read_raw_texts", "mine_abbreviations", "abbreviation_pairs", "raw_text_pairs"]
