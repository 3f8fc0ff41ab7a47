"""The re-ranking shortcut (``context_margin``): which mentions are re-ranked, that the bound margin never
changes the first concept, and that in the linker a re-ranked mention gets exactly what full re-ranking
gives while the others keep the name ranking."""
from __future__ import annotations

import numpy as np
import pytest
import spacy
from spacy.tokens import Span

from spacy_sapbert.context import ContextWeights, PrototypeStore
from spacy_sapbert.context.rerank import needs_context, rerank
from spacy_sapbert.errors import ConfigError

from test_context import _Enc, unit
from test_context_linker import T1, T2, files, make_nlp  # noqa: F401  (the module's fixture, reused)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


STORE = PrototypeStore.from_rows(np.stack([unit(1, 0), unit(0, 1)]), ["A", "B"], [0, 0], encoder=_Enc(),
                                 kb_checksum="x")


@pytest.mark.parametrize("cands,margin,expected", [
    ([("A", 0.9), ("B", 0.9)], 0.0, True),  # a tie between concepts with prototypes
    ([("C", 0.9), ("D", 0.9)], 0.0, False),  # a tie, but nobody has prototypes: nothing can change
    ([("A", 0.9), ("B", 0.7)], 0.1, False),  # a clear name winner
    ([("A", 0.9), ("B", 0.85)], 0.1, True),
    ([("C", 0.9), ("A", 0.85)], 0.1, True),  # the challenger has prototypes
    ([("A", 0.9)], 0.5, False),  # one candidate
    ([("A", 0.9)], None, True), ([], None, False),  # None: every mention with candidates
])
def test_needs_context(cands, margin, expected):
    assert needs_context(cands, STORE, margin) is expected


def test_the_bound_margin_never_changes_the_first_concept():
    rng = np.random.default_rng(0)
    ids = ["A", "B", "C", "D"]
    for fallback in ("name", 0.0, -1.0, 1.0):
        w = ContextWeights(context=0.3, definition=0.0, fallback=fallback)
        bound = 2 * (w.context + w.definition) / w.name
        for _ in range(300):
            scores = np.sort(rng.uniform(-1, 1, 4))[::-1]
            cands = [(c, round(float(s), 6)) for c, s in zip(rng.permutation(ids).tolist(), scores)]
            full = rerank(cands, unit(*rng.normal(size=2)), STORE, w)
            if not needs_context(cands, STORE, bound):
                assert full[0][0] == cands[0][0]


def test_bad_margin_is_coded():
    for bad in (-0.1, "wide", True):
        with pytest.raises(ConfigError, match="SB-E619"):
            ContextWeights(margin=bad)
    assert ContextWeights(margin=0.05).to_dict()["context_margin"] == 0.05


def _docs(nlp, texts):
    docs = []
    for text in texts:
        doc = nlp.make_doc(text)
        doc.ents = [Span(doc, i, i + 1, label="DISEASE") for i, t in enumerate(doc) if t.text in ("MI", "flu")]
        docs.append(doc)
    return docs


def test_linker_shortcut_equals_full_reranking_where_it_reranks(tiny_bert_path, files):  # noqa: F811
    texts = [T1, T2, "a bad flu after the MI ."]
    full = make_nlp(tiny_bert_path, files, context_weight=0.5, context_fallback="name")
    short = make_nlp(tiny_bert_path, files, context_weight=0.5, context_fallback="name", context_margin=0.0)
    names = make_nlp(tiny_bert_path, files, prototypes=False)
    store = short.get_pipe("sapbert_linker").prototypes
    seen = {"reranked": 0, "kept": 0}
    for f, s, n in zip(*(list(p.get_pipe("sapbert_linker").pipe(_docs(p, texts))) for p in (full, short, names))):
        for fe, se, ne in zip(f.ents, s.ents, n.ents):
            if needs_context(ne._.kb_ents, store, 0.0):
                seen["reranked"] += 1
                assert se._.kb_ents == fe._.kb_ents
            else:
                seen["kept"] += 1
                assert se._.kb_ents == ne._.kb_ents
    assert seen["reranked"] >= 3 and seen["kept"] >= 1  # every "MI" ties on its name; "flu" does not
    # the "MI"s still get their context's concept
    assert [d.ents[0].kb_id_ for d in short.get_pipe("sapbert_linker").pipe(_docs(short, [T1, T2]))] == ["D001", "D002"]


def test_margin_travels_in_the_config(tiny_bert_path, files, tmp_path):  # noqa: F811
    nlp = make_nlp(tiny_bert_path, files, context_margin=0.05)
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("sapbert_linker")._context.weights.margin == 0.05
    with pytest.raises(ConfigError, match="SB-E619"):
        make_nlp(tiny_bert_path, files, context_margin=-1.0)
