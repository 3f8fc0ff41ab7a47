"""UMLS download against a loopback server that mimics the UTS download API.

The mock (``UtsMock``) answers ``GET /download?url=<file url>&apiKey=<key>``:
- the valid key → a 302 redirect to ``/files/<name>?ticket=...`` (as a signed-URL CDN would), which
  serves the zip with Range / If-Range support, ETag and Content-Length;
- an unknown key → 401 with an HTML page that echoes the key (to prove we scrub it);
- the "expired" key → 403 with a licence page (UTS's wording is undocumented; see assets/umls.py);
- an unknown file → 404.
Switches: drop the connection after N bytes (once), ignore Range, serve a truncated zip, change the
ETag (the file changed). Every request is recorded; after ``MAX_REQUESTS`` the server refuses and
shuts itself down, and a timer stops it after 60 s whatever happens.
"""
from __future__ import annotations

import io
import json
import logging
import random
import socket
import threading
import urllib.parse
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from typer.testing import CliRunner

from spacy_sapbert.assets import umls as umls_mod
from spacy_sapbert.assets.umls import MANIFEST_NAME, UMLS_FILES, download_umls, resolve_api_key
from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, DownloadError

KEY = "0b1e2f3c-S3CRET-4d5e-9f8a-77aa"
EXPIRED_KEY = "dead0000-EXPIRED-1111-2222-3333"
RELEASE = "2024AB"
MAX_REQUESTS = 25


def make_umls_zip(seed: int = 0) -> Dict[str, bytes]:
    """The files of a tiny Metathesaurus in the real layouts; MRREL is big enough (~500 kB) to be cut
    mid-transfer."""
    rng = random.Random(seed)
    conso = "CUI,LAT,TS,LUI,STT,SUI,ISPREF,AUI,SAUI,SCUI,SDUI,SAB,TTY,CODE,STR,SRL,SUPPRESS,CVF"
    rel = "CUI1,AUI1,STYPE1,REL,CUI2,AUI2,STYPE2,RELA,RUI,SRUI,SAB,SL,RG,DIR,SUPPRESS,CVF"
    files = {
        "MRCONSO.RRF": b"C0000005|ENG|P|L0000005|PF|S0007492|Y|A26634265||M0019694|D012711|MSH|PEP|D012711|"
                       b"(131)I-Macroaggregated Albumin|0|N|256|\n"
                       b"C0000005|ENG|S|L0270109|PF|S0007491|Y|A26634266||M0019694|D012711|MSH|ET|D012711|"
                       b"(131)I-MAA|0|N|256|\n",
        "MRSTY.RRF": b"C0000005|T116|A1.4.1.2.1.7|Amino Acid, Peptide, or Protein|AT17648347|256|\n",
        "MRDEF.RRF": b"C0000005|A0016515|AT38152019||MSH|Albumin labelled with iodine-131.|N||\n",
        "MRFILES.RRF": (f"MRCONSO.RRF|Concept names and sources|{conso}|18|2|300|\n"
                        "MRSTY.RRF|Semantic types|CUI,TUI,STN,STY,ATUI,CVF|6|1|80|\n"
                        "MRDEF.RRF|Definitions|CUI,AUI,ATUI,SATUI,SAB,DEF,SUPPRESS,CVF|8|1|90|\n"
                        f"MRREL.RRF|Related concepts|{rel}|16|4000|500000|\n").encode(),
        "MRCOLS.RRF": b"CUI|Unique identifier for concept|||8|8.00|8|MRCONSO.RRF|char(8)|\n",
    }
    rows = [f"C{rng.randrange(10**7):07d}|A{rng.getrandbits(32):x}|AUI|RO|C{rng.randrange(10**7):07d}|"
            f"A{rng.getrandbits(32):x}|AUI|{rng.choice(['isa', 'part_of', ''])}|R{rng.getrandbits(40):x}||MSH|"
            f"MSH||Y|N||\n" for _ in range(4000)]
    files["MRREL.RRF"] = "".join(rows).encode()
    return files


