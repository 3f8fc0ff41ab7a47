from pathlib import Path

import pytest

from spacy_sapbert.errors import ConfigError, Errors
from spacy_sapbert.kb.concept import Concept, normalize_name
from spacy_sapbert.base.util import atomic_dir, atomic_write, resolve_device


def test_errors_are_coded():
    assert Errors.E003.startswith("[SB-E003] ")
    assert "{path}" in Errors.E003
    assert Errors.__name__ == "Errors"


def test_normalize_name_is_the_one_normaliser():
    assert normalize_name("  Breast\u00a0CANCER\t type\n2 ") == "breast cancer type 2"
    assert normalize_name("ﬁbrosis") == "fibrosis"  # NFKC folds the ligature


def test_concept_names_order():
    c = Concept("C1", "Fever", aliases=("pyrexia",))
    assert c.names() == ("Fever", "pyrexia")


def test_atomic_write_keeps_old_file_on_error(tmp_path: Path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as fh:
            fh.write("half")
            raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]
    with atomic_write(target) as fh:
        fh.write("new")
    assert target.read_text() == "new"


def test_atomic_dir_refuses_existing_and_cleans_up(tmp_path: Path):
    target = tmp_path / "kb"
    with atomic_dir(target) as tmp:
        (tmp / "a").write_text("1")
    assert (target / "a").read_text() == "1"
    with pytest.raises(ConfigError, match=r"\[SB-E003\]"):
        with atomic_dir(target):
            pass
    with pytest.raises(ValueError):
        with atomic_dir(target, overwrite=True) as tmp:
            (tmp / "b").write_text("2")
            raise ValueError("stop")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb"]
    assert (target / "a").exists() and not (target / "b").exists()


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(ConfigError, match=r"\[SB-E002\]"):
        resolve_device("tpu")


def test_tiny_bert_fixture_loads(tiny_bert_path):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert_path)
    model = AutoModel.from_pretrained(tiny_bert_path)
    ids = tok(["fever", "breast cancer"], padding=True, return_tensors="pt")
    assert model(**ids).last_hidden_state.shape[-1] == 32


def test_atomic_outputs_get_the_usual_modes(tmp_path: Path):
    import os

    mask = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "f.txt") as fh:
            fh.write("x")
        with atomic_dir(tmp_path / "d"):
            pass
    finally:
        os.umask(mask)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755


def test_public_api_names_resolve():
    import spacy_sapbert

    for name in spacy_sapbert.__all__:
        assert getattr(spacy_sapbert, name) is not None, name
    with pytest.raises(AttributeError):
        spacy_sapbert.not_a_name  # noqa: B018


def test_device_is_cpu_reads_the_torch_build_without_importing_it(tmp_path, monkeypatch):
    import importlib.machinery
    import importlib.util
    import sys

    from spacy_sapbert.base import util

    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    spec = importlib.machinery.ModuleSpec("torch", None, origin=str(fake / "__init__.py"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "torch" else None)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    cases = {
        "cuda: Optional[str] = None\nhip: Optional[str] = None\n": False,  # CPU wheel
        "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n": True,
        "cuda = None\nhip = '6.2'\n": True,
        "__version__ = '9.9'\n": True,  # unknown layout: torch must be asked
    }
    for text, has_gpu in cases.items():
        (fake / "version.py").write_text(text)
        assert util._torch_build_has_gpu() is has_gpu, text
    (fake / "version.py").write_text("cuda = None\nhip = None\n")
    assert util.device_is_cpu("auto") and util.device_is_cpu("cpu")
    assert "torch" not in sys.modules
