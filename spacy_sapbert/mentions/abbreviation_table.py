"""A table of short forms and their long forms for mentions that are short forms their document never defines.

The linker replaces a short form by its long form where the document defines it ("myotonic dystrophy (DM)":
:mod:`.abbreviations`). A mention that is a short form the document does not define ("DM" in a text that never
spells it out, or a mention linked alone: `spacy-sapbert link INDEX`) is encoded as written, and a short form
says little to a name encoder. An :class:`AbbreviationTable` gives such a mention a long form:

- :func:`mine` reads raw text (no annotations) with the same definition finder as the linker and keeps, for each
  short form, the long form most documents define it with (ties: the alphabetically first), when at least
  ``min_count`` documents do and that long form holds at least ``min_share`` of the short form's definitions
  ("AS": Angelman syndrome in 4 documents, ankylosing spondylitis in 2, is kept at 0.5 and dropped at 0.7);
- a table can also be written by hand: a TSV file, ``short form<TAB>long form`` a line (:func:`read_tsv`).

Only a mention whose whole text is a short form of the table is replaced, and only when its document defines
no abbreviation inside it (:meth:`AbbreviationTable.text_for`); short forms are matched case-sensitively on the
mention's text with surrounding whitespace stripped. The table is saved as JSON with a sha256 of its entries
(``abbreviations.json``, also inside a saved pipeline's linker folder), checked at load (E798).
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from ..base.signed_json import sign, signed_payload
from ..base.util import PathLike, atomic_write, ensure_path
from ..errors import ConfigError, DataFormatError, Errors, MissingInputError

FORMAT = "spacy_sapbert.abbreviations"
VERSION = 1
FILE_NAME = "abbreviations.json"
MAX_BYTES = 256 << 20  # a mined table of a large corpus is a few MB; anything this large is not one
MAX_SHORT = 32  # characters of a short form
MAX_LONG = 300  # characters of a long form


@dataclass(frozen=True)
class Entry:
    """A short form's long form, with how many documents defined the short form with it (``count``) and at all
    (``total``); a hand-written entry has ``count = total = 0``."""

    long_form: str
    count: int = 0
    total: int = 0


@dataclass(frozen=True)
class AbbreviationTable:
    """``short form -> Entry``; see the module docstring."""

    entries: Mapping[str, Entry]
    info: Mapping[str, Any] = field(default_factory=dict)  # how it was made: for people, not checked

    def __len__(self) -> int:
        return len(self.entries)

    def long_form(self, short: str) -> Optional[str]:
        """The long form of ``short`` (stripped, case-sensitive), or None."""
        entry = self.entries.get(short.strip())
        return None if entry is None else entry.long_form

    def text_for(self, written: str, text: str) -> str:
        """What the linker encodes for a mention written ``written`` whose text after the document's own
        definitions is ``text``: the table's long form when the document resolved nothing inside the mention
        (``text == written``) and the whole mention is one of the table's short forms; else ``text``."""
        if text != written:
            return text
        found = self.long_form(written)
        return text if found is None else found

    # ---- serialisation ---------------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        payload = {"entries": [[s, e.long_form, e.count, e.total] for s, e in sorted(self.entries.items())],
                   "info": dict(self.info)}
        return sign(payload, file_format=FORMAT, version=VERSION, key="table")

    def to_disk(self, path: PathLike) -> None:
        """Write the JSON file ``path`` atomically."""
        data = self.to_dict()
        rows = data["table"]["entries"]
        head = {key: value for key, value in data.items() if key != "table"}
        with atomic_write(ensure_path(path)) as fh:  # one entry a line: a table people can read and diff
            fh.write(json.dumps(head, ensure_ascii=False, sort_keys=True)[:-1])
            fh.write(', "table": {"info": ' + json.dumps(data["table"]["info"], ensure_ascii=False, sort_keys=True))
            fh.write(', "entries": [\n' + ",\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n]}}\n")

    @classmethod
    def from_dict(cls, data: Any, *, path: Any = "<memory>") -> "AbbreviationTable":
        def bad(why: str) -> DataFormatError:
            return DataFormatError(Errors.E798.format(path=path, why=why))

        payload = signed_payload(data, file_format=FORMAT, version=VERSION, key="table", bad=bad, what="entries")
        rows, info = payload.get("entries"), payload.get("info")
        if not isinstance(rows, list) or not isinstance(info, dict):
            raise bad("'entries' is not a list or 'info' is not an object")
        entries: Dict[str, Entry] = {}
        for n, row in enumerate(rows, 1):
            if not (isinstance(row, list) and len(row) == 4 and all(isinstance(v, str) for v in row[:2])
                    and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in row[2:])
                    and row[2] <= row[3]):
                raise bad(f"entry {n} is {str(row)[:120]}, not [short form, long form, count, total]")
            _check_entry(row[0], row[1], bad, f"entry {n}")
            if row[0] in entries:
                raise bad(f"entry {n}: the short form {row[0]!r} is given twice")
            entries[row[0]] = Entry(row[1], row[2], row[3])
        return cls(entries, info)

    @classmethod
    def from_disk(cls, path: PathLike) -> "AbbreviationTable":
        """Read a table from :meth:`to_disk` (``.json``) or a hand-written TSV (any other name; see
        :func:`read_tsv`): E798 when it is damaged, E001 when it is missing."""
        path = ensure_path(path)
        if not path.is_file():
            raise MissingInputError(Errors.E001.format(what="Abbreviation table", path=path,
                                                       hint="give the file `spacy-sapbert mine-abbreviations` "
                                                            "wrote, or a TSV of short form<TAB>long form lines."))
        try:
            size = path.stat().st_size
            if size > MAX_BYTES:
                raise DataFormatError(Errors.E798.format(path=path, why=f"{size} bytes, more than a table has"))
            raw = path.read_text(encoding="utf8")
        except (OSError, UnicodeDecodeError) as err:
            raise DataFormatError(Errors.E798.format(path=path, why=f"{type(err).__name__}: {err}")) from None
        if path.suffix.lower() != ".json":
            return read_tsv(raw, path=path)
        try:
            data = json.loads(raw)
        except ValueError as err:
            raise DataFormatError(Errors.E798.format(path=path, why=f"not valid JSON ({err})")) from None
        return cls.from_dict(data, path=path)


