"""CLI command: verify. Thin: check a folder's files in full, print one line per file."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..commands.verify import summary, verify_folder
from ._app import app


@app.command("verify")
def verify_command(
    path: Path = typer.Argument(..., help="A KB, encoder, index, prototype store or spaCy pipeline folder (every "
                                          "sapbert_linker in it)."),
    resources: Optional[Path] = typer.Option(None, "--resources", help="The resources folder (kb/ + index/) of a "
                                             "pipeline saved with resources = 'outside' (default: where a load looks: "
                                             "the linker's resources_path, then $SPACY_SAPBERT_RESOURCES)."),
) -> None:
    """Check every file of a saved folder against the checksums recorded when it was written (full sha256).
    Prints one line per file; exits with status 1 when a file is damaged."""
    checks = verify_folder(path, resources=resources)
    for check in checks:
        line = f"{check.status.upper():<10} {check.path}"
        typer.echo(f"{line}: {check.detail}" if check.detail else line)
    counts = summary(checks)
    typer.echo(f"{counts['ok']} ok, {counts['damaged']} damaged, {counts['unrecorded']} without records", err=True)
    if counts["damaged"]:
        raise typer.Exit(code=1)
