"""Download a UMLS Metathesaurus release through the UTS download API and extract the files we use.

The UTS download API (https://documentation.uts.nlm.nih.gov/automating-downloads.html) serves a
licensed file to ``GET https://uts-ws.nlm.nih.gov/download?url=<file URL>&apiKey=<API key>``; the file
URL of a release's Metathesaurus is
``https://download.nlm.nih.gov/umls/kss/<release>/umls-<release>-metathesaurus-full.zip``. NLM
publishes MD5 sums on its UMLS download page (the release API does not carry checksums), so a checksum
is verified when the user passes one (``md5=`` / ``sha256=``); the size is always verified against
Content-Length / Content-Range.

NLM does not document the error answers of ``/download``. We read them this way: HTTP 401, or a
page that asks to sign in or says the API key is invalid → the key was rejected (E402); HTTP 403, or a
page that says the licence is expired / inactive / revoked / must be renewed → licence problem (E403);
any other page in place of the archive (text/html, JSON, or a body that does not start like a zip)
→ E404 with its status, content type and first words (the key scrubbed out).

The key comes from an environment variable (``UMLS_API_KEY``) or a hidden prompt; it is sent only in
the request URL and never logged, printed, written to disk or put into an exception message.

Layout of ``output`` after a run: ``MRCONSO.RRF``, ``MRSTY.RRF``, ``MRDEF.RRF``, ``MRREL.RRF``,
``MRFILES.RRF``, ``MRCOLS.RRF`` (flat) and ``umls_manifest.json`` (release, source URL, sizes and
sha256 of the extracted files; written last, so its presence means the run finished). While
downloading, ``<archive>.part`` and ``<archive>.part.json`` hold the partial file for resuming.
"""
from __future__ import annotations

import contextlib
import getpass
import html
import json
import os
import re
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

from ..errors import ConfigError, DownloadError, Errors, SapbertError
from ..base.util import atomic_write, ensure_path, get_logger
from .archive import extract_files, file_digests
from .download import Redactor, check_url, download_resumable, safe_location

logger = get_logger("assets.umls")

UTS_DOWNLOAD_URL = "https://uts-ws.nlm.nih.gov/download"
METATHESAURUS_URL = "https://download.nlm.nih.gov/umls/kss/{release}/umls-{release}-metathesaurus-full.zip"
API_KEY_ENV = "UMLS_API_KEY"
UMLS_FILES: Tuple[str, ...] = (
    "MRCONSO.RRF", "MRSTY.RRF", "MRDEF.RRF", "MRREL.RRF", "MRFILES.RRF", "MRCOLS.RRF",
)
REQUIRED_FILES: Tuple[str, ...] = ("MRCONSO.RRF", "MRSTY.RRF")
MANIFEST_NAME = "umls_manifest.json"
ZIP_MAGIC = b"PK"
_RELEASE = re.compile(r"\d{4}A[AB]")
_FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_HEX_LENGTHS = {"md5": 32, "sha256": 64}
_LICENCE = re.compile(
    r"licen[cs]e.{0,80}?(expired|inactive|not active|revoked|suspended|renew|pending)"
    r"|(expired|inactive|revoked|suspended|renew).{0,80}?licen[cs]e",
    re.I | re.S,
)
_KEY = re.compile(r"api[ _-]?key|unauthori[sz]ed|invalid credentials|sign[ -]?in|log[ -]?in", re.I)


@dataclass(frozen=True)
class UmlsDownload:
    """What :func:`download_umls` did."""

    release: str
    output: Path
    files: Dict[str, Path]
    missing: Tuple[str, ...] = ()
    archive: Optional[Path] = None  # the kept archive (keep_archive=True), else None
    archive_size: int = 0
    downloaded_bytes: int = 0  # bytes received in this run
    resumed_from: int = 0  # bytes of an earlier partial download that were reused
    skipped: bool = False  # all files were already there (no network, no key needed)
    sizes: Dict[str, int] = field(default_factory=dict)


def check_release(release: str) -> str:
    """``2024ab`` → ``2024AB``; anything not of the form YYYYAA / YYYYAB is an error (E400)."""
    value = str(release).strip().upper()
    if not _RELEASE.fullmatch(value):
        raise ConfigError(Errors.E400.format(release=release))
    return value


def metathesaurus_url(release: str) -> str:
    return METATHESAURUS_URL.format(release=check_release(release))


