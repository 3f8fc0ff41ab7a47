"""Abbreviation definitions found in a document (spacy_sapbert.mentions.abbreviations): scispaCy's rules and the
three additions (long form inside the sentence, hyphenated short forms, initials in another order), and evaluate's
abbreviation map, which must find what the linker finds."""
from __future__ import annotations

import pytest
import spacy
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from spacy_sapbert.mentions.abbreviations import definitions, long_forms, make_detector, mention_text

pytest.importorskip("scispacy")


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("en")


@pytest.fixture(scope="module")
def detector(nlp):
    return make_detector(nlp.vocab)


def defined(nlp, detector, text, **kw):
    doc = nlp(text)
    return {short.text: long_text for short, long_text in definitions(doc, lambda: detector, **kw)}


def resolved(nlp, detector, text, start_char, end_char, **kw):
    doc = nlp(text)
    return mention_text(doc.char_span(start_char, end_char), long_forms(doc, lambda: detector, **kw))


def test_scispacy_definitions_are_kept(nlp, detector):
    text = "Wilson disease (WD) is rare. WD-like signs. Valproic acid (VPA) was given."
    for extended in (True, False):
        assert defined(nlp, detector, text, extended=extended) == {"WD": "Wilson disease", "VPA": "Valproic acid"}


def test_the_long_form_stays_in_the_short_forms_sentence(nlp, detector):
    text = "Splicing in myotonic dystrophy. Myotonic dystrophy (DM) is common. Congenital DM is severe."
    assert defined(nlp, detector, text, extended=False) == {"DM": "dystrophy. Myotonic dystrophy"}  # scispaCy's
    assert defined(nlp, detector, text) == {"DM": "Myotonic dystrophy"}
    start = text.index("Congenital DM")
    assert resolved(nlp, detector, text, start, start + len("Congenital DM")) == "Congenital Myotonic dystrophy"


def test_a_hyphenated_short_form_is_judged_as_one_word(nlp, detector):
    text = "Mutations in ataxia-telangiectasia (A-T) homozygotes. A-T patients and T-cell prolymphocytic " \
           "leukaemia (T-PLL) cases."
    assert defined(nlp, detector, text, extended=False) == {}
    assert defined(nlp, detector, text) == {"A-T": "ataxia-telangiectasia", "T-PLL": "T-cell prolymphocytic leukaemia"}
    start = text.index("A-T patients")
    assert resolved(nlp, detector, text, start, start + 3) == "ataxia-telangiectasia"
    assert resolved(nlp, detector, text, start, start + 3, extended=False) == "A-T"


def test_a_joined_short_form_needs_a_capital(nlp, detector):
    assert defined(nlp, detector, "It was dissolved in water with ethanol (w/v) and given intravenously (i.v.).") == {}


def test_initials_in_another_order(nlp, detector):
    text = "Infants with congenital myotonic dystrophy (CDM) and adults with myotonic dystrophy (DM) were seen."
    assert defined(nlp, detector, text, extended=False) == {}
    assert defined(nlp, detector, text) == {"CDM": "congenital myotonic dystrophy", "DM": "myotonic dystrophy"}


@pytest.mark.parametrize("text", [
    "They studied the disease (DT) in mice.",        # a stop word among the words
    "They studied myotonic dystrophy (dm) in mice.",  # not capitals
    "They studied myotonic dystrophy (DMX) in mice.",  # three letters, two words' initials
])
def test_initials_are_not_taken_loosely(nlp, detector, text):
    assert defined(nlp, detector, text) == {}


def test_evaluate_finds_what_the_linker_finds(nlp, detector):
    from spacy_sapbert.evaluation.preprocess import abbreviation_map, expand_abbreviations
    from spacy_sapbert.mentions.records import Document, Mention

    text = "Splicing in myotonic dystrophy. Myotonic dystrophy (DM) and ataxia-telangiectasia (A-T) differ. " \
           "Congenital DM and A-T are rare."
    doc = Document(doc_id="d1", text=text, mentions=[Mention(text="Congenital DM", ids=("x",))])
    pairs = abbreviation_map([doc])["d1"]
    assert pairs == defined(nlp, detector, text) == {"DM": "Myotonic dystrophy", "A-T": "ataxia-telangiectasia"}
    assert expand_abbreviations("congenital DM", pairs) == "congenital Myotonic dystrophy"


_WORDS = st.sampled_from(["myotonic", "dystrophy", "Myotonic", "the", "disease", "(", ")", ".", "DM", "A-T", "-",
                          "ataxia", "telangiectasia", "T", "cell", "(DM)", "(A-T)", "of", "WD", "Wilson", ";", "x"])


# derandomized: the same 150 examples every run (a random search made the suite fail on whatever it found that day)
@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_WORDS, min_size=1, max_size=30))
@example(["myotonic", "(", "myotonic", "myotonic", "myotonic", "myotonic", ")"])  # found 2026-11-29: "defined" as itself
def test_any_text_gives_definitions_from_the_text_around_their_short_form(nlp, detector, words):
    doc = nlp(" ".join(words))
    found = definitions(doc, lambda: detector)
    assert len({short.text for short, _ in found}) == len(found) == len({long for _, long in found})
    for short, long_text in found:  # "long form (SF)", or "SF (long form)" with more than two words inside
        assert long_text and (long_text in doc[:short.start].text or long_text in doc[short.end:].text)
        assert long_text.lower() != short.text.lower()
    forms = long_forms(doc, lambda: detector)
    assert all(start < end <= len(doc) for start, (end, _) in forms.items())


def test_short_form_before_its_long_form_and_a_word_defined_as_itself(nlp, detector):
    """scispaCy's "SF (long form)" order is kept; a word "defined" as itself is dropped (Hypothesis found one)."""
    doc = nlp("Patients with DM ( dystrophia myotonica of muscle ) and DM.")
    assert [(short.start, long_text) for short, long_text in definitions(doc, lambda: detector)] == \
        [(2, "dystrophia myotonica of muscle")]
    assert definitions(nlp("myotonic ( myotonic myotonic myotonic myotonic )"), lambda: detector) == []
    assert long_forms(nlp("myotonic ( myotonic myotonic myotonic myotonic )"), lambda: detector) == {}
