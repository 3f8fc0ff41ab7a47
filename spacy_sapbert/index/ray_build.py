"""``build-index --ray``: the KB names encoded on Ray actors into the work folder's chunk files.

The chunks are the ones the local build writes (``chunk_NNNNNN.npy``, ``chunk_size`` names each, the
same ``Encoder.encode`` call per chunk, ``work.json`` alike), so :meth:`ConceptIndex.build` then finds
every chunk done and builds the index on this node from them: the result equals a local build (same
vectors within floating-point tolerance on the same kind of device). Chunks already in the work folder
are not encoded again (resume). Each actor loads the KB (memory-mapped) and the encoder once: both must
be readable at the same paths on every node (with ``--runtime onnx``, the ONNX export the driver wrote
into the work folder too). Vectors travel back through Ray's object store; only the
driver writes files.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy
from tqdm import tqdm

from ..base.ray_session import ray_session, reraise_job_error
from ..base.util import PathLike, atomic_write, ensure_path
from ..encoding.bulk import BULK_BATCH_SIZE
from ..encoding.onnx_encoder import OnnxEncoder
from ..encoding.torch_encoder import Encoder
from ..errors import ConfigError, Errors
from ..kb import KnowledgeBase
from .build import _check_work_dir, _load_chunk, chunk_path, work_record


class EncodeChunks:
    """The Ray Data callable class: KB and encoder loaded once per actor; one call encodes a batch of
    chunks (``{"chunk", "start", "stop"}``) → ``{"chunk", "rows", "vectors" (float32 bytes), "fingerprint"}``."""

    def __init__(self, kb_dir: str, model: str, encoder_options: Dict[str, Any], batch_size: int,
                 threads: int) -> None:
        self.kb = KnowledgeBase.from_disk(kb_dir)
        if "onnx_folder" in encoder_options:  # the driver's ONNX export (build-index --runtime onnx)
            self.enc: Any = OnnxEncoder(encoder_options["onnx_folder"], threads=int(threads), cache_size=0,
                                        quantized=bool(encoder_options.get("quantized")))
        else:
            import torch  # lazy: torch

            torch.set_num_threads(int(threads))
            options = dict(encoder_options)
            compile = bool(options.pop("compile", False))  # build-index --compile: each actor compiles its own
            self.enc = Encoder.load(model, **options)
            if compile:
                self.enc.compile()
        self.batch_size = batch_size

    def __call__(self, batch: Dict[str, numpy.ndarray]) -> Dict[str, numpy.ndarray]:
        names = self.kb.names
        vectors = []
        for start, stop in zip(batch["start"], batch["stop"]):
            vecs = self.enc.encode(list(names[int(start):int(stop)]), batch_size=self.batch_size, use_cache=False)
            vectors.append(numpy.ascontiguousarray(vecs, dtype=numpy.float32).tobytes())
        out = numpy.empty(len(vectors), dtype=object)
        out[:] = vectors
        return {"chunk": numpy.asarray(batch["chunk"], dtype=numpy.int64),
                "rows": numpy.asarray(batch["stop"] - batch["start"], dtype=numpy.int64), "vectors": out,
                "fingerprint": numpy.asarray([self.enc.fingerprint] * len(vectors), dtype=object)}


def encode_names_ray(kb: Any, enc: Any, *, kb_dir: PathLike, model: str, encoder_options: Dict[str, Any],
                     work_dir: PathLike, chunk_size: int = 8192, batch_size: int = BULK_BATCH_SIZE, actors: int = 2,
                     gpus_per_actor: float = 0.0, threads: int = 1, address: Optional[str] = None,
                     show_progress: bool = True) -> int:
    """Encode the chunks of ``kb.names`` missing from ``work_dir`` on ``actors`` Ray actors (``enc`` is the
    driver's encoder: its fingerprint names the chunks and must match the actors'). Returns the number of
    chunks encoded."""
    for what, value, minimum in (("actors", actors, 1), ("chunk_size", chunk_size, 1), ("threads", threads, 1),
                                 ("gpus_per_actor", gpus_per_actor, 0)):
        if value < minimum:
            raise ConfigError(Errors.E111.format(what=what, minimum=minimum, value=value))
    work = ensure_path(work_dir)
    n, dim = len(kb.names), int(enc.dim)
    lock = _check_work_dir(work, work_record(kb, enc, chunk_size))
    try:
        todo = [{"chunk": c, "start": start, "stop": min(n, start + chunk_size)}
                for c, start in enumerate(range(0, n, chunk_size))
                if _load_chunk(chunk_path(work, c), (min(n, start + chunk_size) - start, dim)) is None]
        if not todo:
            return 0
        with ray_session("build-index --ray", address=address, show_progress=False) as ray, \
                tqdm(total=sum(t["stop"] - t["start"] for t in todo), desc="encode names (ray)", unit="name",
                     disable=not show_progress) as bar:
            ds = ray.data.from_items(todo, override_num_blocks=len(todo)).map_batches(
                EncodeChunks,
                fn_constructor_kwargs={"kb_dir": str(ensure_path(kb_dir).resolve()), "model": model,
                                       "encoder_options": encoder_options, "batch_size": batch_size,
                                       "threads": threads},
                compute=ray.data.ActorPoolStrategy(size=actors), batch_size=1, batch_format="numpy",
                num_cpus=threads, num_gpus=gpus_per_actor or None)
            try:
                for batch in ds.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=0):
                    for chunk, rows, data, fingerprint in zip(batch["chunk"], batch["rows"], batch["vectors"],
                                                              batch["fingerprint"]):
                        if fingerprint != enc.fingerprint:
                            raise ConfigError(Errors.E709.format(
                                what="encoding names", reason=f"an actor's encoder has fingerprint {fingerprint}, "
                                f"the driver's {enc.fingerprint}: the model differs between nodes"))
                        vecs = numpy.frombuffer(data, dtype=numpy.float32).reshape(int(rows), dim)
                        with atomic_write(chunk_path(work, int(chunk)), "wb") as fh:
                            numpy.save(fh, vecs)
                        bar.update(int(rows))
            except Exception as err:  # Ray wraps what an actor raised
                reraise_job_error(err, "encoding names")
    finally:
        lock.release()
    return len(todo)


__all__ = ["EncodeChunks", "encode_names_ray"]
