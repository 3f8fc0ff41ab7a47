"""Synthetic name vectors with the structure of a biomedical dictionary, for the UMLS-scale benchmark.

Real UMLS and a 768-d SapBERT are not on this machine, so ``benchmarks/umls_scale.py`` indexes vectors
made here. Their shape was calibrated on all-MiniLM-L6-v2 vectors of 2,599 MEDIC names (600 concepts
with 2+ names; ``--calibrate`` reruns it) and follows it where a dictionary's structure matters to an
ANN index:

- concepts have 1–20 names, heavy-tailed (P(k) ∝ k^-1.8: mean ≈ 2.9 names a concept, as UMLS's
  English ~10M names over ~3.3M concepts);
- vectors are anisotropic: a shared mean direction (norm ≈ 0.4 before normalising, as measured), a
  power-law spectrum (s_i ∝ i^-0.35, falling faster past half the dimensions: MiniLM's measured
  singular values) in a random orthonormal basis, so that no coordinate is special;
- a concept's names scatter around its centre (measured: synonym cosine mean 0.65, median 0.74;
  here set by ``NAME_NOISE``);
- 5 % of concepts are near-duplicates of another concept (centre + small noise), and 2 % of the names
  are shared: one name row belongs to two concepts (in the row → concept CSR);
- everything is L2-normalised; queries are new draws around a concept's centre (mentions that are not
  dictionary names), with the name noise.

Vectors are written chunk by chunk as float16 into a ``.npy`` (memory-mapped), so 3M x 768 needs
~4.6 GB of disk and little RAM.

Two geometries (``generate(..., geometry=...)``; every result says which it used):

- ``isotropic`` (the first one, above): the offsets follow the flat power law ``i^-0.35`` over all
  dimensions, so names fill the space almost isotropically: a PCA participation ratio of ~200 of 384
  dimensions and a high local intrinsic dimension. Real embeddings are not like that, and graph
  indexes are known to lose recall on such data.
- ``spectrum``: the offsets follow the PCA spectrum measured on real MiniLM name vectors
  (``umls_scale_real.py``: the eigenvalues in its results' figures; 768 dimensions stretch the
  384-dimension spectrum over twice the indices), with the mean norm and the median synonym cosine of
  the real names (``NAME_NOISE`` and the mean's norm calibrated here on 4,000 draws); the concept
  structure (names per concept, variants, duplicates, shared names) is the same.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, Tuple

import numpy

NAME_NOISE = 0.8     # std of a name's offset from its concept centre, relative to the centres' spread
     # mentions scatter a little more than dictionary names
DUPLICATE_FRACTION = 0.1
VARIANT_FRACTION = 0.4     # names that are spelling variants of the concept's previous name
VARIANT_NOISE = 0.3
DUPLICATE_NOISE = 0.35
SHARED_NAME_FRACTION = 0.02
MEAN_NORM = 0.55
MAX_NAMES = 20


def spectrum(dim: int) -> numpy.ndarray:
    i = numpy.arange(1, dim + 1, dtype=numpy.float64)
    s = i ** -0.35
    tail = i > dim / 2
    s[tail] *= numpy.exp(-(i[tail] - dim / 2) / (dim / 8))  # MiniLM's singular values drop past ~half
    return (s / numpy.sqrt((s ** 2).sum())).astype(numpy.float32)


GEOMETRIES = ("isotropic", "spectrum")
HERE = Path(__file__).resolve().parent
REAL_RESULTS = HERE / "results" / "umls_scale_real.json"
REAL_CACHE = HERE / "output" / "umls_scale_real" / "spectrum.json"


def real_shape() -> Dict[str, object]:
    """The measured shape of real MiniLM name vectors (eigenvalues, mean norm, synonym cosine): from the
    committed results of ``umls_scale_real.py``, else from its work folder."""
    if REAL_RESULTS.exists():
        spec = json.loads(REAL_RESULTS.read_text()).get("figures", {}).get("spectrum")
        if spec:
            return spec
    if REAL_CACHE.exists():
        return json.loads(REAL_CACHE.read_text())
    raise SystemExit("no measured spectrum: run benchmarks/studies/umls_scale_real.py first (geometry 'spectrum')")


def real_spectrum(dim: int) -> numpy.ndarray:
    """Square roots of the measured eigenvalues, stretched to ``dim`` indices, unit norm."""
    ev = numpy.asarray(real_shape()["eigenvalues"], dtype=numpy.float64).clip(min=0)
    pos = numpy.linspace(0, len(ev) - 1, dim)
    s = numpy.sqrt(numpy.interp(pos, numpy.arange(len(ev)), ev))
    return (s / numpy.sqrt((s ** 2).sum())).astype(numpy.float32)


@dataclass
class Geometry:
    dim: int
    mean: numpy.ndarray      # [dim]
    basis: numpy.ndarray     # [dim, dim] orthonormal
    scale: numpy.ndarray     # [dim] spectrum
    name_noise: float = NAME_NOISE
    kind: str = "isotropic"

    @classmethod
    def make(cls, dim: int, seed: int, kind: str = "isotropic") -> "Geometry":
        if kind not in GEOMETRIES:
            raise SystemExit(f"unknown geometry {kind!r}: one of {GEOMETRIES}")
        rng = numpy.random.default_rng(seed)
        q, _ = numpy.linalg.qr(rng.standard_normal((dim, dim)))
        direction = rng.standard_normal(dim)
        direction = direction / numpy.linalg.norm(direction)
        if kind == "isotropic":
            return cls(dim, (MEAN_NORM * direction).astype(numpy.float32), q.astype(numpy.float32), spectrum(dim))
        geo = cls(dim, (MEAN_NORM * direction).astype(numpy.float32), q.astype(numpy.float32), real_spectrum(dim),
                  kind=kind)
        shape = real_shape()
        geo.calibrate(float(shape["mean_norm"]), float(shape["synonym_cos_median"]), direction)
        return geo

    def calibrate(self, mean_norm: float, synonym_cos: float, direction: numpy.ndarray) -> None:
        """Set the mean's norm and the name noise so that normalised names have the measured mean norm
        and two names of a concept the measured median cosine (bisection, 4,000 seeded draws each)."""
        def stats(m: float, noise: float) -> Tuple[float, float]:
            rng = numpy.random.default_rng(123)
            c = (m * direction).astype(numpy.float32) + self.draw(rng, 2000)
            a = _normalise(c + noise * self.draw(rng, 2000))
            b = _normalise(c + noise * self.draw(rng, 2000))
            return float(numpy.linalg.norm(numpy.concatenate([a, b]).mean(0))), float(numpy.median((a * b).sum(1)))

        m, noise = MEAN_NORM, NAME_NOISE
        for _ in range(2):
            lo, hi = 0.0, 5.0
            for _ in range(20):
                m = (lo + hi) / 2
                lo, hi = (m, hi) if stats(m, noise)[0] < mean_norm else (lo, m)
            lo, hi = 0.0, 5.0
            for _ in range(20):
                noise = (lo + hi) / 2
                lo, hi = (noise, hi) if stats(m, noise)[1] > synonym_cos else (lo, noise)
        self.mean = (m * direction).astype(numpy.float32)
        self.name_noise = float(noise)

    def draw(self, rng: numpy.random.Generator, n: int) -> numpy.ndarray:
        """``n`` unit-spread anisotropic offsets (expected squared norm 1)."""
        z = rng.standard_normal((n, self.dim), dtype=numpy.float32) * self.scale
        return z @ self.basis.T


def _normalise(x: numpy.ndarray) -> numpy.ndarray:
    return x / numpy.linalg.norm(x, axis=1, keepdims=True)


def names_per_concept(rng: numpy.random.Generator, n_concepts: int) -> numpy.ndarray:
    k = numpy.arange(1, MAX_NAMES + 1)
    p = k ** -1.8
    return rng.choice(k, size=n_concepts, p=p / p.sum()).astype(numpy.int64)


def concepts_for(n_names: int) -> int:
    k = numpy.arange(1, MAX_NAMES + 1)
    p = k ** -1.8
    return max(1, int(round(n_names / float((k * p).sum() / p.sum()))))


@dataclass
class SyntheticKB:
    """What a KB contributes to an index: name vectors (float16 .npy), and for each row its concepts."""
    vectors_path: Path
    n_names: int
    n_concepts: int
    row_ptr: numpy.ndarray    # CSR row -> concept indices
    row_idx: numpy.ndarray
    centres_path: Path        # float16 [n_concepts, dim]: for drawing queries
    seed: int = 0
    geometry: str = "isotropic"

    def vectors(self) -> numpy.ndarray:
        return numpy.load(self.vectors_path, mmap_mode="r")


def generate(out_dir: Path, n_names: int, dim: int, *, seed: int = 0, chunk: int = 200_000,
             geometry: str = "isotropic") -> SyntheticKB:
    """Write ``n_names`` synthetic name vectors (rows grouped by concept) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    geo = Geometry.make(dim, seed, geometry)
    noise_scale = geo.name_noise / NAME_NOISE  # variants and duplicates scale with the name noise
    rng = numpy.random.default_rng(seed + 1)
    n_concepts = concepts_for(n_names)
    counts = names_per_concept(rng, n_concepts)
    counts = _fit_total(counts, n_names)
    n_concepts = len(counts)
    concept_of_row = numpy.repeat(numpy.arange(n_concepts, dtype=numpy.int64), counts)
    vectors_path = out_dir / f"names_{n_names}_{dim}.npy"
    centres_path = out_dir / f"centres_{n_names}_{dim}.npy"
    vec = numpy.lib.format.open_memmap(vectors_path, mode="w+", dtype=numpy.float16, shape=(n_names, dim))
    cen = numpy.lib.format.open_memmap(centres_path, mode="w+", dtype=numpy.float16, shape=(n_concepts, dim))
    starts = numpy.concatenate([[0], numpy.cumsum(counts)])
    prev_centre = None
    for c0 in range(0, n_concepts, chunk):
        c1 = min(n_concepts, c0 + chunk)
        centres = geo.mean + geo.draw(rng, c1 - c0)
        dup = rng.random(c1 - c0) < DUPLICATE_FRACTION
        dup[0] = False
        # a near-duplicate concept sits next to the concept before it
        src = numpy.where(dup)[0] - 1
        centres[dup] = centres[src] + DUPLICATE_NOISE * noise_scale * geo.draw(rng, int(dup.sum()))
        centres = _normalise(centres)
        if prev_centre is not None and dup[0]:
            centres[0] = prev_centre
        prev_centre = centres[-1]
        cen[c0:c1] = centres
        r0, r1 = starts[c0], starts[c1]
        owner = concept_of_row[r0:r1] - c0
        names = centres[owner] + geo.name_noise * geo.draw(rng, r1 - r0)
        # spelling variants (word order, plurals): close to the concept's previous name
        variant = rng.random(r1 - r0) < VARIANT_FRACTION
        variant[0] = False
        variant &= owner == numpy.roll(owner, 1)
        for _ in range(2):  # chains of variants stay near their first name
            names[variant] = (names[numpy.where(variant)[0] - 1]
                              + VARIANT_NOISE * noise_scale * geo.draw(rng, int(variant.sum())))
        names = _normalise(names)
        vec[r0:r1] = names
    vec.flush()
    cen.flush()
    del vec, cen
    # shared names: a row also belongs to the next concept (a near neighbour when that one is a duplicate)
    shared = rng.random(n_names) < SHARED_NAME_FRACTION
    extra = numpy.minimum(concept_of_row + 1, n_concepts - 1)
    shared &= extra != concept_of_row
    row_len = 1 + shared.astype(numpy.int64)
    row_ptr = numpy.concatenate([[0], numpy.cumsum(row_len)])
    row_idx = numpy.empty(int(row_ptr[-1]), dtype=numpy.int64)
    row_idx[row_ptr[:-1]] = concept_of_row
    row_idx[row_ptr[:-1][shared] + 1] = extra[shared]
    return SyntheticKB(vectors_path, n_names, n_concepts, row_ptr, row_idx, centres_path, seed, geometry)


