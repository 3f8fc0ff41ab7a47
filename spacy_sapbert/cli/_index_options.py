"""The index options of ``build-index`` and ``create-pipeline``, declared once, and the one function that turns
them into an :class:`~spacy_sapbert.index.IndexSettings` (whose defaults the help texts read)."""
from __future__ import annotations

from typing import Optional, Tuple

import typer

from ..errors import ConfigError, Errors
from ..index.settings import (DEFAULTS, EXACT_MAX_NAMES, HNSW_EF_SEARCH, HNSW_VECTORS, IVF_RESCORE, KINDS,
                              LARGE_MIN_NAMES, IndexSettings)
from ..index.sparse import MAX_NGRAM
from ..index.sparse import check_settings as check_sparse_settings
from ._options import check_choice

KIND_HELP = (f"auto (exact up to {EXACT_MAX_NAMES:,} names, hnsw below {LARGE_MIN_NAMES:,}, ivf from there), exact, "
             "hnsw or ivf (faiss fast-scan codes in RAM + float16 re-scoring, memory-mapped: for UMLS).")
EXACT = typer.Option(None, "--exact/--hnsw", help="Exact matrix search or hnswlib (older form of the kind).")
RESCORE = typer.Option(None, "--rescore", help=f"ivf: candidates re-scored exactly per query (default {IVF_RESCORE}).")
LISTS = typer.Option(None, "--lists", help="ivf: cells (default: the power of two nearest 4 x sqrt(names)).")
M = typer.Option(None, "--M", help=f"hnsw graph degree (default {DEFAULTS.M}).")
EF_CONSTRUCTION = typer.Option(None, "--ef-construction",
                               help=f"hnsw build depth (default {DEFAULTS.ef_construction}).")
HNSW_VECTORS_OPTION = typer.Option(DEFAULTS.hnsw_vectors, "--hnsw-vectors",
                                   help="hnsw: the graph's vectors, float16 (faiss's graph: about half the memory, "
                                        "the same top-1 names on MEDIC) or float32 (hnswlib's graph, the default "
                                        "until 2026-12-01).")
EF_SEARCH = typer.Option(None, "--ef-search", help=f"Search depth (default: hnsw {HNSW_EF_SEARCH}; ivf: cells "
                                                    "scanned, half of them, a quarter from 2,000,000 names).")
LANGUAGES = typer.Option(None, "--languages",
                         help="Search only the names in these languages by default, comma-separated ISO 639-1 codes "
                              "(e.g. es,en); every name is still indexed, and the linker's `languages` setting "
                              "overrides it.")
THREADS = typer.Option(DEFAULTS.num_threads, "--threads",
                       help="Index build threads; 1 gives the same graph every run.")
SPARSE = typer.Option(DEFAULTS.sparse, "--sparse", help="Also fit the char n-gram tf-idf of the names (saved in the "
                                                         "same folder) for the linker's hybrid scores (sparse_weight).")
SPARSE_NGRAMS = typer.Option(",".join(map(str, DEFAULTS.sparse_ngrams)), "--sparse-ngrams",
                             help="--sparse: the n-gram range LO,HI (char_wb).")


def index_settings(*, kind_option: str, kind: str, exact: Optional[bool], M: Optional[int],
                   ef_construction: Optional[int], ef_search: Optional[int], rescore: Optional[int],
                   lists: Optional[int], threads: int, languages: Optional[str], sparse: bool,
                   sparse_ngrams: str, hnsw_vectors: str = DEFAULTS.hnsw_vectors) -> IndexSettings:
    """The command line's index options as one :class:`IndexSettings` (E012 for an unknown kind, named by
    ``kind_option``; the settings' own codes for the rest); an option not given keeps its default."""
    check_choice(kind_option, kind, KINDS)
    check_choice("--hnsw-vectors", hnsw_vectors, HNSW_VECTORS)
    given = {"M": M, "ef_construction": ef_construction}
    return IndexSettings(kind=kind, exact=exact, ef_search=ef_search, rescore=rescore, lists=lists,
                         num_threads=threads, sparse=sparse, hnsw_vectors=hnsw_vectors,
                         sparse_ngrams=parse_ngrams(sparse_ngrams),
                         languages=tuple(x.strip() for x in languages.split(",") if x.strip()) if languages else None,
                         **{k: v for k, v in given.items() if v is not None})


def parse_ngrams(value: str) -> Tuple[int, int]:
    """``"2,3"`` → ``(2, 3)``; anything else is E780 (the range too: ``check_settings``)."""
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ConfigError(Errors.E780.format(what="--sparse-ngrams", value=value,
                                             allowed=f"LO,HI with 1 <= LO <= HI <= {MAX_NGRAM}, e.g. 2,3"))
    return check_sparse_settings("char_wb", (int(parts[0]), int(parts[1])))[1]


__all__ = ["index_settings", "parse_ngrams", "KIND_HELP", "EXACT", "RESCORE", "LISTS", "M", "EF_CONSTRUCTION", "EF_SEARCH",
           "HNSW_VECTORS_OPTION", "LANGUAGES", "THREADS", "SPARSE", "SPARSE_NGRAMS"]
