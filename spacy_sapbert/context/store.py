"""The prototype store: context vectors of example mentions (and definitions) per concept.

A store folder holds (no pickle anywhere)::

    prototypes_meta.json  format, counts, KB checksum, the context encoder's settings + fingerprint, and
                          ``files``: each array file's size and hashes (written last, checked at load)
    vectors.npy           float32 [n, dim], L2-normalised, grouped by concept (memory-mapped at load)
    kinds.npy             int8 [n]: 0 = example mention in context, 1 = definition
    concept_ids.npy       unicode [n_concepts], sorted: the concepts that have prototypes
    offsets.npy           int64 [n_concepts + 1]: rows of concept i are offsets[i]:offsets[i + 1]
    names.npy             optional, float32 [n, name dim]: the *name* encoder's vector of each example's
                          mention text (zeros on definition rows); its settings are ``name_encoder`` in
                          the meta (the linker's encoder must match them)
    encoder/              the context encoder (a Hugging Face folder with the <ENT>/</ENT> markers; with
                          ``quantized`` in the meta's encoder settings also its ONNX export and int8 copy)

:meth:`PrototypeStore.similarities` answers "best example similarity and definition similarity of
each candidate concept" for one context vector; :meth:`PrototypeStore.example_name_similarities`
"best similarity of a mention's name vector to the example mentions' names" (example names: a
concept's train mentions count as its names).

Loading trusts nothing: the array files are checked against their records (sizes and sampled hashes,
E551; a store written before the records existed loads with W554), a pickle-bearing or malformed array
is E558, a sample of rows of ``vectors.npy`` / ``names.npy`` must be unit length (E558), and every
similarity a query computes must lie in [-1, 1] (E556 naming the store, never a link).
"""
from __future__ import annotations

import json
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ..about import __version__
from ..base.integrity import NORM_TOLERANCE, NPY_READ_ERRORS, check_files, file_records, unit_norm_problem
from ..base.util import PathLike, atomic_dir, atomic_write, ensure_path
from ..errors import DataFormatError, Errors, IncompatibleError, IntegrityError, Warnings
from .context_encoder import ContextEncoder

META_FILE = "prototypes_meta.json"
ENCODER_DIR = "encoder"
FORMAT = "spacy_sapbert.prototypes"
FORMAT_VERSION = 1
EXAMPLE, DEFINITION = 0, 1
_ARRAYS = ("vectors", "kinds", "concept_ids", "offsets")
NAMES = "names"  # the optional example-name vectors
_NAME_FIELDS = ("fingerprint", "dim", "pooling", "max_length")


NORM_SAMPLE_ROWS = 1024  # rows of vectors.npy / names.npy whose length is checked at load (all: `verify`)


def _load(file: Any, *, mmap: bool) -> numpy.ndarray:
    try:
        try:
            return numpy.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
        except ValueError:  # an empty array cannot be memory-mapped
            return numpy.load(file, allow_pickle=False)
    except NPY_READ_ERRORS as err:  # a pickle-bearing (object) array, a damaged header
        raise DataFormatError(Errors.E558.format(path=file.parent, why=f"{file.name} cannot be read as a plain "
                                                                         f"array ({err})")) from None


def array_files(meta: Dict[str, Any]) -> List[str]:
    """The array files of a store with ``meta`` (names.npy when it declares example names)."""
    return [f"{name}.npy" for name in _ARRAYS] + ([f"{NAMES}.npy"] if meta.get("name_encoder") else [])


def unit_problem(vectors: numpy.ndarray, kinds: numpy.ndarray, names: Optional[numpy.ndarray], *,
                 sample: Optional[int]) -> Optional[str]:
    """What is wrong with the lengths of the store's rows (None: nothing): ``vectors`` unit, ``names`` unit on
    example rows and zero elsewhere; ``sample`` rows evenly spread, or all (None)."""
    problem = unit_norm_problem(vectors, sample=sample)
    if problem is not None:
        return f"{_ARRAYS[0]}.npy: {problem}"
    if names is not None:
        problem = unit_norm_problem(names, sample=sample, zero_rows=numpy.asarray(kinds) != EXAMPLE)
        if problem is not None:
            return f"{NAMES}.npy: {problem}"
    return None


