"""The typer application every command module registers on.

Help texts are plain text. typer's rich help reads them as Rich markup, where ``[ray]`` is a style tag and
vanishes ("the  extra"); so ``--help`` shows an escaped copy of each text, while the texts themselves (which
docs/cli.md is made from) stay as written.
"""
from __future__ import annotations

import copy
from typing import Any, Optional

import typer
from typer.core import TyperCommand, TyperGroup


def _escaped(obj: Any) -> Any:
    """A shallow copy of a command or parameter whose help texts are escaped for Rich markup."""
    from rich.markup import escape

    shown = copy.copy(obj)
    for attr in ("help", "short_help"):
        if getattr(shown, attr, None):
            setattr(shown, attr, escape(getattr(shown, attr)))
    return shown


class PlainHelpCommand(TyperCommand):
    """A command whose ``--help`` shows its help texts as written (no Rich markup)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        shown = _escaped(self)
        shown.params = [_escaped(param) for param in self.params]
        return TyperCommand.format_help(shown, ctx, formatter)


class PlainHelpGroup(TyperGroup):
    """The app: its ``--help`` lists the commands' help texts as written (no Rich markup)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        shown = _escaped(self)
        shown.commands = {name: _escaped(command) for name, command in self.commands.items()}
        return TyperGroup.format_help(shown, ctx, formatter)


class _Typer(typer.Typer):
    def command(self, name: Optional[str] = None, *, cls: Optional[type] = None, **kwargs: Any) -> Any:
        return super().command(name, cls=cls or PlainHelpCommand, **kwargs)


app = _Typer(
    name="spacy-sapbert",
    help="SapBERT concept linking for spaCy: build KBs and indexes, pretrain, link, evaluate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=PlainHelpGroup,
)
