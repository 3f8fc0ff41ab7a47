"""Render every table of every benchmark results file into ``docs/benchmarks.md``.

Each benchmark writes ``benchmarks/results/<name>.json`` through ``benchmarks/results_io.py``
(command, date, machine, git commit, tables). This script turns all of them, generically (no code
per benchmark), into Markdown between the two marker lines of the benchmarks page, with the command,
date, commit and machine under each table. The page's other text is left as it is.

    python scripts/render_benchmarks.py            # rewrite the generated part of docs/benchmarks.md
    python scripts/render_benchmarks.py --check    # exit 1 when the committed page differs (CI, tests)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from spacy_sapbert.errors import DataFormatError, Errors, SapbertError

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- BEGIN GENERATED BENCHMARK TABLES: scripts/render_benchmarks.py writes this part; do not edit -->"
END = "<!-- END GENERATED BENCHMARK TABLES -->"
REQUIRED = ("benchmark", "command", "date", "git_commit", "machine", "tables")


def format_cell(value: Any) -> str:
    """One table cell: thousands separators for numbers, ``–`` for missing, pipes escaped."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format(value, ",")
    if isinstance(value, (list, dict)):
        value = json.dumps(value, ensure_ascii=False)
    return " ".join(str(value).split()).replace("|", "\\|")


def _short(value: Any, limit: int = 64) -> Any:
    """A figure for the page: lists of more than ``limit`` numbers (e.g. a spectrum) as their length, at
    any depth; the JSON file keeps them whole."""
    if isinstance(value, list) and len(value) > limit and all(_is_number(v) for v in value):
        return f"[{len(value)} numbers]"
    if isinstance(value, dict):
        return {k: _short(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v, limit) for v in value]
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> List[str]:
    """A Markdown table; columns whose filled cells are all numbers are right-aligned."""
    aligns = []
    for j in range(len(columns)):
        cells = [r[j] for r in rows if r[j] is not None]
        aligns.append("---:" if cells and all(_is_number(c) for c in cells) else "---")
    out = ["| " + " | ".join(format_cell(c) for c in columns) + " |", "|" + "|".join(aligns) + "|"]
    out += ["| " + " | ".join(format_cell(c) for c in row) + " |" for row in rows]
    return out


def describe_machine(machine: Mapping[str, Any]) -> str:
    parts = [str(machine.get("cpu") or "unknown CPU")]
    if machine.get("cores") is not None:
        parts.append(f"{machine['cores']} cores")
    if machine.get("memory_gb") is not None:
        parts.append(f"{machine['memory_gb']} GB RAM")
    if machine.get("python"):
        parts.append(f"Python {machine['python']}")
    if machine.get("load_avg_1min_at_write") is not None:
        parts.append(f"load average {machine['load_avg_1min_at_write']:.1f} when written")
    extra = [f"{k} {v}" for k, v in machine.items()
             if k not in ("cpu", "cores", "memory_gb", "python", "platform", "load_avg_1min_at_write")]
    return ", ".join(parts + extra)


def load_results(path: Path) -> Dict[str, Any]:
    """A results file, checked enough to render (coded error E650 otherwise)."""
    try:
        doc = json.loads(path.read_text(encoding="utf8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DataFormatError(Errors.E650.format(path=path, what=f"not readable JSON ({err})")) from None
    if not isinstance(doc, dict):
        raise DataFormatError(Errors.E650.format(path=path, what="the top level is not an object"))
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise DataFormatError(Errors.E650.format(path=path, what=f"the key(s) {', '.join(missing)} are missing"))
    if not isinstance(doc["tables"], dict) or not isinstance(doc["machine"], dict):
        raise DataFormatError(Errors.E650.format(path=path, what="'tables' and 'machine' must be objects"))
    for name, tab in doc["tables"].items():
        if not isinstance(tab, dict) or not isinstance(tab.get("columns"), list) or not isinstance(tab.get("rows"), list):
            raise DataFormatError(Errors.E650.format(path=path, what=f"table '{name}' needs 'columns' and 'rows' lists"))
        for i, row in enumerate(tab["rows"]):
            if not isinstance(row, list) or len(row) != len(tab["columns"]):
                raise DataFormatError(Errors.E650.format(
                    path=path, what=f"row {i} of table '{name}' does not have {len(tab['columns'])} cells"))
    return doc


def render_results(doc: Mapping[str, Any]) -> List[str]:
    """The Markdown for one results file: a heading, then each table with its provenance."""
    out = [f"### {doc['benchmark']}", ""]
    provenance = (f"Command: `{doc['command']}` · date {doc['date']} · commit `{doc['git_commit']}` · "
                  f"machine: {describe_machine(doc['machine'])}.")
    for name, tab in doc["tables"].items():
        out += [f"#### {doc['benchmark']}: {name}", ""]
        out += render_table(tab["columns"], tab["rows"])
        out += ["", provenance, ""]
    for note in doc.get("notes") or []:
        out.append(f"- {format_cell(note)}")
    if doc.get("notes"):
        out.append("")
    figures = doc.get("figures") or {}
    if figures:
        out.append("Other figures: " + "; ".join(f"{k} = {format_cell(_short(v))}" for k, v in figures.items()) + ".")
        out.append("")
    return out


def render_all(results_dir: Path) -> str:
    """The generated part of the page, markers included."""
    files = sorted(Path(results_dir).glob("*.json"))
    body: List[str] = [BEGIN, ""]
    if not files:
        body += ["No results files yet: run a benchmark in `benchmarks/`.", ""]
    for path in files:
        body += render_results(load_results(path))
    return "\n".join(body + [END])


def splice(page_text: str, generated: str, page: Path) -> str:
    """``page_text`` with the part between the markers replaced by ``generated``."""
    lines = page_text.split("\n")
    for marker in (BEGIN, END):
        if marker not in lines:
            raise DataFormatError(Errors.E651.format(path=page, marker=marker, begin=BEGIN, end=END))
    start, stop = lines.index(BEGIN), lines.index(END)
    if stop < start:
        raise DataFormatError(Errors.E651.format(path=page, marker=END + " (after the begin line)", begin=BEGIN, end=END))
    return "\n".join(lines[:start] + generated.split("\n") + lines[stop + 1:])


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from what it renders")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of results files")
    parser.add_argument("--page", type=Path, default=PAGE, help="the Markdown page to fill in")
    args = parser.parse_args(list(argv))
    try:
        if not args.page.is_file():
            raise DataFormatError(Errors.E651.format(path=args.page, marker=BEGIN, begin=BEGIN, end=END))
        current = args.page.read_text(encoding="utf8")
        wanted = splice(current, render_all(args.results), args.page)
    except SapbertError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    if args.check:
        if current != wanted:
            print(f"{args.page} differs from what {args.results} renders: run python scripts/render_benchmarks.py "
                  "and commit the page.", file=sys.stderr)
            return 1
        print(f"{args.page} is up to date with {args.results}.")
        return 0
    if current != wanted:
        tmp = args.page.with_name(f".{args.page.name}.tmp")
        tmp.write_text(wanted, encoding="utf8")
        os.replace(tmp, args.page)
        print(f"wrote {args.page}")
    else:
        print(f"{args.page} already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
