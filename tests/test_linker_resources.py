"""KB and index outside the pipeline (resources = "outside"): pointer, lookup, checks, packaging."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import Span

from helpers import write_toy_kb

from spacy_sapbert.errors import ConfigError, MissingInputError
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.commands.pipeline import create_pipeline
from spacy_sapbert.linker.resources import ENV_VAR, POINTER_FILE

IDS = ("D003", "C004")  # the toy KB's influenza and aspirin


def _link(nlp):
    doc = nlp.make_doc("grippe and aspirin")
    doc.ents = [Span(doc, 0, 1, "D"), Span(doc, 2, 3, "C")]
    doc = nlp.get_pipe("sapbert_linker")(doc)
    return [list(e._.kb_ents) for e in doc.ents]


@pytest.fixture()
def made(tiny_bert_path, tmp_path):
    kb_dir = tmp_path / "kb"
    write_toy_kb(kb_dir, *IDS)
    config = {"device": "cpu", "pooling": "mean", "threshold": -1.0, "runtime": "torch"}
    inside = create_pipeline(tmp_path / "inside", kb_path=kb_dir, model=str(tiny_bert_path), config=config,
                             show_progress=False)
    create_pipeline(tmp_path / "outside", kb_path=kb_dir, model=str(tiny_bert_path), config=config,
                    show_progress=False, kind="hnsw", resources_dir=tmp_path / "res" / "tiny_res")
    return tmp_path, _link(inside)


def test_outside_pipeline_holds_a_pointer_and_loads_through_the_environment(made, monkeypatch):
    tmp_path, expected = made
    linker_dir = tmp_path / "outside" / "sapbert_linker"
    assert (linker_dir / POINTER_FILE).exists() and (linker_dir / "encoder").is_dir()
    assert not (linker_dir / "kb").exists() and not (linker_dir / "index").exists()
    pointer = json.loads((linker_dir / POINTER_FILE).read_text())
    assert pointer["name"] == "tiny_res" and pointer["index_kind"] == "hnsw"
    for root in (tmp_path / "res", tmp_path / "res" / "tiny_res"):  # the parent, or the folder itself
        monkeypatch.setenv(ENV_VAR, str(root))
        nlp = spacy.load(tmp_path / "outside")
        got = _link(nlp)
        assert [[c for c, _ in e] for e in got] == [[c for c, _ in e] for e in expected]
        assert [s for e in got for _, s in e] == pytest.approx([s for e in expected for _, s in e], abs=2e-3)
    # saving the loaded pipeline again writes the pointer, not the data
    nlp.to_disk(tmp_path / "again")
    assert not (tmp_path / "again" / "sapbert_linker" / "index").exists()
    monkeypatch.delenv(ENV_VAR)
    nlp = spacy.load(tmp_path / "again", config={"components": {"sapbert_linker": {
        "resources_path": str(tmp_path / "res" / "tiny_res")}}})
    assert _link(nlp)[0][0][0] == expected[0][0][0]


def test_missing_or_mismatched_resources_are_coded_errors(made, monkeypatch, tiny_bert_path):
    tmp_path, _ = made
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(MissingInputError, match=f"SB-E127.*{ENV_VAR}"):
        spacy.load(tmp_path / "outside")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(MissingInputError, match="SB-E127.*tried"):
        spacy.load(tmp_path / "outside")
    # another KB's resources under the same name: refused, naming what differs
    other_kb = tmp_path / "kb2"
    write_toy_kb(other_kb, IDS[0])
    create_pipeline(tmp_path / "p2", kb_path=other_kb, model=str(tiny_bert_path), show_progress=False,
                    config={"device": "cpu", "runtime": "torch"}, resources_dir=tmp_path / "res2" / "tiny_res")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "res2"))
    with pytest.raises(MissingInputError, match="SB-E128.*KB checksum"):
        spacy.load(tmp_path / "outside")


def test_outside_without_a_resources_folder_is_refused(tiny_bert_path, tmp_path):
    kb_dir = tmp_path / "kb"
    write_toy_kb(kb_dir, *IDS)
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu",
                                                    "resources": "outside", "runtime": "torch"})
    linker.initialize(kb_path=str(kb_dir), show_progress=False)
    with pytest.raises(ConfigError, match="SB-E130"):
        nlp.to_disk(tmp_path / "p")
    with pytest.raises(ConfigError, match="SB-E129"):
        linker.export_resources(tmp_path / "bad name!")
    with pytest.raises(ConfigError, match="SB-E124"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"resources": "elsewhere"})


def _run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result


@pytest.mark.slow
def test_spacy_package_of_an_outside_pipeline_is_small_and_loads_installed(made):
    """The wheel holds the encoder and the pointer; the installed package finds the resources through
    SPACY_SAPBERT_RESOURCES."""
    import zipfile

    tmp_path, expected = made
    nlp_dir = tmp_path / "outside"
    meta = json.loads((nlp_dir / "meta.json").read_text())
    meta.update({"name": "outpkg", "version": "0.0.1"})
    (nlp_dir / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "packages").mkdir()
    # `spacy package` loads the pipeline: the resources must be reachable there too
    _run([sys.executable, "-m", "spacy", "package", str(nlp_dir), str(tmp_path / "packages"), "--name", "outpkg",
          "--version", "0.0.1", "--build", "none"], env=dict(os.environ, **{ENV_VAR: str(tmp_path / "res")}))
    pkg_dir = tmp_path / "packages" / "en_outpkg-0.0.1"
    _run([sys.executable, "-m", "build", "--no-isolation", "--wheel"], cwd=pkg_dir)
    wheel = next((pkg_dir / "dist").glob("*.whl"))
    members = zipfile.ZipFile(wheel).namelist()
    assert any(m.endswith("sapbert_linker/" + POINTER_FILE) for m in members)
    assert not any("/sapbert_linker/index/" in m or "/sapbert_linker/kb/" in m for m in members)
    target = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target), str(wheel)])
    code = ("import json, spacy\nfrom spacy.tokens import Span\nnlp = spacy.load('en_outpkg')\n"
            "doc = nlp.make_doc('grippe and aspirin')\ndoc.ents = [Span(doc, 0, 1, 'D'), Span(doc, 2, 3, 'C')]\n"
            "doc = nlp.get_pipe('sapbert_linker')(doc)\nprint(json.dumps([e.kb_id_ for e in doc.ents]))\n")
    env = dict(os.environ, PYTHONPATH=str(target), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               **{ENV_VAR: str(tmp_path / "res")})
    out = _run([sys.executable, "-c", code], env=env, cwd=tmp_path)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [e[0][0] for e in expected]
    env.pop(ENV_VAR)
    failed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=300)
    assert failed.returncode != 0 and "SB-E127" in failed.stderr


def test_cli_builds_an_index_and_an_outside_pipeline(tiny_bert_path, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.index import META_FILE

    kb_dir = tmp_path / "kb"
    write_toy_kb(kb_dir, *IDS)
    runner = CliRunner()
    result = runner.invoke(app, ["build-index", str(kb_dir), "--model", str(tiny_bert_path), "--output",
                                 str(tmp_path / "ix"), "--device", "cpu", "--kind", "hnsw", "--M", "8",
                                 "--ef-construction", "40"])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "ix" / META_FILE).read_text())
    assert meta["kind"] == "hnsw" and meta["M"] == 8 and meta["ef_construction"] == 40
    result = runner.invoke(app, ["create-pipeline", str(tmp_path / "p"), "--kb", str(kb_dir), "--model",
                                 str(tiny_bert_path), "--index", str(tmp_path / "ix"), "--device", "cpu",
                                 "--runtime", "torch", "--resources-dir", str(tmp_path / "res" / "r1")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "p" / "sapbert_linker" / POINTER_FILE).exists()
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "res"))
    nlp = spacy.load(tmp_path / "p")
    assert nlp.get_pipe("sapbert_linker").index.kind == "hnsw"
    for removed in ("faiss", "compact"):  # compact: removed on 2026-11-27
        result = runner.invoke(app, ["build-index", str(kb_dir), "--model", str(tiny_bert_path), "--output",
                                     str(tmp_path / "bad"), "--device", "cpu", "--kind", removed])
        out = result.output + str(result.exception)
        assert result.exit_code != 0 and "SB-E012" in out and "auto, exact, hnsw, ivf" in out  # before loading


def test_outside_resources_open_the_kb_once_at_load(made, monkeypatch):
    tmp_path, expected = made
    opened = []
    original = KnowledgeBase.from_disk.__func__

    def counting(cls, path, **kwargs):
        opened.append(path)
        return original(cls, path, **kwargs)

    monkeypatch.setattr(KnowledgeBase, "from_disk", classmethod(counting))
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "res"))
    nlp = spacy.load(tmp_path / "outside")
    assert opened == [tmp_path / "res" / "tiny_res" / "kb"]  # checked against the pointer and used: one open
    assert [[c for c, _ in e] for e in _link(nlp)] == [[c for c, _ in e] for e in expected]


def test_verify_follows_the_pointer_to_the_resources_folder(made, monkeypatch):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    tmp_path, _ = made
    res = tmp_path / "res" / "tiny_res"
    runner = CliRunner()
    monkeypatch.delenv(ENV_VAR, raising=False)
    lost = runner.invoke(app, ["verify", str(tmp_path / "outside")])  # nowhere to look: the load would fail too
    assert lost.exit_code == 1
    assert any(line.startswith("DAMAGED") and POINTER_FILE in line and "SB-E127" in line
               for line in lost.stdout.splitlines()), lost.output
    for how in ("option", "environment"):
        args = ["verify", str(tmp_path / "outside")] + (["--resources", str(res)] if how == "option" else [])
        if how == "environment":
            monkeypatch.setenv(ENV_VAR, str(tmp_path / "res"))
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        checked = [line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("OK")]
        assert any(path.startswith(str(res / "kb") + os.sep) for path in checked), how
        assert any(path.startswith(str(res / "index") + os.sep) for path in checked), how
    for folder in ("inside", "kb"):  # --resources that no load of the folder reads: said, not silently ignored
        with pytest.warns(UserWarning, match=r"SB-W555.*was not checked"):
            ignored = runner.invoke(app, ["verify", str(tmp_path / folder), "--resources", str(res)])
        assert ignored.exit_code == 0, ignored.output
    index_file = next(p for p in (res / "index").iterdir() if p.name != "index_meta.json")
    index_file.write_bytes(index_file.read_bytes()[:-8])
    damaged = runner.invoke(app, ["verify", str(tmp_path / "outside")])
    assert damaged.exit_code == 1
    assert [line for line in damaged.stdout.splitlines() if line.startswith("DAMAGED")] \
        and index_file.name in "".join(line for line in damaged.stdout.splitlines() if line.startswith("DAMAGED"))
