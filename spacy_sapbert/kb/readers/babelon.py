"""Translation tables of an ontology (the HPO translation project's Babelon TSVs): translated labels and
synonyms, each with its language, as ``Concept``s that add names to the ontology's concepts.

Two layouts, both read by column *name* (the files order their columns differently):

- Babelon (``hp-fr.babelon.tsv``): columns ``subject_id``, ``predicate_id``, ``translation_value``,
  ``translation_status`` and ``translation_language`` (the last may be replaced by ``language=``).
  Rows whose ``predicate_id`` is a label or synonym (:data:`NAME_PREDICATES`) are kept; definitions
  (``IAO:0000115``) are not names and are skipped.
- ROBOT synonym templates (``hp-fr.synonyms.tsv``): a header with ``subject_id`` and
  ``translation_value``, then a template row starting ``ID`` whose ``...@fr`` tag gives the language
  (``SPLIT=|``: several synonyms in one cell). A ``Status`` / ``translation_status`` column is used
  when present; without one every row counts as OFFICIAL.

``statuses`` chooses the translation statuses kept (default OFFICIAL only; machine translations
are CANDIDATE). Ids are not checked here: :func:`spacy_sapbert.kb.build_kb` drops (with warning
W735) translations of ids the ontology given with them does not have.
"""
from __future__ import annotations

import re
from typing import Collection, Dict, Iterator, List, Optional, Tuple

from ...errors import ConfigError, DataFormatError, EmptyResultError, Errors
from ...base.util import PathLike, get_logger
from ..concept import Concept
from ..languages import language_code
from ...base.lines import as_set, iter_lines, require_file

logger = get_logger("kb.babelon")

STATUSES = ("OFFICIAL", "CANDIDATE")
NAME_PREDICATES = frozenset({"rdfs:label", "skos:prefLabel", "skos:altLabel", "oboInOwl:hasExactSynonym",
                             "oboInOwl:hasRelatedSynonym", "oboInOwl:hasNarrowSynonym", "oboInOwl:hasBroadSynonym"})
BABELON_COLUMNS = ("subject_id", "predicate_id", "translation_value", "translation_status", "translation_language")
TEMPLATE_COLUMNS = ("subject_id", "translation_value")
_TAG = re.compile(r"@([A-Za-z]{2,3}(?:-[A-Za-z]+)?)\b")


def _column(header: List[str], name: str) -> Optional[int]:
    lowered = [h.strip().lower() for h in header]
    return lowered.index(name.lower()) if name.lower() in lowered else None


def _require(path, header: List[str], needed: Tuple[str, ...]) -> Dict[str, int]:
    found = {}
    for name in needed:
        i = _column(header, name)
        if i is None:
            raise DataFormatError(Errors.E737.format(path=path, missing=name, found=", ".join(header) or "none",
                                                     needed=", ".join(needed)))
        found[name] = i
    return found


def read_babelon(
    path: PathLike,
    *,
    statuses: Collection[str] = ("OFFICIAL",),
    language: Optional[str] = None,
    show_progress: bool = False,
) -> Iterator[Concept]:
    """Concepts (one per translated id, every name tagged with its language) from a Babelon TSV or a
    ROBOT synonym template (see the module doc). ``language``: used where the file names none."""
    path = require_file(path, "Translation file", "pass a Babelon TSV (e.g. hp-fr.babelon.tsv).")
    wanted = {s.strip().upper() for s in as_set(statuses)}
    bad = sorted(wanted - set(STATUSES))
    if bad:
        raise ConfigError(Errors.E742.format(value=bad[0]))
    fallback = language_code(language) if language else None
    lines = iter_lines(path, show_progress=show_progress)
    first = next(lines, None)
    header = first[1].split("\t") if first is not None else []
    rows = list(lines)
    template = bool(rows) and rows[0][1].split("\t", 1)[0].strip() == "ID"
    split = None
    if template:
        cols = _require(path, header, TEMPLATE_COLUMNS)
        spec = rows.pop(0)[1].split("\t")
        cell = spec[cols["translation_value"]] if cols["translation_value"] < len(spec) else ""
        tag = _TAG.search(cell)
        file_lang = tag.group(1) if tag else fallback
        split = "|" if "SPLIT=|" in cell else None
        for key, name in (("translation_status", "translation_status"), ("translation_status", "status"),
                          ("predicate_id", "predicate_id"), ("translation_language", "translation_language")):
            i = _column(header, name)
            if i is not None:
                cols.setdefault(key, i)
    else:
        needed = BABELON_COLUMNS if fallback is None or _column(header, "translation_language") is not None \
            else BABELON_COLUMNS[:-1]
        cols = _require(path, header, needed)
        file_lang = fallback
    if "translation_language" not in cols and file_lang is None:
        raise DataFormatError(Errors.E741.format(path=path, column="translation_language"))
    codes: Dict[str, str] = {}
    names: Dict[str, Dict[str, List[str]]] = {}  # id -> name -> languages (ids and names in file order)
    labels: Dict[str, List[str]] = {}
    skipped = 0
    width = len(header)
    for lineno, line in rows:
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) > width:
            raise DataFormatError(Errors.E738.format(path=path, line=lineno, what=f"{len(parts)} tab-separated "
                                                     f"columns, the header has {width}",
                                                     fix="Remove the extra tabs or fix the header."))
        parts += [""] * (width - len(parts))
        status = parts[cols["translation_status"]].strip().upper() if "translation_status" in cols else "OFFICIAL"
        if status not in wanted:
            skipped += 1
            continue
        if "predicate_id" in cols and parts[cols["predicate_id"]].strip() not in NAME_PREDICATES:
            continue
        raw_lang = parts[cols["translation_language"]].strip() if "translation_language" in cols else ""
        raw_lang = raw_lang or file_lang or ""
        code = codes.get(raw_lang)
        if code is None:
            try:
                code = codes[raw_lang] = language_code(raw_lang)
            except ConfigError:
                raise DataFormatError(Errors.E738.format(
                    path=path, line=lineno, what=f"unknown language code '{raw_lang}'",
                    fix="Use an ISO 639-1 code (fr, es, pt, de, it ...); see spacy_sapbert.kb.languages.")) from None
        cid = parts[cols["subject_id"]].strip()
        value = parts[cols["translation_value"]]
        texts = value.split(split) if split else [value]
        for text in (t.strip() for t in texts):
            if not cid or not text:
                continue
            langs = names.setdefault(cid, {}).setdefault(text, [])
            if code not in langs:
                langs.append(code)
            if "predicate_id" in cols and parts[cols["predicate_id"]].strip() == "rdfs:label":
                labels.setdefault(cid, []).append(text)
    if skipped:
        logger.info("%s: %d translations with another status than %s skipped", path, skipped, sorted(wanted))
    if not names:
        raise EmptyResultError(Errors.E007.format(what=path, filters=f"statuses={sorted(wanted)}, name predicates"))
    for cid, by_name in names.items():
        ordered = list(dict.fromkeys(labels.get(cid, []) + list(by_name)))  # the translated label first
        yield Concept(concept_id=cid, canonical_name=ordered[0], aliases=tuple(ordered[1:]),
                      languages=tuple(tuple(by_name[n]) for n in ordered))


__all__ = ["read_babelon", "STATUSES", "NAME_PREDICATES", "BABELON_COLUMNS", "TEMPLATE_COLUMNS"]