def zip_bytes(files: Dict[str, bytes], extra: bool = True) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{RELEASE}/README.txt", b"UMLS test release\n")
        for name, data in files.items():
            zf.writestr(f"{RELEASE}/META/{name}", data)
        if extra:
            zf.writestr(f"{RELEASE}/META/MRSAT.RRF", b"not wanted|\n" * 100)
    return buf.getvalue()


class UtsMock:
    def __init__(self, payload: bytes, name: str) -> None:
        self.files = {name: payload}
        self.name = name
        self.requests: List[dict] = []
        self.drop_after: Optional[int] = None
        self.ignore_range = False
        self.etag = '"v1"'
        self.expired_status = 403
        self.content_type: Optional[str] = "application/zip"
        self.lock = threading.Lock()
        mock = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # the request line holds the key: never print it
                pass

            def do_GET(self) -> None:  # noqa: N802
                mock.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(60.0, self.server.shutdown)
        self.timer.daemon = True

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def uts_url(self) -> str:
        return f"{self.base}/download"

    @property
    def file_url(self) -> str:
        return f"https://download.nlm.nih.gov/umls/kss/{RELEASE}/{self.name}"

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        parts = urllib.parse.urlsplit(req.path)
        query = urllib.parse.parse_qs(parts.query)
        with self.lock:
            self.requests.append({"path": parts.path, "range": req.headers.get("Range"),
                                  "if_range": req.headers.get("If-Range"), "query": query})
            n = len(self.requests)
        if n > MAX_REQUESTS:
            self.send(req, 503, b"too many requests", "text/plain")
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            return
        if parts.path == "/download":
            key = (query.get("apiKey") or [""])[0]
            file_url = (query.get("url") or [""])[0]
            if key == EXPIRED_KEY:
                page = (b"<html><head><title>UTS</title></head><body><h1>Access denied</h1><p>Your UMLS "
                        b"Metathesaurus License has expired. Please renew your license.</p></body></html>")
                return self.send(req, self.expired_status, page, "text/html")
            if key != KEY:
                page = f"<html><body><h1>401 Unauthorized</h1><p>Invalid API key: {key}</p></body></html>"
                return self.send(req, 401, page.encode(), "text/html")
            name = file_url.rsplit("/", 1)[-1]
            if name not in self.files:
                return self.send(req, 404, b"<html><body>Not Found</body></html>", "text/html")
            req.send_response(302)
            req.send_header("Location", f"/files/{name}?ticket=ST-{n}")
            req.send_header("Content-Length", "0")
            req.end_headers()
            return None
        if parts.path.startswith("/files/"):
            return self.serve_file(req, self.files[parts.path[len("/files/"):]])
        return self.send(req, 404, b"no such path", "text/plain")

    def send(self, req, status: int, body: bytes, content_type: str) -> None:
        req.send_response(status)
        req.send_header("Content-Type", content_type)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    def serve_file(self, req: BaseHTTPRequestHandler, data: bytes) -> None:
        start = 0
        rng = req.headers.get("Range")
        if_range = req.headers.get("If-Range")
        if rng and not self.ignore_range and (if_range is None or if_range == self.etag):
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                return self.send(req, 416, b"", "text/plain")
            req.send_response(206)
            req.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            req.send_response(200)
        if self.content_type:
            req.send_header("Content-Type", self.content_type)
        req.send_header("ETag", self.etag)
        req.send_header("Content-Length", str(len(data) - start))
        req.end_headers()
        body = data[start:]
        if self.drop_after is not None:
            cut, self.drop_after = self.drop_after, None
            req.wfile.write(body[:cut])
            req.wfile.flush()
            req.connection.shutdown(socket.SHUT_RDWR)
            req.close_connection = True
            return None
        req.wfile.write(body)
        return None

    def __enter__(self) -> "UtsMock":
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def umls_files() -> Dict[str, bytes]:
    return make_umls_zip()


