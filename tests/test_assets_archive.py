"""Archive extraction (layouts, atomicity) and the .part bookkeeping of the resumable download."""
from __future__ import annotations

import gzip
import json
import zipfile
from pathlib import Path

import pytest

from spacy_sapbert.assets.archive import extract_files, file_digests, find_members
from spacy_sapbert.assets.download import Redactor, check_url, safe_location
from spacy_sapbert.errors import ConfigError, DownloadError

from test_assets_umls import KEY, UtsMock, make_umls_zip, run, zip_bytes


def write_zip(path: Path, members: dict) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_find_members_prefers_meta_then_gz_then_split(tmp_path):
    archive = write_zip(tmp_path / "a.zip", {
        "2024AB/LEX/MRCONSO.RRF": b"wrong folder\n",
        "2024AB/META/MRCONSO.RRF": b"right\n",
        "2024AB/META/MRSTY.RRF.gz": gzip.compress(b"sty\n"),
        "2024AB/META/MRREL.RRF.ab.gz": gzip.compress(b"second\n"),
        "2024AB/META/MRREL.RRF.aa.gz": gzip.compress(b"first\n"),
        "2024AB/OTHER/MRREL.RRF.aa": b"other folder\n",
        "2024AB/META/MRCONSO.RRF.bak": b"not a part\n",
    })
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
    assert [i.filename for i in find_members(infos, "MRCONSO.RRF")] == ["2024AB/META/MRCONSO.RRF"]
    assert [i.filename for i in find_members(infos, "mrsty.rrf")] == ["2024AB/META/MRSTY.RRF.gz"]
    assert [i.filename for i in find_members(infos, "MRREL.RRF")] == [
        "2024AB/META/MRREL.RRF.aa.gz", "2024AB/META/MRREL.RRF.ab.gz"]
    assert find_members(infos, "MRDEF.RRF") == []
    out = tmp_path / "out"
    result = extract_files(archive, out, ["MRCONSO.RRF", "MRSTY.RRF", "MRREL.RRF"], show_progress=False)
    assert (out / "MRCONSO.RRF").read_bytes() == b"right\n"
    assert (out / "MRSTY.RRF").read_bytes() == b"sty\n"
    assert (out / "MRREL.RRF").read_bytes() == b"first\nsecond\n"
    assert result["MRREL.RRF"].sha256 == file_digests(out / "MRREL.RRF", ["sha256"])["sha256"]
    assert sorted(p.name for p in out.iterdir()) == ["MRCONSO.RRF", "MRREL.RRF", "MRSTY.RRF"]


def test_member_names_cannot_escape_the_output(tmp_path):
    archive = write_zip(tmp_path / "a.zip", {"../../evil/MRCONSO.RRF": b"x|\n", "/abs/MRSTY.RRF": b"y|\n"})
    out = tmp_path / "deep" / "out"
    extract_files(archive, out, ["MRCONSO.RRF", "MRSTY.RRF"], show_progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["MRCONSO.RRF", "MRSTY.RRF"]
    assert not (tmp_path / "evil").exists()


def test_corrupt_gzip_part_keeps_earlier_files_out_of_final_names(tmp_path):
    archive = write_zip(tmp_path / "a.zip", {"META/MRCONSO.RRF.gz": gzip.compress(b"abc\n" * 100)[:-12]})
    out = tmp_path / "out"
    with pytest.raises(DownloadError, match=r"\[SB-E409\]"):
        extract_files(archive, out, ["MRCONSO.RRF"], show_progress=False)
    assert list(out.iterdir()) == [] and not archive.exists()


def test_complete_part_is_finished_without_a_request(tmp_path):
    payload = zip_bytes(make_umls_zip())
    with UtsMock(payload, "u.zip") as uts:
        out = tmp_path / "umls"
        out.mkdir()
        (out / "u.zip.part").write_bytes(payload)
        (out / "u.zip.part.json").write_text(json.dumps({"source": uts.file_url, "total": len(payload)}))
        result = run(uts, out)
        assert uts.requests == [] and result.resumed_from == len(payload) and result.downloaded_bytes == 0
        assert (out / "MRSTY.RRF").exists()


def test_part_of_another_file_is_discarded_and_oversized_part_restarts(tmp_path):
    payload = zip_bytes(make_umls_zip())
    with UtsMock(payload, "u.zip") as uts:
        out = tmp_path / "a"
        out.mkdir()
        (out / "u.zip.part").write_bytes(b"junk" * 10)
        (out / "u.zip.part.json").write_text(json.dumps({"source": "https://elsewhere/x.zip", "total": 40}))
        result = run(uts, out)
        assert result.resumed_from == 0 and uts.requests[-1]["range"] is None
        # a .part longer than the file with no known total: the server answers 416, we restart once
        out = tmp_path / "b"
        out.mkdir()
        (out / "u.zip.part").write_bytes(payload + b"extra")
        (out / "u.zip.part.json").write_text(json.dumps({"source": uts.file_url, "total": None}))
        n = len(uts.requests)
        result = run(uts, out)
        ranges = [r["range"] for r in uts.requests[n:] if r["path"].startswith("/files/")]
        assert ranges == [f"bytes={len(payload) + 5}-", None]
        assert result.downloaded_bytes == len(payload) and (out / "MRCONSO.RRF").exists()


def test_redactor_and_url_helpers():
    redact = Redactor("a b+c/d", None, "")
    text = "x a b+c/d y a%20b%2Bc%2Fd z a+b%2Bc%2Fd"
    assert redact(text) == "x *** y *** z ***"
    assert safe_location(f"https://user:pw@uts.example.org:8443/download?apiKey={KEY}#f") == \
        "https://uts.example.org:8443/download"
    check_url("http://127.0.0.1:1/download", "--uts-url", carries_secret=True)
    with pytest.raises(ConfigError, match=r"\[SB-E414\]"):
        check_url("not a url", "--url")


def test_http_error_status_5xx_is_coded(tmp_path):
    with UtsMock(b"", "u.zip") as uts:
        uts.handle = lambda req: uts.send(req, 503, b"<html>Service Unavailable</html>", "text/html")
        with pytest.raises(DownloadError, match=r"\[SB-E405\].*HTTP 503.*rerun later"):
            run(uts, tmp_path / "x")


def _raw_206(req, body: bytes, content_range: str) -> None:
    req.send_response(206)
    req.send_header("Content-Type", "application/zip")
    req.send_header("Content-Range", content_range)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


def test_more_bytes_than_announced_is_a_coded_error(tmp_path):
    with UtsMock(b"", "u.zip") as uts:
        uts.handle = lambda req: _raw_206(req, b"PK" + b"x" * 148, "bytes 0-99/100")
        with pytest.raises(DownloadError, match=r"\[SB-E407\] Size mismatch for u.zip: .* 100 bytes but 150"):
            run(uts, tmp_path / "x")
        assert not list((tmp_path / "x").glob("u.zip.part*"))


def test_server_that_never_answers_the_right_range_gives_up(tmp_path):
    with UtsMock(b"", "u.zip") as uts:
        calls = []

        def handle(req):
            calls.append(req.headers.get("Range"))
            _raw_206(req, b"PK" + b"x" * 8, "bytes 5-14/15")

        uts.handle = handle
        with pytest.raises(DownloadError, match=r"\[SB-E405\].*answered 3 requests without a usable range"):
            run(uts, tmp_path / "x")
        assert calls == [None, None, None]  # each wrong range restarts from byte 0, at most 3 times
