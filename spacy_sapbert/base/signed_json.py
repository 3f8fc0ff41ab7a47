"""Small JSON files that carry a sha256 of their own content: ``{"format", "version", "sha256", <key>: payload}``.

The digest is taken over the payload serialised canonically (sorted keys, no spaces, ASCII), so any change to
the payload, and any truncation, is found at load; it guards against damage, not against a forger, who can
recompute it (each reader checks its payload's fields itself as well). Used by the calibration
(``calibration.json``) and the abbreviation table (``abbreviations.json``)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, Mapping


def digest(payload: Mapping[str, Any]) -> str:
    """The sha256 (hex) of ``payload`` serialised canonically."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def sign(payload: Mapping[str, Any], *, file_format: str, version: int, key: str) -> Dict[str, Any]:
    """The file's JSON object: format, version, the payload's digest, and the payload under ``key``."""
    return {"format": file_format, "version": version, "sha256": digest(payload), key: payload}


def signed_payload(data: Any, *, file_format: str, version: int, key: str, bad: Callable[[str], Exception],
                   what: str = "content") -> Dict[str, Any]:
    """The payload of a file :func:`sign` made, after checking its format, version and digest; ``bad(why)`` makes
    the (coded) error raised otherwise."""
    if not isinstance(data, dict) or data.get("format") != file_format:
        raise bad(f"not a {file_format} file")
    if data.get("version") != version:
        raise bad(f"version {data.get('version')!r}; this package reads version {version}")
    payload = data.get(key)
    if not isinstance(payload, dict) or data.get("sha256") != digest(payload):
        raise bad(f"the sha256 of its {what} does not match: the file was changed or damaged")
    return payload


__all__ = ["digest", "sign", "signed_payload"]