@pytest.fixture
def uts(umls_files):
    with UtsMock(zip_bytes(umls_files), f"umls-{RELEASE}-metathesaurus-full.zip") as mock:
        yield mock
    assert len(mock.requests) <= MAX_REQUESTS


def run(uts: UtsMock, out: Path, key: Optional[str] = KEY, **kwargs):
    return download_umls(RELEASE, out, api_key=key, interactive=False, uts_url=uts.uts_url,
                         url=uts.file_url, show_progress=False, timeout=10, **kwargs)


def assert_extracted(out: Path, umls_files: Dict[str, bytes]) -> None:
    for name in UMLS_FILES:
        assert (out / name).read_bytes() == umls_files[name]
    assert not (out / "MRSAT.RRF").exists() and not (out / "README.txt").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith((".part", ".tmp", ".part.json"))]


def test_download_extracts_only_the_metathesaurus_files(uts, umls_files, tmp_path):
    out = tmp_path / "umls"
    result = run(uts, out)
    assert_extracted(out, umls_files)
    assert result.downloaded_bytes == len(uts.files[uts.name]) and result.resumed_from == 0
    assert result.archive is None and not (out / uts.name).exists()
    assert [r["path"] for r in uts.requests] == ["/download", f"/files/{uts.name}"]
    assert uts.requests[0]["query"]["url"] == [uts.file_url]
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["release"] == RELEASE and manifest["missing"] == []
    assert manifest["files"]["MRCONSO.RRF"]["members"] == [f"{RELEASE}/META/MRCONSO.RRF"]
    # a rerun is a no-op: no key needed, no request made
    again = download_umls(RELEASE, out, api_key=None, interactive=False, uts_url=uts.uts_url, url=uts.file_url,
                          show_progress=False)
    assert again.skipped and len(uts.requests) == 2 and set(again.files) == set(UMLS_FILES)


def test_archive_without_content_type_is_accepted(uts, umls_files, tmp_path):
    uts.content_type = None
    run(uts, tmp_path / "umls")
    assert_extracted(tmp_path / "umls", umls_files)


def test_dropped_connection_then_resume_with_range(uts, umls_files, tmp_path, caplog):
    out = tmp_path / "umls"
    cut = 40_000
    uts.drop_after = cut
    with pytest.raises(DownloadError, match=r"\[SB-E406\].*rerun the same command to resume") as err:
        run(uts, out)
    assert f"after {cut} of {len(uts.files[uts.name])} bytes" in str(err.value)
    part = out / (uts.name + ".part")
    assert part.stat().st_size == cut and not (out / "MRCONSO.RRF").exists()
    result = run(uts, out, keep_archive=True)
    assert uts.requests[-1]["range"] == f"bytes={cut}-" and uts.requests[-1]["if_range"] == '"v1"'
    assert result.resumed_from == cut and result.downloaded_bytes == len(uts.files[uts.name]) - cut
    assert (out / uts.name).read_bytes() == uts.files[uts.name] and result.archive == out / uts.name
    assert_extracted(out, umls_files)


def test_server_that_ignores_range_restarts_from_zero(uts, umls_files, tmp_path, caplog):
    out = tmp_path / "umls"
    uts.drop_after = 30_000
    with pytest.raises(DownloadError, match="SB-E406"):
        run(uts, out)
    uts.ignore_range = True
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        result = run(uts, out)
    assert "[SB-W401]" in caplog.text
    assert result.resumed_from == 30_000 and result.downloaded_bytes == len(uts.files[uts.name])
    assert_extracted(out, umls_files)


