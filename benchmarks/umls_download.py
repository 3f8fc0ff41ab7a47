"""UMLS download throughput and memory, against a loopback server that mimics the UTS download API.

No UMLS licence or network needed: a synthetic Metathesaurus zip (``--mb`` MB of RRF rows, stored
uncompressed so that making it costs little CPU) is served from disk by a Range-capable HTTP server on
127.0.0.1. Measured in one run, on the same file:

- baseline: plain ``urllib`` GET into a file + ``zipfile.extractall`` (no resume, no checks);
- ``download_umls`` from scratch (Range-capable streaming, size check, sha256, selective extraction);
- ``download_umls`` interrupted at half the file (the server drops the connection), then resumed.

Prints wall times, MB/s and the peak RSS of the process (it stays flat: everything streams).
Usage: ``python benchmarks/umls_download.py --mb 200``
"""
from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from results_io import table, write_results
from spacy_sapbert.assets.umls import download_umls
from spacy_sapbert.errors import DownloadError
from spacy_sapbert.base.util import file_sha256, peak_rss_mb

KEY = "benchmark-key-0000"


def make_zip(path: Path, mb: int) -> None:
    row = "C{:07d}|ENG|P|L0000005|PF|S0007492|Y|A{:08d}||M0019694|D012711|MSH|PEP|D012711|name {}|0|N|256|\n"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        with zf.open("2024AB/META/MRCONSO.RRF", "w", force_zip64=True) as out:
            i, written, target = 0, 0, mb * 2**20
            while written < target:
                block = "".join(row.format(i + j, i + j, i + j) for j in range(5000)).encode()
                out.write(block)
                written += len(block)
                i += 5000
        for name in ("MRSTY.RRF", "MRDEF.RRF", "MRREL.RRF", "MRFILES.RRF", "MRCOLS.RRF", "MRSAT.RRF"):
            zf.writestr(f"2024AB/META/{name}", f"{name}|row|\n" * 1000)


class Server:
    def __init__(self, path: Path) -> None:
        self.path, self.size, self.drop_after = path, path.stat().st_size, None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                outer.serve(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/download"

    def serve(self, req: BaseHTTPRequestHandler) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(req.path).query)
        if query.get("apiKey") != [KEY]:
            req.send_response(401)
            req.end_headers()
            return
        start = 0
        if req.headers.get("Range"):
            start = int(req.headers["Range"].split("=")[1].split("-")[0])
            req.send_response(206)
            req.send_header("Content-Range", f"bytes {start}-{self.size - 1}/{self.size}")
        else:
            req.send_response(200)
        req.send_header("Content-Type", "application/zip")
        req.send_header("Content-Length", str(self.size - start))
        req.end_headers()
        limit, self.drop_after = self.drop_after, None
        sent = 0
        with open(self.path, "rb") as fh:
            fh.seek(start)
            for block in iter(lambda: fh.read(1 << 20), b""):
                if limit is not None and sent + len(block) > limit:
                    req.wfile.write(block[: limit - sent])
                    req.wfile.flush()
                    req.connection.shutdown(socket.SHUT_RDWR)
                    return
                req.wfile.write(block)
                sent += len(block)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the synthetic MRCONSO.RRF in MB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        zpath = tmp / "umls-2024AB-metathesaurus-full.zip"
        t = time.perf_counter()
        make_zip(zpath, args.mb)
        size_mb = zpath.stat().st_size / 2**20
        print(f"synthetic zip: {size_mb:.0f} MB, made in {time.perf_counter() - t:.1f} s")
        server = Server(zpath)
        file_url = "https://download.nlm.nih.gov/umls/kss/2024AB/umls-2024AB-metathesaurus-full.zip"
        try:
            base = tmp / "baseline"
            base.mkdir()
            t = time.perf_counter()
            query = urllib.parse.urlencode({"url": file_url, "apiKey": KEY})
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(f"{server.url}?{query}") as resp, open(base / "u.zip", "wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
            with zipfile.ZipFile(base / "u.zip") as zf:
                zf.extractall(base / "x")
            rows = [("baseline: urllib GET + extractall (all members)", time.perf_counter() - t)]

            t = time.perf_counter()
            download_umls("2024AB", tmp / "a", api_key=KEY, uts_url=server.url, show_progress=False)
            rows.append(("download_umls from scratch", time.perf_counter() - t))

            server.drop_after = zpath.stat().st_size // 2
            t = time.perf_counter()
            try:
                download_umls("2024AB", tmp / "b", api_key=KEY, uts_url=server.url, show_progress=False)
            except DownloadError as err:
                assert "[SB-E406]" in str(err)
            result = download_umls("2024AB", tmp / "b", api_key=KEY, uts_url=server.url, show_progress=False)
            rows.append((f"download_umls dropped at 50% + resumed ({result.resumed_from / 2**20:.0f} MB reused)",
                         time.perf_counter() - t))
            digests = {file_sha256(p) for p in (tmp / "a" / "MRCONSO.RRF", tmp / "b" / "MRCONSO.RRF",
                                                base / "x/2024AB/META/MRCONSO.RRF")}
        finally:
            server.close()
    print("(2 shared CPU cores, loopback HTTP, local disk; the machine was shared with other jobs)")
    print(f"{'run':<70} {'wall s':>7} {'MB/s':>7}")
    for name, secs in rows:
        print(f"{name:<70} {secs:7.2f} {size_mb / secs:7.0f}")
    print(f"extracted MRCONSO.RRF identical in all three runs (sha256): {len(digests) == 1}")
    print(f"peak RSS of the whole process: {peak_rss_mb():.0f} MB")
    notes = [f"Synthetic Metathesaurus zip of {size_mb:.0f} MB (stored uncompressed) served by a Range-capable HTTP "
             "server on 127.0.0.1 that mimics the UTS download API; no licence or network needed.",
             f"Extracted MRCONSO.RRF identical in all three runs (sha256): {len(digests) == 1}; peak RSS of the whole "
             f"process: {peak_rss_mb():.0f} MB (everything streams).",
             "Shared machine (other jobs running): timings are noisy."]
    cells = [[name, round(secs, 2), round(size_mb / secs)] for name, secs in rows]
    path = write_results("umls_download", {"UMLS download": table(["run", "wall s", "MB/s"], cells)}, notes=notes,
                         figures={"zip_mb": round(size_mb, 1), "identical": len(digests) == 1,
                                  "peak_rss_mb": round(peak_rss_mb())})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
