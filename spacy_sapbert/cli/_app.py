"""The typer application every command module registers on."""
from __future__ import annotations

import typer

app = typer.Typer(
    name="spacy-sapbert",
    help="SapBERT concept linking for spaCy: build KBs and indexes, pretrain, link, evaluate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
