"""Readers of two multilingual benchmark formats: XL-BEL query files and CodiEsp-X TSVs.

**XL-BEL** (Liu et al., ACL 2021; ``evaluation/xl_bel`` of the SapBERT repository), one mention per line:

- v0.0 ``de_1k_test_query.txt``: ``CUI||mention``;
- v1.0 ``es_1k_test_query_with_context.txt``: ``CUI||mention||sentence`` with the mention marked
  ``<tgt>mention</tgt>`` in the sentence: the markers are removed and give the mention's offsets.

Several CUIs ``C1|C2||mention`` are alternatives (any counts; the mention is marked composite). Each line is its
own document (``FILE:LINE``). **CodiEsp-X** (CLEF eHealth 2020, Spanish clinical cases coded with ICD-10):
``articleID<TAB>label<TAB>code<TAB>text-reference<TAB>reference-position``, the position ``START END`` or, for a
discontinuous reference, ``START END;START END``. The columns are read by name when the first row is a header
(``articleID``, ``label``, ``code``, ``reference``, ``position``; any order, aliases in
:data:`CODIESP_COLUMNS`), else by position. The texts are read from ``text_files/ARTICLE.txt`` beside the TSV
when that folder exists (offsets checked, E721), else the mentions have no text (mention-only evaluation).
Codes are upper-cased (``q62.11`` → ``Q62.11``, as ICD-10 writes them); ``label`` (``DIAGNOSTICO`` /
``PROCEDIMIENTO``) is the mention type. The CodiEsp-D / -P files (``articleID<TAB>code``) name no mention and
are refused (E723): use the X file of the same split.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Collection, Dict, List, Optional, Tuple

from ..errors import DataFormatError, Errors
from ..base.util import PathLike
from .records import (Document, Mention, match_fragments, read_lines, read_text, require_file, span_text,
                      split_ids, type_ok)

_TGT = re.compile(r"<tgt>(.*?)</tgt>", re.S)
CODIESP_COLUMNS: Dict[str, Tuple[str, ...]] = {
    "article": ("articleid", "article_id", "doc_id", "document"),
    "label": ("label", "type"),
    "code": ("code", "icd10-code", "icd10_code", "ids"),
    "reference": ("reference", "text-reference", "text_reference", "mention"),
    "position": ("position", "reference-position", "reference_position", "offsets"),
}
_REQUIRED = ("article", "code", "reference")
_XLBEL_FIX = "An XL-BEL line is 'CUI||mention' or 'CUI||mention||sentence with <tgt>mention</tgt>'."


def read_xlbel(path: PathLike, *, types: Optional[Collection[str]] = None) -> List[Document]:
    """Read an XL-BEL query file (v0.0 without or v1.0 with context; see the module docstring). ``types`` is
    accepted for a uniform reader signature; XL-BEL mentions have no type, so a type filter keeps none."""
    path = require_file(path, "XL-BEL query file")
    docs: List[Document] = []
    for n, line in read_lines(path):
        if not line.strip():
            continue
        cols = line.split("||")
        if len(cols) not in (2, 3) or not cols[0].strip() or not cols[1].strip():
            raise DataFormatError(Errors.E723.format(path=path, line=n, what=f"expected 2 or 3 '||'-separated "
                                                     f"columns with ids and a mention, found {len(cols)}", fix=_XLBEL_FIX))
        ids, composite = split_ids(cols[0])
        doc_id = f"{path.name}:{n}"
        text, start, end = "", None, None
        if len(cols) == 3:
            marked = list(_TGT.finditer(cols[2]))
            if len(marked) != 1:
                raise DataFormatError(Errors.E723.format(path=path, line=n, what=f"the sentence marks {len(marked)} "
                                                         "mentions with <tgt>...</tgt>, not one", fix=_XLBEL_FIX))
            tgt = marked[0]
            text = cols[2][: tgt.start()] + tgt.group(1) + cols[2][tgt.end():]
            start, end = tgt.start(), tgt.start() + len(tgt.group(1))
            if span_text(text, start, end, cols[1]) is None:
                raise DataFormatError(Errors.E721.format(path=path, line=n, start=start, end=end, found=tgt.group(1),
                                                         mention=cols[1], text="the marked sentence"))
        doc = Document(doc_id=doc_id, text=text)
        if type_ok(None, types):
            doc.mentions.append(Mention(text=cols[1].strip() if start is None else text[start:end], ids=ids,
                                        start=start, end=end, doc_id=doc_id, composite=composite))
        docs.append(doc)
    return docs


def _codiesp_columns(path: Path, first: List[str]) -> Tuple[Optional[Dict[str, int]], bool]:
    """``(column index per field, first row is a header)``."""
    names = [c.strip().lower() for c in first]
    if not any(n in CODIESP_COLUMNS["article"] for n in names):
        if len(first) == 2:
            raise DataFormatError(Errors.E723.format(
                path=path, line=1, what="two columns (articleID, code): a CodiEsp-D/P file, which names no mention",
                fix="Evaluate linking on the CodiEsp-X file of the same split (trainX.tsv, devX.tsv, testX.tsv)."))
        if len(first) != 5:
            raise DataFormatError(Errors.E723.format(
                path=path, line=1, what=f"{len(first)} columns without a header",
                fix="A CodiEsp-X row is articleID, label, code, text-reference, reference-position; or name the "
                    "columns in a header row."))
        return {"article": 0, "label": 1, "code": 2, "reference": 3, "position": 4}, False
    index = {field: next((i for i, n in enumerate(names) if n in aliases), -1) for field, aliases in CODIESP_COLUMNS.items()}
    missing = [f for f in _REQUIRED if index[f] < 0]
    if missing:
        aliases = "; ".join(f"{f}: {', '.join(CODIESP_COLUMNS[f])}" for f in missing)
        raise DataFormatError(Errors.E722.format(path=path, missing=", ".join(missing), fmt="CodiEsp-X",
                                                 found=", ".join(first), aliases=aliases))
    return {f: i for f, i in index.items() if i >= 0}, True


def _positions(path: Path, n: int, raw: str) -> List[Tuple[int, int]]:
    try:
        spans = [tuple(int(x) for x in part.split()) for part in raw.split(";") if part.strip()]
    except ValueError:
        spans = []
    if not spans or any(len(s) != 2 or s[1] <= s[0] for s in spans):
        raise DataFormatError(Errors.E723.format(path=path, line=n, what=f"position '{raw}' is not 'START END' "
                                                 "(or 'START END;START END')", fix="Fix the offsets of the line."))
    return spans  # type: ignore[return-value]


def read_codiesp(path: PathLike, *, types: Optional[Collection[str]] = None) -> List[Document]:
    """Read a CodiEsp-X TSV (see the module docstring); ``types`` filters on the label column."""
    path = require_file(path, "CodiEsp TSV")
    texts_dir = path.parent / "text_files"
    texts: Dict[str, Optional[str]] = {}
    docs: Dict[str, Document] = {}
    with path.open("r", encoding="utf8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        index: Optional[Dict[str, int]] = None
        try:
            for cols in reader:
                n = reader.line_num
                if not cols or not any(c.strip() for c in cols):
                    continue
                if index is None:
                    index, header = _codiesp_columns(path, cols)
                    if header:
                        continue
                if len(cols) <= max(index.values()):
                    raise DataFormatError(Errors.E723.format(path=path, line=n, what=f"{len(cols)} columns, the "
                                                             f"header has {max(index.values()) + 1}", fix="Fix the line."))
                _codiesp_row(path, n, cols, index, texts_dir, texts, docs, types)
        except UnicodeDecodeError:
            raise DataFormatError(Errors.E004.format(path=path, line=reader.line_num + 1)) from None
    return list(docs.values())


def _codiesp_row(path: Path, n: int, cols: List[str], index: Dict[str, int], texts_dir: Path,
                 texts: Dict[str, Optional[str]], docs: Dict[str, Document], types: Optional[Collection[str]]) -> None:
    article = cols[index["article"]].strip()
    if article not in texts:
        txt = texts_dir / f"{article}.txt"
        texts[article] = read_text(txt) if txt.is_file() else None
    text = texts[article]
    doc = docs.setdefault(article, Document(doc_id=article, text=text or ""))
    label = cols[index["label"]].strip() if "label" in index else None
    mention = cols[index["reference"]].strip()
    start = end = None
    if "position" in index and cols[index["position"]].strip():
        spans = _positions(path, n, cols[index["position"]])
        if text is not None:
            found, shown = match_fragments(text, spans, mention)
            if found is None:
                raise DataFormatError(Errors.E721.format(path=path, line=n, start=spans[0][0], end=spans[-1][1],
                                                         found=shown, mention=mention, text=f"text_files/{article}.txt"))
            start, end = spans[0][0], spans[-1][1]
    if type_ok(label, types):
        ids, composite = split_ids(cols[index["code"]].upper())
        doc.mentions.append(Mention(text=mention, ids=ids, start=start, end=end, type=label, doc_id=article,
                                    composite=composite))


__all__ = ["read_xlbel", "read_codiesp", "CODIESP_COLUMNS"]
