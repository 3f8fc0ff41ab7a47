"""What the docs say about loading a pipeline without torch/transformers, checked in a subprocess where
torch, transformers and spacy-transformers cannot be imported and spacy-transformers' entry points are
hidden (as if they were not installed)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import spacy

from spacy_sapbert.kb import Concept, KnowledgeBase

pytest.importorskip("onnxruntime", reason="the onnx extra (requirements-dev.txt installs it)")
pytest.importorskip("onnx", reason="the onnx extra (requirements-dev.txt installs it)")

SCRIPT = r'''
import sys
BLOCK = ("torch", "transformers", "spacy_transformers")
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Blocker())
import catalogue
from importlib.metadata import SelectableGroups
catalogue.AVAILABLE_ENTRY_POINTS = SelectableGroups(
    {g: [ep for ep in eps if ep.value.split(".")[0].split(":")[0] not in BLOCK]
     for g, eps in catalogue.AVAILABLE_ENTRY_POINTS.items()})
import spacy
from spacy.tokens import Span
nlp = spacy.load(sys.argv[1])
doc = nlp.make_doc("flu")
doc.ents = [Span(doc, 0, 1, "E")]
doc = nlp.get_pipe("sapbert_linker")(doc)
print(type(nlp.get_pipe("sapbert_linker").encoder).__name__, doc.ents[0].kb_id_,
      ",".join(m for m in BLOCK if m in sys.modules) or "none")
'''


def _saved(path, model, exact):
    KnowledgeBase.from_concepts([Concept("D1", "Influenza", ("flu",), ())]).to_disk(path / "kb")
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(model), "device": "cpu", "pooling": "mean"})
    linker.initialize(kb_path=str(path / "kb"), index_settings={"exact": exact}, show_progress=False)
    nlp.to_disk(path / "pipeline")
    return path / "pipeline"


def _run(pipeline):
    return subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT, str(pipeline)], capture_output=True,
                          text=True, timeout=300)


def test_hnsw_pipeline_with_onnx_export_links_without_torch_or_transformers(tiny_bert_path, tmp_path):
    result = _run(_saved(tmp_path, tiny_bert_path, exact=False))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["OnnxEncoder", "D1", "none"]