def _check_entry(short: str, long: str, bad: Any, where: str) -> None:
    if not short.strip() or short != short.strip() or len(short) > MAX_SHORT or any(c in short for c in "\t\n\r"):
        raise bad(f"{where}: the short form {short[:40]!r} is empty, padded with spaces, longer than {MAX_SHORT} "
                  "characters or holds a tab or line break")
    if not long.strip() or len(long) > MAX_LONG or any(c in long for c in "\t\n\r"):
        raise bad(f"{where}: the long form {long[:40]!r} of {short!r} is empty, longer than {MAX_LONG} characters "
                  "or holds a tab or line break")


def read_tsv(text: str, *, path: Any = "<memory>") -> AbbreviationTable:
    """A hand-written table: ``short form<TAB>long form`` a line (blank lines and lines starting with ``#`` are
    skipped; a short form given twice is an error, as is a line without exactly one tab)."""
    def bad(why: str) -> DataFormatError:
        return DataFormatError(Errors.E798.format(path=path, why=why))

    entries: Dict[str, Entry] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise bad(f"line {n} has {len(parts) - 1} tabs, not one (short form<TAB>long form)")
        short, long = parts[0].strip(), parts[1].strip()
        _check_entry(short, long, bad, f"line {n}")
        if short in entries:
            raise bad(f"line {n}: the short form {short!r} is given twice")
        entries[short] = Entry(long)
    return AbbreviationTable(entries, {"source": "tsv"})


def check_mining_options(min_count: int, min_share: float) -> None:
    """E799 for a ``min_count`` below 1 or a ``min_share`` outside (0, 1]."""
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ConfigError(Errors.E799.format(what=f"min_count = {min_count!r}", fix="give a whole number of at least 1"))
    if not isinstance(min_share, (int, float)) or isinstance(min_share, bool) or not 0.0 < min_share <= 1.0:
        raise ConfigError(Errors.E799.format(what=f"min_share = {min_share!r}", fix="give a share in (0, 1], e.g. 0.5"))


def count_definitions(texts: Iterable[str], nlp: Any = None, *, batch_size: int = 64,
                      progress: Any = None) -> Tuple[Dict[str, Counter], int]:
    """``(short form -> Counter(long form -> documents), documents read)``: the definitions each text makes, found
    as the linker finds them (:func:`~.abbreviations.definitions`; needs scispaCy). ``nlp``: whose tokenizer
    splits the texts (default: a blank English pipeline, as the linker's saved pipelines have); ``progress``:
    called with the number of documents read after each batch."""
    import spacy  # lazy: spacy

    from .abbreviations import definitions, make_detector  # lazy: spacy (its matcher), scispacy

    nlp = nlp if nlp is not None else spacy.blank("en")
    detector = make_detector(nlp.vocab)  # as evaluation.preprocess.abbreviation_map makes it
    counts: Dict[str, Counter] = defaultdict(Counter)
    n = 0
    for doc in nlp.tokenizer.pipe(texts, batch_size=batch_size):
        for short, long in definitions(doc, lambda: detector):
            short_text, long_text = short.text.strip(), " ".join(long.split())
            if short_text and long_text and len(short_text) <= MAX_SHORT and len(long_text) <= MAX_LONG \
                    and not any(c in short_text for c in "\t\n\r"):
                counts[short_text][long_text] += 1
        n += 1
        if progress is not None and n % batch_size == 0:
            progress(n)
    if progress is not None and n % batch_size:
        progress(n)
    return dict(counts), n


def table_from_counts(counts: Mapping[str, Mapping[str, int]], *, min_count: int = 1, min_share: float = 0.5,
                      info: Optional[Mapping[str, Any]] = None) -> AbbreviationTable:
    """The table of :func:`count_definitions`' counts: each short form's most frequent long form (ties: the
    alphabetically first) when at least ``min_count`` documents define it so and it holds ``min_share`` of them."""
    check_mining_options(min_count, min_share)
    entries: Dict[str, Entry] = {}
    for short in sorted(counts):
        longs = counts[short]
        total = sum(longs.values())
        long, count = min(longs.items(), key=lambda kv: (-kv[1], kv[0]))
        if count >= min_count and count >= min_share * total:
            entries[short] = Entry(long, count, total)
    return AbbreviationTable(entries, dict(info or {}, min_count=min_count, min_share=min_share,
                                           short_forms_seen=len(counts)))


def mine(texts: Iterable[str], *, min_count: int = 1, min_share: float = 0.5, nlp: Any = None,
         progress: Any = None, info: Optional[Mapping[str, Any]] = None) -> AbbreviationTable:
    """:func:`count_definitions` then :func:`table_from_counts` (options checked first: E799)."""
    check_mining_options(min_count, min_share)
    counts, n = count_definitions(texts, nlp, progress=progress)
    return table_from_counts(counts, min_count=min_count, min_share=min_share,
                             info=dict(info or {}, documents=n))


__all__ = ["AbbreviationTable", "Entry", "FILE_NAME", "mine", "count_definitions", "table_from_counts", "read_tsv",
           "check_mining_options"]
