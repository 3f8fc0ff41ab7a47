"""The runtime install (setup.cfg's install_requires, no extras): a saved pipeline whose encoder runs in
ONNX Runtime loads and links without torch, transformers or scispaCy; what needs an extra says which.

Each check runs in a subprocess whose ``sys.meta_path`` refuses the extras' packages (torch, transformers,
safetensors, onnx, spacy-transformers, and scispaCy unless abbreviations are on) and whose spaCy entry
points leave out spacy-transformers, as in an environment where they are not installed. The finder also
records every import of them that is tried after ``import spacy`` (thinc probes torch while spaCy is
imported, and handles its absence), so a test fails when our code even asks for one."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import spacy

from spacy_sapbert.errors import MissingExtraError
from spacy_sapbert.about import __version__
from spacy_sapbert.base.extras import declare_extra, extra_for, missing_message, require
from spacy_sapbert.kb import Concept, KnowledgeBase

pytest.importorskip("onnx", reason="the ONNX export needs the [train] extra (requirements-dev.txt installs it)")

TRAIN = ("torch", "transformers", "safetensors", "onnx", "spacy_transformers")

PRELUDE = r'''
import json, sys
BLOCK = tuple(json.loads(sys.argv[1]))
TRIED = []
RECORD = [False]
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            if RECORD[0]:
                TRIED.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Blocker())
import catalogue
from importlib.metadata import SelectableGroups
catalogue.AVAILABLE_ENTRY_POINTS = SelectableGroups(
    {g: [ep for ep in eps if ep.value.split(".")[0].split(":")[0] not in BLOCK]
     for g, eps in catalogue.AVAILABLE_ENTRY_POINTS.items()})
import spacy
RECORD[0] = True
heavy = ("torch", "transformers", "scispacy", "spacy_transformers", "onnx", "safetensors")
'''

LOAD_AND_LINK = PRELUDE + r'''
from spacy.tokens import Span
nlp = spacy.load(sys.argv[2])
doc = nlp.make_doc("flu and fever")
doc.ents = [Span(doc, 0, 1, "E"), Span(doc, 2, 3, "E")]
doc = nlp.get_pipe("sapbert_linker")(doc)
print(json.dumps({"encoder": type(nlp.get_pipe("sapbert_linker").encoder).__name__,
                  "ids": [e.kb_id_ for e in doc.ents], "tried": TRIED,
                  "imported": sorted(m for m in heavy if m in sys.modules)}))
'''

LINK_SPANS = PRELUDE + r'''
from spacy.tokens import Span
nlp = spacy.load(sys.argv[2])
doc = nlp.make_doc(sys.argv[3])
doc.ents = [Span(doc, start, end, label) for start, end, label in json.loads(sys.argv[4])]
doc = nlp(doc)
print(json.dumps({"kb_ents": [[list(pair) for pair in e._.kb_ents] for e in doc.ents], "tried": TRIED,
                  "imported": sorted(m for m in heavy if m in sys.modules)}))
'''

CLI = PRELUDE + r'''
from spacy_sapbert.cli import main
sys.argv = ["spacy-sapbert"] + sys.argv[2:]
main()
'''


def _env() -> dict:
    root = str(Path(__file__).resolve().parents[1])
    return dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
                HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def _run(script: str, block, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "ignore", "-c", script, json.dumps(list(block)), *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=_env())


@pytest.fixture(scope="module")
def saved(tiny_bert_path, tmp_path_factory):
    """``{abbreviations on?: pipeline folder}`` (runtime 'auto': the ONNX export is written beside the weights),
    a pipeline saved with runtime 'torch' (no export), ``exact``: the plain one with the index ``kind = "auto"``
    picks for a small KB (exact search), and ``hybrid``: the plain one with sparse + dense scores."""
    path = tmp_path_factory.mktemp("lean")
    KnowledgeBase.from_concepts([Concept("D1", "Influenza", ("flu",), ()),
                                 Concept("D2", "Fever", ("pyrexia",), ())]).to_disk(path / "kb")
    out = {}
    for name, abbreviations, runtime, kind, weight in (
            ("abbr", True, "auto", "hnsw", 0.0), ("plain", False, "auto", "hnsw", 0.0),
            ("torch", False, "torch", "hnsw", 0.0), ("exact", False, "auto", "auto", 0.0),
            ("hybrid", False, "auto", "hnsw", 0.5)):
        nlp = spacy.blank("en")
        linker = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu",
                                                        "pooling": "mean", "runtime": runtime,
                                                        "resolve_abbreviations": abbreviations,
                                                        "sparse_weight": weight})
        linker.initialize(lambda: [], nlp=nlp, kb_path=str(path / "kb"), index_settings={"kind": kind},
                          show_progress=False)
        nlp.to_disk(path / name)
        out[name] = path / name
    return out


def lean_kb_ents(pipeline: Path, text: str, spans, *, block=TRAIN) -> dict:
    """``kb_ents`` of the spans ``(start token, end token, label)`` of ``text`` linked by the saved ``pipeline`` in a
    process that refuses ``block`` (the [train] extra's packages), with the imports of them it tried and made."""
    return _linked(_run(LINK_SPANS, block, pipeline, text, json.dumps([list(s) for s in spans])))


def _linked(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_onnx_pipeline_without_abbreviations_imports_no_extra(saved):
    found = _linked(_run(LOAD_AND_LINK, TRAIN + ("scispacy",), saved["plain"]))
    assert found == {"encoder": "OnnxEncoder", "ids": ["D1", "D2"], "tried": [], "imported": []}


def test_a_small_kb_searched_exactly_links_without_torch(saved):
    found = _linked(_run(LOAD_AND_LINK, TRAIN + ("scispacy",), saved["exact"]))
    assert found == {"encoder": "OnnxEncoder", "ids": ["D1", "D2"], "tried": [], "imported": []}
    assert spacy.load(saved["exact"]).get_pipe("sapbert_linker").index.kind == "exact"


def test_a_hybrid_pipeline_links_without_torch(saved):
    """The sparse part's search (sparse-dot-topn, scikit-learn, scipy) is in the runtime install."""
    found = _linked(_run(LOAD_AND_LINK, TRAIN + ("scispacy",), saved["hybrid"]))
    assert found == {"encoder": "OnnxEncoder", "ids": ["D1", "D2"], "tried": [], "imported": []}
    assert spacy.load(saved["hybrid"]).get_pipe("sapbert_linker").index.sparse is not None


def test_onnx_pipeline_with_abbreviations_imports_scispacy_only(saved):
    found = _linked(_run(LOAD_AND_LINK, TRAIN, saved["abbr"]))
    assert found == {"encoder": "OnnxEncoder", "ids": ["D1", "D2"], "tried": [], "imported": ["scispacy"]}


def test_abbreviations_without_scispacy_is_a_coded_error(saved):
    result = _run(LOAD_AND_LINK, TRAIN + ("scispacy",), saved["abbr"])
    assert result.returncode == 1
    assert "[SB-E821]" in result.stderr and "spacy-sapbert[abbreviations]" in result.stderr
    assert "ModuleNotFoundError" not in result.stderr


def test_the_same_pipeline_links_with_abbreviations_turned_off_at_load(saved):
    script = LOAD_AND_LINK.replace(
        "nlp = spacy.load(sys.argv[2])",
        "nlp = spacy.load(sys.argv[2], config={'components': {'sapbert_linker': {'resolve_abbreviations': False}}})")
    found = _linked(_run(script, TRAIN + ("scispacy",), saved["abbr"]))
    assert found["ids"] == ["D1", "D2"] and found["tried"] == [] and found["imported"] == []


def test_pipeline_without_onnx_export_says_which_extra(saved):
    result = _run(LOAD_AND_LINK, TRAIN + ("scispacy",), saved["torch"])
    assert result.returncode == 1
    assert "[SB-E822]" in result.stderr and "spacy-sapbert[train]" in result.stderr
    assert "export-onnx" in result.stderr


@pytest.mark.parametrize("command", [
    ["pretrain", "{kb}", "--base-model", "{model}", "-o", "{out}"],
    ["finetune", "{kb}", "{train}", "--base-model", "{model}", "-o", "{out}"],
    ["export-onnx", "{torch}"],
    ["create-pipeline", "{out}", "--kb", "{kb}", "--model", "{model}"],
    ["build-index", "{kb}", "--model", "{model}", "-o", "{out}"],
])
def test_commands_that_need_the_train_extra_exit_2_naming_it(command, saved, tiny_bert_path, tmp_path):
    values = {"kb": saved["plain"].parent / "kb", "model": tiny_bert_path, "out": tmp_path / "out",
              "torch": saved["torch"], "train": Path(__file__).parent / "fixtures" / "eval" / "test.pubtator"}
    result = _run(CLI, TRAIN, *[part.format(**values) for part in command])
    assert result.returncode == 2, (result.stdout[-1000:], result.stderr[-3000:])
    assert "[SB-E820]" in result.stderr and 'spacy-sapbert[train]' in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_link_command_runs_in_the_runtime_install(saved, tmp_path):
    names = tmp_path / "names.txt"
    names.write_text("flu\nfever\n", encoding="utf8")
    result = _run(CLI, TRAIN + ("scispacy",), "link", saved["plain"], str(names))
    assert result.returncode == 0, result.stderr[-3000:]
    row = json.loads(result.stdout.strip().splitlines()[-1])  # no NER in this pipeline: no entities to link
    assert row["text"] == "flu\nfever\n" and row["ents"] == []


def test_require_and_the_command_line_fallback_name_the_extra(monkeypatch):
    require("Nothing", "json")  # installed: no error
    import spacy_sapbert.base.extras as extras

    monkeypatch.setattr(extras, "is_installed", lambda module: module != "ray")
    with pytest.raises(MissingExtraError, match=r"\[SB-E820\] build-index --ray needs ray\[data\].*spacy-sapbert\[ray\]"):
        extras.require("build-index --ray", "json", "ray")
    message = missing_message("`pretrain`", "torch.nn", "No module named 'torch'")
    assert "onnx, safetensors, torch, transformers" in message and "[train]" in message
    assert extra_for("torch.nn") == "train" and extra_for("scispacy.abbreviation") == "abbreviations"
    assert extra_for("numpy") is None and extra_for(None) is None
    assert isinstance(MissingExtraError("x"), ImportError)  # `except ImportError` still catches it


def test_runtime_requirements_leave_out_the_extras():
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parents[1] / "setup.cfg")
    runtime = {line.split(">")[0].split("<")[0].split("=")[0].strip()
               for line in cfg["options"]["install_requires"].strip().splitlines() if line.strip()}
    assert runtime.isdisjoint({"torch", "transformers", "safetensors", "onnx", "scispacy", "spacy-transformers"})
    assert {"spacy", "onnxruntime", "tokenizers", "hnswlib", "numpy"} <= runtime
    extras = cfg["options.extras_require"]
    assert {"torch", "transformers", "onnx"} <= {r.split(">")[0].strip() for r in extras["train"].split()}
    assert "scispacy" in extras["abbreviations"]


@pytest.mark.parametrize("name, extra", [("plain", ""), ("abbr", "[abbreviations]")])
def test_spacy_package_requires_the_runtime_and_only_the_extras_the_pipeline_uses(saved, name, extra, tmp_path):
    result = subprocess.run([sys.executable, "-m", "spacy", "package", str(saved[name]), str(tmp_path),
                             "--name", "lean", "--version", "0.0.1", "--build", "none"],
                            capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    meta = json.loads(next(tmp_path.glob("*-0.0.1")).joinpath("meta.json").read_text(encoding="utf8"))
    major, minor, _ = __version__.split(".")
    ours = [r for r in meta["requirements"] if not r.startswith("spacy>=")]  # spaCy itself: `spacy package` adds it
    assert ours == [f"spacy-sapbert{extra}>={__version__},<{major}.{int(minor) + 1}.0"], meta["requirements"]


def test_declare_extra_merges_with_an_existing_requirement():
    meta = {"requirements": ["spacy-sapbert[train]>=0.0.1", "en-core-sci-sm>=0.5"]}
    declare_extra(meta, "abbreviations")
    assert meta["requirements"][0] == "en-core-sci-sm>=0.5"
    assert meta["requirements"][1].startswith("spacy-sapbert[abbreviations,train]>=")
    declare_extra(meta, "abbreviations")  # idempotent
    assert len(meta["requirements"]) == 2


def test_link_corpus_runs_in_the_runtime_install(saved, tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "a.jsonl").write_text('{"id": "a", "text": "flu and fever"}\n', encoding="utf8")
    result = _run(CLI, TRAIN + ("scispacy",), "link-corpus", shards, "-p", saved["plain"], "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "corpus_run.json").is_file()
