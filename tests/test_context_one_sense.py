"""One sense per document: a document's mentions written alike share the first one's context.

One document holds both sentences of test_context_linker ("MI" after troponin: D001; "MI" with a murmur:
D002), and the prototypes are those two mentions in it. Per mention, each occurrence gets its own concept;
with one sense per document both get the first's, and the context encoder sees the first occurrence only."""
from __future__ import annotations

import numpy as np
import pytest
from spacy.tokens import Span

from helpers import write_toy_kb

from spacy_sapbert.context.ranker import context_settings
from spacy_sapbert.context.rerank import ContextWeights, first_of_each
from spacy_sapbert.errors import ConfigError
from spacy_sapbert.evaluation.context import context_rankings, mention_keys
from spacy_sapbert.mentions.datasets import Document, Mention
from spacy_sapbert.mentions.metrics import Ranking

from spacy_sapbert.context import ContextEncoder, build_prototypes
from spacy_sapbert.kb import KnowledgeBase

from test_context_linker import IDS, T1, T2, make_nlp

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BOTH = f"{T1} {T2}"
AT = [BOTH.index("MI"), BOTH.rindex("MI")]


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_bert_path):
    """Prototypes from the very document linked later: each occurrence's context is its concept's prototype."""
    root = tmp_path_factory.mktemp("one_sense")
    kb = KnowledgeBase.from_disk(write_toy_kb(root / "kb", *IDS))
    doc = Document("1", BOTH, [Mention("MI", (cid,), s, s + 2) for s, cid in zip(AT, ("D001", "D002"))])
    encoder = ContextEncoder.load(str(tiny_bert_path), pooling="mean", device="cpu")
    build_prototypes([doc], kb, encoder, show_progress=False).to_disk(root / "protos")
    return root


def _doc_with_both(nlp, label="DISEASE"):
    doc = nlp.make_doc(BOTH)
    at = [i for i, t in enumerate(doc) if t.text == "MI"]
    doc.ents = [Span(doc, i, i + 1, label=label) for i in at]
    return doc


def _link(nlp, doc):
    for _, proc in nlp.pipeline:
        doc = proc(doc)
    return doc


def test_first_of_each():
    assert first_of_each([]) == []
    assert first_of_each([("d1", "mi"), ("d1", "flu"), ("d1", "mi"), ("d2", "mi")]) == [0, 1, 0, 3]


def test_per_mention_and_per_document_in_the_linker(tiny_bert_path, files):
    config = dict(context_weight=0.5, context_fallback="name")
    per_mention = make_nlp(tiny_bert_path, files, one_sense_per_document=False, **config)
    assert [e.kb_id_ for e in _link(per_mention, _doc_with_both(per_mention)).ents] == ["D001", "D002"]

    shared = make_nlp(tiny_bert_path, files, **config)  # the default: one sense per document
    store = shared.get_pipe("sapbert_linker").prototypes
    seen = []
    encode = store.encoder.encode

    def spy(mentions, **kw):
        seen.extend(mentions)
        return encode(mentions, **kw)

    store.encoder.encode = spy
    ents = _link(shared, _doc_with_both(shared)).ents
    assert [e.kb_id_ for e in ents] == ["D001", "D001"]
    assert ents[0]._.kb_ents == ents[1]._.kb_ents
    assert [(s, e) for _t, s, e in seen] == [(AT[0], AT[0] + 2)]  # the first one only
    # the same text in another document, or with another label, is encoded on its own
    seen.clear()
    docs = [_doc_with_both(shared), _doc_with_both(shared, label="OTHER")]
    list(shared.get_pipe("sapbert_linker").pipe(docs, batch_size=2))
    assert len(seen) == 2


def test_per_document_in_the_evaluation():
    class Store:
        has_names = False

        def __contains__(self, cid):
            return True

        def similarities(self, query, ids):
            return {cid: float(query[i]) for i, cid in enumerate(ids)}, {}

    docs = [Document("1", "x MI y MI", [Mention("MI", ("A",), 2, 4), Mention("MI", ("B",), 7, 9)]),
            Document("2", "MI", [Mention("MI", ("B",), 0, 2)])]
    keys = mention_keys(docs, ["MI", "mi", "MI"])
    assert keys == [(0, "mi"), (0, "mi"), (1, "mi")]
    tie = [Ranking(concepts=[("A", 0.9), ("B", 0.9)]) for _ in range(3)]
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], dtype=np.float32)  # context favours A, B, B
    weights = ContextWeights(context=0.5, fallback="name", margin=0.0)
    top = lambda rs: [r.concepts[0][0] for r in rs]  # noqa: E731
    assert top(context_rankings(tie, vectors, [True] * 3, Store(), weights, keys=keys)) == ["A", "B", "B"]
    shared = ContextWeights(context=0.5, fallback="name", margin=0.0, one_sense_per_document=True)
    assert top(context_rankings(tie, vectors, [True] * 3, Store(), shared, keys=keys)) == ["A", "A", "B"]
    assert top(context_rankings(tie, vectors, [True] * 3, Store(), shared)) == ["A", "B", "B"]  # no keys: per mention


def test_one_sense_must_be_a_bool():
    with pytest.raises(ConfigError, match="SB-E002"):
        ContextWeights(one_sense_per_document="yes")
    cfg = {"type_priors": {}, "context_weight": 0.05, "definition_weight": 0.0, "context_fallback": 0.0,
           "one_sense_per_document": 1}
    with pytest.raises(ConfigError, match="SB-E002"):
        context_settings(cfg)  # what the linker checks its config with (spaCy's own check comes first there)
