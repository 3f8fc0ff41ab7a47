"""Building blocks of :class:`spacy_sapbert.index.ConceptIndex`: chunked, resumable encoding of
the KB names and the hnswlib graph build."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy
from tqdm import tqdm

from ..base.outputs import FileLock, check_parent
from ..base.util import PathLike, atomic_write, ensure_path, get_logger
from ..encoding.bulk import names_precision
from ..errors import Errors, IncompatibleError, Warnings

WORK_FILE = "work.json"
LOCK_FILE = "work.lock"

logger = get_logger("index_build")


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
    keeps a UMLS-sized build out of RAM); with ``work_dir``, chunks are saved as .npy and reused (a
    damaged chunk is encoded again, W503). The work folder is locked meanwhile (E509 for a second process)."""
    names = kb.names
    n = len(names)
    if out is None:
        out = numpy.empty((n, int(enc.dim)), dtype=numpy.float32)
    work = ensure_path(work_dir) if work_dir is not None else None
    lock = None
    if work is not None:
        lock = _check_work_dir(work, work_record(kb, enc, chunk_size))
    try:
        with tqdm(total=n, desc="encode names", unit="name", disable=not show_progress) as bar:
            for c, start in enumerate(range(0, n, chunk_size)):
                stop = min(n, start + chunk_size)
                chunk_file = chunk_path(work, c) if work is not None else None
                vecs = _load_chunk(chunk_file, (stop - start, out.shape[1]))
                if vecs is None:
                    vecs = enc.encode(list(names[start:stop]), batch_size=batch_size, use_cache=False)
                    if chunk_file is not None:
                        with atomic_write(chunk_file, "wb") as fh:
                            numpy.save(fh, vecs)
                out[start:stop] = vecs
                bar.update(stop - start)
    finally:
        if lock is not None:
            lock.release()
    return out


def work_record(kb: Any, enc: Any, chunk_size: int) -> Dict[str, Any]:
    """What ``work.json`` records: the chunks in a work folder belong to this KB, encoder and chunking."""
    return {"encoder_fingerprint": enc.fingerprint, "pooling": enc.pooling, "max_length": int(enc.max_length),
            "kb_checksum": kb.checksum, "chunk_size": int(chunk_size), "n_names": len(kb.names),
            "precision": names_precision(enc)}


# what a work.json written before a field existed meant by it
_RECORD_DEFAULTS = {"precision": "fp32"}


def chunk_path(work: Path, chunk: int) -> Path:
    """The file of chunk number ``chunk`` (names ``chunk * chunk_size`` onwards) in a work folder."""
    return work / f"chunk_{chunk:06d}.npy"


def _load_chunk(chunk_file: Optional[Path], shape: Tuple[int, int]) -> Optional[numpy.ndarray]:
    """A saved chunk of ``shape`` finite float vectors, or None (absent, or damaged: W503)."""
    if chunk_file is None or not chunk_file.exists():
        return None
    try:
        vecs = numpy.load(chunk_file, allow_pickle=False)
        if vecs.shape != shape or vecs.dtype.kind != "f":
            raise ValueError(f"shape {vecs.shape} {vecs.dtype}, expected {shape} float")
        if not numpy.isfinite(vecs).all():
            raise ValueError("non-finite values")
    except (OSError, ValueError, EOFError) as err:
        logger.warning(Warnings.W503.format(path=chunk_file, reason=str(err)[:200]))
        return None
    return vecs


def _check_work_dir(work: Path, expected: Dict[str, Any]) -> FileLock:
    """Lock the work folder (E509 while another process holds it): what is there was left by a run that
    ended. An unreadable ``work.json`` (W502), or another build's chunks in a default ``.NAME.work``
    folder (W504), start it afresh; another build's chunks in a folder the user chose are E112."""
    check_parent(work / WORK_FILE)
    work.mkdir(parents=True, exist_ok=True)
    lock_file = work / LOCK_FILE
    lock = FileLock(lock_file, Errors.E509.format(path=work, lock=lock_file)).acquire()
    marker = work / WORK_FILE
    if marker.exists():
        try:
            found = json.loads(marker.read_text(encoding="utf8"))
            if not isinstance(found, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as err:  # JSON and UTF-8 errors are ValueErrors
            logger.warning(Warnings.W502.format(path=work, file=WORK_FILE, reason=str(err)[:200]))
            found = None
        diff = [] if found is None else sorted(k for k in expected
                                               if found.get(k, _RECORD_DEFAULTS.get(k)) != expected[k])
        if diff and not (work.name.startswith(".") and work.name.endswith(".work")):
            lock.release()
            raise IncompatibleError(Errors.E112.format(path=work, reason="different " + ", ".join(diff)))
        if diff:
            logger.warning(Warnings.W504.format(path=work, reason="different " + ", ".join(diff)))
        if found is None or diff:
            for stale in [marker, *work.glob("chunk_*.npy")]:
                stale.unlink()
    if not marker.exists():
        with atomic_write(marker) as fh:
            json.dump(expected, fh, indent=2, sort_keys=True)
    return lock
