"""Linking whole corpora (``spacy-sapbert link-corpus``): readers of document shards (JSONL, Parquet,
PubTator, folders of .txt), shard bookkeeping (one atomic output file per input shard, resumable), the
entity-row schema, and two back-ends behind :func:`link_corpus`: local ``nlp.pipe`` and Ray Data
actors. Importing this package does not import Ray."""
from .readers import FORMATS, Shard, find_shards, read_shard
from .rows import COLUMNS, OUTPUT_FORMATS
from .run import BACKENDS, CorpusResult, link_corpus
from .shards import MANIFEST_FILE, ROWS_DIR, RUN_FILE

__all__ = ["link_corpus", "CorpusResult", "BACKENDS", "FORMATS", "OUTPUT_FORMATS", "COLUMNS", "Shard",
           "find_shards", "read_shard", "RUN_FILE", "MANIFEST_FILE", "ROWS_DIR"]
