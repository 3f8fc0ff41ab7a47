"""Resumable HTTP downloads with the standard library (urllib), for URLs that carry a secret.

A download goes to ``<dest>.part`` (plus a small ``<dest>.part.json`` with the source id, the total
size and the validators, never the request URL). A rerun sends ``Range: bytes=<size of .part>-`` and
appends; a server that ignores the Range (answers 200) or whose file changed (``If-Range`` fails, or the
announced total differs) makes the download restart from byte 0. When the size is right the ``.part``
is renamed to ``dest`` in one step.

Secrets: the request URL is never logged, shown in a progress bar, written to disk or put into an
exception. Text that comes back from the server (error pages) or from the network stack passes through
a :class:`Redactor` before it reaches a message; exceptions are raised ``from None`` so that urllib's
errors (whose ``url`` attribute holds the full request URL) are not chained into tracebacks.
"""
from __future__ import annotations

import contextlib
import errno
import http.client
import json
import os
import re
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from ..about import __version__
from ..errors import ConfigError, DownloadError, Errors, Warnings
from ..base.util import get_logger

logger = get_logger("assets.download")

CHUNK_SIZE = 1 << 20
ERROR_BODY_LIMIT = 64 * 1024
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/problem", "application/xhtml")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

# (status, content type, body start) -> the exception to raise for an answer that is not the file
ErrorPageHandler = Callable[[int, str, bytes], Exception]


class Redactor:
    """Replaces every occurrence of the secrets (also URL-quoted) in a text with ``***``."""

    def __init__(self, *secrets: Optional[str]) -> None:
        forms = set()
        for secret in secrets:
            if secret:
                forms.update({secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)})
        # longest first so that a quoted form is not half-replaced through the plain one
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: object) -> str:
        out = str(text)
        for form in self._forms:
            out = out.replace(form, "***")
        return out


def safe_location(url: str) -> str:
    """``scheme://host[:port]/path`` of a URL: no user info, no query, no fragment."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def check_url(url: str, what: str, *, carries_secret: bool = False) -> None:
    """An http(s) URL with a host; a URL that will carry a secret must be https unless it is loopback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(Errors.E414.format(url=safe_location(url) if parts.hostname else url, what=what))
    if carries_secret and parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
        raise ConfigError(Errors.E413.format(host=parts.hostname))


@dataclass(frozen=True)
class DownloadOutcome:
    path: Path
    size: int
    resumed_from: int  # bytes of the .part that were kept and continued (0: started from scratch)
    downloaded: int  # bytes received in this call
    requests: int