def resolve_api_key(
    env: str = API_KEY_ENV,
    *,
    interactive: Optional[bool] = None,
    prompt: Optional[Callable[[], str]] = None,
) -> str:
    """The key from ``$env``, else from a hidden prompt when a terminal is attached, else E401.

    ``interactive`` defaults to ``sys.stdin.isatty()``; ``prompt`` defaults to :func:`getpass.getpass`
    (input not echoed).
    """
    key = os.environ.get(env, "").strip()
    if key:
        return key
    if interactive is None:
        interactive = bool(sys.stdin and sys.stdin.isatty())
    if interactive:
        ask = prompt or (lambda: getpass.getpass(f"UMLS API key (input hidden; or set {env}): "))
        key = (ask() or "").strip()
        if key:
            return key
    raise ConfigError(Errors.E401.format(env=env))


def check_checksum(algo: str, value: Optional[str]) -> Optional[str]:
    if value is None or value == "":
        return None
    cleaned = value.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{%d}" % _HEX_LENGTHS[algo], cleaned):
        raise ConfigError(Errors.E412.format(algo=algo.upper(), value=value, n=_HEX_LENGTHS[algo]))
    return cleaned


def _page_text(body: bytes, redact: Redactor, limit: int = 200) -> str:
    text = body.decode("utf8", errors="replace")
    with contextlib.suppress(ValueError):
        data = json.loads(text)
        if isinstance(data, dict):
            parts = [str(data[k]) for k in ("error", "message", "detail", "status") if data.get(k)]
            text = " ".join(parts) or text
    text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", text)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = " ".join(redact(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def classify_uts_answer(
    status: int, content_type: str, body: bytes, *, env: str, redact: Redactor, host: str
) -> SapbertError:
    """The coded error for an answer that is not the archive (see the module docstring)."""
    text = _page_text(body, redact, limit=100_000)
    short = text if len(text) <= 200 else text[:197] + "..."
    detail = f"; the server said: '{short}'" if short else ""
    if _LICENCE.search(text) or status == 403:
        return DownloadError(Errors.E403.format(status=status, detail=detail))
    if status == 401 or (status < 400 and _KEY.search(text)):
        return DownloadError(Errors.E402.format(status=status, detail=detail, env=env))
    if status == 404:
        hint = "The file is not there: check --release (e.g. 2024AB) or --url."
    elif status >= 500:
        hint = "The server has a problem: rerun later (a partial download resumes)."
    elif status >= 400:
        hint = "Check --release / --url and rerun."
    else:
        return DownloadError(Errors.E404.format(status=status, content_type=content_type, detail=detail))
    return DownloadError(Errors.E405.format(name="the UMLS archive", status=status, host=host,
                                            detail=detail, hint=hint))


