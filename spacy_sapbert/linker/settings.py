"""The ``sapbert_linker`` component's settings, each key written once: :class:`LinkerSettings`.

Every key of ``[components.sapbert_linker]`` is a field of :class:`LinkerSettings`, with its type and default. From
it come ``DEFAULT_CONFIG`` (the factory's ``default_config``), the factory's signature (:func:`settings_signature`:
spaCy builds the config schema, and so refuses a value of the wrong type or an unknown key, from
``inspect.signature`` of the factory) and the checks of the values (coded errors, in :meth:`LinkerSettings.__post_init__`).
The component keeps the checked values as its ``cfg`` dict (:meth:`LinkerSettings.to_config`). The context keys are
checked again, as weights, by :class:`~spacy_sapbert.context.ContextWeights` when the component is made.
"""
from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, TypeVar, Union

from ..base.defaults import DEFAULT_MODEL, MAX_LENGTH
from ..encoding.onnx_encoder import check_int8_settings, check_runtime
from ..errors import ConfigError, Errors
from ..index.hybrid import check_mode, check_weight
from ..index.meta import MAX_EF_SEARCH, MAX_K
from ..index.query_variants import check_kinds
from ..kb.languages import language_codes
from ..rerank.apply import DEFAULT_RERANK_K, DEFAULT_RERANK_WINDOW, check_rerank_settings
from ..rerank.model import DEFAULT_RERANK_PRECISION, check_precision
from .confidence import validate_confidence_cfg

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class LinkerSettings:
    """The linker's settings (docs/linker.md has the table). Options mirroring scispaCy's ``EntityLinker`` mean
    the same: ``k`` (candidates retrieved; here concepts, not names), ``threshold``, ``max_entities_per_mention``,
    ``resolve_abbreviations``, ``filter_for_definitions`` (default False here: many KBs have no definitions).

    Encoder: ``model`` (hub id or folder, loaded in initialize), ``pooling`` (``cls``, ``mean`` or ``auto``: what
    the model folder declares, else ``cls``; see :mod:`spacy_sapbert.encoding.pooling`), ``max_length``,
    ``batch_size``, ``device``, ``precision``, ``runtime`` (what runs the encoder of a saved pipeline: ``onnx``,
    ONNX Runtime on the CPU, the same vectors about twice as fast; ``torch``; ``auto``: ONNX Runtime when the
    pipeline holds an ONNX export, onnxruntime is installed, the device is the CPU and the precision fp32, else
    PyTorch; precision ``int8``: ONNX Runtime over the int8 copy of the export, ``spacy-sapbert export-onnx
    --quantize``, queries only, the index keeps float32 name vectors).

    Abbreviation table (docs/linker.md): with ``abbreviation_table`` on and a table loaded (initialize's
    ``abbreviations_path``, from ``spacy-sapbert mine-abbreviations`` or a TSV), a mention whose whole text is one
    of its short forms and inside which the document defines no abbreviation is encoded as the table's long form.

    What is linked and written: ``semantic_types`` (applied before the top-k cut), ``languages`` (search only the
    KB names in these languages, ISO 639-1 codes such as ``["es", "en"]``, on the same index; ``None``: all
    names), ``spans_key`` (link ``doc.spans[key]`` instead of ``doc.ents``), ``labels`` (link only spans with one
    of these labels, e.g. ``["Disease"]``; empty: all), ``extension_name`` (the Span attribute written),
    ``ef_search`` (search depth of an hnsw index, cells scanned by an ivf one; ``None``: the value the
    index was built with), ``set_kb_id`` (write ``kb_id_`` of the spans), ``reuse_name_vectors`` (a mention that
    is a KB name takes that name's vector from the index instead of running the encoder: same result, faster),
    ``skip_non_alnum`` (spans without a letter or digit get ``[]``), ``resources`` (``inside``: KB and index are
    saved with the pipeline; ``outside``: only a pointer is, the folder found at load through ``resources_path``
    or ``SPACY_SAPBERT_RESOURCES``; see :mod:`spacy_sapbert.linker.resources`).

    Context (docs/context.md): ``context_weight``, ``definition_weight`` and ``context_fallback`` mix name and
    prototype similarities when a prototype store is loaded (``prototypes_path`` in initialize);
    ``context_margin`` re-ranks only mentions whose best name scores lie within the margin (0: the mentions whose
    best names tie; ``None``: every mention, ~10x slower); ``one_sense_per_document`` encodes the context of only
    the first of a document's mentions written alike (same text and label) and lets it decide for all of them;
    ``example_names`` lets the prototypes' example mentions count as names of their concepts; ``context_k`` name
    candidates are re-ranked when prototypes are loaded; ``type_priors`` maps NER labels to allowed semantic
    types / id prefixes (``"D*"``).

    Hybrid scoring and the candidate stage (docs/linker.md): with ``sparse_weight`` w > 0 the candidates (dense top
    ``k`` united with the ``sparse_k`` best concepts of the index's char n-gram tf-idf) are scored
    ``(dense + w * sparse) / (1 + w)`` per name, max per concept; 0: dense only. ``candidates`` (``score`` or
    ``interleave``) and ``query_variants`` (kinds of :mod:`spacy_sapbert.index.query_variants`) shape the
    candidate lists and use the index's sparse part too.

    Knowing when not to link (docs/linker.md): with a calibration ``Span._.<confidence_attr>`` holds the
    probability that the top concept is right; ``threshold_on`` (``score``: ``threshold`` on the raw score;
    ``confidence``: link only when that probability is at least ``confidence_threshold``).

    Re-ranker (docs/reranker.md): ``reranker_k`` candidates of the mentions whose best two name scores lie within
    ``reranker_margin`` (1.0: every mention) are re-ordered by the cross-encoder's logit + ``reranker_dense_weight``
    x the name score, their scores the softmax of that; with ``reranker_skip_names`` a mention that is a KB name is
    never re-ranked (its top concept has that name; docs/reranker.md, "Which close calls"); of the ``reranker_k``,
    only those within ``reranker_window`` of the best name score are read (the best two at least);
    ``reranker_precision``: the re-ranker's ONNX graph on the CPU (``int8``, or ``float32``: the same logit for a pair
    in any batch, so the pairs of all mentions are batched by length; docs/reranker.md)."""

    model: str = DEFAULT_MODEL
    pooling: str = "auto"  # cls | mean | auto: what the model folder declares, else cls
    max_length: int = MAX_LENGTH
    batch_size: int = 64  # a linking pass 17-19 % faster than at 128 (load_path.py batch; docs/footprint.md)
    device: str = "auto"
    precision: str = "auto"
    runtime: str = "auto"
    k: int = 10
    threshold: float = 0.5
    max_entities_per_mention: int = 5
    resolve_abbreviations: bool = True
    abbreviation_table: bool = True  # use a loaded table for short forms the document does not define
    filter_for_definitions: bool = False
    semantic_types: List[str] = field(default_factory=list)
    languages: Optional[List[str]] = None
    spans_key: Optional[str] = None
    labels: List[str] = field(default_factory=list)
    extension_name: str = "kb_ents"
    ef_search: Optional[int] = None
    set_kb_id: bool = True
    reuse_name_vectors: bool = True
    skip_non_alnum: bool = True
    resources: str = "inside"
    resources_path: Optional[str] = None
    context_weight: float = 0.05  # tuned on NCBI-disease dev (benchmarks/context_finetuned.py); tune your own
    definition_weight: float = 0.0
    context_fallback: Union[float, str] = 0.0
    context_margin: Optional[float] = 0.0  # re-rank the mentions whose best names tie (None: every mention)
    example_names: bool = True
    one_sense_per_document: bool = True  # a document's mentions written alike share the first one's context
    context_k: int = 30  # candidates re-ranked with prototypes: 10 caps NCBI test at 87.9, 30 at 93.4 (docs/context.md)
    type_priors: Dict[str, List[str]] = field(default_factory=dict)
    sparse_weight: float = 0.0  # hybrid scores (dense + w * sparse) / (1 + w): 0 = dense only (docs/linker.md)
    sparse_k: int = 20  # concepts the char n-gram tf-idf adds to the dense candidates
    candidates: str = "score"  # score | interleave: how the k candidates are picked from the lists
    query_variants: List[str] = field(default_factory=list)  # number, generic_head, punctuation, word_order
    confidence_attr: str = "kb_confidence"  # Span attribute of the calibrated confidence
    threshold_on: str = "score"  # score: kb_ents keep scores >= threshold; confidence: link when confidence >= ...
    confidence_threshold: float = 0.5
    reranker_k: int = DEFAULT_RERANK_K  # candidates a re-ranker (initialize's reranker_path) re-orders
    reranker_margin: float = 0.05  # re-rank mentions whose best two name scores are this close (>= 1.0: every one)
    reranker_dense_weight: float = 30.0  # order re-ranked candidates by logit + this x name score (0: re-ranker alone)
    reranker_skip_names: bool = True  # a mention that is a KB name keeps its name ranking (docs/reranker.md)
    reranker_window: float = DEFAULT_RERANK_WINDOW  # read the candidates this close to the best name score (1.0: all)
    reranker_precision: str = DEFAULT_RERANK_PRECISION  # int8 | float32: the re-ranker graph ONNX Runtime runs

    def __post_init__(self) -> None:
        """Normalise (lists, language codes, the hybrid keys) and check every value: coded errors."""
        normalise = object.__setattr__  # frozen: set once, here
        normalise(self, "semantic_types", list(self.semantic_types or []))
        normalise(self, "labels", list(self.labels or []))
        if self.languages:
            normalise(self, "languages", list(language_codes(self.languages)))
        self._check_counts()
        check_runtime(self.runtime)
        if self.precision == "int8":
            check_int8_settings("sapbert_linker", self.runtime, self.device)
        check_rerank_settings(self.reranker_k, self.reranker_margin, self.reranker_dense_weight, self.reranker_window)
        check_precision(self.reranker_precision)
        threshold = self.threshold
        if not isinstance(threshold, (int, float)) or not -1.0 <= float(threshold) <= 1.0:
            raise ConfigError(Errors.E116.format(value=threshold))
        normalise(self, "sparse_weight", check_weight(self.sparse_weight))
        if not isinstance(self.sparse_k, int) or isinstance(self.sparse_k, bool) or not 0 <= self.sparse_k <= MAX_K:
            raise ConfigError(Errors.E784.format(what="sparse_k", value=self.sparse_k, name="sapbert_linker",
                                                 allowed=f"a whole number from 0 to {MAX_K:,} (0: re-score the dense "
                                                         "candidates only)"))
        normalise(self, "candidates", check_mode(self.candidates))
        normalise(self, "query_variants", check_kinds(self.query_variants))
        if self.resources not in ("inside", "outside"):
            raise ConfigError(Errors.E124.format(value=self.resources, choices="inside, outside"))
        if not self.extension_name or not str(self.extension_name).isidentifier():
            raise ConfigError(Errors.E002.format(what="extension_name", value=self.extension_name,
                                                 choices="a Python identifier such as kb_ents"))
        validate_confidence_cfg(self.to_config())

    def _check_counts(self) -> None:
        """E111 for a count below its minimum, E559 above its maximum (10**20 candidates: an OverflowError, not a
        search)."""
        for what, minimum, maximum in (("k", 1, MAX_K), ("max_entities_per_mention", 1, MAX_K),
                                       ("batch_size", 1, None), ("ef_search", 1, MAX_EF_SEARCH),
                                       ("context_k", 1, MAX_K)):
            value = getattr(self, what)
            if what == "ef_search" and value is None:
                continue
            if not isinstance(value, int) or value < minimum:
                raise ConfigError(Errors.E111.format(what=what, minimum=minimum, value=value))
            if maximum is not None and value > maximum:
                raise ConfigError(Errors.E559.format(what=what, minimum=minimum, maximum=maximum, value=value))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], *, name: str = "sapbert_linker") -> "LinkerSettings":
        """The settings of a config mapping (the keys not given keep their defaults); E823 for a key that is no
        setting (spaCy's config validation says so first for a config; this covers ``SapbertLinker(...)``)."""
        unknown = sorted(set(cfg) - set(setting_names()))
        if unknown:
            raise ConfigError(Errors.E823.format(name=name, key=unknown[0], known=", ".join(setting_names())))
        return cls(**cfg)

    def to_config(self) -> Dict[str, Any]:
        """Every setting as a fresh ``{key: value}`` dict (lists and dicts copied), in the order of the fields."""
        return dataclasses.asdict(self)


