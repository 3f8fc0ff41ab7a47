"""Generated documentation pages, filled in at build time by an MkDocs hook (``mkdocs.yml`` → ``hooks``).

A page holds a placeholder line, ``<!-- GENERATED: errors -->`` or ``<!-- GENERATED: cli -->``, and the
hook replaces it with Markdown made from the code itself:

- ``errors``: every code of :class:`spacy_sapbert.errors.Errors` and ``Warnings``, grouped by the
  ``# ---- ... ----`` section comments of the ``errors`` package's files, so a code added later gets its entry with no edit
  here;
- ``cli``: every command of the ``spacy-sapbert`` typer app, with its help, usage and every argument and
  option (type, default, help).

``python scripts/docs_hooks.py errors|cli`` prints the Markdown (to look at it without a build).
"""
from __future__ import annotations

import html
import re
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

PLACEHOLDER = re.compile(r"^<!-- GENERATED: ([a-z]+) -->$", re.MULTILINE)
_CODE = re.compile(r"^\s{4}([EW]\d{3})\s*=")
_SECTION = re.compile(r"^\s{4}# -+ (.+?) -+\s*$")


def escape_markdown(text: str) -> str:
    """Plain text made safe for a Markdown table cell or paragraph."""
    text = html.escape(re.sub(r"\s+", " ", text), quote=False)
    return re.sub(r"([\\*_\[\]|#])", r"\\\1", text)  # code spans (`...`) are kept


class _Field:
    """Stands for a ``{field}`` of a template: formats as a marker whatever its conversion or spec."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __format__(self, spec: str) -> str:
        return f"\x00{self.name}\x01"

    __str__ = __repr__ = lambda self: f"\x00{self.name}\x01"


class _Fields(dict):
    def __missing__(self, key: str) -> _Field:
        return _Field(key)


_MARKER = re.compile(r"\x00([^\x01]*)\x01")


def _message_markdown(template: str) -> str:
    """An error template as Markdown: its text escaped, its own code spans (between backticks) kept whole
    with the fields inside them shown as ``{name}``, the other fields shown as code (side by side: one
    span), ``{{`` / ``}}`` as single braces."""
    out = []
    for i, part in enumerate(template.format_map(_Fields()).split("`")):
        if i % 2:  # inside one of the template's code spans: shown as written (HTML is escaped by Markdown)
            out.append(f"`{_MARKER.sub(lambda m: '{' + m.group(1) + '}', part)}`" if part else "``")
            continue
        pieces = _MARKER.split(part)  # text, field, text, field, ..., text
        out.append(escape_markdown(pieces[0]))
        fields: List[str] = []
        for name, text in zip(pieces[1::2], pieces[2::2]):
            fields.append("{" + name + "}")
            if text:
                out += [f"`{''.join(fields)}`", escape_markdown(text)]
                fields = []
        if fields:
            out.append(f"`{''.join(fields)}`")
    return "".join(out)


def error_sections(package: Path) -> Dict[str, str]:
    """``code -> section title`` read from the ``# ---- title ----`` comments of the ``errors`` package's files."""
    out: Dict[str, str] = {}
    for source in sorted(package.glob("*.py")):
        out.update(_file_sections(source))
    return out


def _file_sections(source: Path) -> Dict[str, str]:
    section, out = "Other", {}
    for line in source.read_text(encoding="utf8").splitlines():
        m = _SECTION.match(line)
        if m:
            section = m.group(1).strip()
            continue
        m = _CODE.match(line)
        if m:
            out[m.group(1)] = section
    return out


def catalogue(cls: type) -> Iterator[Tuple[str, str]]:
    """``(code, raw template)`` of a catalogue class (and the classes it is made of), in definition order."""
    for part in cls.__mro__[:-1]:
        for name, value in vars(part).items():
            if name[:1] in ("E", "W") and name[1:].isdigit() and isinstance(value, str):
                yield name, value


def errors_markdown() -> str:
    """The error and warning catalogue as Markdown tables, one per section."""
    from spacy_sapbert import errors

    sections = error_sections(Path(errors.__file__).parent)
    out: List[str] = []
    for title, cls in (("Errors", errors.Errors), ("Warnings", errors.Warnings)):
        out += [f"## {title}", ""]
        current: Optional[str] = None
        for code, template in catalogue(cls):
            section = sections.get(code, "Other")
            if section != current:
                out += ["", f"### {section}", "", "| code | message |", "|---|---|"]
                current = section
            out.append(f'| <span id="sb-{code.lower()}"></span>`SB-{code}` | {_message_markdown(template)} |')
        out.append("")
    classes = [(name, obj) for name, obj in vars(errors).items()
               if isinstance(obj, type) and issubclass(obj, errors.SapbertError)]
    out += ["## Exception classes", "", "| class | raised when |", "|---|---|"]
    out += [f"| `{name}` | {escape_markdown((obj.__doc__ or '').strip())} |" for name, obj in classes]
    return "\n".join(out) + "\n"


