"""Packaging round trip: nlp.to_disk → `spacy package` → wheel → pip install → spacy.load("<name>").

Fully offline: `spacy package --build none`, then `python -m build --no-isolation --wheel` in the
package folder, `pip install --no-deps --target`, and a fresh interpreter loads it by name (our
factory is found through the entry point, without importing us). About half a minute."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from spacy.tokens import Span

from helpers import linker_nlp, write_toy_kb

LOAD_AND_LINK = """
import json, sys, spacy
from spacy.tokens import Span
nlp = spacy.load("sapbert_pkgtest")
doc = nlp.make_doc("grippe and aspirin")
doc.ents = [Span(doc, 0, 1, "D"), Span(doc, 2, 3, "C")]
for _, proc in nlp.pipeline:
    doc = proc(doc)
print(json.dumps({"path": nlp.path and str(nlp.path), "kb_ents": [e._.kb_ents for e in doc.ents],
                  "kb_ids": [e.kb_id_ for e in doc.ents],
                  "encoder": type(nlp.get_pipe("sapbert_linker").encoder).__name__,
                  "precision": nlp.get_pipe("sapbert_linker").encoder.precision}))
"""


def _run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result


@pytest.mark.slow
@pytest.mark.parametrize("model_fixture,precision", [("tiny_bert_path", "auto"),  # WordPiece and SentencePiece
                                                     ("tiny_xlmr_path", "auto"),
                                                     ("tiny_bert_path", "int8")])  # the int8 copy travels too
def test_spacy_package_wheel_installs_and_loads(model_fixture, precision, request, tmp_path):
    model_path = request.getfixturevalue(model_fixture)
    nlp = linker_nlp(model_path, write_toy_kb(tmp_path / "kb", "D003", "C004"), precision=precision)
    linker = nlp.get_pipe("sapbert_linker")
    nlp.meta.update({"name": "pkgtest", "version": "0.0.1"})
    nlp.to_disk(tmp_path / "nlp")
    doc = nlp.make_doc("grippe and aspirin")
    doc.ents = [Span(doc, 0, 1, "D"), Span(doc, 2, 3, "C")]
    doc = linker(doc)
    expected = [[[c, s] for c, s in e._.kb_ents] for e in doc.ents]

    (tmp_path / "packages").mkdir()
    _run([sys.executable, "-m", "spacy", "package", str(tmp_path / "nlp"), str(tmp_path / "packages"),
          "--name", "sapbert_pkgtest", "--version", "0.0.1", "--build", "none"])
    pkg_dir = tmp_path / "packages" / "en_sapbert_pkgtest-0.0.1"
    meta = json.loads((pkg_dir / "meta.json").read_text())
    assert any(r.startswith("spacy-sapbert") for r in meta["requirements"]), meta["requirements"]
    _run([sys.executable, "-m", "build", "--no-isolation", "--wheel"], cwd=pkg_dir)
    wheels = list((pkg_dir / "dist").glob("*.whl"))
    assert len(wheels) == 1
    target = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
          str(wheels[0])])
    # the wheel's folder first, then this checkout: the factory found through the entry point is the
    # code under test, not whatever copy of spacy_sapbert the environment has installed
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), root]), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1")
    out = _run([sys.executable, "-c", LOAD_AND_LINK.replace("sapbert_pkgtest", "en_sapbert_pkgtest")],
               env=env, cwd=tmp_path)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded["path"].startswith(str(target))  # the installed copy, not the folder we wrote
    # the wheel holds the ONNX export, which runtime "auto" runs: same candidates, scores within 1e-5
    assert loaded["encoder"] == "OnnxEncoder" and loaded["precision"] == ("int8" if precision == "int8" else "fp32")
    assert [[c for c, _ in ents] for ents in loaded["kb_ents"]] == [[c for c, _ in ents] for ents in expected]
    assert [s for ents in loaded["kb_ents"] for _, s in ents] == pytest.approx(
        [s for ents in expected for _, s in ents], abs=1e-5)
    assert loaded["kb_ids"] == ["D003", "C004"]