def setting_names() -> List[str]:
    """The keys of the linker's config, in order."""
    return [f.name for f in dataclasses.fields(LinkerSettings)]


def default_config() -> Dict[str, Any]:
    """Every setting's default, as a fresh dict (the factory's ``default_config``), unchecked."""
    return {f.name: f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
            for f in dataclasses.fields(LinkerSettings)}


DEFAULT_CONFIG: Dict[str, Any] = default_config()


def settings_signature(*, returns: Any, **leading: Any) -> Callable[[F], F]:
    """Decorator for a factory ``(nlp, name, **settings)``: gives it the signature ``(<leading>, *, <every setting
    with its type>) -> returns`` (``__signature__`` and ``__annotations__``; ``leading`` maps the first parameters'
    names to their types), which spaCy (confection) reads to build the component's config schema: a value of the
    wrong type or an unknown key is refused there. No defaults in the signature: they come from ``DEFAULT_CONFIG``,
    as in spaCy's own factories."""
    hints = typing.get_type_hints(LinkerSettings)
    params = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind)
              for name, kind in leading.items()]
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[name])
               for name in setting_names()]

    def decorate(func: F) -> F:
        func.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
        func.__annotations__ = {**{p.name: p.annotation for p in params}, "return": returns}
        return func

    return decorate


__all__ = ["LinkerSettings", "DEFAULT_CONFIG", "default_config", "setting_names", "settings_signature"]
