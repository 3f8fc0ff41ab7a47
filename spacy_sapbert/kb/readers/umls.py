"""UMLS Metathesaurus (RRF): MRCONSO names, MRSTY semantic types, MRDEF definitions, MRREL trade names.

Streaming: MRCONSO is read once, line by line, and the rows of one CUI (consecutive in a real
release, which is sorted by CUI) become one ``Concept`` as soon as the next CUI starts. Only MRSTY
(CUI -> TUIs), the first MRDEF definition per CUI and the trade-name pairs of MRREL are held in memory.
If a CUI reappears later in an unsorted file, it is yielded again and the KB merges the two.

Column layouts come from ``MRFILES.RRF`` (its ``FMT`` column) in the same folder; ``MRCOLS.RRF`` alone
can only confirm the standard layout (it has no column order); without them the standard layout is used.
"""
from __future__ import annotations

from pathlib import Path
from typing import Collection, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from ...errors import DataFormatError, EmptyResultError, Errors, MissingInputError
from ...base.util import PathLike, ensure_path, get_logger
from ..concept import Concept
from ..languages import UMLS_LAT, language_codes
from ...base.lines import as_set, iter_lines, require_file

logger = get_logger("kb.umls")

STANDARD_LAYOUT: Dict[str, Tuple[str, ...]] = {
    "MRCONSO.RRF": ("CUI", "LAT", "TS", "LUI", "STT", "SUI", "ISPREF", "AUI", "SAUI", "SCUI", "SDUI",
                    "SAB", "TTY", "CODE", "STR", "SRL", "SUPPRESS", "CVF"),
    "MRSTY.RRF": ("CUI", "TUI", "STN", "STY", "ATUI", "CVF"),
    "MRDEF.RRF": ("CUI", "AUI", "ATUI", "SATUI", "SAB", "DEF", "SUPPRESS", "CVF"),
    "MRREL.RRF": ("CUI1", "AUI1", "STYPE1", "REL", "CUI2", "AUI2", "STYPE2", "RELA", "RUI", "SRUI", "SAB",
                  "SL", "RG", "DIR", "SUPPRESS", "CVF"),
}
NEEDED = {
    "MRCONSO.RRF": ("CUI", "LAT", "TS", "STT", "ISPREF", "SAB", "STR", "SUPPRESS"),
    "MRSTY.RRF": ("CUI", "TUI", "STY"),
    "MRDEF.RRF": ("CUI", "DEF", "SUPPRESS"),
    "MRREL.RRF": ("CUI1", "CUI2", "RELA"),
}
TRADENAME_RELAS = frozenset({"has_tradename", "tradename_of"})


def read_layout(meta_dir: Path) -> Dict[str, Tuple[str, ...]]:
    """Column names per RRF file, in file order.

    ``MRFILES.RRF`` gives each file's columns in order (its FMT field) and is used as is. ``MRCOLS.RRF``
    lists columns but not their order (a release sorts it by column name), so without MRFILES it can
    only confirm the standard layout: a file whose MRCOLS column set differs is an error (E013).
    Without either file the standard layout is used."""
    layout = dict(STANDARD_LAYOUT)
    mrfiles, mrcols = meta_dir / "MRFILES.RRF", meta_dir / "MRCOLS.RRF"
    if mrfiles.is_file():
        for lineno, line in iter_lines(mrfiles):
            parts = line.split("|")
            if len(parts) < 3:
                raise DataFormatError(Errors.E005.format(path=mrfiles, line=lineno, expected="at least 3",
                                                         found=len(parts), fix="MRFILES.RRF is FIL|DES|FMT|...; restore it from the release."))
            name, cols = Path(parts[0]).name, tuple(parts[2].split(","))
            if name in layout:
                missing = [c for c in NEEDED[name] if c not in cols]
                if missing:
                    raise DataFormatError(Errors.E013.format(path=meta_dir, file=name,
                                                             why=f"MRFILES.RRF: columns {', '.join(missing)} missing"))
                layout[name] = cols
    elif mrcols.is_file():
        found: Dict[str, Set[str]] = {}
        for lineno, line in iter_lines(mrcols):
            parts = line.split("|")
            if len(parts) < 7:
                raise DataFormatError(Errors.E005.format(path=mrcols, line=lineno, expected="at least 7",
                                                         found=len(parts), fix="MRCOLS.RRF is COL|DES|REF|MIN|AV|MAX|FIL|...; restore it from the release."))
            found.setdefault(Path(parts[6]).name, set()).add(parts[0])
        for name, cols in found.items():
            if name in layout and cols != set(layout[name]):
                raise DataFormatError(Errors.E013.format(
                    path=meta_dir, file=name, why=f"MRCOLS.RRF lists {','.join(sorted(cols))}, not the standard "
                    "columns, and gives no column order; add the release's MRFILES.RRF"))
    return layout