def _default(param: Any) -> str:
    default = param.default
    if getattr(param, "required", False):
        return "required"
    if default is None or default == () or default == []:
        return "–"
    if callable(default):
        return "(computed)"
    if getattr(param, "is_flag", False) and param.secondary_opts:
        on, off = param.opts[0], param.secondary_opts[0]
        return on if default else off
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, (list, tuple)):
        return ", ".join(f"`{d}`" for d in default)
    return f"`{default}`"


def type_name(annotation: Any) -> str:
    """A reader's name for a parameter's annotation (``List[Path]`` -> ``path, repeatable``)."""
    import enum
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return type_name(inner[0]) if len(inner) == 1 else " or ".join(type_name(a) for a in inner)
    if origin in (list, tuple, set, typing.List, typing.Tuple, typing.Set, typing.Sequence):
        return (type_name(args[0]) if args else "value") + ", repeatable"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in annotation)
    names = {bool: "flag", int: "integer", float: "number", str: "text", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _param_name(param: Any) -> str:
    if param.param_type_name == "argument":
        return param.name.upper()
    return " / ".join(list(param.opts) + list(param.secondary_opts))


def _param_row(param: Any) -> Optional[str]:
    if getattr(param, "hidden", False):
        return None
    descriptor = getattr(param, "type_descriptor", None)
    kind = type_name(descriptor.annotation) if descriptor is not None else ""
    if param.param_type_name == "argument":
        kind = "argument: " + kind
    help_text = escape_markdown((getattr(param, "help", None) or "").strip())
    return f"| `{_param_name(param)}` | {escape_markdown(kind)} | {_default(param)} | {help_text} |"


def usage_line(name: str, params: List[Any]) -> str:
    """``spacy-sapbert NAME [OPTIONS] ARG...`` (optional arguments in brackets)."""
    pieces = ["spacy-sapbert", name, "[OPTIONS]"]
    for p in params:
        if p.param_type_name == "argument":
            piece = p.name.upper() + ("..." if p.nargs == -1 else "")
            pieces.append(piece if p.required else f"[{piece}]")
    return " ".join(pieces)


def cli_markdown() -> str:
    """Every command of the ``spacy-sapbert`` app: help, usage, arguments and options."""
    import typer

    from spacy_sapbert.cli import app

    root = typer.main.get_command(app)
    root_ctx = typer.Context(root, info_name="spacy-sapbert")
    out = [escape_markdown(root.help or ""), ""]
    out += ["| command | what it does |", "|---|---|"]
    names = root.list_commands(root_ctx)
    for name in names:
        cmd = root.get_command(root_ctx, name)
        out.append(f"| [`{name}`](#{name}) | {escape_markdown(cmd.get_short_help_str(limit=200))} |")
    out.append("")
    for name in names:
        cmd = root.get_command(root_ctx, name)
        ctx = typer.Context(cmd, info_name=name, parent=root_ctx)
        params = cmd.get_params(ctx)
        usage = usage_line(name, params)
        out += [f"## {name}", "", escape_markdown(cmd.help or ""), "", "```text", usage, "```", ""]
        if cmd.context_settings.get("allow_extra_args"):
            out += ["Extra arguments are config overrides in spaCy's style (`--section.key value`).", ""]
        rows = [r for r in (_param_row(p) for p in params) if r]
        out += ["| argument / option | type | default | help |", "|---|---|---|---|"] + rows + [""]
    return "\n".join(out)


GENERATORS = {"errors": errors_markdown, "cli": cli_markdown}


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    """MkDocs hook: replace each placeholder line with its generated Markdown."""
    def fill(m: "re.Match[str]") -> str:
        generator = GENERATORS.get(m.group(1))
        if generator is None:
            raise ValueError(f"unknown generated section '{m.group(1)}' (known: {', '.join(GENERATORS)})")
        return generator()

    return PLACEHOLDER.sub(fill, markdown)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in GENERATORS:
        sys.exit(f"usage: python scripts/docs_hooks.py {'|'.join(GENERATORS)}")
    print(GENERATORS[sys.argv[1]]())
