"""CLI commands: tune-hybrid. Thin: parse arguments, call library functions."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ..base.defaults import MAX_LENGTH
from ..base.outputs import check_output
from ..base.util import atomic_write
from ..encoding.torch_encoder import Encoder
from ..index.hybrid import CANDIDATE_MODES
from ..index.query_variants import KINDS
from ..kb import KnowledgeBase
from ..mentions.abbreviation_table import AbbreviationTable
from ..linker.settings import DEFAULT_CONFIG
from ._app import app
from ._index_options import parse_ngrams


@app.command("tune-hybrid")
def tune_hybrid_command(
    dev: Path = typer.Argument(..., help="Annotated mentions to tune on (PubTator, JSONL, TSV): a train or dev set, "
                                         "never the test set."),
    kb_dir: Path = typer.Option(..., "--kb", help="KB folder (the linker's KB)."),
    model: str = typer.Option(..., "--model", "-m", help="Name encoder: a model folder (the linker's model)."),
    pooling: str = typer.Option("auto", "--pooling", help="Name encoder pooling (as the linker's): cls, mean or auto."),
    max_length: int = typer.Option(MAX_LENGTH, "--max-length", help="Name encoder max_length (as the linker's)."),
    types: List[str] = typer.Option([], "--type", help="Keep only mentions of this type (repeatable)."),
    sparse_k: int = typer.Option(DEFAULT_CONFIG["sparse_k"], "--sparse-k", min=0,
                                 help="Concepts the sparse index adds (the linker's sparse_k; 0: the sparse part "
                                      "only re-scores the dense candidates)."),
    k: int = typer.Option(max(DEFAULT_CONFIG["k"], DEFAULT_CONFIG["max_entities_per_mention"]), "--k",
                          help="Concepts per mention in the candidate stage, as the linker's: max(k, "
                               "max_entities_per_mention), and reranker_k with a re-ranker."),
    candidates: str = typer.Option(DEFAULT_CONFIG["candidates"], "--candidates",
                                   help="How the candidates are picked from the lists, as the linker's candidates: "
                                        f"{' or '.join(CANDIDATE_MODES)}."),
    query_variants: List[str] = typer.Option(list(DEFAULT_CONFIG["query_variants"]), "--query-variants",
                                             metavar="KIND", help="A query-variant kind of the linker's "
                                             f"query_variants (repeatable): {', '.join(KINDS)}."),
    resolve_abbreviations: bool = typer.Option(DEFAULT_CONFIG["resolve_abbreviations"],
                                               "--resolve-abbreviations/--as-written",
                                               help="Read a short form in a mention as the long form its document "
                                                    "defines, as the linker's resolve_abbreviations (default: on, "
                                                    "the linker's default; needs scispaCy)."),
    abbreviation_table: Optional[Path] = typer.Option(None, "--abbreviation-table",
                                                      help="The linker's abbreviation table (mine-abbreviations' "
                                                           "file, or a TSV), read as the linker reads it."),
    ngrams: List[str] = typer.Option(["2,3"], "--ngrams", help="char_wb n-gram range LO,HI of the sparse index; "
                                                               "repeat to try several (e.g. --ngrams 2,3 --ngrams 3,3)."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Keep encoded names here between runs "
                                                                       "(evaluate's cache_dir)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the grid and the best setting as JSON."),
) -> None:
    """Pick the linker's sparse_weight (and the sparse n-gram range) by strict acc@1 on annotated mentions,
    ranked at the linker's candidate settings (--k, --candidates, --query-variants, --resolve-abbreviations: give
    the linker's own)."""
    from ..evaluation.hybrid import check_tuner_settings, tune_on_file  # lazy: spacy
    check_tuner_settings(k, candidates, query_variants, sparse_k)  # before the KB and the encoder are loaded
    if output is not None:  # never over the dev set or the table it reads (E503), before the tuning runs
        check_output(output, folder=False,
                     inputs=[("the dev set", dev), ("the abbreviation table", abbreviation_table)])
    if abbreviation_table is not None:
        AbbreviationTable.from_disk(abbreviation_table)  # E001 / E798 before the KB and the encoder, too
    ranges = [parse_ngrams(value) for value in ngrams]
    kb = KnowledgeBase.from_disk(kb_dir)
    encoder = Encoder.load(model, pooling=pooling, max_length=max_length, device=device)
    found = tune_on_file(dev, kb, encoder, types=types or None, ngram_ranges=ranges, sparse_k=sparse_k, k=k,
                         candidates=candidates, query_variants=query_variants,
                         resolve_abbreviations=resolve_abbreviations, abbreviation_table=abbreviation_table,
                         cache_dir=cache_dir)
    best = found["best"]
    typer.echo(f"{found['mentions']} mentions: name-only strict acc@1 {100 * found['name_only_acc@1']:.1f}, best "
               f"{100 * best['acc@1']:.1f} with sparse_weight = {best['sparse_weight']} (build-index --sparse "
               f"--sparse-ngrams {','.join(map(str, best['ngram_range']))}; candidates {found['candidates']}, "
               f"k {found['k']}, query_variants {found['query_variants']}; abbreviations "
               + (f"resolved in {found['abbreviations_resolved']} mentions" if found["resolve_abbreviations"]
                  else "as written") + (f", abbreviation table {abbreviation_table}" if abbreviation_table else "")
               + ")")
    if output is not None:
        with atomic_write(output) as fh:
            json.dump(found, fh, indent=2)
