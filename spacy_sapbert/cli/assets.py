"""CLI commands: download-umls. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..assets.umls import API_KEY_ENV, UMLS_FILES, UTS_DOWNLOAD_URL, download_umls
from ..base.outputs import check_parent
from ._app import app


def _hidden_prompt() -> str:
    return typer.prompt("UMLS API key (input hidden)", hide_input=True, err=True)


@app.command("download-umls")
def download_umls_cli(
    release: str = typer.Option(..., "--release", "-r", help="UMLS release, e.g. 2024AB."),
    output: Path = typer.Option(
        Path("assets/umls"), "--output", "-o", help="Folder for the extracted .RRF files and the manifest."
    ),
    api_key_env: str = typer.Option(
        API_KEY_ENV, "--api-key-env",
        help="Environment variable holding your UTS API key. Without it you are asked (hidden input) "
        "when a terminal is attached. The key is never accepted as an argument.",
    ),
    url: Optional[str] = typer.Option(
        None, "--url", help="File URL of the release zip (default: the release's Metathesaurus zip on "
        "download.nlm.nih.gov)."
    ),
    uts_url: str = typer.Option(UTS_DOWNLOAD_URL, "--uts-url", help="The UTS download endpoint."),
    md5: Optional[str] = typer.Option(None, "--md5", help="Expected MD5 of the zip (from the UMLS download page)."),
    sha256: Optional[str] = typer.Option(None, "--sha256", help="Expected SHA-256 of the zip."),
    files: Optional[List[str]] = typer.Option(
        None, "--file", "-f", help=f"A file to extract (repeatable). Default: {', '.join(UMLS_FILES)}."
    ),
    keep_archive: bool = typer.Option(
        False, "--keep-archive/--remove-archive", help="Keep the downloaded zip after extraction."
    ),
    force: bool = typer.Option(False, "--force", help="Download and extract again even if the output is complete."),
    timeout: float = typer.Option(60.0, "--timeout", help="Network timeout in seconds (per read)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """Download a UMLS Metathesaurus release with your UTS API key (resumable) and extract
    MRCONSO, MRSTY, MRDEF, MRREL, MRFILES and MRCOLS."""
    check_parent(output / "MRCONSO.RRF")
    result = download_umls(
        release, output, api_key_env=api_key_env, prompt=_hidden_prompt, url=url, uts_url=uts_url,
        md5=md5, sha256=sha256, files=tuple(files) if files else UMLS_FILES, keep_archive=keep_archive,
        force=force, timeout=timeout, show_progress=progress,
    )
    if result.skipped:
        typer.echo(f"UMLS {result.release} is already complete in {result.output} (use --force to redo).")
    else:
        resumed = f", resumed after {result.resumed_from} bytes" if result.resumed_from else ""
        typer.echo(f"Downloaded {result.downloaded_bytes} bytes{resumed}; extracted UMLS {result.release} "
                   f"into {result.output}:")
    for name, path in sorted(result.files.items()):
        typer.echo(f"  {name}  {result.sizes.get(name, 0)} bytes")
    for name in result.missing:
        typer.echo(f"  {name}  not in the archive (skipped)", err=True)
    if result.archive is not None:
        typer.echo(f"Archive kept: {result.archive}")
    sys.stdout.flush()
