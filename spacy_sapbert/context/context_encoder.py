"""Context encoding: a mention in its text as ``[CLS] left <ENT> mention </ENT> right [SEP]``.

:class:`ContextEncoder` wraps a PyTorch :class:`~spacy_sapbert.encoding.torch_encoder.Encoder` (its batching,
pooling and normalisation are reused). The markers ``<ENT>`` / ``</ENT>`` are added to the
tokenizer as special tokens and the embedding matrix grows by two rows, initialised as copies of
the embeddings of ``[`` and ``]`` (the mean embedding where the vocabulary lacks them): the same
model always gives the same context encoder, and its fingerprint changes with the new rows.

The word-piece budget is ``max_length`` minus the model's special tokens and the two markers; the
mention takes at most half of it, the rest is split evenly between the left and right context
(what one side does not use goes to the other). Only a window of characters around the mention
is tokenised, so long documents cost no more than short ones.

Runtimes: PyTorch (:meth:`ContextEncoder.load`), or, for speed on a CPU, ONNX Runtime over an int8 copy
of the encoder (:meth:`ContextEncoder.quantize`, ``build-prototypes --quantize``: ~2x faster, vectors a
few hundredths of cosine from the float32 ones). A store's prototypes and the mentions re-ranked
against them always come from the same encoder: the store records which (``quantized`` in its
encoder settings) and loads it so, whatever runtime the linker's name encoder uses.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy

from ..encoding.int8_recipes import LEGACY_RECIPE
from ..encoding.onnx_encoder import OnnxEncoder, quantized_copy
from ..encoding.cached import CachedEncoder
from ..encoding.tokenizer_file import WordPieces
from ..encoding.torch_encoder import Encoder, weights_fingerprint
from ..errors import ConfigError, DataFormatError, Errors, MissingInputError
from ..base.util import PathLike, ensure_path

MARKERS = ("<ENT>", "</ENT>")
DEFAULT_CONTEXT_LENGTH = 64
# characters kept on each side of a mention before tokenising (a word piece is >= 1 character)
_WINDOW_CHARS = 8 * DEFAULT_CONTEXT_LENGTH

# a mention in its text: (text, start, end) with character offsets
MentionInText = Tuple[str, int, int]


def check_mention(text: str, start: int, end: int, where: str = "") -> None:
    """Raise a coded error unless ``start:end`` is a non-empty slice of ``text``."""
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
        raise ConfigError(Errors.E602.format(start=start, end=end, length=len(text), where=where))


def split_budget(budget: int, n_left: int, n_right: int) -> Tuple[int, int]:
    """``(left, right)`` word pieces to keep: an even split of ``budget``, the unused part of one
    side given to the other."""
    left = min(n_left, max(budget // 2, budget - n_right))
    return left, min(n_right, budget - left)


def context_token_rows(tokenizer: Any, mentions: Sequence[MentionInText], max_length: int) -> List[List[int]]:
    """Word-piece ids of ``mentions`` as ``[CLS] left <ENT> mention </ENT> right [SEP]`` for a tokenizer
    that has the markers (:func:`add_markers`), at most ``max_length`` (the budget split of the module doc).
    ``tokenizer``: a :class:`~spacy_sapbert.encoding.tokenizer_file.WordPieces`, or a Hugging Face tokenizer.
    The context encoder and context training (``context/train_pairs.py``) share it."""
    pieces = tokenizer if isinstance(tokenizer, WordPieces) else WordPieces.of(tokenizer)
    lefts, middles, rights = [], [], []
    for i, (text, start, end) in enumerate(mentions):
        check_mention(text, start, end, where=f" (mention {i})")
        lefts.append(text[max(0, start - _WINDOW_CHARS):start])
        middles.append(text[start:end])
        rights.append(text[end:end + _WINDOW_CHARS])
    budget = max_length - pieces.n_special - 2
    open_id, close_id = (pieces.token_id(m) for m in MARKERS)
    rows: List[List[int]] = []
    for left, mention, right in zip(pieces.pieces(lefts), pieces.pieces(middles), pieces.pieces(rights)):
        mention = mention[: max(1, budget // 2)]
        n_left, n_right = split_budget(budget - len(mention), len(left), len(right))
        body = left[len(left) - n_left:] + [open_id] + mention + [close_id] + right[:n_right]
        rows.append(pieces.wrap(body))
    return rows


def add_markers(encoder: Encoder) -> bool:
    """Add ``<ENT>``/``</ENT>`` to the encoder's tokenizer and embeddings (in place) unless they are
    there already; returns whether anything changed. The fingerprint is recomputed."""
    tokenizer, model = encoder.tokenizer, encoder.model
    if all(m in tokenizer.get_vocab() for m in MARKERS):
        return False
    import torch  # lazy: torch

    tokenizer.add_special_tokens({"additional_special_tokens": list(MARKERS)})
    old = model.get_input_embeddings().weight.shape[0]
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    weight = model.get_input_embeddings().weight
    vocab = tokenizer.get_vocab()
    with torch.no_grad():
        mean = weight[:old].mean(dim=0)
        for marker, source in zip(MARKERS, ("[", "]")):
            row = vocab.get(source)
            weight[vocab[marker]] = weight[row] if row is not None and row < old else mean
    encoder.fingerprint = weights_fingerprint(model)
    encoder.clear_cache()
    return True


def _marked_tokenizer(folder: Any) -> WordPieces:
    """The word pieces of a saved context encoder folder (its ``tokenizer.json``: no transformers needed), which
    must hold the markers."""
    try:
        pieces = WordPieces.from_folder(ensure_path(folder), probe=MARKERS[0])
    except ValueError:
        pieces = None
    if pieces is None or any(pieces.token_id(m) is None for m in MARKERS):
        raise DataFormatError(Errors.E636.format(path=folder))
    return pieces


class ContextEncoder:
    """Encodes mentions in their text into L2-normalised float32 vectors ``[n, dim]``.

    ``encoder``: a PyTorch :class:`~spacy_sapbert.encoding.torch_encoder.Encoder` (the markers are added
    to it), or an int8 :class:`~spacy_sapbert.encoding.onnx_encoder.OnnxEncoder` over a folder this class
    wrote (:meth:`quantize`)."""

    def __init__(self, encoder: Any) -> None:
        quantized = isinstance(encoder, OnnxEncoder) and encoder.precision == "int8"
        if not (isinstance(encoder, Encoder) or quantized):
            raise ConfigError(Errors.E600.format(what=repr(encoder)[:200]))
        if encoder.max_length < 6:
            raise ConfigError(Errors.E601.format(minimum=6, value=encoder.max_length))
        if quantized:
            self.tokenizer = _marked_tokenizer(encoder.folder)
        else:
            add_markers(encoder)
            self.tokenizer = encoder.tokenizer
        self.encoder = encoder
        self.quantized = quantized
        self.fingerprint, self.dim = encoder.fingerprint, encoder.dim
        self.pooling, self.max_length = encoder.pooling, encoder.max_length

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def load(cls, name_or_path: str, *, pooling: str = "mean", max_length: int = DEFAULT_CONTEXT_LENGTH,
             device: str = "auto", precision: str = "auto") -> "ContextEncoder":
        """A context encoder from a Hugging Face model folder (the name encoder's, typically)."""
        if not isinstance(max_length, int) or max_length < 6:
            raise ConfigError(Errors.E601.format(minimum=6, value=max_length))
        return cls(Encoder.load(name_or_path, pooling=pooling, max_length=max_length, device=device,
                                precision=precision, cache_size=0))

    @classmethod
    def from_disk(cls, path: PathLike, *, device: str = "auto", precision: str = "auto",
                  quantized: bool = False) -> "ContextEncoder":
        """A saved context encoder; ``quantized``: its int8 ONNX Runtime copy (CPU; ``device`` and
        ``precision`` do not apply)."""
        path = ensure_path(path)
        if not path.is_dir():
            raise MissingInputError(Errors.E001.format(what="Context encoder folder", path=path,
                                                       hint="it is written by build-prototypes."))
        if quantized:
            return cls(OnnxEncoder.from_disk(path, cache_size=0, quantized=True))
        return cls(Encoder.from_disk(path, device=device, precision=precision, cache_size=0))

    def quantize(self, folder: PathLike) -> "ContextEncoder":
        """This encoder as an int8 ONNX Runtime one, written to ``folder`` (the weights, an ONNX export and
        its int8 copy): :func:`~spacy_sapbert.encoding.onnx_encoder.quantize_export` with the recipe ``dynamic``
        (per-tensor, every node; the one the context benchmarks measured), not the name encoder's default."""
        if self.quantized:
            return self
        return ContextEncoder(quantized_copy(self.encoder, folder, cache_size=0, recipe=LEGACY_RECIPE))

    def to_disk(self, path: PathLike) -> None:
        self.encoder.to_disk(path)

    def settings(self) -> dict:
        """The encoder's settings (as its store records them); ``quantized: true`` for the int8 one."""
        settings = CachedEncoder.settings(self.encoder)
        return {**settings, "quantized": True} if self.quantized else settings

    # ---- encoding -----------------------------------------------------------------------
    def token_rows(self, mentions: Sequence[MentionInText]) -> List[List[int]]:
        """Word-piece ids per mention, special tokens and markers included, at most ``max_length``."""
        return context_token_rows(self.tokenizer, mentions, self.max_length)

    def encode(self, mentions: Sequence[MentionInText], *, batch_size: int = 64,
               show_progress: bool = False) -> numpy.ndarray:
        """Vectors of ``mentions`` (``(text, start, end)``), in order; batched by length."""
        if batch_size < 1:
            raise ConfigError(Errors.E105.format(value=batch_size))
        if not len(mentions):
            return numpy.zeros((0, self.dim), dtype=numpy.float32)
        rows = self.token_rows(mentions)
        self.encoder.check_fork()  # either runtime: one thread in a process forked after it ran
        return self.encoder.encode_rows(rows, batch_size, show_progress)


__all__ = ["ContextEncoder", "MARKERS", "DEFAULT_CONTEXT_LENGTH", "MentionInText", "add_markers",
           "split_budget", "check_mention", "context_token_rows"]
