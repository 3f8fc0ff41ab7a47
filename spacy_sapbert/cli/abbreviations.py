"""CLI command: mine-abbreviations. Thin: parse arguments, call library functions, print a summary."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, List

import typer

from ..base.outputs import check_output
from ..corpus.readers import FORMATS, find_shards, read_shard
from ..errors import ConfigError, Errors
from ..mentions.abbreviation_table import check_mining_options, mine
from ._app import app


@app.command("mine-abbreviations")
def mine_abbreviations_command(
    inputs: List[Path] = typer.Argument(..., help="Raw text to read definitions from (no annotations needed): "
                                                  "files or folders as for link-corpus (JSONL, Parquet, PubTator, "
                                                  "a folder of .txt files)."),
    output: Path = typer.Option(..., "--output", "-o", help="The table to write (JSON, atomically; an existing file "
                                                             "is replaced); give it to the linker with initialize's "
                                                             "abbreviations_path, create-pipeline --abbreviations or "
                                                             "link --abbreviations."),
    data_format: str = typer.Option("auto", "--format", help=f"Input format: {', '.join(FORMATS)}."),
    text_field: str = typer.Option("text", "--text-field", help="JSONL / Parquet: the field holding the text."),
    min_count: int = typer.Option(1, "--min-count", help="Keep a short form when at least this many documents "
                                                         "define it with its most frequent long form."),
    min_share: float = typer.Option(0.5, "--min-share", help="... and that long form holds at least this share of "
                                                             "the short form's definitions (drops ambiguous ones)."),
) -> None:
    """Mine a table of short forms and their long forms ("myotonic dystrophy (DM)") from raw text, for mentions
    that are short forms their document never defines (needs scispaCy, the [abbreviations] extra)."""
    from tqdm import tqdm  # lazy: tqdm

    check_mining_options(min_count, min_share)  # before any file is read
    check_output(output, folder=False, inputs=[("the input", path) for path in inputs])
    shards = find_shards(inputs, data_format)
    out = output.resolve()  # never a file the run reads, in a folder given too: the table replaced it, unread (E503)
    for shard in shards:
        read = Path(shard.path)
        if out == read or (shard.fmt == "txt" and read in out.parents and out.suffix.lower() == ".txt"):
            raise ConfigError(Errors.E503.format(path=output, what="the input", input=out))

    def texts() -> Iterator[str]:
        for shard in shards:
            for _, text in read_shard(shard, text_field=text_field):
                yield text

    with tqdm(desc="documents", unit="doc") as bar:
        table = mine(texts(), min_count=min_count, min_share=min_share, progress=lambda n: bar.update(n - bar.n),
                     info={"inputs": [Path(shard.path).name for shard in shards]})
    table.to_disk(output)
    typer.echo(f"{table.info['documents']:,} documents, {table.info['short_forms_seen']:,} short forms defined, "
               f"{len(table):,} kept (min count {min_count}, min share {min_share}) -> {output}")