class PrototypeStore:
    """Prototype vectors grouped by concept; see the module doc for the files."""

    def __init__(self, vectors: numpy.ndarray, kinds: numpy.ndarray, concept_ids: numpy.ndarray,
                 offsets: numpy.ndarray, meta: Dict[str, Any], encoder: Any = None,
                 names: Optional[numpy.ndarray] = None) -> None:
        self.vectors, self.kinds = vectors, kinds
        self.concept_ids, self.offsets = concept_ids, offsets
        self.meta = meta
        self.encoder = encoder
        self.names = names
        self.path: Any = None  # the folder it was loaded from
        self._pos = {str(c): i for i, c in enumerate(concept_ids.tolist())}

    @classmethod
    def from_rows(cls, vectors: numpy.ndarray, concepts: Sequence[str], kinds: Sequence[int], *,
                  encoder: Any, kb_checksum: str, extra: Optional[Dict[str, Any]] = None,
                  names: Optional[numpy.ndarray] = None, name_encoder: Any = None) -> "PrototypeStore":
        """Group prototype rows by concept (stable: rows of one concept keep their order). ``names``
        (rows aligned with ``vectors``) are the example mentions' name vectors by ``name_encoder``."""
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
        name_rows = None
        if names is not None:
            meta["name_encoder"] = {f: name_encoder.settings()[f] for f in ("name", *_NAME_FIELDS)}
            name_rows = numpy.ascontiguousarray(numpy.asarray(names, dtype=numpy.float32)[order]) if order \
                else numpy.zeros((0, name_encoder.dim), numpy.float32)
            name_rows[kinds_arr != EXAMPLE] = 0.0
        return cls(vecs, kinds_arr, numpy.asarray(ids, dtype=str), numpy.cumsum(counts), meta, encoder, name_rows)

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
        return self._best(self.vectors, query, concept_ids)

    @property
    def has_names(self) -> bool:
        """Whether the store holds example-name vectors (``build-prototypes`` with a name encoder)."""
        return self.names is not None

    def example_name_similarities(self, name_vector: numpy.ndarray, concept_ids: Sequence[str]) -> Dict[str, float]:
        """Best cosine of ``name_vector`` (the mention's vector by the name encoder) to the names of each
        concept's example mentions; concepts without examples (or a store without names) are absent."""
        return self.example_name_similarities_many(numpy.asarray(name_vector)[None, :], [concept_ids])[0]

    def example_name_similarities_many(self, name_vectors: numpy.ndarray, concept_lists: Sequence[Sequence[str]]
                                       ) -> List[Dict[str, float]]:
        """:meth:`example_name_similarities` of many mentions at once (row ``i`` of ``name_vectors`` with
        ``concept_lists[i]``): one gather and one row-wise product for the whole batch."""
        out: List[Dict[str, float]] = [{} for _ in concept_lists]
        pairs = [(q, c, self._pos[c]) for q, ids in enumerate(concept_lists) for c in ids if c in self._pos]
        if self.names is None or not pairs:
            return out
        rows, segments, lengths = self._rows_of([i for _q, _c, i in pairs])
        queries = numpy.asarray(name_vectors, dtype=numpy.float32)[numpy.repeat([q for q, _c, _i in pairs], lengths)]
        sims = numpy.einsum("ij,ij->i", numpy.asarray(self.names[rows], dtype=numpy.float32), queries)
        self._check_sims(sims)
        best = numpy.maximum.reduceat(numpy.where(numpy.asarray(self.kinds[rows]) == EXAMPLE, sims, -numpy.inf),
                                      segments)
        for (q, c, _i), s in zip(pairs, best.tolist()):
            if s != -numpy.inf:
                out[q][c] = s
        return out

    def _rows_of(self, positions: Sequence[int]) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """The rows of the concepts at ``positions`` (in ``concept_ids``), one concept after the other; where
        each concept's rows start among them; how many each has."""
        at = numpy.asarray(positions, dtype=numpy.int64)
        starts, lengths = self.offsets[at], self.offsets[at + 1] - self.offsets[at]
        segments = numpy.cumsum(lengths) - lengths
        return numpy.repeat(starts - segments, lengths) + numpy.arange(int(lengths.sum())), segments, lengths

    def _best(self, matrix: numpy.ndarray, query: numpy.ndarray, concept_ids: Sequence[str]
              ) -> Tuple[Dict[str, float], Dict[str, float]]:
        """Best row of ``matrix`` (the context vectors) by inner product with ``query``, per concept of
        ``concept_ids`` and kind: ``(examples, definitions)``. One gather and one product for all the
        concepts; the best per concept by ``maximum.reduceat`` over their row segments."""
        found = [(c, self._pos[c]) for c in concept_ids if c in self._pos]
        if not found:
            return {}, {}
        rows, segments, _lengths = self._rows_of([i for _c, i in found])
        sims = numpy.asarray(matrix[rows], dtype=numpy.float32) @ numpy.asarray(query, dtype=numpy.float32)
        self._check_sims(sims)
        kinds = numpy.asarray(self.kinds[rows])
        out: List[Dict[str, float]] = []
        for kind in (EXAMPLE, DEFINITION):
            best = numpy.maximum.reduceat(numpy.where(kinds == kind, sims, -numpy.inf), segments)
            out.append({c: s for (c, _i), s in zip(found, best.tolist()) if s != -numpy.inf})
        return out[0], out[1]

    def _check_sims(self, sims: numpy.ndarray) -> None:
        """No similarity outside [-1, 1] (rows and queries are unit vectors) leaves the store: E556 naming it."""
        bad = ~(numpy.abs(sims) <= 1.0 + 2 * NORM_TOLERANCE)
        if bad.any():
            raise IntegrityError(Errors.E556.format(score=float(sims[bad][0]), what="the prototype store",
                                                    path=self.path or "<memory>",
                                                    fix="`spacy-sapbert build-prototypes`"))

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

    def check_name_encoder(self, encoder: Any, *, path: Any = "<memory>") -> None:
        """Raise unless ``encoder`` (the linker's name encoder) made the example-name vectors."""
        theirs = self.meta.get("name_encoder")
        if self.names is None or not theirs:
            return
        for field in _NAME_FIELDS:
            if theirs.get(field) != getattr(encoder, field):
                raise IncompatibleError(Errors.E635.format(path=path, field=field, store_value=theirs.get(field),
                                                           encoder_value=getattr(encoder, field)))

    # ---- serialisation ------------------------------------------------------------------
    def to_disk(self, path: PathLike, *, overwrite: bool = True) -> None:
        """Write the store folder atomically (the encoder included)."""
        path = ensure_path(path)
        with atomic_dir(path, overwrite=overwrite) as tmp:
            for name in _ARRAYS:
                numpy.save(tmp / f"{name}.npy", numpy.asarray(getattr(self, name)), allow_pickle=False)
            if self.names is not None:
                numpy.save(tmp / f"{NAMES}.npy", numpy.asarray(self.names), allow_pickle=False)
            if self.encoder is not None:
                self.encoder.to_disk(tmp / ENCODER_DIR)
            meta = {key: value for key, value in self.meta.items() if key != "files"}
            meta["files"] = file_records(tmp, array_files(meta))
            with atomic_write(tmp / META_FILE) as fh:
                json.dump(meta, fh, indent=2, sort_keys=True)

    @classmethod
    def from_disk(cls, path: PathLike, *, kb: Any = None, device: str = "auto",
                  load_encoder: bool = True) -> "PrototypeStore":
        """Open a store: vectors memory-mapped; the saved encoder loaded and checked against the
        fingerprint the vectors were made with; with ``kb``, the KB checksum is checked."""
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
        _check_records(path, meta)
        arrays = {name: _load(path / f"{name}.npy", mmap=name == "vectors") for name in _ARRAYS}
        _check_shapes(path, meta, arrays)
        n = arrays["vectors"].shape[0]
        if len(arrays["kinds"]) != n or int(arrays["offsets"][-1]) != n or n != meta.get("n_prototypes"):
            raise DataFormatError(Errors.E607.format(path=path, why="the arrays disagree with each other or the meta"))
        offsets = arrays["offsets"]
        if len(offsets) != len(arrays["concept_ids"]) + 1 or offsets[0] != 0 or (numpy.diff(offsets) < 1).any():
            raise DataFormatError(Errors.E607.format(path=path, why="offsets.npy does not give each concept its rows "
                                                                      "(one or more, in order)"))
        names = _names(path, meta, n)
        problem = unit_problem(arrays["vectors"], arrays["kinds"], names, sample=NORM_SAMPLE_ROWS)
        if problem is not None:
            raise DataFormatError(Errors.E558.format(path=path, why=f"stored vectors are not unit length: {problem}"))
        quantized = bool(meta.get("encoder", {}).get("quantized", False))
        encoder = (ContextEncoder.from_disk(path / ENCODER_DIR, device=device, quantized=quantized)
                   if load_encoder else None)
        store = cls(arrays["vectors"], arrays["kinds"], arrays["concept_ids"], arrays["offsets"], meta, encoder, names)
        store.path = path
        if encoder is not None:
            store.check_encoder(encoder, path=path)
        if kb is not None:
            store.check_kb(kb, path=path)
        return store


