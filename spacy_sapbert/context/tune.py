"""Tune the context weights on a dev set: the name index proposes ``k`` candidates per mention (as
in the linker, ``context_k``), with and without the store's example names, the grid of
:func:`~spacy_sapbert.context.rerank.tune_weights` is scored by strict
acc@1 (a composite gold counts if any part is predicted)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import EmptyResultError, Errors
from ..util import PathLike
from .rerank import ContextWeights, tune_weights


def tune_on_documents(docs: Sequence[Any], kb_dir: PathLike, model: str, prototypes: PathLike, *,
                      pooling: str = "auto", max_length: int = 25, k: int = 30, step: float = 0.05,
                      device: str = "auto", index_dir: Optional[PathLike] = None
                      ) -> Tuple[ContextWeights, List[Dict[str, Any]], int]:
    """``(best weights, grid table, mentions used)`` for the mentions of ``docs`` with a gold id in
    the KB and a context; the name index is loaded from ``index_dir`` or built (exact search)."""
    from ..encoding.torch_encoder import Encoder
    from ..evaluation.metrics import resolve_gold
    from ..index import ConceptIndex
    from ..kb import KnowledgeBase
    from ..kb.concept import normalize_name
    from .store import PrototypeStore

    kb = KnowledgeBase.from_disk(kb_dir)
    store = PrototypeStore.from_disk(prototypes, kb=kb, device=device)
    items, golds, queries = [], [], []
    for d in docs:
        for m in d.mentions:
            gold = resolve_gold(kb, m.ids)
            if not gold.in_kb or m.start is None or m.end is None or not 0 <= m.start < m.end <= len(d.text):
                continue
            query = normalize_name(m.text)
            if query:
                items.append((d.text, m.start, m.end))
                golds.append(gold.ids)
                queries.append(query)
    if not items:
        raise EmptyResultError(Errors.E614.format(what="no dev mention has a gold id in the KB and a context"))
    encoder = Encoder.load(model, pooling=pooling, max_length=max_length, device=device)
    if index_dir is not None:
        index = ConceptIndex.from_disk(index_dir, kb)
        index.check_compatible(encoder, path=index_dir)
    else:
        index = ConceptIndex.build(kb, encoder, exact=True)
    names = encoder.encode(queries, show_progress=True)
    candidates = index.search(names, k)
    contexts = store.encoder.encode(items, show_progress=True)
    if store.has_names:
        store.check_name_encoder(encoder, path=prototypes)
    best, table = tune_weights(candidates, contexts, store, golds, step=step, name_vectors=names)
    return best, table, len(items)


__all__ = ["tune_on_documents"]