def _meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _load_meta(part: Path) -> Dict[str, object]:
    try:
        data = json.loads(_meta_path(part).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_meta(part: Path, meta: Dict[str, object]) -> None:
    tmp = _meta_path(part).with_name(_meta_path(part).name + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf8")
    os.replace(tmp, _meta_path(part))


def _discard(part: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        part.unlink()
    with contextlib.suppress(FileNotFoundError):
        _meta_path(part).unlink()


_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", re.I)


def _parse_content_range(value: Optional[str]) -> Tuple[Optional[int], Optional[int]]:
    match = _CONTENT_RANGE.match(value or "")
    if not match:
        return None, None
    total = match.group(3)
    return int(match.group(1)), (None if total == "*" else int(total))


def _content_length(headers) -> Optional[int]:
    value = headers.get("Content-Length")
    return int(value) if value and value.strip().isdigit() else None


def _content_type(headers) -> str:
    """The media type, lower case, or "" when the header is missing (email's default, text/plain, would
    misclassify an untyped archive as a page)."""
    raw = headers.get("Content-Type") if headers is not None else None
    return raw.split(";")[0].strip().lower() if raw else ""


def _is_text(content_type: str) -> bool:
    return any(content_type.startswith(prefix) for prefix in TEXT_TYPES)


def _check_space(folder: Path, need: Optional[int], what: str) -> None:
    if not need:
        return
    free = shutil.disk_usage(folder).free
    if need > free:
        raise DownloadError(
            Errors.E411.format(path=folder, what=what, need=need // 2**20 + 1, free=free // 2**20)
        )


def download_resumable(
    request_url: str,
    dest: Path,
    *,
    source_id: str,
    redact: Redactor,
    on_error_page: ErrorPageHandler,
    magic: Optional[bytes] = None,
    timeout: float = 60.0,
    show_progress: bool = True,
    max_requests: int = 3,
) -> DownloadOutcome:
    """Download ``request_url`` to ``dest``, resuming ``dest.part`` when it belongs to ``source_id``.

    ``source_id`` identifies the file (e.g. its URL without credentials); a ``.part`` left by another
    source is discarded. ``magic``: the bytes the file must start with; an answer that starts otherwise,
    or has a text content type, or a 4xx/5xx status, goes to ``on_error_page``.
    """
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    meta = _load_meta(part)
    offset = part.stat().st_size if part.exists() else 0
    if offset and meta.get("source") != source_id:
        logger.info("Discarding %s: it belongs to another download", part.name)
        _discard(part)
        meta, offset = {}, 0
    known_total = meta.get("total") if isinstance(meta.get("total"), int) else None
    if offset and known_total is not None and offset > known_total:
        _discard(part)
        meta, offset, known_total = {}, 0, None
    resumed_from = offset
    received = 0
    requests = 0
    # proxies from the environment apply, except for loopback (test servers) where a proxy cannot help
    loopback = urllib.parse.urlsplit(request_url).hostname in LOOPBACK_HOSTS
    opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if loopback else []))
    while True:
        if known_total is not None and offset == known_total and offset > 0:
            break  # the .part is already complete
        if requests >= max_requests:
            raise DownloadError(
                Errors.E405.format(
                    name=dest.name, status="-", host=safe_location(request_url), detail="",
                    hint=f"The server answered {requests} requests without a usable range; rerun later.",
                )
            )
        requests += 1
        headers = {"User-Agent": f"spacy-sapbert/{__version__}", "Accept-Encoding": "identity"}
        etag = meta.get("etag")
        # If-Range takes a strong ETag or a date; a weak ETag would make every resume restart
        validator = etag if isinstance(etag, str) and not etag.startswith("W/") else meta.get("last_modified")
        if offset:
            headers["Range"] = f"bytes={offset}-"
            if isinstance(validator, str):
                headers["If-Range"] = validator
        try:
            response = opener.open(urllib.request.Request(request_url, headers=headers), timeout=timeout)
        except urllib.error.HTTPError as err:
            status = err.code
            content_type = _content_type(err.headers)
            body = b""
            with contextlib.suppress(Exception):
                body = err.read(ERROR_BODY_LIMIT) or b""
            err.close()
            if status == 416 and offset:
                logger.info("The server cannot continue %s at byte %d; restarting", part.name, offset)
                _discard(part)
                meta, offset, known_total = {}, 0, None
                continue
            raise on_error_page(status, content_type, body) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            reason = getattr(err, "reason", err)
            raise DownloadError(
                Errors.E406.format(
                    name=dest.name, reason=redact(reason), done=offset, total=known_total or "?",
                    part=part,
                )
            ) from None
        with response:
            status = response.status
            content_type = _content_type(response.headers)
            if _is_text(content_type):
                raise on_error_page(status, content_type, response.read(ERROR_BODY_LIMIT)) from None
            if status == 206:
                start, total = _parse_content_range(response.headers.get("Content-Range"))
                changed = known_total is not None and total is not None and total != known_total
                if start != offset or changed:
                    what = f"size {known_total} -> {total}" if changed else f"range starts at {start}"
                    logger.warning(Warnings.W402.format(what=what))
                    _discard(part)
                    meta, offset, known_total = {}, 0, None
                    continue
            elif status == 200:
                total = _content_length(response.headers)
                if offset:
                    now = response.headers.get("ETag") or response.headers.get("Last-Modified")
                    if "If-Range" in headers and now != headers["If-Range"]:
                        logger.warning(Warnings.W402.format(what=f"validator {headers['If-Range']} -> {now}"))
                    else:
                        logger.warning(Warnings.W401.format(discarded=offset))
                    _discard(part)
                    offset = 0
            else:
                raise on_error_page(status, content_type, response.read(ERROR_BODY_LIMIT)) from None
            first = b""
            if offset == 0 and magic:
                first = _read(response, len(magic), dest.name, redact, part, 0, total)
                if not first.startswith(magic):
                    raise on_error_page(status, content_type, first + response.read(ERROR_BODY_LIMIT)) from None
            meta = {
                "source": source_id,
                "total": total,
                "etag": response.headers.get("ETag"),
                "last_modified": response.headers.get("Last-Modified"),
            }
            known_total = total
            _check_space(dest.parent, (total - offset) if total is not None else None, f"downloading {dest.name}")
            _save_meta(part, meta)
            received += _stream(response, part, first, offset, total, dest.name, redact, show_progress)
            offset = part.stat().st_size
        if total is None or offset == total:
            break
        if offset > total:
            _discard(part)
            raise DownloadError(Errors.E407.format(name=dest.name, expected=total, got=offset))
        raise DownloadError(
            Errors.E406.format(
                name=dest.name, reason="the connection closed early", done=offset, total=total, part=part
            )
        )
    os.replace(part, dest)
    with contextlib.suppress(FileNotFoundError):
        _meta_path(part).unlink()
    return DownloadOutcome(dest, dest.stat().st_size, resumed_from, received, requests)


def _network_error(err: BaseException, name: str, redact: Redactor, part: Path, done: int, total) -> DownloadError:
    return DownloadError(
        Errors.E406.format(
            name=name, reason=redact(f"{type(err).__name__}: {err}"), done=done, total=total or "?", part=part
        )
    )


def _read(response, size: int, name: str, redact: Redactor, part: Path, done: int, total) -> bytes:
    try:
        return response.read(size)
    except (http.client.HTTPException, OSError, socket.timeout) as err:
        raise _network_error(err, name, redact, part, done, total) from None


def _stream(response, part: Path, first: bytes, offset: int, total: Optional[int], name: str,
            redact: Redactor, show_progress: bool) -> int:
    """Append the body to ``part``; on a network error keep what arrived (flushed) and raise E406."""
    from tqdm.auto import tqdm

    written = 0
    with open(part, "ab") as out, tqdm(
        total=total, initial=offset, unit="B", unit_scale=True, unit_divisor=1024, desc=name,
        disable=not show_progress, leave=False,
    ) as bar:
        chunk = first
        while True:
            if chunk:
                try:
                    out.write(chunk)
                except OSError as err:
                    if err.errno == errno.ENOSPC:
                        raise DownloadError(
                            Errors.E411.format(path=part.parent, what=f"downloading {name}",
                                               need=len(chunk) // 2**20 + 1, free=0)
                        ) from None
                    raise
                written += len(chunk)
                bar.update(len(chunk))
            try:
                chunk = response.read(CHUNK_SIZE)
            except (http.client.HTTPException, OSError, socket.timeout) as err:
                out.flush()
                os.fsync(out.fileno())
                raise _network_error(err, name, redact, part, offset + written, total) from None
            if not chunk:
                break
        out.flush()
        os.fsync(out.fileno())
    return written


__all__ = ["Redactor", "DownloadOutcome", "download_resumable", "check_url", "safe_location"]
