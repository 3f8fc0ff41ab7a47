"""What a reader sees of the generated pages and of ``--help``: every message and help text as written.

- the errors page (``scripts/docs_hooks.py errors``), rendered to HTML with the site's Markdown extensions, shows
  each message with its ``{fields}`` and code spans intact (issue 30: 13 rows were garbled where a field sat
  inside backticks or two fields touched, and doubled braces were shown doubled);
- ``spacy-sapbert COMMAND --help`` shows every help text as written: rich markup must not eat ``[ray]``.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List

import pytest

from helpers import load_module

ROOT = Path(__file__).resolve().parents[1]
docs_hooks = load_module(ROOT / "scripts" / "docs_hooks.py")


class _Field:
    """Formats as ``{name}`` whatever the conversion or format spec: the field as the page shows it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __format__(self, spec: str) -> str:
        return "{" + self.name + "}"

    __repr__ = __str__ = lambda self: "{" + self.name + "}"


class _Fields(dict):
    def __missing__(self, key: str) -> _Field:
        return _Field(key)


def shown(template: str) -> str:
    """The text a reader should see for a message template: fields as ``{name}``, ``{{`` as ``{``, no backticks."""
    return re.sub(r"\s+", " ", template.format_map(_Fields()).replace("`", "")).strip()


def code_spans(template: str) -> List[str]:
    """The template's own code spans (between backticks), fields shown as ``{name}``."""
    return re.findall(r"`([^`]*)`", template.format_map(_Fields()))


class _Rows(HTMLParser):
    """``SB-code -> (cell text, [code texts])`` of the message cells of the rendered errors page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: Dict[str, tuple] = {}
        self.tags: List[str] = []
        self._cells: List[List[str]] = []
        self._codes: List[List[str]] = []
        self._in_code = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(self.get_starttag_text())
        if tag == "tr":
            self._cells, self._codes = [], []
        elif tag == "td":
            self._cells.append([])
            self._codes.append([])
        elif tag == "code" and self._cells:
            self._in_code = True
            self._codes[-1].append("")

    def handle_endtag(self, tag):
        if tag == "code":
            self._in_code = False
        elif tag == "tr" and len(self._cells) == 2:
            code = "".join(self._cells[0]).strip()
            self.rows[code] = ("".join(self._cells[1]), self._codes[1])

    def handle_data(self, data):
        if self._cells:
            self._cells[-1].append(data)
            if self._in_code:
                self._codes[-1][-1] += data


def rendered_rows(markdown_text: str) -> _Rows:
    import markdown

    page = markdown.markdown(markdown_text, extensions=["admonition", "attr_list", "tables", "toc"])
    parser = _Rows()
    parser.feed(page)
    return parser


def test_errors_page_shows_every_message_as_written():
    from spacy_sapbert.errors import Errors, Warnings

    parser = rendered_rows(docs_hooks.errors_markdown())
    templates = {f"SB-{code}": template for cls in (Errors, Warnings) for code, template in docs_hooks.catalogue(cls)}
    assert len(templates) > 200 and set(parser.rows) >= set(templates)
    garbled = []
    for code, template in templates.items():
        text, codes = parser.rows[code]
        want = shown(template)
        if re.sub(r"\s+", " ", text).strip() != want:
            garbled.append(f"{code}: shows {text!r}\n      wants {want!r}")
            continue
        # each code span of the message (`spacy-sapbert export-onnx {folder}`) is one <code> element, whole
        missing = [span for span in code_spans(template) if span not in codes]
        if missing:
            garbled.append(f"{code}: code spans {missing} not shown as code (shown: {codes})")
    assert not garbled, f"{len(garbled)} garbled rows:\n" + "\n".join(garbled)
    # no stray attributes made of message words (`<code folder>`)
    assert not [t for t in parser.tags if t.startswith("<code") and t != "<code>"]


@pytest.mark.parametrize("template", [
    "Run `spacy-sapbert export-onnx {folder}`, or use runtime='torch'.",   # a field inside a code span
    "HTTP {status}{detail} from {host}.",                                   # two fields side by side
    "e.g. {{\"a\": [\"{x}\"]}}; run `export {env}=<your key>`; a | b, x_y *z* #1",  # braces, HTML, Markdown
])
def test_errors_page_renderer_handles_fields_in_and_next_to_code_spans(template):
    cell = docs_hooks._message_markdown(template)
    text, codes = rendered_rows(f"| code | message |\n|---|---|\n| X | {cell} |\n").rows["X"]
    assert re.sub(r"\s+", " ", text).strip() == shown(template), cell
    assert all(span in codes for span in code_spans(template)), (cell, codes)


# ------------------------------------------------------------------ --help shows the help texts as written
def _commands():
    import typer

    from spacy_sapbert.cli import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="spacy-sapbert")
    return [(name, root.get_command(ctx, name), ctx) for name in root.list_commands(ctx)]


def _plain(text: str) -> str:
    """Help output without the panels' box drawing, whitespace folded (wrapped lines joined)."""
    return re.sub(r"\s+", " ", re.sub(r"[\u2500-\u257f]", " ", text)).strip()


@pytest.mark.parametrize("name", [name for name, _, _ in _commands()])
def test_help_of_every_command_shows_its_texts_as_written(name):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    cmd = next(c for n, c, _ in _commands() if n == name)
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "100", "TERMINAL_WIDTH": "100"})
    assert result.exit_code == 0, result.output
    out = _plain(result.output)
    assert "()" not in out and "( " not in out, out
    texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    for text in texts:
        plain = _plain(text)
        assert plain in out, f"{name} --help does not show {plain!r}"


def test_cli_page_shows_help_texts_without_markup_escapes():
    page = docs_hooks.cli_markdown()
    assert "(the \\[ray\\] extra)" in page
    assert "\\\\[" not in page


def test_help_of_the_app_lists_every_command():
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100", "TERMINAL_WIDTH": "100"})
    assert result.exit_code == 0, result.output
    out = _plain(result.output)
    for name, cmd, ctx in _commands():
        assert f" {name} " in out and _plain(cmd.get_short_help_str(limit=40).rstrip(".")) in out, name
