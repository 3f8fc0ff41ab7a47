"""Pre-tokenised names of a pair set: token ids computed once, memory-mapped at training time.

Tokenising a UMLS-sized pair set on the fly costs CPU at every step; at GPU speed the tokenizer becomes
the bottleneck. :func:`write_pair_tokens` runs the fast tokenizer once, in batches, over every text a
pair can point at (the KB's name rows, then the pair set's extra texts) and writes them beside the
pairs, in ``PAIRS/tokens/``:

- ``ids.bin``: little-endian int32 token ids of all texts, one after the other (special tokens included,
  truncated to ``max_length``: exactly what ``tokenizer(text, max_length=..., truncation=True)`` gives);
- ``offsets.bin``: little-endian int64, ``n_texts + 1`` offsets into ``ids.bin`` (text ``i`` is
  ``ids[offsets[i]:offsets[i + 1]]``);
- ``meta.json``, written last: the tokenizer's fingerprint, ``max_length``, the KB checksum and counts.

:class:`TokenTable` memory-maps the two files and refuses a table made with another tokenizer or
max_length (E218), for another pair set or KB (E219) or damaged (E220).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import numpy as np

from ..errors import ConfigError, DataFormatError, Errors, IncompatibleError, MissingInputError
from ..base.util import atomic_dir, get_logger
from .pairs import PairSet

logger = get_logger("training.tokens")

TOKENS_DIR = "tokens"
IDS_FILE = "ids.bin"
OFFSETS_FILE = "offsets.bin"
META_FILE = "meta.json"
FORMAT_VERSION = 1


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A hash of what decides the token ids: a fast tokenizer's full definition (vocabulary, normaliser,
    pre-tokeniser, post-processor; not its current truncation/padding state), else the class, the
    vocabulary and the lower-casing flag."""
    h = hashlib.sha256()
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        h.update(json.dumps(spec, sort_keys=True).encode("utf8"))
    else:
        h.update(type(tokenizer).__name__.encode("utf8"))
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode("utf8"))
        h.update(repr(getattr(tokenizer, "do_lower_case", None)).encode("utf8"))
    return h.hexdigest()[:32]


def _texts(pairs: PairSet, kb: Any, batch_size: int) -> Iterator[List[str]]:
    """All texts a pair can point at, in text-id order, ``batch_size`` at a time."""
    names = kb.names
    n = len(names)
    for start in range(0, n, batch_size):
        yield [names[i] for i in range(start, min(n, start + batch_size))]
    for start in range(0, len(pairs.texts), batch_size):
        yield pairs.texts[start : start + batch_size]


def write_pair_tokens(pairs: PairSet, kb: Any, tokenizer: Any, max_length: int, *, batch_size: int = 1024,
                      overwrite: bool = False, show_progress: bool = False) -> "TokenTable":
    """Tokenise every text of ``pairs`` once into ``pairs.path / "tokens"`` and return the table."""
    from tqdm import tqdm

    if max_length < 2 or batch_size < 1:
        bad = ("max_length", max_length) if max_length < 2 else ("batch_size", batch_size)
        raise ConfigError(Errors.E012.format(option=bad[0], value=bad[1], why="must be a positive number (max_length >= 2)"))
    pairs.check_kb(kb)
    n_texts = int(pairs.meta["n_kb_names"]) + len(pairs.texts)
    if len(kb.names) != int(pairs.meta["n_kb_names"]):
        raise IncompatibleError(Errors.E219.format(path=pairs.path, what="the KB's name count differs from the pairs'"))
    offsets = np.zeros(n_texts + 1, dtype="<i8")
    done = 0
    with atomic_dir(pairs.path / TOKENS_DIR, overwrite=overwrite) as tmp:
        with open(tmp / IDS_FILE, "wb") as fh, tqdm(total=n_texts, desc="tokenise", unit="name",
                                                     disable=not show_progress) as bar:
            for batch in _texts(pairs, kb, batch_size):
                rows = tokenizer(batch, max_length=max_length, truncation=True, add_special_tokens=True,
                                 return_attention_mask=False, return_token_type_ids=False)["input_ids"]
                lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
                flat = np.fromiter((t for r in rows for t in r), dtype="<i4", count=int(lengths.sum()))
                fh.write(flat.tobytes())
                offsets[done + 1 : done + 1 + len(rows)] = offsets[done] + np.cumsum(lengths)
                done += len(rows)
                bar.update(len(rows))
        offsets.tofile(tmp / OFFSETS_FILE)
        meta = {"format": FORMAT_VERSION, "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
                "max_length": int(max_length), "kb_checksum": pairs.meta.get("kb_checksum"),
                "n_kb_names": int(pairs.meta["n_kb_names"]), "n_texts": n_texts, "n_tokens": int(offsets[-1])}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf8")
    logger.info("%d texts (%d tokens) pre-tokenised into %s", n_texts, int(offsets[-1]), pairs.path / TOKENS_DIR)
    return TokenTable(pairs, tokenizer, max_length)


