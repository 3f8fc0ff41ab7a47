#!/usr/bin/env python
"""Make the public data files the project needs available under assets/data/.

The list of files is the ``assets`` section of project.yml (one source of truth; weasel's
``assets`` command reads the same entries). For each entry, in this order:

1. ``file`` (the usable path) already exists with the pinned MD5 (``file_md5``): nothing to do;
2. ``<shared_data>/<shared>`` exists (../shared/data on the project machines): its MD5 is checked
   and ``file`` becomes a symlink to it (nothing is copied);
3. otherwise ``url`` is downloaded to ``dest`` (written via a temporary file), the ``member`` is
   extracted from a zip (or a .gz is decompressed), ``convert: ctd_medic`` turns CTD's current
   ``CTD_diseases.tsv`` into the ``ID|ALT||name|synonym`` MEDIC format, and the MD5 is checked.

Every file that cannot be made available is listed at the end with what to do, and the script
exits with status 1. A manifest (source, path, MD5 of every file) is written to
assets/data/MANIFEST.json.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

import srsly

from spacy_sapbert.errors import Errors
from spacy_sapbert.base.util import atomic_write

TIMEOUT_S = 60


def md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _download(url: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            shutil.copyfileobj(resp, out)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _ctd_to_medic(lines) -> List[str]:
    """CTD_diseases.tsv (DiseaseName, DiseaseID, Definition, AltDiseaseIDs, ParentIDs, TreeNumbers,
    ParentTreeNumbers, Synonyms, SlimMappings) → ``ID|ALT...||name|synonym...`` lines."""
    out = []
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.rstrip("\n").split("\t")
        if len(cols) < 8:
            continue
        ids = [cols[1]] + [x for x in cols[3].split("|") if x]
        names = [cols[0]] + [x for x in cols[7].split("|") if x]
        out.append("|".join(ids) + "||" + "|".join(names) + "\n")
    return out


def _materialise(entry: Dict, root: Path, downloaded: Path, target: Path) -> None:
    """Turn the downloaded file into the usable file (extract / decompress / convert)."""
    member: Optional[str] = entry.get("member")
    convert: Optional[str] = entry.get("convert")
    if member:
        with zipfile.ZipFile(downloaded) as zf:
            data = zf.read(member)
    elif downloaded.suffix == ".gz":
        with gzip.open(downloaded, "rb") as fh:
            data = fh.read()
    else:
        data = downloaded.read_bytes()
    if convert == "ctd_medic":
        data = "".join(_ctd_to_medic(data.decode("utf8").splitlines(True))).encode("utf8")
    elif convert:
        raise SystemExit(f"Unknown 'convert: {convert}' in project.yml for {entry.get('file')}")
    with atomic_write(target, "wb") as fh:
        fh.write(data)


def fetch_one(entry: Dict, root: Path, shared: Path, *, allow_unpinned: bool, offline: bool) -> Dict:
    target = root / entry.get("file", entry["dest"])
    expected = entry.get("file_md5") or (entry.get("checksum") if not entry.get("member") and not entry.get("convert") else None)
    if target.exists():
        got = md5(target)
        if expected is None or got == expected:
            return {"file": str(target.relative_to(root)), "source": "present", "md5": got}
    shared_file = shared / entry["shared"] if entry.get("shared") else None
    if shared_file is not None and shared_file.is_file():
        got = md5(shared_file)
        if expected and got != expected:
            raise RuntimeError(Errors.E447.format(path=shared_file, got=got, expected=expected,
                                                  hint="the shared copy is not the pinned release; restore it or point --vars.shared_data elsewhere."))
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        try:
            target.symlink_to(shared_file.resolve())
        except OSError:  # file systems without symlinks: copy (assets/ is git-ignored)
            shutil.copyfile(shared_file, target)
        return {"file": str(target.relative_to(root)), "source": str(shared_file), "md5": got}
    url = entry.get("url")
    looked = str(shared_file) if shared_file is not None else "(no shared copy listed)"
    if not url or offline:
        reason = "no URL listed" if not url else "offline mode (--offline)"
        raise RuntimeError(Errors.E446.format(file=target.relative_to(root), shared=looked, url=url or "-", reason=reason))
    dest = root / entry["dest"]
    if not dest.exists() or (entry.get("checksum") and md5(dest) != entry["checksum"]):
        try:
            _download(url, dest)
        except Exception as err:  # network errors of every kind end here with one message
            raise RuntimeError(Errors.E446.format(file=target.relative_to(root), shared=looked, url=url,
                                                  reason=f"{type(err).__name__}: {err}")) from None
    if entry.get("checksum") and md5(dest) != entry["checksum"]:
        got = md5(dest)
        dest.unlink()
        raise RuntimeError(Errors.E447.format(path=url, got=got, expected=entry["checksum"],
                                              hint="the download was removed; retry, or place the file by hand."))
    if dest != target:
        _materialise(entry, root, dest, target)
    got = md5(target)
    if expected and got != expected:
        if not allow_unpinned:
            target.unlink()
            raise RuntimeError(Errors.E447.format(path=target, got=got, expected=expected,
                                                  hint="the published file differs from the pinned release; rerun with "
                                                       "--allow-unpinned to use it anyway (results will differ)."))
        print(f"WARNING: {target} differs from the pinned release (MD5 {got}, pinned {expected}); used anyway.")
    elif not expected:
        print(f"WARNING: {target} comes from {url}, which publishes only its current release (no pinned checksum).")
    return {"file": str(target.relative_to(root)), "source": url, "md5": got}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=Path("project.yml"), help="project.yml with the assets list")
    parser.add_argument("--shared-data", type=Path, default=Path("../shared/data"), help="folder with the shared copies")
    parser.add_argument("--manifest", type=Path, default=Path("assets/data/MANIFEST.json"))
    parser.add_argument("--only", nargs="*", default=None, help="only these usable files (paths as in project.yml)")
    parser.add_argument("--offline", action="store_true", help="never download; fail when a file is missing")
    parser.add_argument("--allow-unpinned", action="store_true", help="accept downloads whose MD5 differs from the pinned one")
    args = parser.parse_args(argv)
    root = args.project.resolve().parent
    config = srsly.read_yaml(args.project)
    entries = [e for e in config.get("assets", []) if "dest" in e]
    if args.only:
        entries = [e for e in entries if e.get("file", e["dest"]) in args.only]
    done: List[Dict] = []
    problems: List[str] = []
    for entry in entries:
        try:
            record = fetch_one(entry, root, args.shared_data, allow_unpinned=args.allow_unpinned, offline=args.offline)
        except (RuntimeError, zipfile.BadZipFile, KeyError, OSError) as err:
            problems.append(str(err))
            continue
        done.append(record)
        print(f"ok  {record['file']:<28} {record['md5']}  ({record['source']})")
    if problems:
        print(f"\n{len(problems)} of {len(entries)} data files are not available:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    with atomic_write(root / args.manifest) as fh:
        json.dump({"files": done}, fh, indent=2)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
