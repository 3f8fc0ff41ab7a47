"""Render every table of every benchmark results file into ``docs/benchmarks.md``.

Each benchmark writes ``benchmarks/results/<name>.json`` through ``benchmarks/results_io.py``
(command, date, machine, git commit, tables). This script turns all of them, generically (no code
per benchmark), into Markdown between the two marker lines of the benchmarks page, with the command,
date, commit and machine under each table. The page's other text is left as it is.

The README's summary table ("this project vs scispaCy's linker") is rendered the same way, from the
figures named in :data:`SUMMARY`, between its own two marker lines in ``README.md``.

    python scripts/render_benchmarks.py            # rewrite the generated parts of docs/benchmarks.md and README.md
    python scripts/render_benchmarks.py --check    # exit 1 when a committed page differs (CI, tests)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from spacy_sapbert.errors import DataFormatError, Errors, SapbertError

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- BEGIN GENERATED BENCHMARK TABLES: scripts/render_benchmarks.py writes this part; do not edit -->"
END = "<!-- END GENERATED BENCHMARK TABLES -->"
REQUIRED = ("benchmark", "command", "date", "git_commit", "machine", "tables")
README = ROOT / "README.md"
SUMMARY_BEGIN = ("<!-- BEGIN GENERATED SUMMARY: scripts/render_benchmarks.py writes this table from "
                 "benchmarks/results; do not edit -->")
SUMMARY_END = "<!-- END GENERATED SUMMARY -->"


class Cell(NamedTuple):
    """Some columns of the first row whose first cell starts with ``row`` and whose ``where`` columns hold the
    given values (in the first table whose name starts with the figure's ``table``)."""
    row: str
    columns: Tuple[str, ...]
    scale: float = 1.0  # e.g. 100 for accuracies stored as fractions
    digits: Optional[int] = None  # fixed decimals after scaling; None: format_number
    unit: str = ""
    where: Tuple[Tuple[str, Any], ...] = ()


class Figure(NamedTuple):
    """One line of the README's summary table. ``label`` may name columns of the ``ours`` row in braces."""
    label: str
    results: str
    table: str
    ours: Cell
    baseline: Optional[Cell] = None
    baseline_name: str = "scispaCy `EntityLinker`"


_ACC = dict(columns=("strict acc@1", "strict acc@5"), scale=100, digits=1)
_SPLIT = ("overall", "seen", "unseen")
_TOGETHER = ("as written: overall", "as written: neither", "as written: unseen in train",
             "abbreviations resolved (linker default): overall",
             "as written + abbreviation table (mined from train text): overall")
_CORPUS = ("docs/s", "x one process")
_FR_ES = ("fr acc@1", "es acc@1")
_INDEX = ("files MB", "of which anon MB", "recall@1", "recall@5", "q/s batch 256")
_AT_1M = (("names", 1_000_000),)
_NCBI = "NCBI-disease test (gold spans) -> MEDIC"
_CONTEXT = ("NCBI test as written", "NCBI ambiguous", "NCBI abbreviations resolved", "BC5CDR dev as written")
SUMMARY: Tuple[Figure, ...] = (
    Figure("strict acc@1 / acc@5, NCBI-disease test (gold spans, abbreviations resolved)", "link_ncbi", _NCBI,
           Cell("sapbert_linker, defaults", **_ACC), Cell("scispaCy EntityLinker", **_ACC)),
    Figure("mentions per second through `nlp.pipe`", "link_ncbi", _NCBI,
           Cell("sapbert_linker, defaults", ("mentions/s",)), Cell("scispaCy EntityLinker", ("mentions/s",))),
    Figure("`spacy.load` of the saved pipeline, cold, in the development environment (its imports included)",
           "link_ncbi", _NCBI,
           Cell("sapbert_linker, defaults", ("load s (cold)",), unit=" s"),
           Cell("scispaCy EntityLinker", ("load s (cold)",), unit=" s")),
    Figure("`link-corpus` over {docs} abstracts, documents/s (× one process): two Ray actors vs one process",
           "corpus_link", "link-corpus back-ends", Cell("ray 2 actors", _CORPUS),
           Cell("local n_process=1", _CORPUS), baseline_name="`nlp.pipe`, one process"),
    Figure("open a KB of {concepts} concepts ({names} names)", "kb_build", "KB build and load",
           Cell("synthetic_", ("load ms",), unit=" ms"), Cell("synthetic_", ("scispaCy jsonl load s",), unit=" s"),
           baseline_name="scispaCy jsonl KB"),
    Figure("index of {names} names × {dim} dims (realistic spectrum; ivf = faiss fast-scan codes + float16 "
           "re-scoring, the default from 500,000 names), each index at its defaults: files MB / anonymous RSS MB "
           "after 10k queries / recall@1 / recall@5 vs exact / queries/s at batch 256 on 2 cores (the 10k queries "
           "after a cold load)",
           "umls_scale_spectrum", "index_at_scale",
           Cell("ivf", _INDEX, where=_AT_1M), Cell("hnswlib f32 (today)", _INDEX, where=_AT_1M),
           baseline_name="hnswlib float32"),
    Figure("cross-lingual HPO: French / Spanish names of held-out concepts → English names, strict acc@1 "
           "(MiniLM aligned 2 epochs on the other concepts)",
           "hpo_crosslingual", "cross-lingual", Cell("MiniLM cross-lingual aligned, 2 epochs", _FR_ES, scale=100, digits=1),
           Cell("char-3gram tf-idf", _FR_ES, scale=100, digits=1), baseline_name="char-3gram tf-idf"),
    Figure("context re-ranking at the linker's defaults (example names, ties re-ranked, one sense per document; "
           "prototypes from train, `--max-length 32 --quantize`), fine-tuned MiniLM: strict acc@1, NCBI test as "
           "written / its ambiguous mentions / abbreviations resolved / BC5CDR-disease dev", "context_finetuned",
           "summary",
           Cell("context, the linker's defaults (ties re-ranked, one sense per document)", _CONTEXT, scale=100,
                digits=1),
           Cell("name-only", _CONTEXT, scale=100, digits=1), baseline_name="name-only, same encoder"),
    Figure("fine-tuned on BC5CDR-disease train: strict acc@1 on dev, overall / seen / unseen mentions "
           "(dev candidate set)", "finetune_guide", "BC5CDR-disease dev", Cell("fine-tuned", _SPLIT, digits=1),
           Cell("base", _SPLIT, digits=1), baseline_name="base MiniLM"),
    Figure("mentions nobody spelled out, NCBI-disease test, base MiniLM, the levers together (hybrid sparse + dense, "
           "cross-encoder re-ranker; tuned and trained on NCBI train/dev): strict acc@1 as written overall / neither a "
           "MEDIC name nor a train mention (refined) / unseen in train; overall with abbreviations resolved / as written "
           "with an abbreviation table mined from the train + dev text",
           "reranker_together", "NCBI-disease test",
           Cell("hybrid (w = 0.05, interleave) + re-ranker (top 4, dense weight 50, margin 0.1)", _TOGETHER, digits=1),
           Cell("name-only (dense)", _TOGETHER, digits=1), baseline_name="name-only, same encoder"),
    Figure("`make test` on a fresh clone (virtual environment from nothing, then the tests not marked slow): minutes / "
           "mean load average of the 2 cores while it ran", "setup_times", "fresh clone",
           Cell("make test", ("minutes", "mean load avg while running"))),
    Figure("`make demo` on a fresh clone (virtual environment from nothing, then the whole demo workflow): minutes / "
           "mean load average of the 2 cores while it ran", "setup_times", "fresh clone",
           Cell("make demo", ("minutes", "mean load avg while running"))),
)


def format_number(value: float) -> str:
    """A number as a reader wants it: thousands separators, and a figure that a benchmark rounded itself
    (``73.0``, ``292.5``, ``0.9865``) as it was written; a longer one cut to the precision that fits its size
    (four significant digits below 1, so recalls of 0.9895 and 0.9905 stay apart; two decimals below 100, one
    above). The results files keep full precision."""
    if isinstance(value, int) or math.isinf(value) or math.isnan(value):
        return format(value, ",")
    text = format(value, ",")
    size = abs(value)
    decimals = text.partition(".")[2]
    if "e" not in text and len(decimals) <= (4 if size < 1 else 2):
        return text
    if size < 1:
        return format(value, ".4g")
    return format(value, ",.2f" if size < 100 else ",.1f")


def format_cell(value: Any) -> str:
    """One table cell: numbers through :func:`format_number`, ``–`` for missing, pipes escaped."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format_number(value)
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
    cpu_id = machine.get("cpu_id")
    if isinstance(cpu_id, Mapping) and cpu_id:
        bits = [f"{k.replace('cpu ', '')} {cpu_id[k]}" for k in ("cpu family", "model", "stepping") if k in cpu_id]
        if "cpu MHz" in cpu_id:
            bits.append(f"{str(cpu_id['cpu MHz']).split('.')[0]} MHz")
        parts[0] += f" ({', '.join(bits)})"
    if machine.get("cores") is not None:
        parts.append(f"{machine['cores']} cores")
    if machine.get("memory_gb") is not None:
        parts.append(f"{machine['memory_gb']} GB RAM")
    if machine.get("python"):
        parts.append(f"Python {machine['python']}")
    if machine.get("load_avg_1min_at_write") is not None:
        parts.append(f"load average {machine['load_avg_1min_at_write']:.1f} when written")
    if machine.get("matmul_gflops_at_write") is not None:
        parts.append(f"float32 matmul {machine['matmul_gflops_at_write']} GFLOP/s when written")
    extra = [f"{k} {v}" for k, v in machine.items()
             if k not in ("cpu", "cpu_id", "cores", "memory_gb", "python", "platform", "load_avg_1min_at_write",
                          "matmul_gflops_at_write")]
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


def _pick(doc: Mapping[str, Any], figure: Figure, cell: Cell) -> Optional[Dict[str, Any]]:
    tab = next((t for name, t in doc["tables"].items() if name.startswith(figure.table)), None)
    if tab is None:
        return None
    rows = (dict(zip(tab["columns"], r)) for r in tab["rows"] if str(r[0]).startswith(cell.row))
    return next((r for r in rows if all(r.get(column) == value for column, value in cell.where)), None)


def _show(values: Mapping[str, Any], cell: Cell) -> str:
    shown = []
    for column in cell.columns:
        value = values.get(column)
        if not _is_number(value):
            shown.append(format_cell(value))
        elif cell.digits is not None:
            shown.append(format(value * cell.scale, f",.{cell.digits}f"))
        else:  # a whole number of hundreds or more reads better without its ".0" (1,598 mentions/s)
            scaled = value * cell.scale
            shown.append(format_number(int(scaled) if float(scaled).is_integer() and abs(scaled) >= 100 else scaled))
    return " / ".join(shown) + cell.unit


def render_summary(results_dir: Path) -> str:
    """The README's summary table (markers included): one line per :data:`SUMMARY` figure whose results file
    and rows exist, each naming the command and date of the run it comes from."""
    lines = [SUMMARY_BEGIN, "", "| figure | `sapbert_linker` | baseline | measured by |", "|---|---:|---:|---|"]
    for figure in SUMMARY:
        path = Path(results_dir) / f"{figure.results}.json"
        if not path.is_file():
            continue
        doc = load_results(path)
        ours = _pick(doc, figure, figure.ours)
        if ours is None:
            continue
        theirs = _pick(doc, figure, figure.baseline) if figure.baseline else None
        label = figure.label.format(**{k.replace(" ", "_"): format_cell(v) for k, v in ours.items()})
        baseline = f"{_show(theirs, figure.baseline)} ({figure.baseline_name})" if theirs and figure.baseline else "–"
        lines.append(f"| {label} | **{_show(ours, figure.ours)}** | {baseline} | "
                     f"`{format_cell(str(doc['command']).split(' --note ')[0])}` ({str(doc['date'])[:10]}) |")
    return "\n".join(lines + ["", SUMMARY_END])


def render_all(results_dir: Path) -> str:
    """The generated part of the page, markers included."""
    files = sorted(Path(results_dir).glob("*.json"))
    body: List[str] = [BEGIN, ""]
    if not files:
        body += ["No results files yet: run a benchmark in `benchmarks/`.", ""]
    for path in files:
        body += render_results(load_results(path))
    return "\n".join(body + [END])


def splice(page_text: str, generated: str, page: Path, begin: str = BEGIN, end: str = END) -> str:
    """``page_text`` with the part between the markers replaced by ``generated``."""
    lines = page_text.split("\n")
    for marker in (begin, end):
        if marker not in lines:
            raise DataFormatError(Errors.E651.format(path=page, marker=marker, begin=begin, end=end))
    start, stop = lines.index(begin), lines.index(end)
    if stop < start:
        raise DataFormatError(Errors.E651.format(path=page, marker=end + " (after the begin line)", begin=begin, end=end))
    return "\n".join(lines[:start] + generated.split("\n") + lines[stop + 1:])


def _targets(args: argparse.Namespace) -> List[Tuple[Path, str, str, str]]:
    """(page, generated text, begin marker, end marker) for each page this run fills in."""
    targets = [(args.page, render_all(args.results), BEGIN, END)]
    readme = args.readme if args.readme is not None else (README if args.page == PAGE else None)
    if readme is not None:
        targets.append((readme, render_summary(args.results), SUMMARY_BEGIN, SUMMARY_END))
    return targets


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page differs from what it renders")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of results files")
    parser.add_argument("--page", type=Path, default=PAGE, help="the benchmarks page to fill in")
    parser.add_argument("--readme", type=Path, default=None,
                        help="the README whose summary table to fill in (default: README.md with the default page)")
    args = parser.parse_args(list(argv))
    updates = []
    try:
        for page, generated, begin, end in _targets(args):
            if not page.is_file():
                raise DataFormatError(Errors.E651.format(path=page, marker=begin, begin=begin, end=end))
            current = page.read_text(encoding="utf8")
            updates.append((page, current, splice(current, generated, page, begin, end)))
    except SapbertError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    stale = [page for page, current, wanted in updates if current != wanted]
    if args.check:
        for page in stale:
            print(f"{page} differs from what {args.results} renders: run python scripts/render_benchmarks.py "
                  "and commit the page.", file=sys.stderr)
        if not stale:
            print(f"{', '.join(str(p) for p, _, _ in updates)} up to date with {args.results}.")
        return 1 if stale else 0
    for page, current, wanted in updates:
        if current != wanted:
            tmp = page.with_name(f".{page.name}.tmp")
            tmp.write_text(wanted, encoding="utf8")
            os.replace(tmp, page)
            print(f"wrote {page}")
        else:
            print(f"{page} already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
