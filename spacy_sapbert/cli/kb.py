"""CLI commands: build-kb. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from ..base.outputs import check_output
from ..errors import ConfigError, Errors
from ..kb.build import build_kb
from ..kb.readers import SCOPES_ALL, write_jsonl
from ._app import app


def _split(values: Optional[List[str]]) -> List[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


@app.command("build-kb")
def build_kb_command(
    sources: List[Path] = typer.Argument(..., help="Source files (UMLS: the META folder or its MRCONSO.RRF)."),
    output: Path = typer.Option(..., "--output", "-o", help="KB folder to write (atomically)."),
    formats: List[str] = typer.Option(
        ..., "--format", "-f",
        help="Format of each source: umls, obo, medic, jsonl, tsv, babelon (translations of the other sources' concepts). Give it once for all sources or once per source, in order."),
    language: List[str] = typer.Option(["ENG"], "--language", "-l", help="UMLS: languages to keep, LAT (ENG,SPA,FRE,GER,DUT) or ISO 639-1 codes ('all' keeps every language); each name keeps its language."),
    sab: Optional[List[str]] = typer.Option(None, "--sab", help="UMLS: keep only these source vocabularies (repeat or comma-separate)."),
    exclude_sab: Optional[List[str]] = typer.Option(None, "--exclude-sab", help="UMLS: drop these source vocabularies."),
    keep_suppressed: bool = typer.Option(False, "--keep-suppressed", help="UMLS: keep rows with SUPPRESS != N."),
    semantic_type: Optional[List[str]] = typer.Option(None, "--semantic-type", "-t", help="UMLS: keep only concepts with these TUIs or STY names (repeat the option; STY names may contain commas)."),
    no_definitions: bool = typer.Option(False, "--no-definitions", help="UMLS: do not read MRDEF.RRF."),
    no_tradenames: bool = typer.Option(False, "--no-tradenames", help="UMLS: do not add MRREL trade names as synonyms."),
    obo_scopes: Optional[str] = typer.Option(None, "--obo-scopes", help="OBO: synonym scopes to keep, comma-separated, or 'all' (default EXACT,RELATED)."),
    map_xrefs: Optional[str] = typer.Option(None, "--map-xrefs", help="OBO: use cross-references with these prefixes as concept ids (e.g. UMLS,UMLS_CUI)."),
    drop_unmapped: bool = typer.Option(False, "--drop-unmapped", help="OBO with --map-xrefs: drop terms without such a cross-reference."),
    obo_language: str = typer.Option("en", "--obo-language", help="OBO: the language of the ontology's names (ISO 639-1; 'und': unknown)."),
    translation_status: str = typer.Option("OFFICIAL", "--translation-status", help="babelon: translation statuses to keep, comma-separated (OFFICIAL, CANDIDATE)."),
    translation_language: Optional[str] = typer.Option(None, "--translation-language", help="babelon: language of files that name none."),
    tsv_header: bool = typer.Option(False, "--tsv-header", help="TSV: the first line is a header."),
    jsonl: Optional[Path] = typer.Option(None, "--jsonl", help="Also write the KB as scispaCy jsonl to this file."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Build a knowledge base folder from UMLS, OBO, MEDIC, scispaCy jsonl or TSV sources, plus translation
    tables (babelon) that add names in other languages to the concepts of those sources."""
    read = [("the source", source) for source in sources]
    check_output(output, overwrite=overwrite, inputs=read)
    if jsonl is not None:
        check_output(jsonl, folder=False, inputs=read)

    fmts = [f.lower() for f in _split(formats)]
    if len(fmts) == 1:
        fmts = fmts * len(sources)
    if len(fmts) != len(sources):
        raise ConfigError(Errors.E012.format(option="--format", value=",".join(fmts),
                                             why=f"give one format for all sources or one per source ({len(sources)})"))
    options: Dict[str, Dict[str, Any]] = {"umls": {}, "obo": {}, "tsv": {}, "babelon": {}}
    umls = options["umls"]
    langs = _split(language)
    umls["languages"] = None if [x.lower() for x in langs] == ["all"] else langs
    if sab:
        umls["sabs"] = _split(sab)
    if exclude_sab:
        umls["exclude_sabs"] = _split(exclude_sab)
    if keep_suppressed:
        umls["keep_suppressed"] = True
    if semantic_type:
        umls["semantic_types"] = [t.strip() for t in semantic_type if t.strip()]
    if no_definitions:
        umls["definitions"] = False
    if no_tradenames:
        umls["tradenames"] = False
    if obo_scopes:
        options["obo"]["synonym_scopes"] = SCOPES_ALL if obo_scopes.strip().lower() == "all" else _split([obo_scopes])
    if map_xrefs:
        options["obo"]["map_xrefs"] = _split([map_xrefs])
    if drop_unmapped:
        options["obo"]["keep_unmapped"] = False
    if tsv_header:
        options["tsv"]["header"] = True
    if obo_language.strip().lower() != "en":
        options["obo"]["language"] = obo_language.strip()
    if translation_status.strip().upper() != "OFFICIAL":
        options["babelon"]["statuses"] = _split([translation_status])
    if translation_language:
        options["babelon"]["language"] = translation_language.strip()
    given = {"umls": [k for k in umls if k != "languages"] + (["languages"] if langs != ["ENG"] else []),
             "obo": list(options["obo"]), "tsv": list(options["tsv"]), "babelon": list(options["babelon"])}
    for fmt, keys in given.items():
        if keys and fmt not in fmts:
            raise ConfigError(Errors.E012.format(option=f"{fmt} options ({', '.join(keys)})", value=",".join(fmts),
                                                 why=f"they apply to {fmt} sources only; add a {fmt} source or drop them"))
    start = time.perf_counter()
    kb = build_kb(list(zip(sources, fmts)), output, options=options, overwrite=overwrite, show_progress=True)
    if jsonl is not None:
        write_jsonl(kb, jsonl)
    elapsed = time.perf_counter() - start
    stats = kb.stats()
    typer.echo(f"Wrote {output} in {elapsed:.1f}s: {stats['concepts']:,} concepts, {stats['names']:,} names, "
               f"{stats['ambiguous_names']:,} ambiguous names")
    typer.echo("  names per language: " + ", ".join(f"{code} {n:,}" for code, n in kb.language_counts().items()))
    for s in stats["sources"]:
        typer.echo(f"  {s['source']}: {s['concepts']:,} concepts, {s['names']:,} names, {s['ambiguous_names']:,} ambiguous names")
    if jsonl is not None:
        typer.echo(f"Wrote scispaCy jsonl {jsonl}")
