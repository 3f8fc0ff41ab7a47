"""Tune the context weights on a dev set at the settings the linker will use: the name index proposes ``k``
candidates per mention (as in the linker, ``context_k``), with and without the store's example names; only
the mentions the linker would re-rank are re-ranked (``context_margin``: :func:`~.rerank.needs_context`),
each with the context of the first mention of its document written alike (``one_sense_per_document``:
:func:`~.rerank.first_of_each`); the others keep their name ranking. The grid of
:func:`~spacy_sapbert.context.rerank.tune_weights` is scored by strict acc@1 (a composite gold counts if any
part is predicted)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Dict, FrozenSet, Hashable, List, Optional, Sequence, Tuple, Union

import numpy

from ..base.defaults import MAX_LENGTH
from ..base.util import PathLike
from ..encoding.torch_encoder import Encoder
from ..errors import ConfigError, EmptyResultError, Errors
from ..index import ConceptIndex
from ..kb import KnowledgeBase
from ..kb.concept import normalize_name
from ..mentions.metrics import resolve_gold
from .rerank import Candidates, ContextWeights, first_of_each, needs_context, tune_weights, with_example_names_many
from .store import PrototypeStore

# the linker's defaults (LinkerSettings): re-rank the mentions whose best names tie, one sense per document
LINKER_MARGIN: Optional[float] = 0.0
LINKER_ONE_SENSE = True


def tune_at_linker_settings(candidates: Sequence[Candidates], contexts: numpy.ndarray, store: Any,
                            golds: Sequence[FrozenSet[str]], *, margin: Optional[float] = LINKER_MARGIN,
                            one_sense_per_document: bool = LINKER_ONE_SENSE,
                            keys: Optional[Sequence[Hashable]] = None, step: float = 0.05,
                            fallbacks: Sequence[Union[str, float]] = ("name", 0.0),
                            name_vectors: Optional[numpy.ndarray] = None
                            ) -> Tuple[ContextWeights, List[Dict[str, Any]]]:
    """:func:`~.rerank.tune_weights` as the linker applies the weights (see the module doc): ``keys`` (one per
    mention, equal for a document's mentions written alike) are needed for ``one_sense_per_document``. The
    grid runs with and without example names (when ``name_vectors`` are given and the store has names); ties
    go to the variant without them, as in ``tune_weights``. The weights returned carry ``margin`` and
    ``one_sense_per_document``; so does every row of the table."""
    if one_sense_per_document and (keys is None or len(keys) != len(candidates)):
        raise ConfigError(Errors.E614.format(what=f"{len(candidates)} candidate lists and "
                                             f"{'no' if keys is None else len(keys)} mention keys (one sense per "
                                             "document needs one key per mention)"))
    ContextWeights(context=0.0, margin=margin)  # a bad margin: E619 before the work
    variants: List[Tuple[bool, List[Candidates]]] = [(False, [list(c) for c in candidates])]
    if name_vectors is not None and getattr(store, "has_names", False):
        variants.append((True, with_example_names_many(candidates, name_vectors, store)))
    best: Optional[Tuple[float, ContextWeights]] = None
    table: List[Dict[str, Any]] = []
    for examples, ranked in variants:
        todo = [i for i, c in enumerate(ranked) if needs_context(c, store, margin)]
        first = first_of_each([keys[i] for i in todo]) if one_sense_per_document else list(range(len(todo)))
        source = {i: todo[j] for i, j in zip(todo, first)}
        # a mention left alone keeps its first name: one candidate, whatever the weights
        shown = [ranked[i] if i in source else ranked[i][:1] for i in range(len(ranked))]
        vectors = numpy.stack([contexts[source.get(i, i)] for i in range(len(ranked))]) if len(ranked) else contexts
        weights, rows = tune_weights(shown, vectors, store, golds, step=step, fallbacks=fallbacks)
        settings = {"example_names": examples, "context_margin": margin, "one_sense_per_document": one_sense_per_document}
        table += [{**row, **settings} for row in rows]
        acc = max(row["acc@1"] for row in rows)
        if best is None or acc > best[0] + 1e-12:
            best = (acc, replace(weights, example_names=examples, margin=margin,
                                 one_sense_per_document=one_sense_per_document))
    assert best is not None
    return best[1], table


def tune_on_documents(docs: Sequence[Any], kb_dir: PathLike, model: str, prototypes: PathLike, *,
                      pooling: str = "auto", max_length: int = MAX_LENGTH, k: int = 30, step: float = 0.05,
                      device: str = "auto", index_dir: Optional[PathLike] = None,
                      margin: Optional[float] = LINKER_MARGIN, one_sense_per_document: bool = LINKER_ONE_SENSE,
                      encode_names: Optional[Callable[[Any, List[str]], numpy.ndarray]] = None
                      ) -> Tuple[ContextWeights, List[Dict[str, Any]], int]:
    """``(best weights, grid table, mentions used)`` for the mentions of ``docs`` with a gold id in
    the KB and a context, tuned at the linker's ``margin`` and ``one_sense_per_document``
    (:func:`tune_at_linker_settings`); the name index is loaded from ``index_dir`` or built (exact search) from
    the KB names' vectors, which ``encode_names(encoder, names)`` gives when set (e.g. ``evaluate``'s vector
    cache: ``tune-context --cache-dir``) instead of encoding them here."""
    kb = KnowledgeBase.from_disk(kb_dir)
    store = PrototypeStore.from_disk(prototypes, kb=kb, device=device)
    items, golds, queries, keys = [], [], [], []
    for d_pos, d in enumerate(docs):
        for m in d.mentions:
            gold = resolve_gold(kb, m.ids)
            if not gold.in_kb or m.start is None or m.end is None or not 0 <= m.start < m.end <= len(d.text):
                continue
            query = normalize_name(m.text)
            if query:
                items.append((d.text, m.start, m.end))
                golds.append(gold.ids)
                queries.append(query)
                keys.append((d_pos, query))
    if not items:
        raise EmptyResultError(Errors.E614.format(what="no dev mention has a gold id in the KB and a context"))
    encoder = Encoder.load(model, pooling=pooling, max_length=max_length, device=device)
    if index_dir is not None:
        index = ConceptIndex.from_disk(index_dir, kb)
        index.check_compatible(encoder, path=index_dir)
    elif encode_names is not None:
        index = ConceptIndex.from_vectors(kb, encode_names(encoder, list(kb.names)), encoder, kind="exact")
    else:
        index = ConceptIndex.build(kb, encoder, exact=True)
    names = encoder.encode(queries, show_progress=True)
    candidates = index.search(names, k)
    contexts = store.encoder.encode(items, show_progress=True)
    if store.has_names:
        store.check_name_encoder(encoder, path=prototypes)
    best, table = tune_at_linker_settings(candidates, contexts, store, golds, margin=margin,
                                          one_sense_per_document=one_sense_per_document, keys=keys, step=step,
                                          name_vectors=names)
    return best, table, len(items)


__all__ = ["tune_on_documents", "tune_at_linker_settings", "LINKER_MARGIN", "LINKER_ONE_SENSE"]