def test_changed_remote_file_restarts_from_zero(uts, umls_files, tmp_path, caplog):
    out = tmp_path / "umls"
    uts.drop_after = 30_000
    with pytest.raises(DownloadError, match="SB-E406"):
        run(uts, out)
    uts.etag = '"v2"'
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        result = run(uts, out)
    assert "[SB-W402]" in caplog.text and result.downloaded_bytes == len(uts.files[uts.name])
    assert_extracted(out, umls_files)


def test_wrong_key_is_a_coded_error_and_the_echoed_key_is_scrubbed(uts, tmp_path):
    wrong = "ffff0000-WRONG-KEY-0000"
    with pytest.raises(DownloadError, match=r"\[SB-E402\] UTS rejected the UMLS API key \(HTTP 401") as err:
        run(uts, tmp_path / "umls", key=wrong)
    assert wrong not in str(err.value) and "Invalid API key: ***" in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


@pytest.mark.parametrize("status", [403, 200])
def test_expired_licence_is_a_coded_error(uts, tmp_path, status):
    uts.expired_status = status
    with pytest.raises(DownloadError, match=rf"\[SB-E403\].*licence is not active or has expired \(HTTP {status}"):
        run(uts, tmp_path / "umls", key=EXPIRED_KEY)
    assert not list((tmp_path / "umls").glob("*.part"))


def test_unknown_release_file_is_a_coded_error(uts, tmp_path):
    with pytest.raises(DownloadError, match=r"\[SB-E405\].*HTTP 404.*check --release"):
        download_umls("2099AA", tmp_path / "umls", api_key=KEY, uts_url=uts.uts_url, show_progress=False)


def test_truncated_archive_is_a_coded_error_and_removed(uts, tmp_path):
    uts.files[uts.name] = uts.files[uts.name][: len(uts.files[uts.name]) // 2]
    out = tmp_path / "umls"
    with pytest.raises(DownloadError, match=r"\[SB-E409\].*truncated or corrupt.*rerun"):
        run(uts, out)
    assert not (out / uts.name).exists() and not list(out.glob("*.part*"))
    assert not (out / MANIFEST_NAME).exists()


def test_corrupt_member_is_a_coded_error(uts, umls_files, tmp_path):
    data = bytearray(zip_bytes(umls_files))
    pos = data.index(b"META/MRREL.RRF") + 2000  # inside MRREL's compressed data
    data[pos] ^= 0xFF
    uts.files[uts.name] = bytes(data)
    with pytest.raises(DownloadError, match=r"\[SB-E409\]"):
        run(uts, tmp_path / "umls")


def test_checksums(uts, umls_files, tmp_path):
    import hashlib

    payload = uts.files[uts.name]
    with pytest.raises(DownloadError, match=r"\[SB-E408\] MD5 checksum mismatch"):
        run(uts, tmp_path / "a", md5="0" * 32)
    assert not (tmp_path / "a" / uts.name).exists()
    run(uts, tmp_path / "b", md5=hashlib.md5(payload).hexdigest(), sha256=hashlib.sha256(payload).hexdigest())
    assert_extracted(tmp_path / "b", umls_files)
    with pytest.raises(ConfigError, match=r"\[SB-E412\] Invalid SHA256 checksum 'abc'"):
        run(uts, tmp_path / "c", sha256="abc")


def test_missing_required_and_optional_files(umls_files, tmp_path, caplog):
    no_def = {k: v for k, v in umls_files.items() if k != "MRDEF.RRF"}
    with UtsMock(zip_bytes(no_def), "umls.zip") as mock:
        with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
            result = run(mock, tmp_path / "a")
    assert result.missing == ("MRDEF.RRF",) and "[SB-W400] The archive has no MRDEF.RRF" in caplog.text
    assert json.loads((tmp_path / "a" / MANIFEST_NAME).read_text())["missing"] == ["MRDEF.RRF"]
    no_conso = {k: v for k, v in umls_files.items() if k != "MRCONSO.RRF"}
    with UtsMock(zip_bytes(no_conso), "umls.zip") as mock:
        with pytest.raises(DownloadError, match=r"\[SB-E410\].*has no MRCONSO.RRF"):
            run(mock, tmp_path / "b")


def test_answer_that_is_not_a_zip(umls_files, tmp_path):
    with UtsMock(b"<!DOCTYPE html><p>Scheduled maintenance</p>", "umls.zip") as mock:
        with pytest.raises(DownloadError, match=r"\[SB-E404\].*Scheduled maintenance"):
            run(mock, tmp_path / "umls")


def test_network_failure_is_a_coded_error(tmp_path):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(DownloadError, match=r"\[SB-E406\] Network failure"):
        download_umls(RELEASE, tmp_path, api_key=KEY, uts_url=f"http://127.0.0.1:{port}/download",
                      show_progress=False, timeout=5)


def test_not_enough_disk_space(uts, tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10, 10, 0))
    with pytest.raises(DownloadError, match=r"\[SB-E411\] Not enough free disk space"):
        run(uts, tmp_path / "umls")


