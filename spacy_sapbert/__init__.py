"""spacy_sapbert: SapBERT concept linking for biomedical spaCy pipelines."""
from .about import __version__
from .errors import Errors, SapbertError, Warnings
from .kb.concept import Concept, normalize_name

__all__ = ["__version__", "Errors", "Warnings", "SapbertError", "Concept", "normalize_name"]