def _fit_total(counts: numpy.ndarray, total: int) -> numpy.ndarray:
    """Trim or extend the per-concept counts so that they sum to exactly ``total``."""
    cum = numpy.cumsum(counts)
    if cum[-1] >= total:
        last = int(numpy.searchsorted(cum, total))
        counts = counts[: last + 1].copy()
        counts[-1] -= int(cum[last] - total)
        return counts[counts > 0]
    return numpy.concatenate([counts, numpy.ones(total - int(cum[-1]), dtype=numpy.int64)])


def queries(kb: SyntheticKB, n: int, *, seed: int = 7) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """``n`` mention vectors (float32, normalised) and their concepts. A mention is drawn like a
    held-out dictionary name: with ``VARIANT_FRACTION`` a spelling variant of one of its concept's
    names, else a new name around the concept's centre (``NAME_NOISE``)."""
    rng = numpy.random.default_rng(seed)
    centres = numpy.load(kb.centres_path, mmap_mode="r")
    names = kb.vectors()
    dim = centres.shape[1]
    geo = Geometry.make(dim, kb.seed, kb.geometry)
    rows = numpy.sort(rng.choice(kb.n_names, size=n, replace=False))
    concepts = kb.row_idx[kb.row_ptr[rows]]
    variant = rng.random(n) < VARIANT_FRACTION
    base = numpy.where(variant[:, None], numpy.asarray(names[rows], dtype=numpy.float32),
                       numpy.asarray(centres[concepts], dtype=numpy.float32))
    scale = geo.name_noise / NAME_NOISE
    noise = numpy.where(variant[:, None], VARIANT_NOISE * scale, geo.name_noise).astype(numpy.float32)
    q = _normalise(base + noise * geo.draw(rng, n))
    return q.astype(numpy.float32), concepts


def iter_chunks(vectors: numpy.ndarray, chunk: int = 100_000) -> Iterator[Tuple[int, numpy.ndarray]]:
    for start in range(0, vectors.shape[0], chunk):
        yield start, numpy.asarray(vectors[start:start + chunk], dtype=numpy.float32)
