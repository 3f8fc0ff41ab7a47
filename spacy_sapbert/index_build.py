"""Building blocks of :class:`spacy_sapbert.index.ConceptIndex`: chunked, resumable encoding of
the KB names, the hnswlib graph build, and filtered hnswlib queries."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import numpy
from tqdm import tqdm

from .errors import Errors, IncompatibleError
from .util import PathLike, atomic_write, ensure_path

WORK_FILE = "work.json"


def _filtered_query(hnsw: Any, vectors: numpy.ndarray, k: int, keep: Callable[[int], bool]
                    ) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """hnswlib with a filter may find fewer than ``k`` allowed rows for some queries; query those
    again one by one with a shrinking ``k`` and pad the rest (row -1, distance +inf)."""
    try:
        return hnsw.knn_query(vectors, k=k, num_threads=1, filter=keep)
    except RuntimeError:
        labels = numpy.full((vectors.shape[0], k), -1, dtype=numpy.int64)
        dist = numpy.full((vectors.shape[0], k), numpy.inf, dtype=numpy.float32)
        for i in range(vectors.shape[0]):
            kk = k
            while kk > 0:
                try:
                    lab, dis = hnsw.knn_query(vectors[i : i + 1], k=kk, num_threads=1, filter=keep)
                except RuntimeError:
                    kk //= 2
                    continue
                labels[i, :kk], dist[i, :kk] = lab[0], dis[0]
                break
        return labels, dist


def _build_hnsw(vectors: numpy.ndarray, *, M: int, ef_construction: int, num_threads: int, seed: int,
                show_progress: bool) -> Any:
    import hnswlib

    n, dim = vectors.shape
    hnsw = hnswlib.Index(space="ip", dim=dim)
    hnsw.init_index(max_elements=n, ef_construction=ef_construction, M=M, random_seed=seed)
    step = 10_000
    with tqdm(total=n, desc="hnsw", unit="name", disable=not show_progress) as bar:
        for start in range(0, n, step):
            stop = min(n, start + step)
            hnsw.add_items(vectors[start:stop], numpy.arange(start, stop), num_threads=num_threads)
            bar.update(stop - start)
    return hnsw


def _encode_names(kb: Any, enc: Any, *, batch_size: int, work_dir: Optional[PathLike], show_progress: bool,
                  chunk_size: int, out: Optional[numpy.ndarray] = None) -> numpy.ndarray:
    """Encode ``kb.names`` in chunks into ``out`` (default: a new float32 array; a float16 memory map
    keeps a UMLS-sized build out of RAM); with ``work_dir``, chunks are saved as .npy and reused."""
    names = kb.names
    n = len(names)
    if out is None:
        out = numpy.empty((n, int(enc.dim)), dtype=numpy.float32)
    work = ensure_path(work_dir) if work_dir is not None else None
    if work is not None:
        _check_work_dir(work, {"encoder_fingerprint": enc.fingerprint, "pooling": enc.pooling,
                               "max_length": int(enc.max_length), "kb_checksum": kb.checksum,
                               "chunk_size": int(chunk_size), "n_names": n})
    with tqdm(total=n, desc="encode names", unit="name", disable=not show_progress) as bar:
        for c, start in enumerate(range(0, n, chunk_size)):
            stop = min(n, start + chunk_size)
            chunk_file = work / f"chunk_{c:06d}.npy" if work is not None else None
            if chunk_file is not None and chunk_file.exists():
                out[start:stop] = numpy.load(chunk_file, allow_pickle=False)
            else:
                vecs = enc.encode(list(names[start:stop]), batch_size=batch_size, use_cache=False)
                out[start:stop] = vecs
                if chunk_file is not None:
                    with atomic_write(chunk_file, "wb") as fh:
                        numpy.save(fh, vecs)
            bar.update(stop - start)
    return out


def _check_work_dir(work: Path, expected: Dict[str, Any]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    marker = work / WORK_FILE
    if marker.exists():
        found = json.loads(marker.read_text(encoding="utf8"))
        diff = sorted(k for k in expected if found.get(k) != expected[k])
        if diff:
            raise IncompatibleError(Errors.E112.format(path=work, reason="different " + ", ".join(diff)))
    else:
        with atomic_write(marker) as fh:
            json.dump(expected, fh, indent=2, sort_keys=True)
