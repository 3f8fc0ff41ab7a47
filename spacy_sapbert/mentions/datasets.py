"""Benchmark readers: PubTator, BioSyn concept files, and generic TSV / JSONL mention lists; the format registry
(:func:`read_dataset`), which also reads brat standoff (:mod:`~spacy_sapbert.mentions.brat`: Mantra GSC,
CANTEMIST), XL-BEL and CodiEsp-X (:mod:`~spacy_sapbert.mentions.clinical`) and spaCy DocBin files
(:mod:`~spacy_sapbert.mentions.docbin`).

Every reader returns ``List[Document]``; a :class:`Document` keeps its text (title + " " + abstract
for PubTator, the ``context`` column for TSV/JSONL, ``<pmid>.txt`` beside a BioSyn ``.concept``
file) when there is one, so the same mentions can be linked mention-only or end-to-end through a
spaCy pipeline.

Gold ids: ``-1`` (or empty) means "no concept" and gives ``ids == ()``. Composite ids ``A|B`` and
``A+B`` are split into their parts and the mention is marked ``composite=True``; how a composite
mention is scored is decided in :mod:`spacy_sapbert.mentions.metrics` (any part counts, or the
mention is excluded with ``exclude_composite``). Malformed lines raise :class:`DataFormatError`
naming file and line; offsets that do not match the document text are errors, never skipped.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Collection, Dict, List, Optional, Sequence, Tuple

from ..errors import DataFormatError, Errors, MissingInputError, ConfigError
from ..base.lines import iter_lines, read_text, require_file
from ..base.util import PathLike, get_logger
from .brat import read_brat
from .clinical import read_codiesp, read_xlbel
from .docbin import read_docbin
from .records import DATA_HINT, Document, Mention, span_text, split_ids, type_ok, with_language

logger = get_logger("evaluation.datasets")

FORMATS = ("auto", "pubtator", "biosyn", "tsv", "jsonl", "brat", "xlbel", "codiesp", "docbin")


def _check_offsets(path: Path, line: int, text: str, start: int, end: int, mention: str) -> str:
    """The text at ``start:end``; differences in whitespace only are tolerated, anything else is E300."""
    found = span_text(text, start, end, mention)
    if found is None:
        shown = text[start:end] if 0 <= start <= end <= len(text) else "<out of range>"
        raise DataFormatError(Errors.E300.format(path=path, line=line, start=start, end=end, mention=mention, found=shown))
    return found


def read_pubtator(path: PathLike, *, types: Optional[Collection[str]] = None) -> List[Document]:
    """Read a PubTator file (NCBI disease, BC5CDR, MedMentions).

    ``pmid|t|title`` and ``pmid|a|abstract`` lines give the text (title + " " + abstract, the
    offsets' frame); ``pmid<TAB>start<TAB>end<TAB>mention<TAB>type<TAB>ids[<TAB>...]`` lines give
    mentions; relation lines (``pmid<TAB>CID<TAB>...``) are skipped; blank lines end a document.
    ``types`` keeps only mentions of those types (e.g. ``{"Disease"}`` for BC5CDR).
    """
    path = require_file(path, "PubTator file", DATA_HINT)
    docs: List[Document] = []
    by_id: Dict[str, Document] = {}
    title: Dict[str, str] = {}
    current: Optional[Document] = None
    for n, line in iter_lines(path):
        if not line.strip():
            current = None
            continue
        if "\t" not in line:
            m = re.match(r"^([^|]+)\|([ta])\|(.*)$", line)
            if not m:
                raise DataFormatError(Errors.E301.format(path=path, line=n, what="expected 'pmid|t|title' or 'pmid|a|abstract'"))
            pmid, kind, body = m.group(1), m.group(2), m.group(3)
            if kind == "t":
                if pmid in by_id:  # NCBI's train set holds one abstract twice: keep both, as published
                    logger.warning("%s: line %d: document '%s' appears a second time; kept as published", path, n, pmid)
                current = Document(doc_id=pmid, text=body)
                title[pmid] = body
                by_id[pmid] = current
                docs.append(current)
            else:
                if current is None or current.doc_id != pmid or current.mentions:
                    raise DataFormatError(Errors.E301.format(path=path, line=n, what=f"abstract of '{pmid}' without its title line just before"))
                current.text = f"{title[pmid]} {body}"
            continue
        cols = line.split("\t")
        if len(cols) >= 2 and not cols[1].strip().lstrip("-").isdigit():
            continue  # relation line: pmid, CID, chemical, disease
        if len(cols) < 6:
            raise DataFormatError(Errors.E301.format(path=path, line=n, what=f"a mention line needs 6 tab-separated columns, found {len(cols)}"))
        pmid = cols[0]
        doc = current if current is not None and current.doc_id == pmid else by_id.get(pmid)
        if doc is None:
            raise DataFormatError(Errors.E301.format(path=path, line=n, what=f"mention of document '{pmid}' before its title line"))
        try:
            start, end = int(cols[1]), int(cols[2])
        except ValueError:
            raise DataFormatError(Errors.E301.format(path=path, line=n, what="start and end must be integers")) from None
        found = _check_offsets(path, n, doc.text, start, end, cols[3])
        if not type_ok(cols[4], types):
            continue
        ids, composite = split_ids(cols[5])
        doc.mentions.append(
            Mention(text=found, ids=ids, start=start, end=end, type=cols[4], doc_id=pmid, composite=composite)
        )
    if not docs:
        raise DataFormatError(Errors.E301.format(path=path, line=1, what="no 'pmid|t|title' line found: not a PubTator file"))
    return docs


def read_biosyn(path: PathLike, *, types: Optional[Collection[str]] = None) -> List[Document]:
    """Read BioSyn's processed data: a folder of ``*.concept`` files (or one file), each line
    ``pmid||start|end||type||mention||ids``. A ``<stem>.txt`` beside a concept file, when present,
    is the document text and the offsets are checked against it."""
    path = require_file(path, "BioSyn concept file or folder", DATA_HINT, folder=True)
    files = sorted(path.glob("*.concept")) if path.is_dir() else [path]
    if not files:
        raise MissingInputError(Errors.E001.format(what="*.concept files", path=path, hint="a BioSyn folder holds <pmid>.concept files."))
    docs: Dict[str, Document] = {}
    for file in files:
        txt = file.with_suffix(".txt")
        text = read_text(txt) if txt.exists() else ""
        for n, line in iter_lines(file):
            if not line.strip():
                continue
            cols = line.split("||")
            if len(cols) != 5 or "|" not in cols[1]:
                raise DataFormatError(Errors.E301.format(path=file, line=n, what="expected 'pmid||start|end||type||mention||ids'"))
            pmid, span, mtype, mention, raw_ids = cols
            try:
                start, end = (int(x) for x in span.split("|"))
            except ValueError:
                raise DataFormatError(Errors.E301.format(path=file, line=n, what="start|end must be two integers")) from None
            if text:
                mention = _check_offsets(file, n, text, start, end, mention)
            doc = docs.setdefault(pmid, Document(doc_id=pmid, text=text))
            if not type_ok(mtype, types):
                continue
            ids, composite = split_ids(raw_ids)
            doc.mentions.append(
                Mention(text=mention, ids=ids, start=start if text else None, end=end if text else None,
                        type=mtype, doc_id=pmid, composite=composite)
            )
    return list(docs.values())


_COLUMNS = ("mention", "ids", "context", "doc_id", "start", "end", "type")


def _row_to_mention(path: Path, n: int, row: Dict[str, object], docs: Dict[Tuple[str, str], Document],
                    types: Optional[Collection[str]]) -> None:
    mention = row.get("mention")
    raw_ids = row.get("ids")
    if not isinstance(mention, str) or not mention.strip() or raw_ids is None:
        raise DataFormatError(Errors.E301.format(path=path, line=n, what="each row needs a non-empty 'mention' and an 'ids' field"))
    if isinstance(raw_ids, (list, tuple)):
        raw_ids = "|".join(str(x) for x in raw_ids)
    ids, composite = split_ids(str(raw_ids))
    context = str(row.get("context") or "")
    doc_id = str(row.get("doc_id") or f"{path.name}:{n}")
    start = row.get("start")
    end = row.get("end")
    s: Optional[int] = None
    e: Optional[int] = None
    if start not in (None, "") and end not in (None, ""):
        try:
            s, e = int(start), int(end)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise DataFormatError(Errors.E301.format(path=path, line=n, what="start and end must be integers")) from None
        if not context:
            raise DataFormatError(Errors.E301.format(path=path, line=n, what="start/end given without a context text"))
        mention = _check_offsets(path, n, context, s, e, mention)
    mtype = row.get("type")
    mtype = str(mtype) if mtype not in (None, "") else None
    doc = docs.setdefault((doc_id, context), Document(doc_id=doc_id, text=context))
    if type_ok(mtype, types):
        doc.mentions.append(Mention(text=mention, ids=ids, start=s, end=e, type=mtype, doc_id=doc_id, composite=composite))


def read_mentions_tsv(path: PathLike, *, types: Optional[Collection[str]] = None) -> List[Document]:
    """Read a TSV of mentions: ``mention<TAB>ids[<TAB>context<TAB>doc_id<TAB>start<TAB>end]``.

    A first row starting with ``mention`` is a header naming the columns (any of
    ``mention, ids, context, doc_id, start, end, type``); otherwise columns are positional.
    Rows sharing ``doc_id`` and ``context`` form one :class:`Document`.
    """
    path = require_file(path, "mentions TSV", DATA_HINT)
    docs: Dict[Tuple[str, str], Document] = {}
    header: Tuple[str, ...] = _COLUMNS
    for n, line in iter_lines(path):
        cols = line.split("\t")
        if not any(c.strip() for c in cols):
            continue
        if n == 1 and cols[0].strip().lower() == "mention":
            header = tuple(c.strip().lower() for c in cols)
            unknown = [c for c in header if c not in _COLUMNS]
            if unknown or "ids" not in header:
                raise DataFormatError(Errors.E301.format(path=path, line=n, what=f"header columns must be among {', '.join(_COLUMNS)} and include 'ids'; got {', '.join(header)}"))
            continue
        if len(cols) < 2 or len(cols) > len(header):
            raise DataFormatError(Errors.E301.format(path=path, line=n, what=f"expected 2 to {len(header)} tab-separated columns, found {len(cols)}"))
        _row_to_mention(path, n, dict(zip(header, cols)), docs, types)
    return list(docs.values())


def read_mentions_jsonl(path: PathLike, *, types: Optional[Collection[str]] = None) -> List[Document]:
    """Read JSON lines ``{"mention": ..., "ids": "A|B" or [...], "context"?, "doc_id"?, "start"?,
    "end"?, "type"?}``."""
    path = require_file(path, "mentions JSONL", DATA_HINT)
    docs: Dict[Tuple[str, str], Document] = {}
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataFormatError(Errors.E301.format(path=path, line=n, what=f"invalid JSON ({err.msg})")) from None
        if not isinstance(row, dict):
            raise DataFormatError(Errors.E301.format(path=path, line=n, what="each line must be a JSON object"))
        _row_to_mention(path, n, row, docs, types)
    return list(docs.values())


_READERS = {
    "pubtator": read_pubtator,
    "biosyn": read_biosyn,
    "tsv": read_mentions_tsv,
    "jsonl": read_mentions_jsonl,
    "brat": read_brat,
    "xlbel": read_xlbel,
    "codiesp": read_codiesp,
    "docbin": read_docbin,
}
_CODIESP_POSITION = re.compile(r"^\d+ \d+(;\d+ \d+)*$")
_XLBEL_LINE = re.compile(r"^[^|\t]+(\|[^|\t]+)*\|\|[^|]")


def _first_line(path: Path) -> str:
    with path.open("r", encoding="utf8", errors="replace") as fh:
        for line in fh:  # the first non-blank line (NCBI's train set starts with a blank one)
            if line.strip():
                return line
    return ""


def detect_format(path: PathLike) -> str:
    """Guess the format from the path: ``.ann`` or a folder holding ``.ann`` files → brat, another folder or
    ``.concept`` → biosyn, ``.jsonl`` → jsonl, ``.spacy`` → docbin (``doc.ents`` with their ``kb_id_``), ``.tsv`` → codiesp when its header names ``articleID`` or its 5th column is a position
    ``START END``, else tsv;
    otherwise the first line decides (``pmid|t|`` → pubtator, ``CUI||mention`` → xlbel)."""
    path = require_file(path, "dataset", DATA_HINT, folder=True)
    if path.suffix == ".ann" or (path.is_dir() and next(path.rglob("*.ann"), None) is not None):
        return "brat"
    if path.is_dir() or path.suffix == ".concept":
        return "biosyn"
    if path.suffix in (".jsonl", ".json"):
        return "jsonl"
    if path.suffix == ".spacy":
        return "docbin"
    first = _first_line(path)
    if path.suffix == ".tsv":
        cells = [c.strip() for c in first.rstrip("\r\n").split("\t")]
        named = {c.lower() for c in cells} & {"articleid", "article_id"}
        return "codiesp" if named or (len(cells) == 5 and _CODIESP_POSITION.match(cells[4])) else "tsv"
    if re.match(r"^[^|\t]+\|[ta]\|", first):
        return "pubtator"
    if _XLBEL_LINE.match(first):
        return "xlbel"
    raise ConfigError(Errors.E002.format(what=f"dataset format of '{path}'", value="(could not detect)", choices=", ".join(FORMATS)))


def read_dataset(path: PathLike, *, format: str = "auto", types: Optional[Collection[str]] = None,
                 language: Optional[str] = None) -> List[Document]:
    """Read any supported benchmark file; ``format`` is one of :data:`FORMATS` (``auto`` guesses, see
    :func:`detect_format`). ``language`` (an ISO 639 code such as ``es``) is set on every mention read: the
    evaluation reports it; a bad code is E725."""
    if format not in FORMATS:
        raise ConfigError(Errors.E002.format(what="dataset format", value=format, choices=", ".join(FORMATS)))
    fmt = detect_format(path) if format == "auto" else format
    docs = with_language(_READERS[fmt](path, types=types), language)
    logger.info("read %d documents, %d mentions from %s (%s)", len(docs), sum(len(d.mentions) for d in docs), path, fmt)
    return docs


def iter_mentions(docs: Collection[Document]) -> List[Mention]:
    """All mentions of ``docs`` in reading order."""
    return [m for d in docs for m in d.mentions]


def select_mentions(docs: Sequence[Document], exclude_composite: bool,
                    keep_without_id: bool = False) -> Tuple[List[Document], Dict[str, int]]:
    """Drop mentions without gold id (and composite ones when asked); return kept docs and counts.
    ``keep_without_id``: keep the mentions without gold id (BC5CDR's ``-1``: no concept fits them; the
    evaluation's no-link section scores them as "should not be linked"); they are counted all the same."""
    counts = {"read": 0, "no_gold_id": 0, "composite": 0}
    kept: List[Document] = []
    for d in docs:
        ms: List[Mention] = []
        for m in d.mentions:
            counts["read"] += 1
            if not m.ids:
                counts["no_gold_id"] += 1
                if keep_without_id:
                    ms.append(m)
                continue
            if m.composite:
                counts["composite"] += 1
                if exclude_composite:
                    continue
            ms.append(m)
        kept.append(Document(doc_id=d.doc_id, text=d.text, mentions=ms))
    return kept, counts


__all__ = ["select_mentions", 
    "Mention",
    "Document",
    "split_ids",
    "read_pubtator",
    "read_biosyn",
    "read_mentions_tsv",
    "read_mentions_jsonl",
    "read_dataset",
    "read_brat",
    "read_xlbel",
    "read_codiesp",
    "detect_format",
    "iter_mentions",
    "FORMATS",
]
