"""brat standoff with concept ids in notes: the Mantra GSC corpus (UMLS CUIs; Spanish, French, German, Dutch,
English) and CANTEMIST (ICD-O codes), both shipped as ``NAME.txt`` + ``NAME.ann`` pairs.

An ``.ann`` file holds, one per line and tab-separated:

- entities ``T1<TAB>DISO 0 5<TAB>Fever`` (a discontinuous one ``T2<TAB>DISO 0 5;10 16<TAB>Fever acute``, its
  fragments joined by a space in the text column);
- notes ``#1<TAB>AnnotatorNotes T1<TAB>C0015967``: the concept id(s) of entity ``T1`` (notes on relations or
  events are skipped); several ids in one note
  (separated by spaces, ``,``, ``;``, ``|`` or ``+``) or several notes are alternatives (any counts, like a
  composite id elsewhere);
- normalisations ``N1<TAB>Reference T1 UMLS:C0015967<TAB>Fever``: the id after the resource name (``C0015967``);
- anything else (relations ``R``, events ``E``, attributes ``A``/``M``, equivalences ``*``) is not about
  linking and is skipped.

Each mention's text is checked against the ``.txt`` at its offsets (E721 naming file and line); an entity
without an id gets ``ids == ()`` (left out of scoring and counted as "without gold id"). A discontinuous
entity spans its first start to its last end (for end-to-end scoring); its mention text is the fragments'.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Collection, Dict, List, Optional, Tuple

from ..errors import DataFormatError, Errors, MissingInputError
from ..base.util import PathLike
from .records import Document, Mention, match_fragments, read_lines, read_text, require_file, split_ids, type_ok

_NOTE_SPLIT = re.compile(r"[\s,;|+]+")
_ENTITY = re.compile(r"^(\S+) (\d+ \d+(?:;\d+ \d+)*)$")


def _fragments(path: Path, n: int, spec: str) -> List[Tuple[int, int]]:
    found = _ENTITY.match(spec)
    if not found:
        raise DataFormatError(Errors.E720.format(path=path, line=n, what=f"'{spec}' is not 'TYPE START END'"))
    spans = [tuple(int(x) for x in part.split(" ")) for part in found.group(2).split(";")]
    for start, end in spans:
        if end <= start:
            raise DataFormatError(Errors.E720.format(path=path, line=n, what=f"the span {start}-{end} is empty or reversed"))
    return spans  # type: ignore[return-value]


def _check_fragments(path: Path, n: int, text: str, text_path: Path, spans: List[Tuple[int, int]],
                     mention: str) -> str:
    """The mention as the text has it (fragments joined by a space), or E721."""
    found, shown = match_fragments(text, spans, mention)
    if found is None:
        raise DataFormatError(Errors.E721.format(path=path, line=n, start=spans[0][0], end=spans[-1][1], found=shown,
                                                 mention=mention, text=text_path.name))
    return found


def _note_ids(note: str) -> List[str]:
    return [part for part in _NOTE_SPLIT.split(note.strip()) if part]


def read_ann(ann: Path, *, doc_id: str, types: Optional[Collection[str]] = None) -> Document:
    """One ``.ann`` file and the ``.txt`` beside it as a :class:`Document` (see the module docstring)."""
    txt = ann.with_suffix(".txt")
    if not txt.is_file():
        raise MissingInputError(Errors.E724.format(path=ann, text=txt.name))
    text = read_text(txt)
    entities: Dict[str, Tuple[int, str, List[Tuple[int, int]], str]] = {}
    ids: Dict[str, List[str]] = {}
    note_lines: Dict[str, int] = {}
    for n, line in read_lines(ann):
        if not line.strip():
            continue
        cols = line.split("\t")
        kind = cols[0][:1]
        if kind == "T":
            if len(cols) < 3:
                raise DataFormatError(Errors.E720.format(
                    path=ann, line=n, what=f"an entity line needs 3 tab-separated columns, found {len(cols)}"))
            spans = _fragments(ann, n, cols[1])
            entities[cols[0]] = (n, cols[1].split(" ", 1)[0], spans, _check_fragments(ann, n, text, txt, spans, cols[2]))
        elif kind in ("#", "N"):
            fields = cols[1].split(" ") if len(cols) >= 2 else []
            if len(fields) < 2 or (kind == "N" and len(fields) < 3) or (kind == "#" and len(cols) < 3):
                raise DataFormatError(Errors.E720.format(path=ann, line=n, what="a note line needs "
                                                         "'#1<TAB>AnnotatorNotes T1<TAB>ID' (a normalisation "
                                                         "'N1<TAB>Reference T1 DB:ID')"))
            target = fields[1]
            if not target.startswith("T"):
                continue  # a note on a relation or an event
            found = _note_ids(cols[2]) if kind == "#" else [fields[2].split(":", 1)[-1]]
            ids.setdefault(target, []).extend(found)
            note_lines.setdefault(target, n)
    unknown = sorted(set(ids) - set(entities), key=note_lines.__getitem__)
    if unknown:
        raise DataFormatError(Errors.E720.format(path=ann, line=note_lines[unknown[0]], what=f"the note refers to "
                                                 f"entity {unknown[0]}, which the file does not define"))
    doc = Document(doc_id=doc_id, text=text)
    for key, (n, mtype, spans, mention) in sorted(entities.items(), key=lambda kv: (kv[1][2][0][0], kv[1][0])):
        if not type_ok(mtype, types):
            continue
        gold, composite = split_ids("|".join(ids.get(key, [])))
        doc.mentions.append(Mention(text=mention, ids=gold, start=spans[0][0], end=spans[-1][1], type=mtype,
                                    doc_id=doc_id, composite=composite))
    return doc


def read_brat(path: PathLike, *, types: Optional[Collection[str]] = None) -> List[Document]:
    """Read brat standoff: one ``.ann`` file or a folder searched recursively for them (Mantra GSC, CANTEMIST).
    Documents are named by their path under the folder without ``.ann`` and come in path order."""
    path = require_file(path, "brat file or folder")
    files = sorted(path.rglob("*.ann")) if path.is_dir() else [path]
    if not files:
        raise MissingInputError(Errors.E726.format(path=path, what=".ann files"))
    root = path if path.is_dir() else path.parent
    return [read_ann(f, doc_id=f.relative_to(root).with_suffix("").as_posix(), types=types) for f in files]


__all__ = ["read_brat", "read_ann"]
