"""Pull named files out of a (large) zip archive without unpacking the rest.

A wanted file is found by its base name under any folder (``2024AB/META/MRCONSO.RRF``), also when the
archive holds it gzipped (``MRCONSO.RRF.gz``) or split into parts (``MRCONSO.RRF.aa.gz``,
``MRCONSO.RRF.ab.gz``, ... concatenated in order), as older UMLS distributions did. Each file is
streamed into a temporary file in the output folder, checksummed on the way, fsynced and renamed into
place, so a crash never leaves a half-written file under the final name. Output names are ours (the
base name), never paths taken from the archive, so a hostile member name cannot write outside.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import re
import shutil
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Dict, List, Sequence

from ..errors import DownloadError, Errors, Warnings
from ..base.util import atomic_write, get_logger

logger = get_logger("assets.archive")

CHUNK_SIZE = 1 << 20
CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError, gzip.BadGzipFile, NotImplementedError)


@dataclass(frozen=True)
class ExtractedFile:
    name: str
    path: Path
    size: int
    sha256: str
    members: tuple  # archive member names it was built from, in order


def _folder_rank(folder: str) -> tuple:
    """Sort key of a folder: a META folder first, then shallower, then by name."""
    parts = PurePosixPath(folder).parts
    in_meta = any(part.upper() == "META" for part in parts)
    return (0 if in_meta else 1, len(parts), folder)


def _member_rank(info: zipfile.ZipInfo) -> tuple:
    return _folder_rank(str(PurePosixPath(info.filename).parent)) + (info.filename,)


def find_members(infos: Sequence[zipfile.ZipInfo], name: str) -> List[zipfile.ZipInfo]:
    """The member(s) that make up ``name``: exact file > ``name.gz`` > split parts; META folders first."""
    files = [info for info in infos if not info.is_dir()]
    base = {info.filename: PurePosixPath(info.filename).name for info in files}
    wanted = name.upper()
    exact = [i for i in files if base[i.filename].upper() == wanted]
    if exact:
        return [min(exact, key=_member_rank)]
    gz = [i for i in files if base[i.filename].upper() == wanted + ".GZ"]
    if gz:
        return [min(gz, key=_member_rank)]
    split = re.compile(re.escape(wanted) + r"\.([A-Z]{2})(\.GZ)?")
    parts = [i for i in files if split.fullmatch(base[i.filename].upper())]
    if not parts:
        return []
    folder = min((str(PurePosixPath(i.filename).parent) for i in parts), key=_folder_rank)
    chosen = [i for i in parts if str(PurePosixPath(i.filename).parent) == folder]
    return sorted(chosen, key=lambda i: base[i.filename].upper())


def _is_gz(info: zipfile.ZipInfo) -> bool:
    return info.filename.lower().endswith(".gz")


def open_archive(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except CORRUPT as err:
        raise _corrupt(path, err) from None


def _corrupt(path: Path, err: BaseException) -> DownloadError:
    with contextlib.suppress(FileNotFoundError):
        Path(path).unlink()
    return DownloadError(Errors.E409.format(path=path, reason=f"{type(err).__name__}: {err}"))


def extract_files(
    archive: Path,
    output: Path,
    names: Sequence[str],
    *,
    required: Sequence[str] = (),
    show_progress: bool = True,
) -> Dict[str, ExtractedFile]:
    """Extract ``names`` from ``archive`` into ``output`` (flat, by base name).

    A missing name in ``required`` raises E410 (nothing is written); another missing name is skipped
    with W400. A truncated or corrupt archive raises E409 and the archive file is removed (a file of
    the announced size that is corrupt cannot be repaired by resuming).
    """
    from tqdm.auto import tqdm

    archive, output = Path(archive), Path(output)
    output.mkdir(parents=True, exist_ok=True)
    with open_archive(archive) as zf:
        infos = zf.infolist()
        plan = {name: find_members(infos, name) for name in names}
        missing = [name for name in required if not plan.get(name)]
        if missing:
            examples = ", ".join(i.filename for i in infos[:5]) or "none"
            raise DownloadError(
                Errors.E410.format(path=archive, names=", ".join(missing), n=len(infos), examples=examples)
            )
        for name in names:
            if not plan[name]:
                logger.warning(Warnings.W400.format(name=name))
        need = sum(i.file_size for members in plan.values() for i in members)
        free = shutil.disk_usage(output).free
        if need > free:
            raise DownloadError(
                Errors.E411.format(path=output, what="extracting the Metathesaurus files",
                                   need=need // 2**20 + 1, free=free // 2**20)
            )
        results: Dict[str, ExtractedFile] = {}
        with tqdm(total=need, unit="B", unit_scale=True, unit_divisor=1024, desc="extracting",
                  disable=not show_progress, leave=False) as bar:
            for name, members in plan.items():
                if members:
                    try:
                        results[name] = _extract_one(zf, members, output / name, bar)
                    except CORRUPT as err:
                        zf.close()
                        raise _corrupt(archive, err) from None
    return results


def _extract_one(zf: zipfile.ZipFile, members: List[zipfile.ZipInfo], target: Path, bar) -> ExtractedFile:
    digest = hashlib.sha256()
    size = 0
    with atomic_write(target, "wb") as out:
        for info in members:
            with zf.open(info) as raw:
                src = gzip.GzipFile(fileobj=raw) if _is_gz(info) else raw
                with src:
                    for block in iter(lambda: src.read(CHUNK_SIZE), b""):
                        out.write(block)
                        digest.update(block)
                        size += len(block)
                        if not _is_gz(info):
                            bar.update(len(block))
            if _is_gz(info):
                bar.update(info.file_size)
    logger.info("Extracted %s (%d bytes) from %s", target.name, size, ", ".join(i.filename for i in members))
    return ExtractedFile(target.name, target, size, digest.hexdigest(), tuple(i.filename for i in members))


def file_digests(path: Path, algorithms: Sequence[str]) -> Dict[str, str]:
    """Hex digests of a file for several algorithms in one pass."""
    hashers = {algo: hashlib.new(algo) for algo in algorithms}
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK_SIZE), b""):
            for hasher in hashers.values():
                hasher.update(block)
    return {algo: hasher.hexdigest() for algo, hasher in hashers.items()}


__all__ = ["ExtractedFile", "extract_files", "find_members", "file_digests", "open_archive"]
