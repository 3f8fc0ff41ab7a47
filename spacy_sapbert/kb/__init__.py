"""Knowledge bases: ``Concept`` records, readers for ontology files, and the ``KnowledgeBase``."""
from .build import build_kb
from .concept import Concept, normalize_name
from .readers import FORMATS, get_reader, read_jsonl, read_medic, read_obo, read_tsv, read_umls, write_jsonl
from .store import KnowledgeBase

__all__ = ["Concept", "KnowledgeBase", "normalize_name", "build_kb", "FORMATS", "get_reader", "read_umls",
           "read_obo", "read_medic", "read_jsonl", "read_tsv", "write_jsonl"]