def _manifest(output: Path) -> dict:
    try:
        data = json.loads((output / MANIFEST_NAME).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _already_done(output: Path, release: str, source: str, names: Sequence[str]) -> Optional[dict]:
    manifest = _manifest(output)
    if manifest.get("release") != release or manifest.get("source") != source:
        return None
    files = manifest.get("files") or {}
    for name in names:
        if name in files:
            path = output / name
            if not path.is_file() or path.stat().st_size != files[name].get("size"):
                return None
        elif name not in manifest.get("missing", []):
            return None
    return manifest


def download_umls(
    release: str,
    output: Union[str, Path],
    *,
    api_key: Optional[str] = None,
    api_key_env: str = API_KEY_ENV,
    prompt: Optional[Callable[[], str]] = None,
    interactive: Optional[bool] = None,
    url: Optional[str] = None,
    uts_url: str = UTS_DOWNLOAD_URL,
    md5: Optional[str] = None,
    sha256: Optional[str] = None,
    files: Sequence[str] = UMLS_FILES,
    required: Sequence[str] = REQUIRED_FILES,
    keep_archive: bool = False,
    force: bool = False,
    timeout: float = 60.0,
    show_progress: bool = True,
) -> UmlsDownload:
    """Download the Metathesaurus of ``release`` and extract ``files`` into ``output``.

    Reruns are cheap: a finished output (manifest present, sizes right) returns at once without
    network or key (``force=True`` redoes it); an interrupted download resumes from its ``.part``;
    a finished archive (``keep_archive=True``, or a crash during extraction) is not downloaded again.
    The key is asked for (``api_key`` → ``$api_key_env`` → hidden prompt) only when a download is needed.
    """
    release = check_release(release)
    file_url = url or METATHESAURUS_URL.format(release=release)
    check_url(file_url, "--url")
    check_url(uts_url, "--uts-url", carries_secret=True)
    for what, value in (("--url", file_url), ("--uts-url", uts_url)):
        params = urllib.parse.parse_qs(urllib.parse.urlsplit(value).query, keep_blank_values=True)
        if any(p.lower() in ("apikey", "api_key", "ticket") for p in params):
            raise ConfigError(Errors.E417.format(what=what, env=api_key_env))
    expected = {algo: v for algo, v in (("md5", check_checksum("md5", md5)),
                                         ("sha256", check_checksum("sha256", sha256))) if v}
    names = tuple(dict.fromkeys(str(f).strip() for f in files))
    bad = [n for n in names if not _FILE_NAME.fullmatch(n) or set(n) == {"."}]
    if bad or not names:
        raise ConfigError(Errors.E416.format(name=bad[0] if bad else ""))
    output = ensure_path(output)
    if output.exists() and not output.is_dir():
        raise ConfigError(Errors.E415.format(path=output))
    output.mkdir(parents=True, exist_ok=True)
    name = Path(urllib.parse.urlsplit(file_url).path).name or f"umls-{release}.zip"
    archive = output / name
    if not force:
        done = _already_done(output, release, file_url, names)
        if done is not None:
            logger.info("UMLS %s is already in %s; nothing to do", release, output)
            paths = {n: output / n for n in names if n in done["files"]}
            return UmlsDownload(release, output, paths, tuple(done.get("missing", [])),
                                archive if archive.exists() else None, done.get("archive_size", 0),
                                skipped=True, sizes={n: done["files"][n]["size"] for n in paths})
    else:
        for stale in (archive, output / (name + ".part"), output / (name + ".part.json"), output / MANIFEST_NAME):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
    downloaded = resumed = 0
    if not archive.is_file():
        key = api_key.strip() if api_key else resolve_api_key(api_key_env, interactive=interactive, prompt=prompt)
        redact = Redactor(key)
        host = safe_location(uts_url)
        request_url = f"{uts_url}?{urllib.parse.urlencode({'url': file_url, 'apiKey': key})}"
        logger.info("Downloading %s through %s", file_url, host)

        def on_error_page(status: int, content_type: str, body: bytes) -> Exception:
            return classify_uts_answer(status, content_type, body, env=api_key_env, redact=redact, host=host)

        outcome = download_resumable(
            request_url, archive, source_id=file_url, redact=redact, on_error_page=on_error_page,
            magic=ZIP_MAGIC, timeout=timeout, show_progress=show_progress,
        )
        downloaded, resumed = outcome.downloaded, outcome.resumed_from
    logger.info("Checksumming %s (%d bytes)", name, archive.stat().st_size)
    digests = file_digests(archive, sorted(set(expected) | {"sha256"}))
    for algo, value in expected.items():
        if digests[algo] != value:
            archive.unlink()
            raise DownloadError(Errors.E408.format(algo=algo.upper(), name=name, expected=value, got=digests[algo]))
    archive_size = archive.stat().st_size
    required = tuple(n for n in required if n in names)
    extracted = extract_files(archive, output, names, required=required, show_progress=show_progress)
    missing = tuple(n for n in names if n not in extracted)
    manifest = {
        "release": release,
        "source": file_url,
        "archive": name,
        "archive_size": archive_size,
        "archive_sha256": digests["sha256"],
        "files": {n: {"size": f.size, "sha256": f.sha256, "members": list(f.members)} for n, f in extracted.items()},
        "missing": list(missing),
    }
    with atomic_write(output / MANIFEST_NAME) as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
    if not keep_archive:
        archive.unlink()
    return UmlsDownload(
        release, output, {n: f.path for n, f in extracted.items()}, missing,
        archive if keep_archive else None, archive_size, downloaded, resumed, False,
        {n: f.size for n, f in extracted.items()},
    )


__all__ = [
    "UmlsDownload", "download_umls", "resolve_api_key", "check_release", "metathesaurus_url",
    "classify_uts_answer", "UMLS_FILES", "REQUIRED_FILES", "UTS_DOWNLOAD_URL", "API_KEY_ENV",
    "MANIFEST_NAME",
]