def _rows(path: Path, columns: Sequence[str], wanted: Sequence[str], *, show_progress: bool = False,
          prefilter: Optional[str] = None) -> Iterator[Tuple[int, List[str]]]:
    """Yield (line, [values of ``wanted``]) for each row; checks the column count."""
    n = len(columns)
    idx = [columns.index(c) for c in wanted]
    for lineno, line in iter_lines(path, show_progress=show_progress):
        if not line:
            continue
        if prefilter is not None and prefilter not in line:
            continue
        parts = (line[:-1] if line.endswith("|") else line).split("|")
        if len(parts) != n:
            raise DataFormatError(Errors.E005.format(
                path=path, line=lineno, expected=n, found=len(parts),
                fix=f"Expected the layout {','.join(columns)}; check MRFILES.RRF or that the file is a complete RRF file."))
        yield lineno, [parts[i] for i in idx]


def _resolve_dir(path: PathLike) -> Path:
    path = ensure_path(path)
    if path.is_file() and path.name.upper() == "MRCONSO.RRF":
        path = path.parent
    require_file(path / "MRCONSO.RRF", "MRCONSO.RRF", "pass the UMLS META folder (the one holding MRCONSO.RRF).")
    return path


def read_umls(
    path: PathLike,
    *,
    languages: Optional[Collection[str]] = ("ENG",),
    sabs: Optional[Collection[str]] = None,
    exclude_sabs: Optional[Collection[str]] = None,
    keep_suppressed: bool = False,
    semantic_types: Optional[Collection[str]] = None,
    definitions: bool = True,
    tradenames: bool = True,
    show_progress: bool = False,
) -> Iterator[Concept]:
    """Concepts from a UMLS META folder (or its MRCONSO.RRF).

    languages: LAT values (or ISO 639-1 codes) to keep (None or empty: all); each name is tagged with
    its language as an ISO 639-1 code (``kb.languages``); a LAT value without one is E740. sabs / exclude_sabs: source vocabularies to
    keep / drop. keep_suppressed: also keep rows with SUPPRESS != N. semantic_types: keep only CUIs with
    one of these TUIs or STY names (needs MRSTY.RRF; kept concepts list all their TUIs).
    definitions: first non-suppressed MRDEF definition.
    tradenames: add the names of ``has_tradename``/``tradename_of`` partners (MRREL) as synonyms.
    Canonical name: the row with TS=P, STT=PF, ISPREF=Y (best match of the three; first row on ties).
    """
    meta = _resolve_dir(path)
    layout = read_layout(meta)
    wanted_langs = set(language_codes(as_set(languages))) if languages else None
    lat_codes: Dict[str, str] = {}
    keep_sab = as_set(sabs) if sabs else None
    drop_sab = as_set(exclude_sabs) if exclude_sabs else set()
    wanted_types = as_set(semantic_types) if semantic_types else None

    types: Dict[str, Tuple[str, ...]] = {}
    matched: Set[str] = set()  # CUIs with a wanted semantic type
    mrsty = meta / "MRSTY.RRF"
    if mrsty.is_file():
        interned: Dict[Tuple[str, ...], Tuple[str, ...]] = {}
        for _, (cui, tui, sty) in _rows(mrsty, layout["MRSTY.RRF"], NEEDED["MRSTY.RRF"], show_progress=show_progress):
            if wanted_types is not None and (tui in wanted_types or sty in wanted_types):
                matched.add(cui)
            key = types.get(cui, ()) + (tui,)
            types[cui] = interned.setdefault(key, key)
    elif wanted_types is not None:
        raise MissingInputError(Errors.E001.format(what="MRSTY.RRF", path=mrsty,
                                                   hint="the semantic type filter needs MRSTY.RRF beside MRCONSO.RRF."))

    defs: Dict[str, str] = {}
    mrdef = meta / "MRDEF.RRF"
    if definitions and mrdef.is_file():
        for _, (cui, text, suppress) in _rows(mrdef, layout["MRDEF.RRF"], NEEDED["MRDEF.RRF"], show_progress=show_progress):
            if (keep_suppressed or suppress == "N") and cui not in defs:
                defs[cui] = text

    partners: Dict[str, Set[str]] = {}
    mrrel = meta / "MRREL.RRF"
    if tradenames and mrrel.is_file():
        for _, (cui1, cui2, rela) in _rows(mrrel, layout["MRREL.RRF"], NEEDED["MRREL.RRF"],
                                           show_progress=show_progress, prefilter="tradename"):
            if rela in TRADENAME_RELAS and cui1 != cui2:
                partners.setdefault(cui1, set()).add(cui2)
                partners.setdefault(cui2, set()).add(cui1)
    partner_names: Dict[str, Dict[str, Tuple[str, ...]]] = {}  # CUI -> its names -> their languages
    yielded: Set[str] = set()

    def make(cui: str, rows: List[Tuple[int, str, str]]) -> Optional[Concept]:
        if wanted_types is not None and cui not in matched:
            return None
        rows.sort(key=lambda r: -r[0])  # stable: the first best-ranked row wins
        by_name: Dict[str, Tuple[str, ...]] = {}
        for _, text, code in rows:
            have = by_name.get(text, ())
            by_name[text] = have if code in have else have + (code,)
        names = list(by_name)
        if cui in partners:
            partner_names[cui] = by_name
            yielded.add(cui)
        return Concept(concept_id=cui, canonical_name=names[0], aliases=tuple(names[1:]),
                       types=types.get(cui, ()), definition=defs.get(cui), languages=tuple(by_name.values()))

    count = 0
    current: Optional[str] = None
    rows: List[Tuple[int, str, str]] = []
    warned = False
    mrconso = meta / "MRCONSO.RRF"
    for lineno, (cui, lat, ts, stt, ispref, sab, text, suppress) in _rows(
            mrconso, layout["MRCONSO.RRF"], NEEDED["MRCONSO.RRF"], show_progress=show_progress):
        if cui != current:
            if rows and current is not None:
                concept = make(current, rows)
                if concept is not None:
                    count += 1
                    yield concept
            if current is not None and cui < current and not warned:
                logger.warning("MRCONSO.RRF is not sorted by CUI; repeated CUIs are merged by the KB.")
                warned = True
            current, rows = cui, []
        code = lat_codes.get(lat)
        if code is None:
            if lat.upper() not in UMLS_LAT:
                raise DataFormatError(Errors.E740.format(path=mrconso, line=lineno, value=lat, lat=", ".join(UMLS_LAT)))
            code = lat_codes[lat] = UMLS_LAT[lat.upper()]
        if wanted_langs is not None and code not in wanted_langs:
            continue
        if (keep_sab is not None and sab not in keep_sab) or sab in drop_sab:
            continue
        if not keep_suppressed and suppress != "N":
            continue
        if not text.strip():
            continue
        rank = (ts == "P") * 4 + (stt == "PF") * 2 + (ispref == "Y")
        rows.append((rank, text, code))
    if rows and current is not None:
        concept = make(current, rows)
        if concept is not None:
            count += 1
            yield concept
    for cui in sorted(yielded):
        extra = {n: langs for p in sorted(partners[cui]) for n, langs in partner_names.get(p, {}).items()}
        if extra:
            own = next(iter(partner_names[cui].items()))
            yield Concept(concept_id=cui, canonical_name=own[0], aliases=tuple(n for n in extra if n != own[0]),
                          languages=(own[1],) + tuple(langs for n, langs in extra.items() if n != own[0]))

    if count == 0:
        filters = (f"languages={sorted(wanted_langs) if wanted_langs else 'all'}, sabs={sorted(keep_sab) if keep_sab else 'all'}, "
                   f"exclude_sabs={sorted(drop_sab)}, keep_suppressed={keep_suppressed}, "
                   f"semantic_types={sorted(wanted_types) if wanted_types else 'all'}")
        raise EmptyResultError(Errors.E007.format(what=meta / "MRCONSO.RRF", filters=filters))


__all__ = ["read_umls", "read_layout", "STANDARD_LAYOUT"]
