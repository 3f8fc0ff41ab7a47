"""A saved model folder's tokenizer as linking needs it, read from ``tokenizer.json`` by the ``tokenizers`` library,
so that a runtime-only environment (no transformers) can run every saved ONNX model: the name encoder
(:class:`~spacy_sapbert.encoding.onnx_encoder.OnnxEncoder`), the context encoder (word pieces around ``<ENT>``
markers) and the re-ranker (padded (mention, name) pair batches). The ids are the ones the folder's Hugging Face
fast tokenizer gives (tests/test_tokenizer_file.py compares them); a folder without ``tokenizer.json`` (a slow
tokenizer only) goes through transformers, as before.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy

from ..base.extras import missing_message
from ..errors import MissingExtraError

TOKENIZER_FILE = "tokenizer.json"


def has_tokenizer_file(folder: Path) -> bool:
    return (folder / TOKENIZER_FILE).is_file()


def _read(folder: Path) -> Any:
    """``tokenizer.json`` with neither truncation nor padding (each user sets its own)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def pad_token_id(folder: Path) -> int:
    """The id that pads a batch, as the Hugging Face tokenizer pads it (``tokenizer.pad_token_id``): ``[PAD]`` = 0
    for BERT, ``<pad>`` = 1 for XLM-R, whose position ids skip it. Read from ``tokenizer_config.json`` and
    ``tokenizer.json`` without transformers; 0 when the folder does not say."""
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf8"))
        pad = config.get("pad_token")
        pad = pad.get("content") if isinstance(pad, dict) else pad
        vocab_entries = config.get("added_tokens_decoder") or {}
        for key, entry in vocab_entries.items():
            if isinstance(entry, dict) and entry.get("content") == pad:
                return int(key)
    except (OSError, ValueError, AttributeError):
        return 0
    if pad and has_tokenizer_file(folder):
        found = _read(folder).token_to_id(str(pad))
        return int(found) if found is not None else 0
    return 0


def _hf_tokenizer(folder: Path) -> Any:
    """The folder's Hugging Face tokenizer, for a folder without ``tokenizer.json``: needs transformers (E820, naming
    the [train] extra, where it is not installed)."""
    try:
        from transformers import AutoTokenizer  # lazy: transformers
    except ImportError as err:
        raise MissingExtraError(missing_message(f"Reading the tokenizer of {folder} (it has no {TOKENIZER_FILE})",
                                                err.name or "transformers", str(err))) from None
    return AutoTokenizer.from_pretrained(str(folder))


def truncating_rows(folder: Path, max_length: int) -> Any:
    """``texts -> token id rows``: special tokens added, truncated to ``max_length``, not padded."""
    if has_tokenizer_file(folder):
        tokenizer = _read(folder)
        tokenizer.enable_truncation(max_length)
        return lambda texts: [e.ids for e in tokenizer.encode_batch(list(texts))]
    slow = _hf_tokenizer(folder)
    return lambda texts: slow(list(texts), truncation=True, max_length=max_length, padding=False,
                              return_attention_mask=False)["input_ids"]


class WordPieces:
    """What the context encoder needs of a tokenizer: word pieces of texts without special tokens, a token's id,
    and the special tokens of one sequence around a body of ids. Made by :meth:`from_folder` (``tokenizer.json``)
    or :meth:`of` (a Hugging Face tokenizer object, as training holds it)."""

    def __init__(self, pieces: Any, token_id: Any, prefix: Sequence[int], suffix: Sequence[int]) -> None:
        self._pieces, self._token_id = pieces, token_id
        self.prefix, self.suffix = list(prefix), list(suffix)

    @property
    def n_special(self) -> int:
        """Special tokens added to one sequence."""
        return len(self.prefix) + len(self.suffix)

    def pieces(self, texts: Sequence[str]) -> List[List[int]]:
        return self._pieces(list(texts)) if texts else []

    def token_id(self, token: str) -> Optional[int]:
        return self._token_id(token)

    def wrap(self, body: Sequence[int]) -> List[int]:
        return self.prefix + list(body) + self.suffix

    @classmethod
    def of(cls, tokenizer: Any) -> "WordPieces":
        """A Hugging Face tokenizer (slow or fast)."""
        probe = tokenizer.build_inputs_with_special_tokens([-1])
        at = probe.index(-1)

        def token_id(token: str) -> Optional[int]:  # not get_vocab(): it copies the vocabulary (~25 ms) each call
            found = tokenizer.convert_tokens_to_ids(token)
            if found is None or (found == tokenizer.unk_token_id and token != tokenizer.unk_token):
                return None
            return int(found)

        return cls(lambda texts: tokenizer(texts, add_special_tokens=False, return_attention_mask=False)["input_ids"],
                   token_id, probe[:at], probe[at + 1:])

    @classmethod
    def from_folder(cls, folder: Path, *, probe: str) -> "WordPieces":
        """The folder's ``tokenizer.json`` (through transformers when it has none). ``probe``: a special token the
        vocabulary holds (an ``<ENT>`` marker): encoding it alone shows the special tokens around a sequence.
        ``ValueError`` when the vocabulary does not hold it."""
        if not has_tokenizer_file(folder):
            found = cls.of(_hf_tokenizer(folder))
            if found.token_id(probe) is None:
                raise ValueError(f"no token {probe!r}")
            return found
        tokenizer = _read(folder)
        probe_id = tokenizer.token_to_id(probe)
        if probe_id is None:
            raise ValueError(f"no token {probe!r}")
        ids = tokenizer.encode(probe).ids
        at = ids.index(probe_id)

        def token_id(token: str) -> Optional[int]:
            found = tokenizer.token_to_id(token)
            return None if found is None else int(found)

        return cls(lambda texts: [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)],
                   token_id, ids[:at], ids[at + 1:])


class PairBatches:
    """``(firsts, seconds) -> model inputs`` of sequence pairs, truncated longest-first to ``max_length`` and padded
    to the longest pair of the batch, as int64 arrays named ``inputs`` (``input_ids``, ``attention_mask``,
    ``token_type_ids``): what ``tokenizer(firsts, seconds, truncation=True, max_length=max_length, padding=True)``
    gives with the folder's Hugging Face tokenizer."""

    def __init__(self, folder: Path, max_length: int, inputs: Sequence[str]) -> None:
        self.inputs = list(inputs)
        self._hf: Any = None
        self._tokenizer: Any = None
        if has_tokenizer_file(folder):
            tokenizer = _read(folder)
            pad = pad_token_id(folder)
            tokenizer.enable_truncation(max_length, strategy="longest_first")
            tokenizer.enable_padding(pad_id=pad, pad_token=tokenizer.id_to_token(pad) or "[PAD]")
            self._tokenizer = tokenizer
        else:
            self._hf = _hf_tokenizer(folder)
        self.max_length = int(max_length)

    def __call__(self, firsts: Sequence[str], seconds: Sequence[str]) -> Dict[str, numpy.ndarray]:
        if self._hf is not None:
            encoded = self._hf(list(firsts), list(seconds), truncation=True, max_length=self.max_length, padding=True,
                               return_tensors="np")
            return {key: numpy.asarray(encoded[key], dtype=numpy.int64) for key in self.inputs}
        found = self._tokenizer.encode_batch(list(zip(firsts, seconds)))
        fields = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
        return {key: numpy.asarray([getattr(e, fields[key]) for e in found], dtype=numpy.int64) for key in self.inputs}


__all__ = ["TOKENIZER_FILE", "has_tokenizer_file", "pad_token_id", "truncating_rows", "WordPieces", "PairBatches"]
