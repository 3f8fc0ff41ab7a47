"""Knowledge bases: ``Concept`` records, readers for ontology files, and the ``KnowledgeBase``."""
from .concept import Concept, normalize_name
from .store import KnowledgeBase

__all__ = ["Concept", "KnowledgeBase", "normalize_name"]
