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

import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.util import minibatch
from spacy.vocab import Vocab

from ..base.extras import declare_extra, is_installed
from ..base.outputs import check_folder_path
from ..base.util import ensure_path, get_logger
from ..calibration.model import Calibration
from ..context.ranker import ContextRanker, context_settings
from ..context.store import PrototypeStore
from ..encoding.bulk import bulk_batch_size
from ..encoding.onnx_encoder import INT8, quantized_copy
from ..encoding.torch_encoder import CachedEncoder, Encoder
from ..errors import ConfigError, Errors, IntegrityError, MissingExtraError, Warnings
from ..index import META_FILE, ConceptIndex, IndexSettings
from ..index.sparse import SparseIndex, write_beside
from ..kb import KnowledgeBase
from ..mentions.abbreviation_table import AbbreviationTable
from ..rerank.stage import RerankStage
from .confidence import decide, register_confidence
from .extension import register_kb_ents
from .ranking import LinkerRanking
from .settings import DEFAULT_CONFIG, LinkerSettings, settings_signature
from .storage import LinkerStorage

logger = get_logger("linker")
_SCORE_LIMIT = 1.02  # scores of unit vectors lie in [-1, 1]; float16 rounding and the load checks' 1e-2 stay below


class SapbertLinker(LinkerRanking, LinkerStorage, Pipe):
    """Links spans to concepts with a SapBERT encoder and a :class:`ConceptIndex`."""

    def __init__(self, vocab: Vocab, name: str = "sapbert_linker", **cfg: Any) -> None:
        self.vocab = vocab
        self.name = name
        # every key checked (coded errors) and kept as a plain dict: the keys of the config, saved with the pipeline
        self.cfg: Dict[str, Any] = LinkerSettings.from_config(cfg, name=name).to_config()
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
        self.abbreviations: Optional[AbbreviationTable] = None  # set by initialize / from_disk / set_abbreviations
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
        index_settings: Optional[Dict[str, Any]] = None,
        work_dir: Optional[str] = None,
        show_progress: bool = True,
        prototypes_path: Optional[str] = None,
        calibration_path: Optional[str] = None,
        reranker_path: Optional[str] = None,
        abbreviations_path: Optional[str] = None,
    ) -> None:
        """Load the encoder (``model``) and the KB at ``kb_path``; load the index at ``index_path``,
        or build it (and save it there, when given, so the next run reuses it); load the prototype
        store at ``prototypes_path`` (from ``spacy-sapbert build-prototypes``) for re-ranking, and the
        calibration at ``calibration_path`` (from ``spacy-sapbert calibrate``), the cross-encoder re-ranker at
        ``reranker_path`` (``spacy-sapbert train-reranker``'s ``OUTPUT/model``), the abbreviation table at
        ``abbreviations_path`` (``spacy-sapbert mine-abbreviations``' JSON file, or a TSV of short form<TAB>long form
        lines; saved with the pipeline). ``index_settings``: how a new
        index is built, the fields of :class:`~spacy_sapbert.index.IndexSettings` as a dict (in a config:
        ``[initialize.components.sapbert_linker.index_settings]``, e.g. ``kind = "ivf"``) or the object itself;
        its ``ef_search`` defaults to the component's ``ef_search``."""
        if kb_path is None:
            raise ConfigError(Errors.E115.format(name=self.name))
        if nlp is not None and self.cfg["resolve_abbreviations"]:  # its package then installs scispaCy too
            declare_extra(nlp.meta, "abbreviations")
        settings = IndexSettings.of(index_settings)  # E124 / E833 / E834 before any loading
        table = AbbreviationTable.from_disk(abbreviations_path) if abbreviations_path is not None else None  # E798 too
        if index_path is not None and not (ensure_path(index_path) / META_FILE).exists():  # built and written there
            check_folder_path(index_path, what="a file, not an index folder")  # E502 / E505, before any encoding
        if settings.ef_search is None and self.cfg["ef_search"] is not None:
            settings = settings.replace(ef_search=self.cfg["ef_search"])
        encoder = self._load_encoder(self.cfg["model"])
        kb = KnowledgeBase.from_disk(kb_path)
        if index_path is not None and (ensure_path(index_path) / META_FILE).exists():
            index = ConceptIndex.from_disk(index_path, kb)
        else:
            if index_path is None and work_dir is None:
                logger.info("building the index of %d names on first use (save it with index_path to reuse it)",
                            len(kb.names))
            # the linker's batch, or build-index's default where that is larger (bf16 on a CPU: 256)
            build_batch = max(self.cfg["batch_size"], bulk_batch_size(None, self.cfg["precision"], self.cfg["device"]))
            index = ConceptIndex.build(kb, encoder, settings, batch_size=build_batch, work_dir=work_dir,
                                       show_progress=show_progress)
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
            self.reranker = RerankStage(reranker_path, device=self.cfg["device"],
                                        precision=self.cfg["reranker_precision"])
        if table is not None:
            self.set_abbreviations(table)
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

    def set_abbreviations(self, table: Optional[AbbreviationTable]) -> None:
        """Use an :class:`~spacy_sapbert.mentions.abbreviation_table.AbbreviationTable` for mentions that are short
        forms their document does not define (None: none); saved with the pipeline. The ``abbreviation_table``
        setting turns its use off without dropping it."""
        if table is not None and not isinstance(table, AbbreviationTable):
            raise ConfigError(Errors.E002.format(what="abbreviation table", value=type(table).__name__,
                                                 choices="an AbbreviationTable (AbbreviationTable.from_disk(path)) or None"))
        self.abbreviations = table

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

    def clear_cache(self) -> None:
        """Forget the name encoder's remembered vectors and the re-ranker's remembered logits (neither changes a
        result: a timing run empties them before each pass so that it times what a first pass does)."""
        if self.encoder is not None:
            self.encoder.clear_cache()
        if self.reranker is not None:
            self.reranker.clear_cache()

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
        score = next(s for _, s in cands if not -_SCORE_LIMIT <= s <= _SCORE_LIMIT)
        where = self.index.path if self.index is not None and self.index.path is not None else "<memory>"
        raise IntegrityError(Errors.E556.format(score=score, what="the index (or prototype store) of "
                                                f"'{self.name}'", path=where, fix="`spacy-sapbert build-index`, "
                                                "`spacy-sapbert build-prototypes`"))

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


@Language.factory("sapbert_linker", default_config=DEFAULT_CONFIG)
@settings_signature(returns=SapbertLinker, nlp=Language, name=str)
def make_sapbert_linker(nlp: Language, name: str, **settings: Any) -> SapbertLinker:
    """Create the linker. Its keyword arguments are the settings of
    :class:`~spacy_sapbert.linker.settings.LinkerSettings` (every key of the config, with its type: the signature
    spaCy reads is made from them); their defaults are ``DEFAULT_CONFIG``. docs/linker.md describes each."""
    return SapbertLinker(nlp.vocab, name, **settings)


__all__ = ["SapbertLinker", "make_sapbert_linker", "DEFAULT_CONFIG"]
