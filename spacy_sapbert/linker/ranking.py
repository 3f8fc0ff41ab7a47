"""From docs to ranked candidates, for the ``sapbert_linker`` component: the spans it links, their normalised texts
(abbreviations resolved), query vectors (a KB name reuses its stored vector), and the ranking of each mention: dense,
hybrid (dense + sparse, the candidate stage), re-ranked by a cross-encoder, or by context (type priors, prototypes).
A mixin of :class:`~spacy_sapbert.linker.SapbertLinker`, kept apart so that the component's set-up and its decisions
(``kb_ents``, ``kb_id_``) can be read on their own; :meth:`~LinkerRanking.evidence` is what both the component and
``spacy-sapbert calibrate`` start from."""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from ..calibration.features import Evidence
from ..errors import Errors, IncompatibleError, MissingInputError, Warnings
from ..index import ConceptIndex
from ..index.hybrid import HybridScore, hybrid_search
from ..index.query_variants import query_variants
from ..kb.concept import normalize_name
from ..mentions.abbreviations import long_forms, make_detector
from ..mentions.abbreviations import mention_text as _mention_text
from .extension import has_alnum

if TYPE_CHECKING:  # for annotations only
    import numpy


class LinkerRanking:
    """Spans, query vectors and candidate rankings of the linker (see the module docstring)."""

    name: str
    vocab: Vocab
    cfg: Dict[str, Any]
    encoder: Any  # a CachedEncoder, set by initialize / from_disk
    index: Optional[ConceptIndex]
    prototypes: Any
    reranker: Any
    abbreviations: Any
    _context: Any
    _detector: Any
    _warned_no_ner: bool

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
            texts = [normalize_name(self._text_of(span, long_forms)) for span in spans]
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
        names = {text for mentions in per_doc for _, text in mentions if text}  # one KB lookup per distinct text
        is_name = {text: row_of_name(text) >= 0 for text in names} if row_of_name is not None else {}
        out: List[List[Tuple[Span, Evidence]]] = []
        for mentions in per_doc:
            out.append([])
            for span, text in mentions:
                cands = next(ranked_in_context) if ranked_in_context is not None else found.get(text, [])
                out[-1].append((span, Evidence(text, list(cands), is_name.get(text, False))))
        return out

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
                                         batch_size=cfg["batch_size"], skip_names=cfg["reranker_skip_names"],
                                         window=cfg["reranker_window"])
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

    def _text_of(self, span: Span, long_forms: Dict[int, Tuple[int, str]]) -> str:
        """What is encoded for ``span``: its text with the document's own abbreviations resolved; a span that is a
        short form of the abbreviation table (when loaded and ``abbreviation_table`` is on) and holds none of
        the document's definitions, the table's long form."""
        text = _mention_text(span, long_forms)
        table = self.abbreviations if self.cfg["abbreviation_table"] else None
        return text if table is None else table.text_for(span.text, text)

    def _long_forms(self, doc: Doc) -> Dict[int, Tuple[int, str]]:
        """Short-form start token → (end token, long form text): see :func:`abbreviations.long_forms`."""
        return long_forms(doc, self._abbreviation_detector)

    def _abbreviation_detector(self) -> Any:
        if self._detector is None:
            self._detector = make_detector(self.vocab)
        return self._detector



__all__ = ["LinkerRanking"]
