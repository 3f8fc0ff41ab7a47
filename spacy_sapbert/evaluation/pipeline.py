"""End-to-end mode: documents with their gold spans go through spaCy pipelines; ``kb_ents`` are
read back from the spans, and spaCy's own ``Scorer.score_links`` gives ``nel_micro_f``.

Pipelines compared: the model under test and the base encoder, each as a ``sapbert_linker`` in a
blank English pipeline over the run's KB (exact index), a packaged pipeline folder as it is
(only its linking components run: components that set ``doc.ents``, such as ``ner``, are skipped
so the gold spans stay), and scispaCy's ``EntityLinker`` over the same dictionary.

Pipelines see the document text as written: case and punctuation handling are theirs
(``sapbert_linker`` normalises with ``normalize_name``); abbreviation resolution follows the run's
``resolve_abbreviations`` option. For ``nel_micro_f`` a composite gold span takes as its id the part
the prediction hit, if any, else its first part; a gold id missing from the KB becomes ``NIL``.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..base.util import ensure_path, get_logger
from ..encoding.torch_encoder import Encoder
from ..errors import ConfigError, Errors, Warnings
from ..index import ConceptIndex
from ..mentions.abbreviation_table import AbbreviationTable
from ..mentions.datasets import Document
from ..mentions.metrics import Gold, Ranking
from .baselines import ScispacyLinker
from .cache import VectorCache, encoder_key

logger = get_logger("evaluation.pipeline")

LINKING_FACTORIES = ("sapbert_linker", "scispacy_linker", "abbreviation_detector")


def _find_linker(nlp, path: Any):
    for name, pipe in nlp.pipeline:
        if getattr(pipe, "encoder", None) is not None and hasattr(pipe, "index"):
            return name, pipe
    raise ConfigError(Errors.E305.format(system=str(path), what="a pipeline with a sapbert_linker component",
                                         hint="Pass a model folder instead, or add the component to the pipeline."))


def pipeline_encoder(path: Any):
    """The encoder inside a saved pipeline's ``sapbert_linker``."""
    import spacy

    nlp = spacy.load(path)
    return _find_linker(nlp, path)[1].encoder


def load_encoder(path: str, sy: Dict[str, Any], pooling: Optional[str] = None):
    """An encoder from a model folder; a spaCy pipeline folder gives its linker's encoder.
    ``pooling`` (this system's, e.g. ``systems.model_pooling``) else ``sy["pooling"]``: ``cls``,
    ``mean``, or ``auto`` (the folder's declaration, else ``cls``; an explicit value always wins)."""
    p = ensure_path(path)
    wanted = pooling or sy["pooling"]
    if (p / "meta.json").exists() and (p / "config.cfg").exists():
        return pipeline_encoder(p)
    if (p / "sapbert_encoder.json").exists() and wanted in (None, "auto"):
        return Encoder.from_disk(p, device=sy["device"])
    return Encoder.load(path, pooling=wanted, max_length=sy["max_length"], device=sy["device"])


def gold_docs(nlp, docs: Sequence[Document]) -> Tuple[List[Any], List[Optional[Tuple[int, int]]]]:
    """One spaCy doc per document with the gold mentions as ``doc.ents`` (token-expanded); for
    every mention, in reading order, ``(doc index, ent index)`` or None when it overlaps an
    earlier one or has no offsets (such mentions get no prediction: counted wrong)."""
    from spacy.tokens import Span

    out, where = [], []
    for d in docs:
        doc = nlp.make_doc(d.text)
        spans: List[Tuple[int, Span]] = []
        taken = set()
        for mi, m in enumerate(d.mentions):
            span = doc.char_span(m.start, m.end, label=m.type or "ENTITY", alignment_mode="expand") \
                if m.start is not None and d.text else None
            if span is None or len(span) == 0 or taken.intersection(range(span.start, span.end)):
                spans.append((mi, None))  # type: ignore[arg-type]
                continue
            taken.update(range(span.start, span.end))
            spans.append((mi, span))
        good = sorted((s.start, mi) for mi, s in spans if s is not None)
        order = {mi: i for i, (_start, mi) in enumerate(good)}
        doc.ents = [spans[mi][1] for _start, mi in good]
        for mi, s in spans:
            where.append((len(out), order[mi]) if s is not None else None)
        out.append(doc)
    lost = sum(1 for w in where if w is None)
    if lost:
        logger.warning("end-to-end: %d mentions overlap another or have no offsets; counted wrong", lost)
    return out, where


