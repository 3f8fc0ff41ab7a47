"""Builders the test modules share: the toy KB, the tiny linker pipeline, unit rows and loading a script as a module.

Plain functions, importable from any test module (``from helpers import toy_concepts, linker_nlp``; pytest puts
``tests/`` on ``sys.path``); ``conftest.py`` wraps the common cases as fixtures (``toy_kb``, ``toy_kb_path``).
Everything is built locally: nothing here reaches the model hub.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Iterable, List, Optional, Union

import numpy

from spacy_sapbert.kb import Concept, KnowledgeBase

if TYPE_CHECKING:
    from spacy.language import Language

# The toy KB: "MI" is a name of two concepts (D001, D002), D001 and D003 have definitions, D00x are
# diseases and C00x chemicals. Tests that need fewer concepts pick them by id; tests that need more add them.
TOY_CONCEPTS = (
    Concept("D001", "Heart attack", ("myocardial infarction", "MI"), ("Disease",), "Death of heart muscle."),
    Concept("D002", "Mitral insufficiency", ("MI", "mitral regurgitation"), ("Disease",)),
    Concept("D003", "Influenza", ("flu", "grippe"), ("Disease",), "A viral infection."),
    Concept("C004", "Aspirin", ("acetylsalicylic acid",), ("Chemical",)),
    Concept("C005", "Ibuprofen", (), ("Chemical",)),
)
_TOY_BY_ID = {c.concept_id: c for c in TOY_CONCEPTS}

# The linker settings every tiny pipeline starts from: the tiny random BERT gives nearly identical [CLS]
# vectors for every input, mean pooling tells names apart; threshold -1 keeps every candidate.
LINKER_DEFAULTS = {"device": "cpu", "threshold": -1.0, "pooling": "mean"}


def toy_concepts(*ids: str, extra: Iterable[Concept] = ()) -> List[Concept]:
    """The toy concepts with these ids in the order given (all of :data:`TOY_CONCEPTS` when none), then
    ``extra``. An unknown id is a mistake in the test: KeyError."""
    picked = [_TOY_BY_ID[i] for i in ids] if ids else list(TOY_CONCEPTS)
    return picked + list(extra)


def make_toy_kb(*ids: str, extra: Iterable[Concept] = ()) -> KnowledgeBase:
    """A KnowledgeBase of :func:`toy_concepts` ``(*ids, extra=extra)``."""
    return KnowledgeBase.from_concepts(toy_concepts(*ids, extra=extra))


def write_toy_kb(path: Path, *ids: str, extra: Iterable[Concept] = ()) -> Path:
    """:func:`make_toy_kb` saved to the folder ``path``; returns ``path``."""
    make_toy_kb(*ids, extra=extra).to_disk(path)
    return path


def linker_nlp(model: Union[str, Path], kb_path: Union[str, Path], *, index_path: Optional[Path] = None,
               prototypes_path: Optional[Path] = None, reranker_path: Optional[Path] = None, **config) -> Language:
    """A blank English pipeline with one ``sapbert_linker`` (:data:`LINKER_DEFAULTS` updated by ``config``)
    initialised on the KB folder ``kb_path`` (and an index, prototype or re-ranker folder when given)."""
    import spacy

    def text(path):
        return None if path is None else str(path)

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(model), **LINKER_DEFAULTS, **config})
    linker.initialize(kb_path=str(kb_path), show_progress=False, index_path=text(index_path),
                      prototypes_path=text(prototypes_path), reranker_path=text(reranker_path))
    return nlp


def whole_doc_evidence(nlp: Language, texts: Iterable[str]) -> list:
    """The linker's ``evidence`` for each text linked as one span covering the whole doc (label Disease)."""
    from spacy.tokens import Span

    docs = []
    for text in texts:
        doc = nlp.make_doc(text)
        doc.ents = [Span(doc, 0, len(doc), label="Disease")]
        docs.append(doc)
    return nlp.get_pipe("sapbert_linker").evidence(docs)


def unit_rows(rows) -> numpy.ndarray:
    """``rows`` as float32, each row divided by its length."""
    arr = numpy.asarray(rows, dtype=numpy.float32)
    return arr / numpy.linalg.norm(arr, axis=1, keepdims=True)


def load_module(path: Path, name: Optional[str] = None) -> ModuleType:
    """The Python file ``path`` (a script of ``scripts/`` or ``benchmarks/``, folders that are not packages)
    imported as a fresh module called ``name`` (the file's stem when none), not entered in ``sys.modules``."""
    spec = importlib.util.spec_from_file_location(name or Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script_or_fail_on_hang(script: str, args: Iterable[object], folder: Path, *, timeout: float,
                               what: str) -> str:
    """Run the Python ``script`` (written into ``folder``) with ``args`` in a fresh process group; a run past
    ``timeout`` seconds is killed with every process it forked and fails the test ("``what`` hung"). Returns
    its stdout; a non-zero exit fails with its stderr."""
    import os
    import signal
    import subprocess
    import sys

    import pytest

    path = folder / "script_under_test.py"
    path.write_text(script)
    proc = subprocess.Popen([sys.executable, str(path), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the forked workers too: none left behind, hung
        proc.communicate()
        pytest.fail(f"{what} hung")
    assert proc.returncode == 0, err[-3000:]
    return out
