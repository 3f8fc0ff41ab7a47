"""Worker processes of link-corpus's local back-end (``--n-process N`` > 1): each links whole shards, as a
Ray actor does, so that every back-end and worker count batches a shard's documents the same way.

Worker ``w`` of ``N`` links shards ``w, w + N, ...`` with the pipeline it inherited by fork (nothing is
pickled or loaded again) and sends each shard's rows back through its own pipe; the parent writes the files
(one writer for every back-end). A worker ends at once on SIGTERM (the default action: it holds no output)
and ignores SIGINT. When the parent stops for any reason (done, an error, Ctrl-C, SIGTERM) it terminates the
workers still running and waits for them (SIGKILL after :data:`GRACE_SECONDS`), so none outlives it.
"""
from __future__ import annotations

import multiprocessing
import pickle
import signal
from multiprocessing.connection import wait
from typing import Any, Callable, Dict, List, Sequence, Tuple

from ..errors import ConfigError, Errors, SapbertError
from .readers import Shard, read_shard

GRACE_SECONDS = 5.0
Link = Callable[[List[Tuple[str, str]]], Dict[str, List[Any]]]
OnShard = Callable[[Shard, Dict[str, List[Any]], int], None]


def _work(link: Link, shards: Sequence[Shard], conn: Any, id_field: str, text_field: str) -> None:
    """A worker's life: link its shards one by one, send ``("rows", index, n_docs, columns)`` per shard,
    then ``("done",)``; an error is sent as ``("error", exception)`` and ends the worker."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler: end now, even inside C code
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which ends the workers
    try:
        for shard in shards:
            pairs = list(read_shard(shard, id_field=id_field, text_field=text_field))
            conn.send(("rows", shard.index, len(pairs), link(pairs)))
        conn.send(("done",))
    except Exception as err:  # sent to the parent, which raises it there
        conn.send(("error", _picklable(err)))
    finally:
        conn.close()


def _picklable(err: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:
        return SapbertError(Errors.E771.format(error=f"{type(err).__name__}: {err}"))
    return err


def fork_context() -> Any:
    """The ``fork`` multiprocessing context (the workers share the loaded pipeline), or E772 where there is none."""
    if "fork" not in multiprocessing.get_all_start_methods():
        raise ConfigError(Errors.E772.format(methods=", ".join(multiprocessing.get_all_start_methods())))
    return multiprocessing.get_context("fork")


def link_in_workers(shards: Sequence[Shard], *, n_process: int, link: Link, on_shard: OnShard, id_field: str,
                    text_field: str) -> None:
    """Link ``shards`` in ``n_process`` forked workers: ``link((doc_id, text) pairs) -> columns`` runs in a worker
    on each shard's documents (a function of the pipeline the workers inherit); ``on_shard(shard, columns,
    n_docs)`` runs in this process as each shard's rows arrive."""
    ctx = fork_context()
    by_index = {shard.index: shard for shard in shards}
    procs: List[Any] = []
    try:
        running: Dict[Any, Any] = {}
        for w in range(n_process):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_work, args=(link, list(shards[w::n_process]), send, id_field, text_field),
                               name=f"link-corpus-worker-{w}", daemon=True)
            proc.start()
            send.close()  # only the worker holds the writing end: its death reads as end of file here
            procs.append(proc)
            running[recv] = proc
        while running:
            for conn in wait(list(running)):
                try:
                    message = conn.recv()
                except EOFError:  # killed (out of memory, a signal) before it said it was done
                    proc = running[conn]
                    proc.join(GRACE_SECONDS)
                    raise SapbertError(Errors.E770.format(name=proc.name, code=proc.exitcode)) from None
                if message[0] == "rows":
                    _, index, n_docs, columns = message
                    on_shard(by_index[int(index)], columns, int(n_docs))
                elif message[0] == "done":
                    running.pop(conn).join()
                    conn.close()
                else:
                    raise message[1]
    finally:
        stop_workers(procs)


def stop_workers(procs: Sequence[Any], grace: float = GRACE_SECONDS) -> None:
    """Terminate (SIGTERM) the workers still running, wait up to ``grace`` seconds, then SIGKILL the rest."""
    import time

    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join()


__all__ = ["link_in_workers", "stop_workers", "fork_context", "GRACE_SECONDS", "Link", "OnShard"]