def test_bad_options_are_coded_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"\[SB-E400\] Invalid UMLS release '2024'"):
        download_umls("2024", tmp_path, api_key=KEY)
    with pytest.raises(ConfigError, match=r"\[SB-E413\].*plain HTTP to 'uts.example.org'"):
        download_umls(RELEASE, tmp_path, api_key=KEY, uts_url="http://uts.example.org/download")
    with pytest.raises(ConfigError, match=r"\[SB-E414\] Invalid URL 'ftp://x/y.zip' for --url"):
        download_umls(RELEASE, tmp_path, api_key=KEY, url="ftp://x/y.zip")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"\[SB-E415\]"):
        download_umls(RELEASE, tmp_path / "file", api_key=KEY)
    pasted = f"https://uts-ws.nlm.nih.gov/download?url=https://x/u.zip&apiKey={KEY}"
    for kwargs in ({"url": pasted}, {"uts_url": pasted}):
        with pytest.raises(ConfigError, match=r"\[SB-E417\].*keep the key in the environment") as err:
            download_umls(RELEASE, tmp_path / "out", api_key=KEY, **kwargs)
        assert KEY not in str(err.value)
    for bad in ("../MRCONSO.RRF", "..", "META/MRSTY.RRF"):
        with pytest.raises(ConfigError, match=r"\[SB-E416\] Invalid file name"):
            download_umls(RELEASE, tmp_path / "out", api_key=KEY, files=["MRSTY.RRF", bad])
    with pytest.raises(ConfigError, match=r"\[SB-E416\]"):
        download_umls(RELEASE, tmp_path / "out", api_key=KEY, files=[])
    assert not (tmp_path / "out").exists()
    assert umls_mod.check_release(" 2024ab ") == "2024AB"


def test_api_key_from_env_prompt_or_error(monkeypatch):
    monkeypatch.setenv("MY_UMLS_KEY", f"  {KEY}\n")
    assert resolve_api_key("MY_UMLS_KEY", interactive=False) == KEY
    monkeypatch.delenv("MY_UMLS_KEY")
    assert resolve_api_key("MY_UMLS_KEY", interactive=True, prompt=lambda: KEY) == KEY
    with pytest.raises(ConfigError, match=r"\[SB-E401\].*export MY_UMLS_KEY=<your key>"):
        resolve_api_key("MY_UMLS_KEY", interactive=False)
    with pytest.raises(ConfigError, match=r"\[SB-E401\]"):
        resolve_api_key("MY_UMLS_KEY", interactive=True, prompt=lambda: "   ")


