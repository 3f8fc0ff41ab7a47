"""The spaCy/weasel project itself: project.yml is valid, every command has help/deps/outputs and one
writer per output, variables substitute cleanly, out-of-order runs name the missing step, and the
`smoke` workflow runs end to end (weasel's project_run) on tiny fixtures with a tiny random BERT,
so the workflow cannot rot."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "project"
SCRIPT_DEPS = ("fetch_data", "base_model", "package_pipeline", "link_sample", "with_site", "e2e_eval", "report",
               "check_umls", "launch")


def _config(overrides=None):
    from weasel.util import load_project_config

    return load_project_config(ROOT, overrides=overrides or {})


def test_every_command_is_documented_and_has_one_writer_per_output():
    config = _config()
    commands = {c["name"]: c for c in config["commands"]}
    writers = {}
    for name, cmd in commands.items():
        assert cmd.get("help"), f"{name} has no help"
        assert cmd.get("script"), f"{name} has no script"
        assert cmd.get("outputs") or name in ("umls-check",), f"{name} has no outputs"
        for out in cmd.get("outputs", []):
            assert out not in writers, f"{out} is written by {writers[out]} and {name}"
            writers[out] = name
        for line in cmd["script"]:
            for script in SCRIPT_DEPS:
                if f"scripts/{script}.py" in line and script != "with_site":
                    assert f"scripts/{script}.py" in cmd.get("deps", []) or name in ("umls-check",) or \
                        script in ("launch",) and "scripts/launch.py" in cmd["deps"], f"{name}: scripts/{script}.py not in deps"
            assert "pip install" not in line or "--no-index" in line, f"{name} installs from an index"
            assert "git clone" not in line
    for workflow, steps in config["workflows"].items():
        for step in steps:
            assert step in commands, f"workflow {workflow}: unknown command {step}"
    assert {"demo", "umls", "umls-released", "smoke"} <= set(config["workflows"])


@pytest.mark.parametrize("overrides", [{}, {"vars.data_dir": "/abs/data", "vars.install_target": "/x/site"}])
def test_variables_substitute_into_separate_paths(overrides):
    """weasel joins adjacent list items that end and start with ${...}: no item may be mangled."""
    config = _config(overrides)
    for cmd in config["commands"]:
        for key in ("deps", "outputs"):
            for item in cmd.get(key, []):
                assert ", " not in item and "${" not in item, f"{cmd['name']} {key}: {item!r}"


def test_demo_evaluates_on_the_test_set_but_never_trains_on_it():
    config = _config()
    commands = {c["name"]: c for c in config["commands"]}
    for name in ("pretrain", "kb-pretrain", "ner-corpus", "ner-train", "umls-pretrain", "umls-ner-train"):
        text = " ".join(commands[name]["script"] + commands[name].get("deps", []))
        assert "ncbi_test" not in text, name
    assert any("ncbi_test" in d for d in commands["evaluate"]["deps"])


def _copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "project.yml", dest / "project.yml")
    shutil.copytree(ROOT / "configs", dest / "configs")
    shutil.copytree(ROOT / "scripts", dest / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_a_step_run_out_of_order_names_the_missing_input(tmp_path):
    project = _copy_project(tmp_path / "p")
    proc = subprocess.run([sys.executable, "-m", "weasel", "run", "pipeline", str(project)],
                          capture_output=True, text=True, timeout=120)
    out = " ".join(proc.stdout.split())  # wasabi wraps long lines
    assert proc.returncode == 1
    assert "Missing dependency specified by command 'pipeline': training/ner/model-best" in out
    assert "previous step" in out


@pytest.fixture(scope="module")
def smoke_project(tmp_path_factory, tiny_bert_path):
    from weasel.cli.run import project_run

    project = _copy_project(tmp_path_factory.mktemp("smoke") / "project")
    overrides = {
        "vars.data_dir": str(FIXTURES),
        "vars.base_model": str(tiny_bert_path),
        "vars.eval_base_model": "",
        "vars.pooling": "cls",
        "vars.pretrain_steps": 3,
        "vars.pretrain_batch_size": 4,
        "vars.ner_max_steps": 4,
        "vars.package_name": "sapbert_smoke",
        "vars.threshold": -1.0,
    }
    try:
        project_run(project, "smoke", overrides=overrides, capture=True)
    except subprocess.SubprocessError as err:  # show the failing step's log
        pytest.fail(str(err)[-6000:])
    return project


@pytest.mark.slow  # the smoke workflow: minutes
def test_smoke_workflow_runs_end_to_end(smoke_project):
    p = smoke_project
    assert (p / "training" / "pretrain" / "model" / "config.json").exists()
    assert (p / "training" / "pipeline" / "config.cfg").exists()
    wheel = p / "packages" / "dist" / "en_sapbert_smoke-0.1.0-py3-none-any.whl"
    assert wheel.exists()
    assert (p / "packages" / "site" / "en_sapbert_smoke" / "meta.json").exists()
    ner = json.loads((p / "metrics" / "ner_dev.json").read_text())
    assert ner["docs"] == 2 and ner["gold_entities"] == 8
    sample = json.loads((p / "metrics" / "sample_linked.json").read_text())
    assert sample["package"] == "en_sapbert_smoke"
    metrics = json.loads((p / "metrics" / "ncbi_test" / "metrics.json").read_text())
    assert set(metrics["results"]) == {"mention_only", "end_to_end"}
    assert "en_sapbert_smoke" in metrics["results"]["end_to_end"]
    e2e = json.loads((p / "metrics" / "e2e_ncbi_test.json").read_text())
    assert e2e["docs"] == 2 and e2e["ner"]["gold"] == 6
    report = (p / "metrics" / "report.md").read_text()
    assert "NER on the dev sets" in report and "End to end on raw text" in report and "nel_micro_f" in report


@pytest.mark.slow  # the smoke workflow: minutes
def test_smoke_package_loads_by_name_in_a_fresh_process(smoke_project):
    site = smoke_project / "packages" / "site"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import spacy; nlp = spacy.load('en_sapbert_smoke'); "
            "doc = nlp('Dementia and chorea in Huntington disease.'); "
            "print(nlp.pipe_names, [(e.text, (e._.kb_ents or [])[:1]) for e in doc.ents])")
    proc = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, timeout=120,
                          cwd=str(smoke_project.parent))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'ner'" in proc.stdout and "'sapbert_linker'" in proc.stdout


@pytest.mark.slow  # the smoke workflow: minutes
def test_smoke_rerun_skips_unchanged_steps(smoke_project):
    proc = subprocess.run([sys.executable, "-m", "weasel", "run", "kb", str(smoke_project),
                           f"--vars.data_dir={FIXTURES}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Skipping 'kb': nothing changed" in " ".join(proc.stdout.split())


@pytest.mark.parametrize("workflow", ["demo", "umls", "umls-released", "smoke"])
def test_every_generated_input_is_written_by_an_earlier_step(workflow):
    """Running a workflow in order never hits weasel's missing-dependency stop: each dep that a
    step generates (training/, corpus/, packages/, metrics/, assets/) is an output of an earlier step."""
    config = _config()
    commands = {c["name"]: c for c in config["commands"]}
    written = set()
    for step in config["workflows"][workflow]:
        for dep in commands[step].get("deps", []):
            if dep.split("/")[0] in ("training", "corpus", "packages", "metrics", "assets"):
                inputs_given = workflow == "smoke" and dep.startswith(("assets/data/", "assets/base_model"))
                assert dep in written or inputs_given, f"{workflow}: {step} needs {dep}, written by no earlier step"
        written.update(commands[step].get("outputs", []))
