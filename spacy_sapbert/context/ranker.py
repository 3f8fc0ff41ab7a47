"""What the linker calls when context is on: name search under type priors, then re-ranking.

:class:`ContextRanker` holds the prototype store (with its context encoder), the type priors and
the weights. :meth:`ContextRanker.rank` takes the mentions of a batch of docs as ``(span,
normalised text)`` and returns each mention's ``kb_ents`` list: the name index proposes ``k``
concepts per (text, prior) once for the batch (with ``example_names``, their name scores raised by
the prototypes' example names: :func:`~spacy_sapbert.context.rerank.with_example_names_many`), then every
mention's candidates are re-ranked with its own context vector (all context vectors of the batch are
encoded at once; none without context or definition weight). With a
``context_margin`` only the mentions :func:`~spacy_sapbert.context.rerank.needs_context` picks are
encoded and re-ranked; the others keep their name ranking. With ``one_sense_per_document`` only the first
of a document's mentions written alike is encoded; its context vector serves them all.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy

from .priors import Candidates, TypePriors, search_with_prior
from .rerank import ContextWeights, first_of_each, needs_context, rerank, with_example_names_many
from .store import PrototypeStore


def context_settings(cfg: Dict[str, Any]) -> Tuple[TypePriors, ContextWeights]:
    """The linker config's type priors and context weights, checked (coded errors for bad values)."""
    return TypePriors(dict(cfg["type_priors"] or {})), ContextWeights(
        context=cfg["context_weight"], definition=cfg["definition_weight"], fallback=cfg["context_fallback"],
        margin=cfg.get("context_margin"), example_names=cfg.get("example_names", False),
        one_sense_per_document=cfg.get("one_sense_per_document", False))


class ContextRanker:
    """Type priors + prototype re-ranking for :class:`~spacy_sapbert.linker.SapbertLinker`."""

    def __init__(self, *, store: Optional[PrototypeStore], priors: TypePriors, weights: ContextWeights) -> None:
        self.store = store
        self.priors = priors
        self.weights = weights

    def rank(self, index: Any, vectors_of: Callable[[List[str]], numpy.ndarray],
             mentions: Sequence[Tuple[Any, str]], *, k: int, semantic_types: Optional[Sequence[str]],
             require_definition: bool, threshold: float, cap: int, batch_size: int) -> List[Candidates]:
        keys = [(text, span.label_ if self.priors.for_label(span.label_) else "") for span, text in mentions]
        unique = sorted({key for key in keys if key[0]})
        texts = sorted({text for text, _ in unique})
        found: Dict[Tuple[str, str], Candidates] = {}
        if texts:
            vectors = vectors_of(texts)
            row = {text: i for i, text in enumerate(texts)}
            for label in sorted({label for _, label in unique}):
                group = [key for key in unique if key[1] == label]
                ranked = search_with_prior(index, vectors[[row[t] for t, _ in group]], k,
                                           self.priors.for_label(label) if label else None,
                                           semantic_types=semantic_types, require_definition=require_definition)
                found.update(zip(group, ranked))
            if self.weights.example_names and self.store is not None and self.store.has_names:
                raised = with_example_names_many([found[key] for key in unique],
                                                 vectors[[row[text] for text, _ in unique]], self.store)
                found.update(zip(unique, raised))
        contexts: Dict[int, numpy.ndarray] = {}
        weighted = self.weights.context > 0 or self.weights.definition > 0
        if self.store is not None and self.store.encoder is not None and weighted:
            todo = [i for i, key in enumerate(keys)
                    if found.get(key) and needs_context(found[key], self.store, self.weights.margin)]
            # one sense per document: the first mention of a (document, text, label) speaks for the others
            first = (first_of_each([(id(mentions[i][0].doc), keys[i]) for i in todo])
                     if self.weights.one_sense_per_document else list(range(len(todo))))
            encode = sorted(set(first))
            spans = [mentions[todo[j]][0] for j in encode]
            vecs = dict(zip(encode, self.store.encoder.encode(
                [(s.doc.text, s.start_char, s.end_char) for s in spans], batch_size=batch_size)))
            contexts = {i: vecs[j] for i, j in zip(todo, first)}
        out: List[Candidates] = []
        for i, key in enumerate(keys):
            cands = found.get(key, [])
            if i in contexts:
                cands = rerank(cands, contexts[i], self.store, self.weights)
            out.append([(cid, round(s, 6)) for cid, s in cands if s >= threshold][:cap])
        return out


__all__ = ["ContextRanker", "context_settings"]
