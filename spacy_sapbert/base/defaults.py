"""Package-wide defaults, each written once: every signature, option and config that needs one reads it here."""
from __future__ import annotations

#: The name encoder used when none is given: SapBERT (Liu et al., NAACL 2021), a hub id (downloaded on first use).
DEFAULT_MODEL = "cambridgeltl/SapBERT-from-PubMedBERT-fulltext"

#: Word pieces per name or mention; longer ones are truncated (SapBERT's own setting).
MAX_LENGTH = 25

__all__ = ["DEFAULT_MODEL", "MAX_LENGTH"]
