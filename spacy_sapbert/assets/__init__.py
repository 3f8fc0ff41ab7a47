"""Assets that need a licence or a download: the UMLS Metathesaurus through the UTS download API."""
from .umls import (
    API_KEY_ENV,
    REQUIRED_FILES,
    UMLS_FILES,
    UTS_DOWNLOAD_URL,
    UmlsDownload,
    download_umls,
    metathesaurus_url,
    resolve_api_key,
)

__all__ = [
    "API_KEY_ENV",
    "REQUIRED_FILES",
    "UMLS_FILES",
    "UTS_DOWNLOAD_URL",
    "UmlsDownload",
    "download_umls",
    "metathesaurus_url",
    "resolve_api_key",
]