def _linkable(nlp, docs: List[Any]) -> List[Any]:
    """End to end scores the linking of *every* gold span: when the pipeline's linker links only some
    labels (``labels``, e.g. ``["Disease"]`` for a NER trained with that scheme), the gold spans take
    its first label, whatever the corpus calls them (NCBI's ``SpecificDisease``, ...)."""
    from spacy.tokens import Span

    restricted = [pipe.cfg["labels"] for _name, pipe in nlp.pipeline
                  if isinstance(getattr(pipe, "cfg", None), dict) and pipe.cfg.get("labels")]
    if not restricted:
        return docs
    label = restricted[0][0]
    for doc in docs:
        doc.ents = [Span(doc, e.start, e.end, label=label) for e in doc.ents]
    return docs


def _copy_docs(docs: Sequence[Any]) -> List[Any]:
    from spacy.tokens import Doc

    return [Doc(d.vocab).from_bytes(d.to_bytes()) for d in docs]


def _rankings(docs: Sequence[Any], where: Sequence[Optional[Tuple[int, int]]], ext: str = "kb_ents") -> List[Ranking]:
    out = []
    for w in where:
        if w is None:
            out.append(Ranking(concepts=[]))
            continue
        ent = docs[w[0]].ents[w[1]]
        ents = ent._.get(ext) or []
        out.append(Ranking(concepts=[(str(c), float(s)) for c, s in ents]))
    return out


def score_links(linked: Sequence[Any], where: Sequence[Optional[Tuple[int, int]]], golds: Sequence[Gold],
                rankings: Sequence[Ranking]) -> Dict[str, Any]:
    """spaCy's ``Scorer.score_links`` with predicted ``kb_id`` = top concept ('' if none)."""
    from spacy.scorer import Scorer
    from spacy.tokens import Doc, Span
    from spacy.training import Example

    pred_ids: Dict[Tuple[int, int], str] = {}
    gold_ids: Dict[Tuple[int, int], str] = {}
    for w, g, r in zip(where, golds, rankings):
        if w is None:
            continue
        top = r.concepts[0][0] if r.concepts else ""
        pred_ids[w] = top
        gold_ids[w] = top if top in g.ids else (sorted(g.ids)[0] if g.ids else "NIL")
    examples = []
    for di, doc in enumerate(linked):
        pred = Doc(doc.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])
        ref = Doc(doc.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])
        pred.ents = [Span(pred, e.start, e.end, label=e.label_, kb_id=pred_ids.get((di, i), ""))
                     for i, e in enumerate(doc.ents)]
        ref.ents = [Span(ref, e.start, e.end, label=e.label_, kb_id=gold_ids.get((di, i), "NIL"))
                    for i, e in enumerate(doc.ents)]
        examples.append(Example(pred, ref))
    scores = Scorer.score_links(examples, negative_labels=["", "NIL"])
    return {k: v for k, v in scores.items() if k.startswith("nel_micro") or k == "nel_f_per_type"}


class _CachedEncoder:
    """Duck-types the encoder for ``ConceptIndex.build``: vectors come from the run's
    :class:`~.cache.VectorCache` (same key as :class:`~.baselines.DenseEncoder`)."""

    def __init__(self, encoder, cache_dir, show_progress: bool) -> None:
        self._encoder = encoder
        self._show_progress = show_progress
        for attr in ("dim", "fingerprint", "pooling", "max_length", "name"):
            setattr(self, attr, getattr(encoder, attr, ""))
        self._cache = VectorCache(cache_dir, encoder_key(encoder), dim=self.dim or None)

    def encode(self, texts, *, batch_size: int = 128, **_: Any):
        return self._cache.get(self._encoder, list(texts), batch_size=batch_size, show_progress=self._show_progress)


def _sapbert_pipeline(model: str, kb, settings: Dict[str, Any], resolve_abbreviations: bool, max_k: int):
    import spacy

    sy = settings["systems"]
    encoder = load_encoder(model, sy)
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={
        "model": str(model), "pooling": encoder.pooling, "max_length": encoder.max_length, "k": max_k,
        "threshold": -1.0, "max_entities_per_mention": max_k, "resolve_abbreviations": resolve_abbreviations,
        "batch_size": settings["batch_size"]})
    # the index encodes kb.names through the run's vector cache: names the mention-only systems
    # (or an earlier run) encoded with this encoder are not encoded again
    index = ConceptIndex.build(kb, _CachedEncoder(encoder, settings["cache_dir"], settings["show_progress"]),
                               exact=True, batch_size=settings["batch_size"], show_progress=False)
    linker.set_resources(encoder, index)
    return nlp, {"class": "SapbertLinker (pipeline)", "model": str(model), "fingerprint": encoder.fingerprint,
                 "search": "exact", "threshold": -1.0, "resolve_abbreviations": resolve_abbreviations}


def _loaded_pipeline(path: Any):
    import spacy

    nlp = spacy.load(path)
    name, linker = _find_linker(nlp, path)
    return nlp, {"class": "packaged pipeline", "path": str(path), "linker": name,
                 "kb_checksum": getattr(getattr(linker, "kb", None), "checksum", None)}


