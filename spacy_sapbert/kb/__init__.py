from .concept import Concept, normalize_name

__all__ = ["Concept", "normalize_name"]
