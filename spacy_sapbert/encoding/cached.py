"""What every encoder runtime shares (:class:`CachedEncoder`): the settings an index checks, de-duplication of the
strings of a call, the bounded LRU cache of strings seen before, and length-sorted batches of token-id rows.

:class:`~spacy_sapbert.encoding.torch_encoder.Encoder` (PyTorch) and
:class:`~spacy_sapbert.encoding.onnx_encoder.OnnxEncoder` (ONNX Runtime) subclass it and implement the three
runtime methods (:meth:`CachedEncoder._token_rows`, ``_inference``, ``_encode_batch``). Nothing here imports torch.
"""
from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import Any, ContextManager, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy

from ..errors import DataFormatError, Errors, ConfigError


def length_order(rows: Sequence[Sequence[int]]) -> List[int]:
    """Indices of token-id ``rows`` sorted by length (ties by position): batches of similar length
    need little padding."""
    return sorted(range(len(rows)), key=lambda i: (len(rows[i]), i))


def token_budget_batches(rows: Sequence[Sequence[int]], order: Sequence[int], batch_size: int,
                         batch_tokens: Optional[int]) -> Iterator[List[int]]:
    """Consecutive runs of ``order`` (indices of ``rows``, shortest first): at most ``batch_size`` rows each and,
    with ``batch_tokens``, at most that many token slots once padded to the batch's longest row (a single row
    longer than the budget still makes a batch of its own)."""
    batch: List[int] = []
    for i in order:
        if batch and (len(batch) >= batch_size
                      or (batch_tokens is not None and (len(batch) + 1) * max(len(rows[i]), 1) > batch_tokens)):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def unique_rows(rows: Sequence[Sequence[int]]) -> Tuple[List[Sequence[int]], Optional[numpy.ndarray]]:
    """``(distinct rows in first-seen order, inverse)``: ``distinct[inverse[i]] == rows[i]``; ``inverse`` is
    None when every row is distinct (nothing to expand)."""
    first: Dict[Tuple[int, ...], int] = {}
    inverse = numpy.empty(len(rows), dtype=numpy.int64)
    unique: List[Sequence[int]] = []
    for i, row in enumerate(rows):
        j = first.setdefault(tuple(row), len(unique))
        if j == len(unique):
            unique.append(row)
        inverse[i] = j
    return unique, (None if len(unique) == len(rows) else inverse)


class CachedEncoder:
    """What every encoder runtime shares: settings, de-duplication and the LRU cache of strings.

    Subclasses set ``pooling``, ``max_length``, ``dim``, ``fingerprint``, ``name``,
    ``cache_size`` and ``_cache`` and implement :meth:`_encode_unique` (unique strings → vectors).
    :class:`Encoder` runs PyTorch; :class:`~spacy_sapbert.encoding.onnx_encoder.OnnxEncoder` runs ONNX Runtime.
    """

    pooling: str
    max_length: int
    dim: int
    fingerprint: str
    name: str
    cache_size: int
    _cache: "OrderedDict[str, numpy.ndarray]"
    # token slots per batch (rows x the longest row), None: only ``batch_size`` bounds a batch. ONNX Runtime's CPU
    # arena grows in powers of two to a call's largest batch, so this bounds its memory (OnnxEncoder's: 768)
    batch_tokens: Optional[int] = None

    def encode(self, texts: Sequence[str], *, batch_size: int = 128, show_progress: bool = False,
               use_cache: bool = True) -> numpy.ndarray:
        """Encode ``texts`` → float32 ``[len(texts), dim]``, rows L2-normalised.

        Inputs longer than ``max_length`` word pieces are truncated (SapBERT is trained on short
        names). Duplicates are encoded once; with ``use_cache`` the cache serves strings seen in
        earlier calls.
        """
        if batch_size < 1:
            raise ConfigError(Errors.E105.format(value=batch_size))
        out = numpy.zeros((len(texts), self.dim), dtype=numpy.float32)
        if not len(texts):
            return out
        positions: Dict[str, List[int]] = {}
        for i, text in enumerate(texts):
            positions.setdefault(text, []).append(i)
        todo: List[str] = []
        for text, rows in positions.items():
            cached = self._cache.get(text) if (use_cache and self.cache_size) else None
            if cached is not None:
                self._cache.move_to_end(text)
                out[rows] = cached
            else:
                todo.append(text)
        if todo:
            vectors = self._encode_unique(todo, batch_size, show_progress)
            bad = int(numpy.count_nonzero(~numpy.isfinite(vectors).all(axis=1)))
            if bad:  # damaged weights or model.onnx: never hand NaN scores to the index
                raise DataFormatError(Errors.E553.format(what=type(self).__name__, n=bad, total=len(todo),
                                                         path=getattr(self, "folder", None) or self.name))
            for text, vector in zip(todo, vectors):
                out[positions[text]] = vector
                if use_cache and self.cache_size:
                    self._remember(text, vector)
        return out

    def clear_cache(self) -> None:
        self._cache.clear()

    def _remember(self, text: str, vector: numpy.ndarray) -> None:
        self._cache[text] = vector
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _encode_unique(self, texts: List[str], batch_size: int, show_progress: bool) -> numpy.ndarray:
        """Vectors of distinct ``texts``: tokenised once, run in length-sorted batches."""
        return self.encode_rows(self._token_rows(texts), batch_size, show_progress)

    def encode_rows(self, encoded: List[List[int]], batch_size: int, show_progress: bool = False) -> numpy.ndarray:
        """Vectors of token-id rows (special tokens included), run in length-sorted batches (each padded to
        its longest row; :func:`token_budget_batches`). Identical rows (strings the tokenizer folds together: case
        and accents for an uncased vocabulary, spacing around punctuation) are run once and their vector copied to
        each."""
        unique, inverse = unique_rows(encoded)
        order = length_order(unique)
        result = numpy.empty((len(unique), self.dim), dtype=numpy.float32)
        bar = _progress_bar(len(encoded), show_progress)
        try:
            with self._inference():
                for idx in token_budget_batches(unique, order, batch_size, self.batch_tokens):
                    result[idx] = self._encode_batch([unique[i] for i in idx])
                    if bar is not None:
                        bar.update(len(idx))
        finally:
            if bar is not None:
                bar.update(len(encoded) - len(unique))
                bar.close()
        return result if inverse is None else result[inverse]

    # what a runtime implements
    def _token_rows(self, texts: List[str]) -> List[List[int]]:
        """Token ids per text, special tokens added, truncated to ``max_length``."""
        raise NotImplementedError

    def _inference(self) -> ContextManager[Any]:
        """The context the batches of one call run in."""
        return contextlib.nullcontext()

    def _encode_batch(self, rows: List[List[int]]) -> numpy.ndarray:
        """L2-normalised float32 vectors ``[len(rows), dim]`` of token-id rows (unpadded)."""
        raise NotImplementedError

    def settings(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "pooling": self.pooling,
            "max_length": self.max_length,
            "dim": self.dim,
            "fingerprint": self.fingerprint,
        }


def _progress_bar(total: int, enabled: bool) -> Any:
    """A tqdm bar over ``total`` names, or None."""
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="encode", unit="name")


__all__ = ["CachedEncoder", "length_order", "token_budget_batches", "unique_rows"]
