"""The prototype store: context vectors of example mentions (and definitions) per concept.

A store folder holds (no pickle anywhere)::

    prototypes_meta.json  format, counts, KB checksum, the context encoder's settings + fingerprint
    vectors.npy           float32 [n, dim], L2-normalised, grouped by concept (memory-mapped at load)
    kinds.npy             int8 [n]: 0 = example mention in context, 1 = definition
    concept_ids.npy       unicode [n_concepts], sorted: the concepts that have prototypes
    offsets.npy           int64 [n_concepts + 1]: rows of concept i are offsets[i]:offsets[i + 1]
    encoder/              the context encoder (a Hugging Face folder with the <ENT>/</ENT> markers)

:meth:`PrototypeStore.similarities` answers "best example similarity and definition similarity of
each candidate concept" for one query vector.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy

from ..about import __version__
from ..errors import DataFormatError, Errors, IncompatibleError
from ..util import PathLike, atomic_dir, atomic_write, ensure_path

META_FILE = "prototypes_meta.json"
ENCODER_DIR = "encoder"
FORMAT = "spacy_sapbert.prototypes"
FORMAT_VERSION = 1
EXAMPLE, DEFINITION = 0, 1
_ARRAYS = ("vectors", "kinds", "concept_ids", "offsets")


def _load(file: Any, *, mmap: bool) -> numpy.ndarray:
    try:
        return numpy.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ValueError:  # an empty array cannot be memory-mapped
        return numpy.load(file, allow_pickle=False)


class PrototypeStore:
    """Prototype vectors grouped by concept; see the module doc for the files."""

    def __init__(self, vectors: numpy.ndarray, kinds: numpy.ndarray, concept_ids: numpy.ndarray,
                 offsets: numpy.ndarray, meta: Dict[str, Any], encoder: Any = None) -> None:
        self.vectors, self.kinds = vectors, kinds
        self.concept_ids, self.offsets = concept_ids, offsets
        self.meta = meta
        self.encoder = encoder
        self._pos = {str(c): i for i, c in enumerate(concept_ids.tolist())}

    @classmethod
    def from_rows(cls, vectors: numpy.ndarray, concepts: Sequence[str], kinds: Sequence[int], *,
                  encoder: Any, kb_checksum: str, extra: Optional[Dict[str, Any]] = None) -> "PrototypeStore":
        """Group prototype rows by concept (stable: rows of one concept keep their order)."""
        concepts = list(concepts)
        order = sorted(range(len(concepts)), key=lambda i: (concepts[i], i))
        ids = sorted(set(concepts))
        counts = numpy.zeros(len(ids) + 1, dtype=numpy.int64)
        pos = {c: i for i, c in enumerate(ids)}
        for c in concepts:
            counts[pos[c] + 1] += 1
        kinds_arr = numpy.asarray(kinds, dtype=numpy.int8)[order] if order else numpy.zeros(0, numpy.int8)
        meta = {
            "format": FORMAT, "version": FORMAT_VERSION, "spacy_sapbert_version": __version__,
            "kb_checksum": kb_checksum, "encoder": encoder.settings(),
            "n_prototypes": len(concepts), "n_concepts": len(ids),
            "n_examples": int((kinds_arr == EXAMPLE).sum()), "n_definitions": int((kinds_arr == DEFINITION).sum()),
            **(extra or {}),
        }
        vecs = numpy.ascontiguousarray(numpy.asarray(vectors, dtype=numpy.float32)[order]) if order \
            else numpy.zeros((0, encoder.dim), numpy.float32)
        return cls(vecs, kinds_arr, numpy.asarray(ids, dtype=str), numpy.cumsum(counts), meta, encoder)

    # ---- queries ------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    def __contains__(self, concept_id: object) -> bool:
        return concept_id in self._pos

    @property
    def dim(self) -> int:
        return int(self.meta["encoder"]["dim"])

    def has_examples(self, concept_id: str) -> bool:
        i = self._pos.get(concept_id)
        return i is not None and bool((self.kinds[self.offsets[i]:self.offsets[i + 1]] == EXAMPLE).any())

    def similarities(self, query: numpy.ndarray, concept_ids: Sequence[str]
                     ) -> Tuple[Dict[str, float], Dict[str, float]]:
        """``(best example similarity, best definition similarity)`` per concept of ``concept_ids``
        that has such prototypes (absent keys: none)."""
        examples: Dict[str, float] = {}
        definitions: Dict[str, float] = {}
        spans = [(c, self._pos[c]) for c in concept_ids if c in self._pos]
        if not spans:
            return examples, definitions
        rows = numpy.concatenate([numpy.arange(self.offsets[i], self.offsets[i + 1]) for _c, i in spans])
        sims = numpy.asarray(self.vectors[rows], dtype=numpy.float32) @ numpy.asarray(query, dtype=numpy.float32)
        kinds = numpy.asarray(self.kinds[rows])
        at = 0
        for cid, i in spans:
            n = int(self.offsets[i + 1] - self.offsets[i])
            s, k = sims[at:at + n], kinds[at:at + n]
            at += n
            if (k == EXAMPLE).any():
                examples[cid] = float(s[k == EXAMPLE].max())
            if (k == DEFINITION).any():
                definitions[cid] = float(s[k == DEFINITION].max())
        return examples, definitions

    # ---- compatibility ------------------------------------------------------------------
    def check_kb(self, kb: Any, *, path: Any = "<memory>") -> None:
        if self.meta.get("kb_checksum") != kb.checksum:
            raise IncompatibleError(Errors.E606.format(path=path, store_value=self.meta.get("kb_checksum"),
                                                       kb_value=kb.checksum))

    def check_encoder(self, encoder: Any, *, path: Any = "<memory>") -> None:
        theirs = self.meta.get("encoder", {})
        for field in ("fingerprint", "dim", "pooling", "max_length"):
            if theirs.get(field) != getattr(encoder, field):
                raise IncompatibleError(Errors.E605.format(path=path, field=field, store_value=theirs.get(field),
                                                           encoder_value=getattr(encoder, field)))

    # ---- serialisation ------------------------------------------------------------------
    def to_disk(self, path: PathLike, *, overwrite: bool = True) -> None:
        """Write the store folder atomically (the encoder included)."""
        path = ensure_path(path)
        with atomic_dir(path, overwrite=overwrite) as tmp:
            for name in _ARRAYS:
                numpy.save(tmp / f"{name}.npy", numpy.asarray(getattr(self, name)), allow_pickle=False)
            if self.encoder is not None:
                self.encoder.to_disk(tmp / ENCODER_DIR)
            with atomic_write(tmp / META_FILE) as fh:
                json.dump(self.meta, fh, indent=2, sort_keys=True)

    @classmethod
    def from_disk(cls, path: PathLike, *, kb: Any = None, device: str = "auto",
                  load_encoder: bool = True) -> "PrototypeStore":
        """Open a store: vectors memory-mapped; the saved encoder loaded and checked against the
        fingerprint the vectors were made with; with ``kb``, the KB checksum is checked."""
        from .encoding import ContextEncoder

        path = ensure_path(path)
        missing = [f for f in (META_FILE, *(f"{name}.npy" for name in _ARRAYS)) if not (path / f).is_file()]
        if missing:
            raise DataFormatError(Errors.E607.format(path=path, why=f"missing: {', '.join(missing)}"))
        try:
            meta = json.loads((path / META_FILE).read_text(encoding="utf8"))
        except ValueError as err:
            raise DataFormatError(Errors.E607.format(path=path, why=f"{META_FILE} is not valid JSON: {err}")) from None
        if not isinstance(meta, dict) or (meta.get("format"), meta.get("version")) != (FORMAT, FORMAT_VERSION):
            raise DataFormatError(Errors.E607.format(path=path, why=f"{META_FILE} is not {FORMAT} v{FORMAT_VERSION}"))
        arrays = {name: _load(path / f"{name}.npy", mmap=name == "vectors") for name in _ARRAYS}
        n = arrays["vectors"].shape[0]
        if len(arrays["kinds"]) != n or int(arrays["offsets"][-1]) != n or n != meta.get("n_prototypes"):
            raise DataFormatError(Errors.E607.format(path=path, why="the arrays disagree with each other or the meta"))
        encoder = ContextEncoder.from_disk(path / ENCODER_DIR, device=device) if load_encoder else None
        store = cls(arrays["vectors"], arrays["kinds"], arrays["concept_ids"], arrays["offsets"], meta, encoder)
        if encoder is not None:
            store.check_encoder(encoder, path=path)
        if kb is not None:
            store.check_kb(kb, path=path)
        return store


__all__ = ["PrototypeStore", "META_FILE", "EXAMPLE", "DEFINITION"]
