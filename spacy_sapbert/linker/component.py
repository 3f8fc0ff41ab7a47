"""The ``sapbert_linker`` spaCy component: link entity spans to KB concepts.

``nlp.add_pipe("sapbert_linker", config={...})`` works without importing this package (entry point
``spacy_factories``). The KB and index are set up in :meth:`SapbertLinker.initialize` (settings in
``[initialize.components.sapbert_linker]``) or loaded by :meth:`SapbertLinker.from_disk`; nothing
is loaded or downloaded when the component is created.

Output (scispaCy's format): ``span._.kb_ents`` = ``[(concept_id, score), ...]``, best first, at most
``max_entities_per_mention``, scores >= ``threshold``; ``ent.kb_id_`` = the best concept or ``""``.
Mentions are normalised with :func:`normalize_name`; those longer than ``max_length`` word pieces
are truncated by the encoder; empty or whitespace-only spans get ``[]`` and ``kb_id_ = ""``.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.util import minibatch
from spacy.vocab import Vocab

from ..encoding.torch_encoder import DEFAULT_MODEL, CachedEncoder, Encoder
from ..errors import ConfigError, Errors, IncompatibleError, MissingExtraError, MissingInputError, Warnings
from ..base.extras import declare_extra, is_installed
from .extension import has_alnum, register_kb_ents
from ..index import DEFAULT_EF_CONSTRUCTION, DEFAULT_M, META_FILE, ConceptIndex
from ..index.hybrid import HybridScore, check_mode, check_weight, hybrid_search
from ..index.query_variants import check_kinds, query_variants
from ..index.sparse import SparseIndex, write_beside
from ..context.ranker import ContextRanker, context_settings
from ..context.store import PrototypeStore
from ..calibration.features import Evidence
from ..calibration.model import Calibration
from .confidence import decide, register_confidence, validate_confidence_cfg
from ..mentions.abbreviations import long_forms, make_detector
from ..mentions.abbreviations import mention_text as _mention_text
from ..kb.concept import normalize_name
from ..kb.languages import language_codes
from .storage import LinkerStorage
from ..base.util import ensure_path, get_logger

if TYPE_CHECKING:  # for annotations only
    import numpy

logger = get_logger("linker")
_SCORE_LIMIT = 1.02  # scores of unit vectors lie in [-1, 1]; float16 rounding and the load checks' 1e-2 stay below

DEFAULT_CONFIG: Dict[str, Any] = {
    "model": DEFAULT_MODEL,
    "pooling": "auto",  # cls | mean | auto: what the model folder declares, else cls
    "max_length": 25,
    "batch_size": 128,
    "device": "auto",
    "precision": "auto",
    "runtime": "auto",
    "k": 10,
    "threshold": 0.5,
    "max_entities_per_mention": 5,
    "resolve_abbreviations": True,
    "filter_for_definitions": False,
    "semantic_types": [],
    "languages": None,
    "spans_key": None,
    "labels": [],
    "extension_name": "kb_ents",
    "ef_search": None,
    "set_kb_id": True,
    "reuse_name_vectors": True,
    "skip_non_alnum": True,
    "resources": "inside",
    "resources_path": None,
    "context_weight": 0.05,  # tuned on NCBI-disease dev (benchmarks/context_finetuned.py); tune your own
    "definition_weight": 0.0,
    "context_fallback": 0.0,
    "context_margin": 0.0,  # re-rank the mentions whose best names tie (null: every mention; docs/context.md)
    "example_names": True,
    "one_sense_per_document": True,  # a document's mentions written alike share the first one's context
    "context_k": 30,  # candidates re-ranked with prototypes: 10 caps NCBI test at 87.9, 30 at 93.4 (docs/context.md)
    "type_priors": {},
    "sparse_weight": 0.0,  # hybrid scores (dense + w * sparse) / (1 + w): 0 = dense only (docs/linker.md)
    "sparse_k": 20,  # concepts the char n-gram tf-idf adds to the dense candidates
    "candidates": "score",  # score | interleave: how the k candidates are picked from the lists (docs/linker.md)
    "query_variants": [],  # number, generic_head, punctuation, word_order: mention variants that add candidates
    "confidence_attr": "kb_confidence",  # Span attribute of the calibrated confidence (docs/linker.md)
    "threshold_on": "score",  # score: kb_ents keep scores >= threshold; confidence: link when confidence >= ...
    "confidence_threshold": 0.5,
    "reranker_k": 16,  # candidates a re-ranker (initialize's reranker_path) re-orders
    "reranker_margin": 0.05,  # re-rank mentions whose best two name scores are this close (>= 1.0: every mention)
    "reranker_dense_weight": 30.0,  # order re-ranked candidates by logit + this x name score (0: re-ranker alone)
}


@Language.factory("sapbert_linker", default_config=DEFAULT_CONFIG)
def make_sapbert_linker(
    nlp: Language,
    name: str,
    *,
    model: str,
    pooling: str,
    max_length: int,
    batch_size: int,
    device: str,
    precision: str,
    runtime: str,
    k: int,
    threshold: float,
    max_entities_per_mention: int,
    resolve_abbreviations: bool,
    filter_for_definitions: bool,
    semantic_types: List[str],
    languages: Optional[List[str]],
    spans_key: Optional[str],
    labels: List[str],
    extension_name: str,
    ef_search: Optional[int],
    set_kb_id: bool,
    reuse_name_vectors: bool,
    skip_non_alnum: bool,
    resources: str,
    resources_path: Optional[str],
    context_weight: float,
    definition_weight: float,
    context_fallback: Union[float, str],
    context_margin: Optional[float],
    example_names: bool,
    one_sense_per_document: bool,
    context_k: int,
    type_priors: Dict[str, List[str]],
    sparse_weight: float,
    sparse_k: int,
    candidates: str,
    query_variants: List[str],
    confidence_attr: str,
    threshold_on: str,
    confidence_threshold: float,
    reranker_k: int,
    reranker_margin: float,
    reranker_dense_weight: float,
) -> "SapbertLinker":
    """Create the linker. Options mirroring scispaCy's ``EntityLinker`` mean the same: ``k``
    (candidates retrieved; here concepts, not names), ``threshold``, ``max_entities_per_mention``,
    ``resolve_abbreviations``, ``filter_for_definitions`` (default False here: many KBs have no
    definitions). Ours: ``model`` (hub id or folder, loaded in initialize), ``pooling`` (``cls``,
    ``mean`` or ``auto``: what the model folder declares, else ``cls``; see :mod:`spacy_sapbert.encoding.pooling`),
    ``max_length``, ``batch_size``, ``device``, ``precision``, ``runtime`` (what runs the encoder of a
    saved pipeline: ``onnx``, ONNX Runtime on the CPU, the same vectors about twice as fast; ``torch``;
    ``auto``: ONNX Runtime when the pipeline holds an ONNX export, onnxruntime is installed, the
    device is the CPU and the precision fp32, else PyTorch; precision ``int8``: ONNX Runtime over the int8
    copy of the export, ``spacy-sapbert export-onnx --quantize``, queries only, the index keeps float32
    name vectors; see docs/linker.md), ``semantic_types`` (applied before
    the top-k cut), ``languages`` (search only the KB names in these languages, ISO 639-1 codes such as
    ``["es", "en"]``, on the same index; ``None``: all names), ``spans_key`` (link ``doc.spans[key]`` instead of ``doc.ents``), ``labels`` (link only
    spans with one of these labels, e.g. ``["Disease"]`` for a disease KB; empty: all),
    ``extension_name`` (the Span attribute written), ``ef_search`` (search depth of an hnsw or compact index, cells scanned by an ivf one; ``None``: the value the index
    was built with, 200 for hnsw and 512 for compact by default),
    ``set_kb_id`` (write ``kb_id_`` of the spans), ``reuse_name_vectors`` (a mention that is a KB
    name takes that name's vector from the index instead of running the encoder: same result, faster),
    ``skip_non_alnum`` (spans without a letter or digit, e.g. ``"."``, an emoji or a zero-width space,
    get ``[]`` instead of whatever name their vector happens to be nearest to),
    ``resources`` (``inside``: KB and index are saved with the pipeline; ``outside``: only a pointer
    is, and the KB + index folder is found at load through ``resources_path`` or the environment
    variable ``SPACY_SAPBERT_RESOURCES``, for UMLS-sized indexes that do not belong in a wheel; see
    :mod:`spacy_sapbert.linker.resources`).
    Context (docs/context.md): ``context_weight``, ``definition_weight`` and ``context_fallback`` mix
    name and prototype similarities when a prototype store is loaded (``prototypes_path`` in
    initialize); ``context_margin`` re-ranks only mentions whose best name scores lie within the margin
    (default 0: the mentions whose best names tie; ``None``: every mention, ~10x slower, see
    docs/context.md); ``one_sense_per_document`` encodes the context of only the first of a document's
    mentions written alike (same text and label) and lets it decide for all of them; ``example_names`` lets the
    prototypes' example mentions count as names of their concepts (a store built with the linker's
    encoder as ``--name-model``); ``context_k`` name candidates (concepts) are re-ranked when
    prototypes are loaded (``k`` otherwise); ``type_priors`` maps NER labels to allowed semantic types / id prefixes (``"D*"``).
    Hybrid scoring (docs/linker.md): with ``sparse_weight`` w > 0 the candidates (dense top ``k`` united
    with the ``sparse_k`` best concepts of the index's char n-gram tf-idf, ``build-index --sparse``) are
    scored ``(dense + w * sparse) / (1 + w)`` per name, max per concept (still in [-1, 1]); 0: dense only.
    Candidate stage (docs/linker.md): ``candidates`` (``score``: the top ``k`` of the union by score;
    ``interleave``: the ``k`` picked by round robin over the dense and sparse lists, then ordered by score) and
    ``query_variants`` (kinds of :mod:`spacy_sapbert.index.query_variants` whose variants of each mention add
    their dense and sparse lists); both use the index's sparse part like ``sparse_weight`` > 0.
    Knowing when not to link (docs/linker.md): with a calibration (``spacy-sapbert calibrate``; initialize's
    ``calibration_path``) ``Span._.<confidence_attr>`` holds the probability that the top concept is right;
    ``threshold_on`` (``score``: ``threshold`` on the raw score, as before; ``confidence``: link only when that
    probability is at least ``confidence_threshold``; see :mod:`spacy_sapbert.linker.confidence`).
    Re-ranker (docs/reranker.md; ``reranker_path`` in initialize): ``reranker_k`` candidates of the mentions whose
    best two name scores lie within ``reranker_margin`` (1.0: every mention) are re-ordered by the cross-encoder's
    logit + ``reranker_dense_weight`` x the name score, their scores the softmax of that (``threshold`` applies)."""
    return SapbertLinker(
        nlp.vocab, name, model=model, pooling=pooling, max_length=max_length, batch_size=batch_size,
        device=device, precision=precision, runtime=runtime, k=k, threshold=threshold,
        max_entities_per_mention=max_entities_per_mention, resolve_abbreviations=resolve_abbreviations,
        filter_for_definitions=filter_for_definitions, semantic_types=semantic_types, languages=languages,
        spans_key=spans_key,
        labels=labels, extension_name=extension_name, ef_search=ef_search, set_kb_id=set_kb_id,
        reuse_name_vectors=reuse_name_vectors, skip_non_alnum=skip_non_alnum, resources=resources,
        resources_path=resources_path, context_weight=context_weight,
        definition_weight=definition_weight, context_fallback=context_fallback, context_margin=context_margin,
        example_names=example_names, one_sense_per_document=one_sense_per_document, context_k=context_k,
        type_priors=type_priors, sparse_weight=sparse_weight, sparse_k=sparse_k, candidates=candidates,
        query_variants=query_variants, confidence_attr=confidence_attr,
        threshold_on=threshold_on, confidence_threshold=confidence_threshold, reranker_k=reranker_k,
        reranker_margin=reranker_margin, reranker_dense_weight=reranker_dense_weight,
    )


class SapbertLinker(LinkerStorage, Pipe):
    """Links spans to concepts with a SapBERT encoder and a :class:`ConceptIndex`."""

    def __init__(self, vocab: Vocab, name: str = "sapbert_linker", **cfg: Any) -> None:
        self.vocab = vocab
        self.name = name
        self.cfg: Dict[str, Any] = dict(DEFAULT_CONFIG)
        self.cfg.update(cfg)
        self.cfg["semantic_types"] = list(self.cfg["semantic_types"] or [])
        self.cfg["labels"] = list(self.cfg["labels"] or [])
        if self.cfg["languages"]:
            self.cfg["languages"] = list(language_codes(self.cfg["languages"]))
        _validate_cfg(self.cfg)
        if self.cfg["resolve_abbreviations"] and not is_installed("scispacy"):  # the [abbreviations] extra
            raise MissingExtraError(Errors.E821.format(name=name, reason="no module named 'scispacy'"))
        self.encoder: Optional[CachedEncoder] = None
        self.index: Optional[ConceptIndex] = None
        self._detector: Any = None
        self._resources_dir: Optional[Path] = None
        self._warned_no_ner = False
        self.prototypes: Any = None  # a context.PrototypeStore, set by initialize / from_disk
        self._context: Any = None  # a context.ContextRanker when priors or prototypes are on
        self._context_settings = context_settings(self.cfg)
        self.calibration: Any = None  # a calibration.Calibration, set by initialize / from_disk / calibrate
        self.reranker: Any = None  # a rerank.RerankStage, set by initialize / from_disk
        register_kb_ents(self.cfg["extension_name"])
        register_confidence(self.cfg["confidence_attr"])

    # ---- resources ----------------------------------------------------------------------
    @property
    def kb(self) -> Any:
        """The :class:`KnowledgeBase` (``cui_to_entity``, ``alias_to_cuis``: scispaCy's views)."""
        return None if self.index is None else self.index.kb

    def set_resources(self, encoder: CachedEncoder, index: ConceptIndex, *, path: Any = "<memory>") -> None:
        """Use an already loaded encoder and index (its ``kb`` comes along); checked for a match. An int8
        encoder (:class:`~spacy_sapbert.encoding.onnx_encoder.OnnxEncoder` with ``quantized=True``) goes with
        precision ``int8`` and no other (E827): what runs now is what the saved pipeline runs."""
        from ..encoding.onnx_encoder import INT8

        if (getattr(encoder, "precision", None) == INT8) != (self.cfg["precision"] == INT8):
            raise ConfigError(Errors.E827.format(name=self.name, precision=self.cfg["precision"],
                                                 encoder=getattr(encoder, "precision", None)))
        index.check_compatible(encoder, path=path)
        if self.cfg["ef_search"] is not None:
            index.set_ef(self.cfg["ef_search"])
        if self.cfg["semantic_types"]:
            index.check_types(self.cfg["semantic_types"])
        index.set_languages(self.cfg["languages"])  # E735 / E739 here, not at the first doc
        self._check_sparse(index, path)
        self.encoder, self.index = encoder, index
        self.set_prototypes(self.prototypes)
        if self.calibration is not None:  # set before the resources: checked against them now
            self.set_calibration(self.calibration, path=path)
        if self.reranker is not None:
            self.reranker.check(index.kb, encoder)  # E811
            if self._context is not None:
                raise ConfigError(Errors.E812.format(name=self.name))

    def set_prototypes(self, store: Any, *, path: Any = "<memory>") -> None:
        """Use a :class:`~spacy_sapbert.context.PrototypeStore` (None: no re-ranking); it must have
        been built for this KB. Type priors work with or without one."""
        priors, weights = self._context_settings
        if self.index is not None:
            priors.check(self.index)
            if store is not None:
                store.check_kb(self.index.kb, path=path)
        if store is not None and weights.example_names:
            if not store.has_names:
                warnings.warn(Warnings.W602.format(path=path))
            elif self.encoder is not None:
                store.check_name_encoder(self.encoder, path=path)
        self.prototypes = store
        self._context = ContextRanker(store=store, priors=priors, weights=weights) if store is not None or priors else None
        if self._context is not None and self.cfg["sparse_weight"] > 0:
            warnings.warn(Warnings.W780.format(weight=self.cfg["sparse_weight"],
                                               what="prototypes" if store is not None else "type_priors"))
        if self._context is not None and (self.cfg["candidates"] != "score" or self.cfg["query_variants"]):
            warnings.warn(Warnings.W781.format(what="prototypes" if store is not None else "type_priors"))

    def initialize(
        self,
        get_examples: Optional[Callable[[], Iterable[Any]]] = None,
        *,
        nlp: Optional[Language] = None,
        kb_path: Optional[str] = None,
        index_path: Optional[str] = None,
        exact: Optional[bool] = None,
        M: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        work_dir: Optional[str] = None,
        num_threads: int = 1,
        show_progress: bool = True,
        kind: str = "auto",
        prototypes_path: Optional[str] = None,
        calibration_path: Optional[str] = None,
        reranker_path: Optional[str] = None,
    ) -> None:
        """Load the encoder (``model``) and the KB at ``kb_path``; load the index at ``index_path``,
        or build it (and save it there, when given, so the next run reuses it); load the prototype
        store at ``prototypes_path`` (from ``spacy-sapbert build-prototypes``) for re-ranking, and the
        calibration at ``calibration_path`` (from ``spacy-sapbert calibrate``), the cross-encoder re-ranker at
        ``reranker_path`` (``spacy-sapbert train-reranker``'s ``OUTPUT/model``). ``kind``
        picks the index back-end of a new build (``auto``, ``exact``, ``hnsw``, ``compact``, ``ivf``: see
        :mod:`spacy_sapbert.index`)."""
        from ..kb import KnowledgeBase

        if kb_path is None:
            raise ConfigError(Errors.E115.format(name=self.name))
        if nlp is not None and self.cfg["resolve_abbreviations"]:  # its package then installs scispaCy too
            declare_extra(nlp.meta, "abbreviations")
        encoder = self._load_encoder(self.cfg["model"])
        kb = KnowledgeBase.from_disk(kb_path)
        if index_path is not None and (ensure_path(index_path) / META_FILE).exists():
            index = ConceptIndex.from_disk(index_path, kb)
        else:
            if index_path is None and work_dir is None:
                logger.info("building the index of %d names on first use (save it with index_path to reuse it)",
                            len(kb.names))
            index = ConceptIndex.build(kb, encoder, kind=kind, exact=exact, M=M, ef_construction=ef_construction,
                                       ef_search=self.cfg["ef_search"], batch_size=self.cfg["batch_size"],
                                       work_dir=work_dir, num_threads=num_threads, show_progress=show_progress)
            if index_path is not None:  # recorded as build-index does: `spacy-sapbert link INDEX` can use it alone
                index.meta.update(model=encoder.name, kb_path=str(ensure_path(kb_path).resolve()))
                index.to_disk(index_path)
        if self.cfg["precision"] == "int8":  # queries by the int8 copy; the index keeps the float32 name vectors
            encoder = self._int8_copy(encoder)
        if self._hybrid() and index.sparse is None:  # hybrid scores need the sparse part: build it
            index.sparse = SparseIndex.from_kb(kb, encoder_fingerprint=encoder.fingerprint)
            if index_path is not None:
                write_beside(index.sparse, index_path, index.meta.get("encoder_fingerprint", ""))
        if prototypes_path is not None:
            self.prototypes = PrototypeStore.from_disk(prototypes_path, kb=kb, device=self.cfg["device"])
        if calibration_path is not None:
            self.calibration = None  # replaced below
        if reranker_path is not None:
            from ..rerank.stage import RerankStage

            self.reranker = RerankStage(reranker_path, device=self.cfg["device"])
        self.set_resources(encoder, index, path=index_path or "<memory>")  # checks one set before
        if calibration_path is not None:
            self.set_calibration(Calibration.from_disk(calibration_path), path=calibration_path)
        elif self.calibration is None:
            self.set_calibration(None)  # E794 when threshold_on = "confidence"

    def set_calibration(self, calibration: Any, *, path: Any = "<memory>") -> None:
        """Use a :class:`~spacy_sapbert.calibration.Calibration` (None: none); it must have been fitted for
        this KB and encoder (E790). ``threshold_on = "confidence"`` needs one (E794)."""
        if calibration is not None and self.index is not None and self.encoder is not None:
            calibration.check(kb_checksum=self.index.kb.checksum, encoder_fingerprint=self.encoder.fingerprint,
                              path=path)
            diff = calibration.settings_diff(self.cfg)
            if diff:
                warnings.warn(Warnings.W785.format(path=path, diff=", ".join(
                    f"{key} {old!r} then, {new!r} now" for key, (old, new) in sorted(diff.items()))))
        if calibration is None and self.cfg["threshold_on"] == "confidence":
            raise ConfigError(Errors.E794.format(name=self.name))
        self.calibration = calibration

    def _load_encoder(self, name_or_path: str) -> Encoder:
        """The PyTorch encoder of ``model`` (float32 on the CPU for precision ``int8``: its int8 copy is made
        from it by :meth:`_int8_copy`)."""
        cfg = self.cfg
        int8 = cfg["precision"] == "int8"
        return Encoder.load(name_or_path, pooling=cfg["pooling"], max_length=cfg["max_length"],
                            device="cpu" if int8 else cfg["device"], precision="fp32" if int8 else cfg["precision"])

    def _int8_copy(self, encoder: Encoder) -> CachedEncoder:
        """The int8 ONNX Runtime copy of ``encoder`` (precision ``int8``), in a folder kept while this component
        lives (ONNX Runtime reads it again in a forked process); ``to_disk`` copies it into the pipeline."""
        import shutil
        import tempfile
        import weakref

        from ..encoding.onnx_encoder import quantized_copy

        tmp = Path(tempfile.mkdtemp(prefix="sapbert_int8_"))
        weakref.finalize(self, shutil.rmtree, str(tmp), ignore_errors=True)
        return quantized_copy(encoder, tmp / "encoder")

    # ---- linking ------------------------------------------------------------------------
    def __call__(self, doc: Doc) -> Doc:
        try:
            self._link([doc])
        except Exception as err:  # spaCy's error-handler protocol
            self.get_error_handler()(self.name, self, [doc], err)
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """Link a stream of docs; the mentions of ``batch_size`` docs are encoded at once."""
        for docs in minibatch(stream, size=batch_size):
            try:
                self._link(docs)
            except Exception as err:
                self.get_error_handler()(self.name, self, docs, err)
            yield from docs

    def _spans(self, doc: Doc) -> Sequence[Span]:
        key = self.cfg["spans_key"]
        if key is None:
            return doc.ents
        return doc.spans[key] if key in doc.spans else ()  # a doc without the group: nothing to link

    def evidence(self, docs: Sequence[Doc]) -> List[List[Tuple[Span, Evidence]]]:
        """Per doc, the spans the linker links with what it has for each before deciding: the normalised
        text, the ranked candidates with raw scores (up to ``k``, before ``threshold`` and
        ``max_entities_per_mention``), whether the text is a KB name. Sets nothing on the docs;
        ``spacy-sapbert calibrate`` fits on it (:mod:`spacy_sapbert.calibration.features`)."""
        if self.encoder is None or self.index is None:
            raise MissingInputError(Errors.E114.format(name=self.name))
        cfg = self.cfg
        labels = set(cfg["labels"])
        per_doc: List[List[Tuple[Span, str]]] = []
        for doc in docs:
            spans = [span for span in self._spans(doc) if not labels or span.label_ in labels]
            long_forms = self._long_forms(doc) if cfg["resolve_abbreviations"] and spans else {}
            texts = [normalize_name(_mention_text(span, long_forms)) for span in spans]
            if cfg["skip_non_alnum"]:
                texts = [text if has_alnum(text) else "" for text in texts]
            per_doc.append(list(zip(spans, texts)))
        self._warn_without_ner(docs)
        unique = [] if self._context else sorted({text for mentions in per_doc for _, text in mentions if text})
        found: Dict[str, List[Tuple[str, float]]] = {}
        ranked_in_context: Optional[Iterator[List[Tuple[str, float]]]] = None
        if self._context:  # type priors and/or prototype re-ranking: spacy_sapbert.context
            k = max(cfg["k"], cfg["max_entities_per_mention"], cfg["context_k"] if self.prototypes is not None else 0)
            ranked_in_context = iter(self._context.rank(
                self.index, self._vectors, [m for mentions in per_doc for m in mentions],
                k=k, semantic_types=cfg["semantic_types"] or None,
                require_definition=cfg["filter_for_definitions"], threshold=-math.inf,
                cap=k, batch_size=cfg["batch_size"]))
        if unique:
            found = dict(zip(unique, self._rank(unique)))  # dense, or hybrid with sparse_weight > 0
        row_of_name = getattr(self.index.kb, "row_of_name", None)
        out: List[List[Tuple[Span, Evidence]]] = []
        for mentions in per_doc:
            out.append([])
            for span, text in mentions:
                cands = next(ranked_in_context) if ranked_in_context is not None else found.get(text, [])
                is_name = bool(text) and row_of_name is not None and row_of_name(text) >= 0
                out[-1].append((span, Evidence(text, list(cands), is_name)))
        return out

    def _link(self, docs: Sequence[Doc]) -> None:
        cfg = self.cfg
        per_doc = self.evidence(docs)
        ext, conf_attr = cfg["extension_name"], cfg["confidence_attr"]
        register_kb_ents(ext)  # again: a scispaCy linker made since may have replaced it
        for doc, mentions in zip(docs, per_doc):
            decided = decide(cfg, self.calibration, [ev for _, ev in mentions])
            kb_ids: List[str] = []
            for (span, _), (cands, confidence) in zip(mentions, decided):
                if any(not -_SCORE_LIMIT <= score <= _SCORE_LIMIT for _, score in cands):  # NaN too: E556
                    self._refuse_score(cands)
                span._.set(ext, cands)
                if confidence is not None:
                    span._.set(conf_attr, confidence)
                kb_ids.append(cands[0][0] if cands else "")
            if cfg["set_kb_id"] and mentions:
                self._set_kb_ids(doc, [span for span, _ in mentions], kb_ids)

    def _refuse_score(self, cands: List[Tuple[str, float]]) -> None:
        """E556: a score outside [-1, 1] never reaches kb_ents (the index's and the store's own guards raise
        first; this one also covers the scores the context re-ranking mixes from both)."""
        from ..errors import IntegrityError

        score = next(s for _, s in cands if not -_SCORE_LIMIT <= s <= _SCORE_LIMIT)
        where = self.index.path if self.index is not None and self.index.path is not None else "<memory>"
        raise IntegrityError(Errors.E556.format(score=score, what="the index (or prototype store) of "
                                                f"'{self.name}'", path=where, fix="`spacy-sapbert build-index`, "
                                                "`spacy-sapbert build-prototypes`"))

    def _rank(self, texts: List[str]) -> List[List[Tuple[str, float]]]:
        """The top concepts of normalised mention ``texts``: dense, or hybrid when ``sparse_weight`` > 0; with a
        re-ranker, its top ``reranker_k`` re-ordered (scores: its probabilities)."""
        cfg = self.cfg
        depth = max(cfg["k"], cfg["max_entities_per_mention"], cfg["reranker_k"] if self.reranker is not None else 0)
        vectors = self._vectors(texts)
        if self._hybrid():
            ranked = [[(c.concept_id, c.score) for c in found] for found in self.score_parts(texts, vectors, depth)]
        else:
            ranked = self.index.search(vectors, depth, semantic_types=cfg["semantic_types"] or None,
                                       require_definition=cfg["filter_for_definitions"])
        if self.reranker is not None:
            ranked = self.reranker.apply(self.index, texts, vectors, ranked, k=cfg["reranker_k"],
                                         margin=cfg["reranker_margin"], dense_weight=cfg["reranker_dense_weight"],
                                         batch_size=cfg["batch_size"])
        return ranked

    def score_parts(self, texts: List[str], vectors: Optional["numpy.ndarray"] = None,
                    depth: Optional[int] = None) -> List[List[HybridScore]]:
        """Hybrid ranking of normalised mention ``texts`` with each concept's dense and sparse parts
        (:class:`~spacy_sapbert.index.hybrid.HybridScore`); needs the index's sparse part (E783). ``vectors``:
        the texts' query vectors when already made; ``depth``: concepts per text (default ``k``)."""
        if self.encoder is None or self.index is None:
            raise MissingInputError(Errors.E114.format(name=self.name))
        self._check_sparse(self.index, self.index.path or "<memory>", needed=True)
        cfg = self.cfg
        variants = [query_variants(text, cfg["query_variants"]) for text in texts] if cfg["query_variants"] else []
        flat = [v for vs in variants for v in vs]
        return hybrid_search(self.index, self.index.sparse, texts, self._vectors(texts) if vectors is None else vectors,
                             k=depth or max(cfg["k"], cfg["max_entities_per_mention"]), sparse_k=cfg["sparse_k"],
                             weight=cfg["sparse_weight"], semantic_types=cfg["semantic_types"] or None,
                             require_definition=cfg["filter_for_definitions"], mode=cfg["candidates"],
                             variants=variants, variant_vectors=self._vectors(flat) if flat else None)

    def _hybrid(self) -> bool:
        """Whether mentions go through the hybrid candidate stage (it needs the index's sparse part)."""
        cfg = self.cfg
        return cfg["sparse_weight"] > 0 or cfg["candidates"] != "score" or bool(cfg["query_variants"])

    def _check_sparse(self, index: ConceptIndex, path: Any, *, needed: bool = False) -> None:
        """E783 when hybrid scoring is on and the index has no sparse part; E781 when it is another KB's."""
        if not needed and not self._hybrid():
            return
        if index.sparse is None and self.cfg["sparse_weight"] <= 0:
            what = "candidates = 'interleave'" if self.cfg["candidates"] != "score" else "query_variants"
            raise MissingInputError(Errors.E788.format(path=path, what=what))
        if index.sparse is None:
            raise MissingInputError(Errors.E783.format(path=path))
        if index.sparse.meta.get("kb_checksum") != index.kb.checksum:
            raise IncompatibleError(Errors.E781.format(path=path, what="knowledge base",
                                                       built=index.sparse.meta.get("kb_checksum"),
                                                       given=index.kb.checksum))

    def _warn_without_ner(self, docs: Sequence[Doc]) -> None:
        """Warn once (W551) when docs reach the linker with no entity annotation at all: nothing
        before it set ``doc.ents`` (a pipeline made without --base)."""
        if self._warned_no_ner or self.cfg["spans_key"] is not None:
            return
        if any(len(doc) and not doc.has_annotation("ENT_IOB") for doc in docs):
            self._warned_no_ner = True
            warnings.warn(Warnings.W551.format(name=self.name))

    def _vectors(self, texts: List[str]) -> "numpy.ndarray":
        """Query vectors; a mention that is a KB name reuses the name's vector stored in the index
        (the encoder would give the same vector) when ``reuse_name_vectors`` is on."""
        import numpy

        index = self.index
        rows = [-1] * len(texts)
        row_of_name = getattr(index.kb, "row_of_name", None)
        if self.cfg["reuse_name_vectors"] and row_of_name is not None:
            rows = [row_of_name(text) for text in texts]
        known = [i for i, row in enumerate(rows) if 0 <= row < len(index)]
        unknown = [i for i, row in enumerate(rows) if not 0 <= row < len(index)]
        vectors = numpy.empty((len(texts), index.dim), dtype=numpy.float32)
        if known:
            vectors[known] = index.name_vectors([rows[i] for i in known])
        if unknown:
            vectors[unknown] = self.encoder.encode([texts[i] for i in unknown], batch_size=self.cfg["batch_size"])
        return vectors

    def _set_kb_ids(self, doc: Doc, spans: List[Span], kb_ids: List[str]) -> None:
        """Rewrite the linked spans with their ``kb_id``; spans not linked (other labels) keep theirs."""
        linked = {(s.start, s.end, s.label): kid for s, kid in zip(spans, kb_ids)}

        def relabel(group: Iterable[Span]) -> List[Span]:
            return [Span(doc, s.start, s.end, label=s.label, span_id=s.id,
                         kb_id=linked.get((s.start, s.end, s.label), s.kb_id_)) for s in group]

        if self.cfg["spans_key"] is None:
            doc.ents = relabel(doc.ents)
        else:
            from spacy.tokens import SpanGroup

            key = self.cfg["spans_key"]
            group = doc.spans[key]
            doc.spans[key] = SpanGroup(doc, name=key, attrs=dict(group.attrs), spans=relabel(group))

    def _long_forms(self, doc: Doc) -> Dict[int, Tuple[int, str]]:
        """Short-form start token → (end token, long form text): see :func:`abbreviations.long_forms`."""
        return long_forms(doc, self._abbreviation_detector)

    def _abbreviation_detector(self) -> Any:
        if self._detector is None:
            self._detector = make_detector(self.vocab)
        return self._detector


def _validate_cfg(cfg: Dict[str, Any]) -> None:
    from ..index.meta import MAX_EF_SEARCH, MAX_K

    for what, minimum, maximum in (("k", 1, MAX_K), ("max_entities_per_mention", 1, MAX_K), ("batch_size", 1, None),
                                   ("ef_search", 1, MAX_EF_SEARCH), ("context_k", 1, MAX_K)):
        if what == "ef_search" and cfg[what] is None:
            continue
        if not isinstance(cfg[what], int) or cfg[what] < minimum:
            raise ConfigError(Errors.E111.format(what=what, minimum=minimum, value=cfg[what]))
        if maximum is not None and cfg[what] > maximum:  # 10**20 candidates: an OverflowError, not a search
            raise ConfigError(Errors.E559.format(what=what, minimum=minimum, maximum=maximum, value=cfg[what]))
    from ..encoding.onnx_encoder import check_int8_settings, check_runtime
    from ..rerank.apply import check_rerank_settings

    check_runtime(cfg["runtime"])
    if cfg["precision"] == "int8":
        check_int8_settings("sapbert_linker", cfg["runtime"], cfg["device"])
    check_rerank_settings(cfg["reranker_k"], cfg["reranker_margin"], cfg["reranker_dense_weight"])
    threshold = cfg["threshold"]
    if not isinstance(threshold, (int, float)) or not -1.0 <= float(threshold) <= 1.0:
        raise ConfigError(Errors.E116.format(value=threshold))
    cfg["sparse_weight"] = check_weight(cfg["sparse_weight"])
    if not isinstance(cfg["sparse_k"], int) or isinstance(cfg["sparse_k"], bool) or cfg["sparse_k"] < 0:
        raise ConfigError(Errors.E784.format(what="sparse_k", value=cfg["sparse_k"], name="sapbert_linker",
                                             allowed="a whole number >= 0 (0: re-score the dense candidates only)"))
    cfg["candidates"] = check_mode(cfg["candidates"])
    cfg["query_variants"] = check_kinds(cfg["query_variants"])
    if cfg["resources"] not in ("inside", "outside"):
        raise ConfigError(Errors.E124.format(value=cfg["resources"], choices="inside, outside"))
    if not cfg["extension_name"] or not str(cfg["extension_name"]).isidentifier():
        raise ConfigError(Errors.E002.format(what="extension_name", value=cfg["extension_name"],
                                             choices="a Python identifier such as kb_ents"))
    validate_confidence_cfg(cfg)


__all__ = ["SapbertLinker", "make_sapbert_linker", "DEFAULT_CONFIG"]
