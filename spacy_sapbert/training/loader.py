"""From pair rows to model inputs: token ids (tokenised on the fly or read from a pre-tokenised table),
length-sorted padded sub-batches, and a torch ``Dataset`` of whole steps for a ``DataLoader`` with workers.

Both token sources give the same ids (the table stores exactly what the tokenizer returns), so a run gives
the same batches, and the same model, whichever it uses; the table only removes the tokenizer's CPU cost.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Sequence, Tuple

import numpy as np

from .batching import EpochBatches
from .pairs import PairSet
from .tokens import TOKENS_DIR, TokenTable, write_pair_tokens

if TYPE_CHECKING:  # for annotations only
    import torch

Part = Tuple["torch.Tensor", "torch.Tensor"]


class LiveTokens:
    """Token ids made on demand with the tokenizer (today's path; no file needed)."""

    def __init__(self, pairs: PairSet, kb: Any, tokenizer: Any, max_length: int) -> None:
        self.pairs, self.kb, self.tokenizer, self.max_length = pairs, kb, tokenizer, max_length

    def flat(self, text_ids: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
        texts = [self.pairs.text(self.kb, int(i)) for i in text_ids]
        rows = self.tokenizer(texts, max_length=self.max_length, truncation=True)["input_ids"] if texts else []
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        return np.fromiter((t for r in rows for t in r), dtype=np.int32, count=int(lengths.sum())), lengths


def token_source(pairs: PairSet, kb: Any, tokenizer: Any, max_length: int, *, pretokenize: bool, is_main: bool,
                 wait: Callable[[], None]) -> Any:
    """With ``pretokenize``: the pair set's ``TokenTable`` (written by the main process when missing, the
    others ``wait``; refused when made with another tokenizer, max_length or KB); else ``LiveTokens``."""
    if not pretokenize:
        return LiveTokens(pairs, kb, tokenizer, max_length)
    if is_main and not (pairs.path / TOKENS_DIR).is_dir():
        write_pair_tokens(pairs, kb, tokenizer, max_length, show_progress=True)
    wait()
    return TokenTable(pairs, tokenizer, max_length)


def rank_share(rows: np.ndarray, world: int, rank: int) -> Tuple[np.ndarray, np.ndarray]:
    """``(text_ids, labels)``: this process's texts (its share of the pair ``rows``: all first names, then
    all second names) and the labels of the global batch in the order ``gather_with_grad`` concatenates
    rows. A short last batch that does not split evenly loses its remainder."""
    share = len(rows) // world
    labels, mine = [], rows[:0]
    for r in range(world):
        part = rows[r * share : (r + 1) * share]
        labels.append(np.concatenate([part[:, 2], part[:, 2]]))
        if r == rank:
            mine = part
    return np.concatenate([mine[:, 0], mine[:, 1]]).astype(np.int64), np.concatenate(labels)


def sorted_padded(flat: np.ndarray, lengths: np.ndarray, pad_id: int) -> Tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]:
    """``(ids, lengths, inverse)``: token ids given as ``(flat, lengths)`` sorted by length (ties by position)
    in one ``[names, longest]`` long tensor padded with ``pad_id``, their lengths, and ``inverse`` (row ``i``
    of the input is row ``inverse[i]`` of ``ids``). Vectorised; three tensors, cheap to send between processes."""
    import torch  # lazy: torch

    n = len(lengths)
    order = np.argsort(lengths, kind="stable")
    lens = lengths[order]
    width = int(lens.max()) if n else 0
    mask = np.arange(width)[None, :] < lens[:, None]
    starts = (np.cumsum(lengths) - lengths)[order]
    ids = np.full((n, width), pad_id, dtype=np.int64)
    ids[mask] = flat[np.repeat(starts, lens) + (np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens))]
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.arange(n)
    return torch.from_numpy(ids), torch.from_numpy(lens.astype(np.int64)), torch.from_numpy(inverse)


def cut_parts(ids: "torch.Tensor", lengths: "torch.Tensor", size: int) -> List[Part]:
    """``(input_ids, attention_mask)`` parts of at most ``size`` rows (0: one part) of ``sorted_padded``'s
    ``ids``, each cut to its own longest name."""
    import torch  # lazy: torch

    size = size or max(len(lengths), 1)
    parts: List[Part] = []
    for first in range(0, len(lengths), size):
        lens = lengths[first : first + size]
        width = int(lens.max())
        mask = (torch.arange(width)[None, :] < lens[:, None]).long()
        parts.append((ids[first : first + size, :width], mask))
    return parts


def padded_parts(flat: np.ndarray, lengths: np.ndarray, size: int, pad_id: int) -> Tuple[List[Part], "torch.Tensor"]:
    """``forward.sub_batches`` for token ids given as ``(flat, lengths)``: names sorted by length (ties by
    position), cut into parts of ``size`` (0: one part), each padded to its longest name; CPU tensors
    ``(parts, inverse)``."""
    ids, lens, inverse = sorted_padded(flat, lengths, pad_id)
    return cut_parts(ids, lens, size), inverse


class StepInputs:
    """A map-style torch ``Dataset`` (``DataLoader(StepInputs(...), batch_size=None, num_workers=N)``): item
    ``k`` holds the inputs of global step ``first_step + k`` of ``batches`` for this process's share of the
    batch: ``(ids, lengths, inverse, labels)`` as ``sorted_padded`` and ``rank_share`` give them (four
    tensors, so that a worker hands a step over cheaply; ``cut_parts`` makes the sub-batches)."""

    def __init__(self, pairs: PairSet, batches: EpochBatches, tokens: Any, *, first_step: int, n_steps: int,
                 pad_id: int, world: int = 1, rank: int = 0) -> None:
        self.pairs, self.batches, self.tokens = pairs, batches, tokens
        self.first_step, self.n_steps = first_step, n_steps
        self.pad_id, self.world, self.rank = pad_id, world, rank

    def __len__(self) -> int:
        return self.n_steps

    def __getitem__(self, k: int) -> Tuple["torch.Tensor", "torch.Tensor", "torch.Tensor", "torch.Tensor"]:
        import torch  # lazy: torch

        if not 0 <= k < self.n_steps:
            raise IndexError(k)
        epoch, index = divmod(self.first_step + k, self.batches.n_batches())
        rows = np.asarray(self.pairs.pairs[self.batches.batch(epoch, index)])
        text_ids, labels = rank_share(rows, self.world, self.rank)
        return (*sorted_padded(*self.tokens.flat(text_ids), self.pad_id), torch.from_numpy(labels))

    def iterate(self, workers: int, *, pin_memory: bool = False) -> Iterator[Any]:
        """The items in order, made ahead by a ``DataLoader`` with ``workers`` processes."""
        from torch.utils.data import DataLoader  # lazy: torch

        return iter(DataLoader(self, batch_size=None, shuffle=False, num_workers=workers,  # type: ignore[arg-type]
                               prefetch_factor=4 if workers else None, pin_memory=pin_memory))


__all__ = ["LiveTokens", "StepInputs", "cut_parts", "padded_parts", "rank_share", "sorted_padded", "token_source"]
