"""The re-ranker as the linker holds it: loaded from a re-ranker folder, checked against the linker's KB and name
encoder, applied to the linker's candidate lists, and saved with the pipeline (``reranker/``: only the files the
folder's ``sapbert_reranker.json`` records, so nothing else travels).

The stage remembers the logits of the groups (a mention and the names of its candidates) it scored, in a bounded
LRU cache like the name encoder's: a text written again in a later batch of ``nlp.pipe`` is not scored again.
The int8 graph scores each group as a batch of its own (:func:`~spacy_sapbert.rerank.model.group_batches`), the
float32 graph gives a pair the same logit in any batch (:func:`~spacy_sapbert.rerank.model.length_batches`), so
either way a remembered logit is the one scoring again would give, bit for bit: the cache changes no result,
whatever was linked before.
"""
from __future__ import annotations

import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy

from ..base.util import PathLike, atomic_dir, ensure_path
from .apply import check_compatible, rerank
from .model import DEFAULT_RERANK_PRECISION, META_FILE, load_reranker, read_meta, recorded_files

Ranked = List[Tuple[str, float]]
Group = Tuple[str, Tuple[str, ...], int]  # mention, candidate names, names per batch
# groups whose logits are remembered: a few hundred bytes each (the texts, k float32 logits)
DEFAULT_CACHE_SIZE = 20_000


class RerankStage:
    """A loaded re-ranker, the folder it came from and the cache of the groups it scored (``cache_size`` groups;
    0: no cache); ``precision``: the ONNX graph run on the CPU (the linker's ``reranker_precision``)."""

    def __init__(self, folder: PathLike, *, device: str = "cpu", cache_size: int = DEFAULT_CACHE_SIZE,
                 precision: str = DEFAULT_RERANK_PRECISION) -> None:
        self.folder = ensure_path(folder)
        self.meta = read_meta(self.folder)
        self.precision = precision
        self.model = load_reranker(self.folder, device="cpu" if device == "auto" else device, precision=precision)
        self.cache_size = max(0, int(cache_size))
        self._cache: "OrderedDict[Group, numpy.ndarray]" = OrderedDict()

    def score_groups(self, groups: Sequence[Tuple[str, Sequence[str]]], *, batch_size: int = 64) -> List[numpy.ndarray]:
        """The model's logits of each ``(mention, names)`` group; a group scored before comes from the cache, the
        others are scored together (each still a batch of its own) and remembered. Each array is the caller's own."""
        # a group of more distinct names than batch_size is scored in several batches: which, is part of the key
        keys: List[Group] = [(mention, tuple(names), min(max(1, batch_size), len(set(names))))
                             for mention, names in groups]
        found: Dict[Group, numpy.ndarray] = {}
        for key in keys:
            if key not in found and key in self._cache:
                self._cache.move_to_end(key)
                found[key] = self._cache[key]
        todo = list(dict.fromkeys(key for key in keys if key not in found))
        if todo:
            for key, logits in zip(todo, self.model.score_groups([(m, list(ns)) for m, ns, _ in todo],
                                                                 batch_size=batch_size)):
                found[key] = logits
                if self.cache_size:
                    self._cache[key] = logits
                    if len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        return [found[key].copy() for key in keys]

    def clear_cache(self) -> None:
        """Forget every remembered group (what a timing run does before each pass)."""
        self._cache.clear()

    def check(self, kb: Any, encoder: Any, *, owner: str = "the linker's") -> None:
        """E811 when it was trained for another KB or another name encoder than ``owner``'s (the message's words
        for whose they are)."""
        check_compatible(self.meta, kb_checksum=kb.checksum, encoder_fingerprint=encoder.fingerprint, path=self.folder,
                         owner=owner)

    def apply(self, index: Any, texts: Sequence[str], vectors: numpy.ndarray, ranked: Sequence[Ranked], *, k: int,
              margin: float, dense_weight: float, batch_size: int, skip_names: bool = False,
              window: float = 1.0) -> List[Ranked]:
        """The lists with the close calls re-ranked (:func:`~spacy_sapbert.rerank.apply.rerank`); ``skip_names``: a
        text that is a name of ``index``'s KB keeps its list (the linker's and evaluate's ``reranker_skip_names``);
        ``window``: the candidates read are those within it of the best (``reranker_window``; 1.0: all ``k``)."""
        row_of_name = getattr(index.kb, "row_of_name", None)
        keep = [row_of_name(text) >= 0 for text in texts] if skip_names and row_of_name is not None else None
        return rerank(self, index, list(texts), vectors, ranked, k=k, margin=margin, dense_weight=dense_weight,
                      window=window, batch_size=batch_size, keep=keep)

    def to_disk(self, path: PathLike) -> None:
        """Copy the recorded files into ``path`` (atomically)."""
        names = sorted(set(recorded_files(self.meta)) | {META_FILE})
        with atomic_dir(ensure_path(path), overwrite=True) as tmp:
            for name in names:
                if Path(name).name == name:  # read_meta refuses other records; never follow one out of the folder
                    shutil.copy2(self.folder / name, Path(tmp) / name)


__all__ = ["RerankStage", "DEFAULT_CACHE_SIZE"]
