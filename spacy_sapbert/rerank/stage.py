"""The re-ranker as the linker holds it: loaded from a re-ranker folder, checked against the linker's KB and name
encoder, applied to the linker's candidate lists, and saved with the pipeline (``reranker/``: only the files the
folder's ``sapbert_reranker.json`` records, so nothing else travels)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, List, Sequence, Tuple

import numpy

from ..base.util import PathLike, atomic_dir, ensure_path
from .apply import check_compatible, rerank
from .model import META_FILE, load_reranker, read_meta, recorded_files

Ranked = List[Tuple[str, float]]


class RerankStage:
    """A loaded re-ranker and the folder it came from."""

    def __init__(self, folder: PathLike, *, device: str = "cpu") -> None:
        self.folder = ensure_path(folder)
        self.meta = read_meta(self.folder)
        self.model = load_reranker(self.folder, device="cpu" if device == "auto" else device)

    def check(self, kb: Any, encoder: Any, *, owner: str = "the linker's") -> None:
        """E811 when it was trained for another KB or another name encoder than ``owner``'s (the message's words
        for whose they are)."""
        check_compatible(self.meta, kb_checksum=kb.checksum, encoder_fingerprint=encoder.fingerprint, path=self.folder,
                         owner=owner)

    def apply(self, index: Any, texts: Sequence[str], vectors: numpy.ndarray, ranked: Sequence[Ranked], *, k: int,
              margin: float, dense_weight: float, batch_size: int) -> List[Ranked]:
        """The lists with the close calls re-ranked (:func:`~spacy_sapbert.rerank.apply.rerank`)."""
        return rerank(self.model, index, list(texts), vectors, ranked, k=k, margin=margin, dense_weight=dense_weight,
                      batch_size=batch_size)

    def to_disk(self, path: PathLike) -> None:
        """Copy the recorded files into ``path`` (atomically)."""
        names = sorted(set(recorded_files(self.meta)) | {META_FILE})
        with atomic_dir(ensure_path(path), overwrite=True) as tmp:
            for name in names:
                if Path(name).name == name:  # read_meta refuses other records; never follow one out of the folder
                    shutil.copy2(self.folder / name, Path(tmp) / name)


__all__ = ["RerankStage"]