def _check_records(path: Any, meta: Dict[str, Any]) -> None:
    """The array files against the meta's records (sizes and sampled hashes, E551); W554 for a store without."""
    records = meta.get("files")
    if records is None:
        warnings.warn(Warnings.W554.format(path=path))
        return
    expected = set(array_files(meta))
    if not isinstance(records, dict) or set(records) != expected:
        got = sorted(records) if isinstance(records, dict) else type(records).__name__
        raise DataFormatError(Errors.E558.format(path=path, why=f"its records name {got}, expected "
                                                               f"{sorted(expected)}"))
    check_files(path, records, what="prototype store")


def _check_shapes(path: Any, meta: Dict[str, Any], arrays: Dict[str, numpy.ndarray]) -> None:
    """Dimensions and dtypes of the arrays (E558): a 2-D float32 ``vectors`` of the encoder's width, int8 kinds,
    1-D offsets (int64) and concept ids (strings)."""
    dim = meta.get("encoder", {}).get("dim") if isinstance(meta.get("encoder"), dict) else None
    vectors, kinds, ids, offsets = (arrays[name] for name in _ARRAYS)
    if vectors.ndim != 2 or vectors.dtype != numpy.float32 or vectors.shape[1] != dim:
        raise DataFormatError(Errors.E558.format(path=path, why=f"vectors.npy is {vectors.shape} {vectors.dtype}, "
                                                               f"expected (n, {dim}) float32"))
    if kinds.ndim != 1 or kinds.dtype != numpy.int8 or offsets.ndim != 1 or offsets.dtype != numpy.int64 \
            or ids.ndim != 1 or ids.dtype.kind != "U" or not len(offsets):
        raise DataFormatError(Errors.E558.format(path=path, why="kinds.npy (int8), offsets.npy (int64) or "
                                                               "concept_ids.npy (strings) has the wrong type or shape"))


def _names(path: Any, meta: Dict[str, Any], n: int) -> Optional[numpy.ndarray]:
    """The example-name vectors (memory-mapped) when the meta declares them; checked against it."""
    declared = meta.get("name_encoder")
    file = path / f"{NAMES}.npy"
    if not declared:
        return None
    if not isinstance(declared, dict) or not file.is_file():
        raise DataFormatError(Errors.E607.format(path=path, why=f"the meta declares example names, {NAMES}.npy is "
                                                               "missing or its settings are not a mapping"))
    names = _load(file, mmap=True)
    if names.ndim != 2 or names.shape != (n, declared.get("dim")) or names.dtype != numpy.float32:
        raise DataFormatError(Errors.E607.format(path=path, why=f"{NAMES}.npy is {names.shape} {names.dtype}, "
                                                               f"expected ({n}, {declared.get('dim')}) float32"))
    return names


__all__ = ["PrototypeStore", "META_FILE", "EXAMPLE", "DEFINITION"]