class TokenTable:
    """The memory-mapped token ids of a pair set's texts, checked against ``tokenizer`` and ``max_length``."""

    def __init__(self, pairs: PairSet, tokenizer: Any, max_length: int) -> None:
        self.path = pairs.path / TOKENS_DIR
        meta_path = self.path / META_FILE
        if not meta_path.is_file():
            raise MissingInputError(Errors.E001.format(what="Pre-tokenised names", path=self.path,
                                                       hint="write them with write_pair_tokens(pairs, kb, tokenizer, max_length)."))
        try:
            self.meta: Dict[str, Any] = json.loads(meta_path.read_text(encoding="utf8"))
            n_texts, n_tokens = int(self.meta["n_texts"]), int(self.meta["n_tokens"])
        except (ValueError, KeyError, TypeError) as err:
            raise DataFormatError(Errors.E220.format(path=self.path, what=f"meta.json: {err}")) from None
        ours = tokenizer_fingerprint(tokenizer)
        if self.meta.get("tokenizer_fingerprint") != ours or self.meta.get("max_length") != max_length:
            raise IncompatibleError(Errors.E218.format(
                path=self.path, what=f"tokenizer {self.meta.get('tokenizer_fingerprint')} max_length "
                f"{self.meta.get('max_length')}; this run: tokenizer {ours} max_length {max_length}"))
        expected = int(pairs.meta["n_kb_names"]) + len(pairs.texts)
        if self.meta.get("kb_checksum") != pairs.meta.get("kb_checksum") or n_texts != expected:
            raise IncompatibleError(Errors.E219.format(
                path=self.path, what=f"KB {self.meta.get('kb_checksum')}, {n_texts} texts; the pair set: KB "
                f"{pairs.meta.get('kb_checksum')}, {expected} texts"))
        self.ids = self._map(IDS_FILE, "<i4", n_tokens)
        self.offsets = self._map(OFFSETS_FILE, "<i8", n_texts + 1)
        if n_texts and (int(self.offsets[-1]) != n_tokens or int(self.offsets[0]) != 0):
            raise DataFormatError(Errors.E220.format(path=self.path, what="offsets.bin does not match ids.bin"))

    def _map(self, name: str, dtype: str, count: int) -> np.ndarray:
        path = self.path / name
        size = path.stat().st_size if path.is_file() else -1
        if size != count * np.dtype(dtype).itemsize:
            raise DataFormatError(Errors.E220.format(path=self.path, what=f"{name}: {size} bytes, expected "
                                                     f"{count * np.dtype(dtype).itemsize}"))
        if count == 0:
            return np.zeros(0, dtype=dtype)
        return np.memmap(path, dtype=dtype, mode="r", shape=(count,))

    def __len__(self) -> int:
        return int(self.meta["n_texts"])

    def flat(self, text_ids: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids, lengths)``: the token ids of ``text_ids`` one after the other (int32) and their lengths,
        gathered with a few vectorised reads (no Python object per token)."""
        rows = np.asarray(text_ids, dtype=np.int64)
        starts = np.asarray(self.offsets[rows])
        lengths = np.asarray(self.offsets[rows + 1]) - starts
        # position k of the output reads ids[starts[row of k] + (k - first output position of that row)]
        begin = np.cumsum(lengths) - lengths
        index = np.repeat(starts - begin, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
        return np.asarray(self.ids[index]), lengths

    def rows(self, text_ids: Sequence[int]) -> List[List[int]]:
        """Token ids of ``text_ids``, one list per text (what the tokenizer returns as ``input_ids``)."""
        flat, lengths = self.flat(text_ids)
        return [part.tolist() for part in np.split(flat, np.cumsum(lengths)[:-1])] if len(lengths) else []


def load_or_write_tokens(pairs: PairSet, kb: Any, tokenizer: Any, max_length: int, *,
                         show_progress: bool = False) -> TokenTable:
    """The pair set's token table, written first when there is none (a stale one raises, see TokenTable)."""
    if (pairs.path / TOKENS_DIR / META_FILE).is_file():
        return TokenTable(pairs, tokenizer, max_length)
    return write_pair_tokens(pairs, kb, tokenizer, max_length, overwrite=True, show_progress=show_progress)


__all__ = ["TokenTable", "write_pair_tokens", "load_or_write_tokens", "tokenizer_fingerprint", "TOKENS_DIR"]