def _check_pipeline_kb(nlp, desc: Dict[str, Any], kb, golds: Sequence[Gold]) -> None:
    """Warn (W553) when a packaged pipeline links against another KB than the run's and gold
    concepts are missing from it: its score would be low for a reason the numbers do not show."""
    pipeline_kb = getattr(nlp.get_pipe(desc["linker"]), "kb", None)
    if pipeline_kb is None or pipeline_kb.checksum == kb.checksum:
        return
    wanted = {cid for g in golds for cid in g.ids}
    missing = sum(1 for cid in wanted if cid not in pipeline_kb)
    if missing:
        warnings.warn(Warnings.W553.format(path=desc["path"], theirs=pipeline_kb.checksum[:12], ours=kb.checksum[:12],
                                           missing=missing, total=len(wanted)))


def _run_pipes(nlp, docs: List[Any]) -> List[Any]:
    for name, proc in nlp.pipeline:
        factory = nlp.get_pipe_meta(name).factory
        assigns = nlp.get_pipe_meta(name).assigns
        if factory not in LINKING_FACTORIES and any(a.startswith("doc.ents") for a in assigns):
            continue  # keep the gold spans
        if factory not in LINKING_FACTORIES and factory in ("ner", "entity_ruler", "span_ruler", "beam_ner"):
            continue
        docs = list(proc.pipe(docs)) if hasattr(proc, "pipe") else [proc(d) for d in docs]
    return docs


def run_end_to_end(settings: Dict[str, Any], docs: Sequence[Document], golds: Sequence[Gold], kb, dictionary,
                   options, max_k: int) -> Dict[str, Tuple[List[Ranking], Dict[str, Any], Dict[str, Any]]]:
    """``{system: (rankings per mention, nel scores, description)}`` for every pipeline system."""
    import spacy

    if not any(d.text for d in docs):
        raise ConfigError(Errors.E305.format(system="end_to_end", what="documents with text and offsets",
                                             hint="Use a PubTator file, or TSV/JSONL rows with context, start and end."))
    sy = settings["systems"]
    blank = spacy.blank("en")
    base_docs, where = gold_docs(blank, docs)
    pipelines: List[Tuple[str, Any, Dict[str, Any]]] = []
    # as in mention_only, read once for both built pipelines; a saved pipeline keeps its own table
    table = AbbreviationTable.from_disk(options.abbreviation_table) if options.abbreviation_table else None
    for key, label in (("model", sy["model_name"]), ("base_encoder", sy["base_encoder_name"])):
        if sy.get(key):
            p = ensure_path(sy[key])
            if (p / "meta.json").exists() and (p / "config.cfg").exists():
                nlp, desc = _loaded_pipeline(p)
            else:
                nlp, desc = _sapbert_pipeline(sy[key], kb, settings, options.resolve_abbreviations, max_k)
                if table is not None:
                    nlp.get_pipe("sapbert_linker").set_abbreviations(table)
                    desc["abbreviation_table"] = options.abbreviation_table
            pipelines.append((f"{label} (pipeline)", nlp, desc))
    if sy.get("pipeline"):
        nlp, desc = _loaded_pipeline(sy["pipeline"])
        pipelines.append((sy["pipeline_name"], nlp, desc))
    out: Dict[str, Tuple[List[Ranking], Dict[str, Any], Dict[str, Any]]] = {}
    for name, nlp, desc in pipelines:
        if desc.get("class") == "packaged pipeline":
            _check_pipeline_kb(nlp, desc, kb, golds)
        linked = _run_pipes(nlp, _linkable(nlp, _copy_docs(base_docs)))
        rankings = _rankings(linked, where)
        out[name] = (rankings, score_links(linked, where, golds, rankings), desc)
    if sy["scispacy"]:
        linker = ScispacyLinker(dictionary, kb, k=max(sy["scispacy_k"], max_k), threshold=sy["scispacy_threshold"],
                                resolve_abbreviations=options.resolve_abbreviations)
        linked = _copy_docs(base_docs)
        if options.resolve_abbreviations:
            from scispacy.abbreviation import AbbreviationDetector  # lazy: scispacy

            detector = AbbreviationDetector(blank)
            with warnings.catch_warnings():  # the detector's empty global matcher (spaCy W036)
                warnings.filterwarnings("ignore", message=r"\[W036\]", category=UserWarning)
                linked = [detector(d) for d in linked]
        linker.link_docs(linked)
        rankings = _rankings(linked, where)
        out[f"{linker.name} (pipeline)"] = (rankings, score_links(linked, where, golds, rankings), linker.describe())
    if not out:
        raise ConfigError(Errors.E305.format(system="end_to_end", what="a model, base_encoder, pipeline or scispacy system",
                                             hint="Switch one on in [evaluate.systems]."))
    return out


__all__ = ["run_end_to_end", "gold_docs", "score_links", "pipeline_encoder", "LINKING_FACTORIES"]
