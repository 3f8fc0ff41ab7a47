"""CLI commands: link, create-pipeline. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

from ._app import app  # noqa: F401
