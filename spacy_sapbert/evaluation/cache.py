"""The evaluation's vector cache: name vectors of one encoder kept on disk, so that later runs, and
back-off runs that add a few names, encode only what is new.

Layout: ``CACHE_DIR/<encoder key>/<names key>.npz``, the encoder key a hash of the encoder's
fingerprint, pooling and max_length, the names key a hash of the (sorted, distinct) names one call
encoded. One ``.npz`` file (written atomically; no pickle) holds ``names``, ``vectors`` and a
``checksum`` (sha256 of both), so a file is never half of one run and half of another, and runs with
other names write other files instead of overwriting each other. On open, every file of the encoder
is read; one that is damaged, whose names and vectors disagree or whose checksum differs is skipped
with warning W552 (its vectors are computed again) instead of giving wrong vectors.
"""
from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np

from ..errors import Warnings
from ..base.outputs import check_folder_path
from ..base.util import PathLike, atomic_write, ensure_path


def encoder_key(encoder) -> str:
    """Hash of what decides an encoder's vectors: fingerprint, pooling, max_length, and the int8 copy of the
    weights (an int8 encoder has its float32 weights' fingerprint but other vectors)."""
    raw = f"{encoder.fingerprint}|{encoder.pooling}|{encoder.max_length}"
    if getattr(encoder, "precision", None) == "int8":
        raw += "|int8"
    return hashlib.sha1(raw.encode()).hexdigest()[:16]


def _names_key(names: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode("utf8", "surrogatepass") + b"\n")
    return digest.hexdigest()[:24]


def _checksum(names: np.ndarray, vectors: np.ndarray) -> str:
    digest = hashlib.sha256()
    digest.update("\n".join(names.tolist()).encode("utf8", "surrogatepass"))
    digest.update(f"|{vectors.shape}|{vectors.dtype}|".encode("ascii"))
    digest.update(np.ascontiguousarray(vectors).tobytes())
    return digest.hexdigest()


class VectorCache:
    """Name → vector for one encoder (see the module doc); ``folder=None`` keeps nothing on disk."""

    def __init__(self, folder: Optional[PathLike], key: str, *, dim: Optional[int] = None) -> None:
        self.folder = ensure_path(folder) / key if folder is not None else None
        if self.folder is not None:  # a cache_dir that is (or lies below) a file: E502 / E505 now, not when saving
            check_folder_path(self.folder)
        self.dim = dim
        self._vectors: Dict[str, np.ndarray] = {}
        if self.folder is not None and self.folder.is_dir():
            for path in sorted(self.folder.glob("*.npz")):
                self._read(path)

    def _read(self, path: Path) -> None:
        try:
            with path.open("rb") as fh, np.load(fh, allow_pickle=False) as data:
                names, vectors, checksum = data["names"], data["vectors"], str(data["checksum"])
            why = ""
            if names.ndim != 1 or vectors.ndim != 2 or len(names) != len(vectors):
                why = f"{len(names)} names but {len(vectors)} vectors"
            elif self.dim is not None and vectors.shape[1] != self.dim:
                why = f"vectors of dimension {vectors.shape[1]}, the encoder's is {self.dim}"
            elif _checksum(names, vectors) != checksum:
                why = "the checksum of names and vectors differs"
        except Exception as err:  # zipfile, numpy and KeyError for a damaged or foreign file
            why = f"unreadable ({type(err).__name__})"
        if why:
            warnings.warn(Warnings.W552.format(path=path, why=why))
            return
        self._vectors.update(zip(names.tolist(), vectors.astype(np.float32)))

    def get(self, encoder, texts: Sequence[str], *, batch_size: int, show_progress: bool) -> np.ndarray:
        """Vectors of ``texts`` (rows in order); names not cached are encoded and the call's names saved."""
        todo = sorted({t for t in texts if t not in self._vectors})
        if todo:
            vecs = encoder.encode(todo, batch_size=batch_size, show_progress=show_progress)
            self._vectors.update(zip(todo, vecs))
            self._save(sorted(set(texts)))
        if not texts:
            return np.zeros((0, encoder.dim), np.float32)
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)

    def _save(self, names: Sequence[str]) -> None:
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        name_array = np.array(names, dtype=str)
        vectors = np.stack([self._vectors[n] for n in names]).astype(np.float32)
        with atomic_write(self.folder / f"{_names_key(names)}.npz", "wb", encoding=None) as fh:
            np.savez(fh, names=name_array, vectors=vectors, checksum=np.array(_checksum(name_array, vectors)))


__all__ = ["VectorCache", "encoder_key"]
