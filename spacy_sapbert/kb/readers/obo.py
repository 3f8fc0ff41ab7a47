"""OBO 1.2/1.4 ontologies (HPO, DO, MONDO, ...): ``[Term]`` stanzas.

Kept: ``id``, ``name``, ``synonym`` (scopes chosen by ``synonym_scopes``; default EXACT and
RELATED: NARROW and BROAD synonyms name other, narrower/broader concepts), ``def``, ``alt_id``
(as alternate ids), ``xref`` (only for ``map_xrefs``). ``is_obsolete: true`` terms are skipped.

``map_xrefs=("UMLS", "UMLS_CUI")`` turns each term into one concept per cross-reference with one
of those prefixes, with the prefix removed (``xref: UMLS:C0001`` -> ``C0001``) and the OBO id kept
as an alternate id; terms without such a cross-reference keep their OBO id unless
``keep_unmapped=False``.
"""
from __future__ import annotations

from typing import Collection, Dict, Iterator, List, Optional, Tuple

from ...errors import ConfigError, DataFormatError, EmptyResultError, Errors, Warnings
from ...base.util import PathLike, get_logger
from ..concept import Concept
from ..languages import UNKNOWN, language_code
from ...base.lines import as_set, iter_lines, require_file

logger = get_logger("kb.obo")

SCOPES = ("EXACT", "RELATED", "NARROW", "BROAD")
DEFAULT_SCOPES = ("EXACT", "RELATED")


def _quoted(value: str) -> Tuple[Optional[str], str]:
    """Parse a leading OBO quoted string (with backslash escapes): (text, rest) or (None, value)."""
    if not value.startswith('"'):
        return None, value
    out: List[str] = []
    i = 1
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append({"n": " ", "t": " "}.get(nxt, nxt))
            i += 2
            continue
        if ch == '"':
            return "".join(out), value[i + 1 :].strip()
        out.append(ch)
        i += 1
    return None, value


def _strip_comment(value: str) -> str:
    # trailing "! comment" (not inside quotes: only used on unquoted values)
    return value.split(" !", 1)[0].strip()


def _concepts(term: Dict[str, List[Tuple[int, str]]], path, start: int, scopes: Collection[str],
              map_xrefs: Optional[Collection[str]], keep_unmapped: bool, language: Optional[str]) -> List[Concept]:
    if "id" not in term:
        raise DataFormatError(Errors.E006.format(path=path, line=start))
    obo_id = _strip_comment(term["id"][0][1])
    if any(_strip_comment(v).lower() == "true" for _, v in term.get("is_obsolete", [])):
        return []
    name = _strip_comment(term["name"][0][1]) if "name" in term else ""
    if not name:
        logger.warning(Warnings.W001.format(path=path, line=start, what=f"term {obo_id} has no name"))
        return []
    synonyms: List[str] = []
    for lineno, value in term.get("synonym", []):
        text, rest = _quoted(value)
        if text is None:
            raise DataFormatError(Errors.E011.format(path=path, line=lineno, what="synonym without a quoted text",
                                                     fix='Write it as synonym: "text" EXACT [].'))
        scope = rest.split(" ", 1)[0].upper() if rest and not rest.startswith("[") else "RELATED"  # OBO default
        if scope in scopes and text.strip() and text != name:
            synonyms.append(text)
    definition = None
    if "def" in term:
        definition, _ = _quoted(term["def"][0][1])
    alt_ids = tuple(_strip_comment(v) for _, v in term.get("alt_id", []))
    ids = [obo_id]
    if map_xrefs:
        mapped = []
        for _, value in term.get("xref", []):
            xref = value.split(" ", 1)[0].strip()
            prefix, _, local = xref.partition(":")
            if prefix in map_xrefs and local:
                mapped.append(local)
        if mapped:
            ids = list(dict.fromkeys(mapped))
            alt_ids = (obo_id,) + alt_ids
        elif not keep_unmapped:
            return []
    aliases = tuple(dict.fromkeys(synonyms))
    languages = ((language,),) * (1 + len(aliases)) if language else ()
    return [Concept(concept_id=cid, canonical_name=name, aliases=aliases, definition=definition,
                    alt_ids=alt_ids, languages=languages) for cid in ids]


def read_obo(
    path: PathLike,
    *,
    synonym_scopes: Collection[str] = DEFAULT_SCOPES,
    map_xrefs: Optional[Collection[str]] = None,
    keep_unmapped: bool = True,
    language: Optional[str] = "en",
    show_progress: bool = False,
) -> Iterator[Concept]:
    """Concepts from an OBO file (see the module doc for the options). ``language``: the language of
    every name (ISO 639-1 or UMLS LAT code; None: unknown)."""
    path = require_file(path, "OBO file", "pass the .obo file of the ontology.")
    lang = language_code(language) if language else None
    lang = None if lang == UNKNOWN else lang
    scopes = {s.upper() for s in as_set(synonym_scopes)}
    bad = sorted(scopes - set(SCOPES))
    if bad:
        raise ConfigError(Errors.E002.format(what="synonym scope", value=",".join(bad), choices=", ".join(SCOPES)))
    prefixes = as_set(map_xrefs) if map_xrefs else None
    term: Optional[Dict[str, List[Tuple[int, str]]]] = None
    start = 0
    count = 0
    for lineno, line in iter_lines(path, show_progress=show_progress):
        stripped = line.strip()
        if stripped.startswith("["):
            if term is not None:
                for concept in _concepts(term, path, start, scopes, prefixes, keep_unmapped, lang):
                    count += 1
                    yield concept
            term = {} if stripped == "[Term]" else None
            start = lineno
            continue
        if term is None or not stripped or stripped.startswith("!"):
            continue
        tag, sep, value = stripped.partition(":")
        if not sep:
            raise DataFormatError(Errors.E011.format(path=path, line=lineno, what=f"'{stripped[:40]}' is not a 'tag: value' line",
                                                     fix="Fix the line or remove it."))
        term.setdefault(tag.strip(), []).append((lineno, value.strip()))
    if term is not None:
        for concept in _concepts(term, path, start, scopes, prefixes, keep_unmapped, lang):
            count += 1
            yield concept
    if count == 0:
        raise EmptyResultError(Errors.E007.format(
            what=path, filters=f"non-obsolete [Term] stanzas with a name, map_xrefs={sorted(prefixes) if prefixes else None}, "
                               f"keep_unmapped={keep_unmapped}"))


__all__ = ["read_obo", "SCOPES", "DEFAULT_SCOPES"]