def test_cli_download_and_errors(uts, umls_files, tmp_path, monkeypatch):
    monkeypatch.delenv("UMLS_API_KEY", raising=False)
    runner = CliRunner()
    out = tmp_path / "umls"
    args = ["download-umls", "--release", RELEASE, "--output", str(out), "--uts-url", uts.uts_url,
            "--url", uts.file_url, "--no-progress"]
    result = runner.invoke(app, args)  # no key, no terminal
    assert isinstance(result.exception, ConfigError) and "[SB-E401]" in str(result.exception)
    result = runner.invoke(app, args + ["--api-key-env", "UTS_KEY"], env={"UTS_KEY": KEY})
    assert result.exit_code == 0, result.output
    assert "extracted UMLS 2024AB" in result.output and "MRCONSO.RRF" in result.output
    assert_extracted(out, umls_files)
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "already complete" in result.output
    sub = tmp_path / "only_def"
    result = runner.invoke(app, args[:4] + [str(sub)] + args[5:] + ["-f", "MRDEF.RRF", "--keep-archive"],
                           env={"UMLS_API_KEY": KEY})
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in sub.iterdir()) == sorted(["MRDEF.RRF", MANIFEST_NAME, uts.name])
    assert (sub / "MRDEF.RRF").read_bytes() == umls_files["MRDEF.RRF"] and "Archive kept" in result.output


def test_key_never_appears_in_output_logs_errors_or_files(uts, umls_files, tmp_path, caplog, capfd, monkeypatch):
    """Every path that sees the key: success, drop + resume, wrong key, server errors, the CLI."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("UMLS_API_KEY", KEY)
    texts: List[str] = []
    out = tmp_path / "umls"
    uts.drop_after = 25_000
    with pytest.raises(DownloadError) as err:
        run(uts, out, key=None, keep_archive=True)
    texts.append(str(err.value))
    texts.append(json.dumps((out / (uts.name + ".part.json")).read_text()))
    result = CliRunner().invoke(app, ["download-umls", "-r", RELEASE, "-o", str(out), "--uts-url", uts.uts_url,
                                      "--url", uts.file_url, "--keep-archive"])
    assert result.exit_code == 0, result.output
    texts.append(result.output)
    for key, kwargs in ((EXPIRED_KEY, {}), (KEY, {"url": uts.file_url + ".missing"})):
        with pytest.raises(DownloadError) as err:
            download_umls(RELEASE, tmp_path / "x", api_key=key, uts_url=uts.uts_url, show_progress=False,
                          **kwargs)
        texts.append(str(err.value))
    captured = capfd.readouterr()
    texts += [captured.out, captured.err, caplog.text]
    texts += [repr(r.__dict__) for r in caplog.records]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("latin1"))
    blob = "\n".join(texts)
    assert "MRCONSO.RRF" in blob and "[SB-E406]" in blob and "[SB-E403]" in blob  # we did look at real text
    for form in (KEY, urllib.parse.quote(KEY), EXPIRED_KEY):
        assert form not in blob


def test_cli_asks_for_the_key_with_hidden_input_on_a_terminal(uts, umls_files, tmp_path, monkeypatch):
    from types import SimpleNamespace

    monkeypatch.delenv("UMLS_API_KEY", raising=False)
    monkeypatch.setattr(umls_mod, "sys", SimpleNamespace(stdin=SimpleNamespace(isatty=lambda: True)))
    out = tmp_path / "umls"
    result = CliRunner().invoke(app, ["download-umls", "-r", RELEASE, "-o", str(out), "--uts-url", uts.uts_url,
                                      "--url", uts.file_url, "--no-progress"], input=KEY + "\n")
    assert result.exit_code == 0, result.output
    assert "UMLS API key (input hidden)" in result.output and KEY not in result.output
    assert_extracted(out, umls_files)


def test_extracted_folder_is_what_the_umls_reader_reads(uts, tmp_path):
    from spacy_sapbert.kb.readers import read_umls

    out = tmp_path / "umls"
    run(uts, out)
    concepts = list(read_umls(out))
    assert [c.concept_id for c in concepts] == ["C0000005"]
    assert concepts[0].types == ("T116",) and "iodine-131" in (concepts[0].definition or "")
