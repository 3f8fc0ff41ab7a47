"""The context system and the subsets context is judged on.

- :func:`context_rankings`: a name-only system's concept rankings re-ranked with each mention's
  context vector and a :class:`~spacy_sapbert.context.PrototypeStore` (strict protocol only: the
  result ranks concepts, not names). Mentions without text/offsets keep the name-only ranking.
- :func:`mention_keys`: which mentions of a document are written alike (``one_sense_per_document``).
- :func:`ambiguity_mask`: mentions whose query (normalised as the run says) is a dictionary name of
  2+ concepts, or whose name-only top-1 score ties with the second concept's.
- :func:`prototype_masks`: mentions whose gold concept has example prototypes (``seen``) or not.
- :func:`context_setup`: what an evaluation run needs for its context system (the store built from
  the run's training files, or loaded; weights, tuned on a dev file when one is given).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..base.util import get_logger
from ..context import ContextEncoder, ContextWeights, PrototypeStore, build_prototypes
from ..context.rerank import first_of_each, needs_context, rerank, with_example_names_many
from ..context.tune import tune_at_linker_settings
from ..errors import ConfigError, Errors
from ..kb import normalize_name
from ..mentions.datasets import Document, read_dataset, select_mentions
from ..mentions.metrics import Gold, Ranking, resolve_gold

logger = get_logger("evaluation.context")


def mention_contexts(docs: Sequence[Document]) -> Tuple[List[Tuple[str, int, int]], List[bool]]:
    """``(text, start, end)`` per mention in reading order, and whether it has a usable context."""
    items, ok = [], []
    for d in docs:
        for m in d.mentions:
            good = bool(d.text) and m.start is not None and m.end is not None and 0 <= m.start < m.end <= len(d.text)
            items.append((d.text, m.start, m.end) if good else ("", 0, 0))
            ok.append(good)
    return items, ok


def context_vectors(encoder: Any, docs: Sequence[Document], *, batch_size: int = 64,
                    show_progress: bool = False) -> Tuple[np.ndarray, List[bool]]:
    """Context vectors of every mention (zeros where it has no context) and the has-context flags."""
    items, ok = mention_contexts(docs)
    out = np.zeros((len(items), encoder.dim), dtype=np.float32)
    idx = [i for i, good in enumerate(ok) if good]
    if idx:
        out[idx] = encoder.encode([items[i] for i in idx], batch_size=batch_size, show_progress=show_progress)
    return out, ok


def context_rankings(name_rankings: Sequence[Ranking],
                     vectors: Union[np.ndarray, Callable[[List[int]], np.ndarray]], has_context: Sequence[bool],
                     store: Any, weights: Any, name_vectors: Optional[np.ndarray] = None,
                     keys: Optional[Sequence[Hashable]] = None) -> List[Ranking]:
    """``name_rankings`` re-ranked as the linker does: example names first (with ``name_vectors``, the
    queries' name-encoder vectors, when ``weights.example_names`` and the store has names), then context
    where ``weights.margin`` asks for it; with ``weights.one_sense_per_document`` and ``keys``
    (:func:`mention_keys`), a mention re-ranked takes the context vector of the first mention of its
    document written alike that is re-ranked too. ``vectors``: every mention's context vector, or a function
    that encodes the contexts of the mentions at the positions it is given (only those the linker would
    encode are asked for: :func:`lazy_context_vectors`)."""
    names = name_vectors is not None and getattr(weights, "example_names", False) and store.has_names
    ranked = ([list(r.concepts) for r in name_rankings] if not names else
              with_example_names_many([list(r.concepts) for r in name_rankings], name_vectors, store))
    # as the linker: no context or definition weight, nothing to re-rank (and no context encoded)
    weighted = getattr(weights, "context", 0) > 0 or getattr(weights, "definition", 0) > 0
    todo = [i for i, (c, ok) in enumerate(zip(ranked, has_context))
            if weighted and ok and needs_context(c, store, getattr(weights, "margin", None))]
    shared = getattr(weights, "one_sense_per_document", False) and keys is not None
    first = first_of_each([keys[i] for i in todo]) if shared else list(range(len(todo)))
    source = {i: todo[j] for i, j in zip(todo, first)}
    if callable(vectors):
        needed = sorted(set(source.values()))
        rows = dict(zip(needed, vectors(needed))) if needed else {}
    else:
        rows = vectors
    return [Ranking(concepts=rerank(c, rows[source[i]], store, weights) if i in source else c)
            for i, c in enumerate(ranked)]


def lazy_context_vectors(encoder: Any, docs: Sequence[Document], *, batch_size: int = 64
                         ) -> Tuple[Callable[[List[int]], np.ndarray], List[bool], List[int]]:
    """``(encode, has-context flags, encoded)`` for :func:`context_rankings`: ``encode(positions)`` encodes the
    contexts of those mentions only (as the linker does), and ``encoded`` counts them."""
    items, ok = mention_contexts(docs)
    encoded: List[int] = []

    def encode(positions: List[int]) -> np.ndarray:
        encoded.extend(positions)
        return encoder.encode([items[i] for i in positions], batch_size=batch_size)

    return encode, ok, encoded


def mention_keys(docs: Sequence[Document], queries: Sequence[str]) -> List[Tuple[int, str]]:
    """``(document position, normalised query)`` per mention: mentions written alike in one document."""
    doc_of = [d for d, doc in enumerate(docs) for _m in doc.mentions]
    return [(d, normalize_name(q)) for d, q in zip(doc_of, queries)]


def ambiguity_mask(queries: Sequence[str], dictionary: Any, rankings: Optional[Sequence[Ranking]] = None) -> List[bool]:
    """True where the query is a name of 2+ concepts, or the ranking's two best concepts tie."""
    out = []
    for i, q in enumerate(queries):
        row = dictionary.row(q)
        amb = row >= 0 and len(dictionary.concepts[row]) > 1
        if not amb and rankings is not None:
            c = rankings[i].concepts
            amb = len(c) > 1 and abs(c[0][1] - c[1][1]) < 1e-6
        out.append(amb)
    return out


def prototype_masks(golds: Sequence[Gold], store: Any) -> Dict[str, List[bool]]:
    seen = [any(store.has_examples(cid) for cid in g.ids) for g in golds]
    return {"seen_in_prototypes": seen, "unseen_in_prototypes": [not s for s in seen]}


def context_setup(settings: Dict[str, Any], kb: Any, name_system: Any, *, prep: Any) -> Tuple[Any, Any, Dict[str, Any]]:
    """``(store, weights, description)`` for the run's context system: the store at
    ``systems.prototypes`` or built from the run's training files with the name system's model as
    context encoder; weights from the config, or tuned on ``systems.context_dev`` at the run's (the linker's)
    ``context_margin`` and ``one_sense_per_document``, with the name system's (cached) name vectors."""
    import warnings

    sy = settings["systems"]
    ds = settings["dataset"]
    if sy.get("prototypes"):
        store = PrototypeStore.from_disk(sy["prototypes"], kb=kb, device=sy["device"])
    else:
        if not ds["train"]:
            raise ConfigError(Errors.E305.format(system="context", what="prototype documents",
                                                 hint="Set [evaluate.dataset] train (annotated training files) or "
                                                      "[evaluate.systems] prototypes (a folder from build-prototypes)."))
        model = str(getattr(name_system.encoder, "name", "") or sy["model"])
        encoder = ContextEncoder.load(model, pooling=sy["context_pooling"], max_length=int(sy["context_max_length"]),
                                      device=sy["device"])
        docs = [d for p in ds["train"] for d in read_dataset(p, format=ds["train_format"], types=ds["types"])]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # unknown / composite train ids: counted in the meta
            store = build_prototypes(docs, kb, encoder, definitions=sy["context_definitions"],
                                     batch_size=settings["batch_size"], show_progress=settings["show_progress"],
                                     what=", ".join(str(p) for p in ds["train"]),
                                     name_encoder=name_system.encoder if sy["example_names"] else None)
    if store.has_names and sy["example_names"]:
        store.check_name_encoder(name_system.encoder, path=sy.get("prototypes") or "<built here>")
    weights = ContextWeights(context=float(sy["context_weight"]), definition=float(sy["definition_weight"]),
                             fallback=sy["context_fallback"], example_names=bool(sy["example_names"]),
                             margin=sy["context_margin"], one_sense_per_document=sy["one_sense_per_document"])
    desc: Dict[str, Any] = {"class": "context re-ranking", "name_system": name_system.name,
                            "prototypes": {k: store.meta.get(k) for k in ("n_prototypes", "n_concepts", "n_examples",
                                                                          "n_definitions", "counts")},
                            "context_encoder": store.meta.get("encoder")}
    if sy.get("context_dev"):
        dev, _counts = select_mentions(read_dataset(sy["context_dev"], format="auto", types=ds["types"]), True)
        mentions = [m for d in dev for m in d.mentions]
        golds = [resolve_gold(kb, m.ids) for m in mentions]
        dev_queries = [prep(m.text) for m in mentions]
        rankings = name_system.rank(dev_queries, max(int(sy["context_k"]), *settings["ks"]))
        vectors, ok = context_vectors(store.encoder, dev, batch_size=settings["batch_size"])
        keep = [i for i, g in enumerate(golds) if g.in_kb and ok[i]]
        names = name_system.encoder.encode(dev_queries, batch_size=settings["batch_size"]) \
            if sy["example_names"] else None
        keys = mention_keys(dev, dev_queries)
        weights, table = tune_at_linker_settings([rankings[i].concepts for i in keep], vectors[keep], store,
                                                 [golds[i].ids for i in keep], margin=sy["context_margin"],
                                                 one_sense_per_document=bool(sy["one_sense_per_document"]),
                                                 keys=[keys[i] for i in keep], step=0.05,
                                                 name_vectors=None if names is None else names[keep])
        desc["tuned_on"] = {"path": str(sy["context_dev"]), "mentions": len(keep),
                            "best_dev_acc@1": max(row["acc@1"] for row in table)}
    desc["weights"] = weights.to_dict()
    return store, weights, desc


__all__ = ["context_rankings", "context_vectors", "lazy_context_vectors", "mention_contexts", "ambiguity_mask", "prototype_masks",
           "context_setup"]
