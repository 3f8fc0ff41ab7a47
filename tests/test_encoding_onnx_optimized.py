"""The name encoder's graph optimised at export (``model.opt.onnx``): recorded with its hash, run at load with the
same vectors as ``model.onnx``, refused with a coded error when missing or damaged; exports made before it existed,
and optimised graphs of another onnxruntime version, load ``model.onnx``."""
from __future__ import annotations

import json
import shutil

import numpy
import pytest

from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import IntegrityError, MissingInputError

ort = pytest.importorskip("onnxruntime", reason="the onnx extra (requirements-dev.txt installs it)")
pytest.importorskip("onnx", reason="the onnx extra (requirements-dev.txt installs it)")

from spacy_sapbert.encoding.onnx_encoder import (  # noqa: E402
    EXPORT_FILE, ONNX_FILE, OPT_FILE, OnnxEncoder, export_onnx, quantize_export)

TEXTS = ["Heart attack", "flu", "a", "Acetylsalicylic acid (ASA) poisoning in a child of 3 years", "MI", "zz-top 42"]


@pytest.fixture(scope="module")
def exported(tiny_bert_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("opt") / "enc"
    enc = Encoder.load(tiny_bert_path, pooling="mean", device="cpu")
    enc.to_disk(folder)
    export_onnx(enc, folder)
    return folder, enc.encode(TEXTS, batch_size=4, use_cache=False)


def _copy(folder, tmp_path):
    shutil.copytree(folder, tmp_path / "enc")
    return tmp_path / "enc"


def _edit_export(folder, change):
    record = json.loads((folder / EXPORT_FILE).read_text())
    change(record)
    (folder / EXPORT_FILE).write_text(json.dumps(record))


def test_export_records_the_optimised_graph_and_a_load_runs_it(exported):
    folder, want = exported
    record = json.loads((folder / EXPORT_FILE).read_text())
    assert record["optimized"] == {"file": OPT_FILE, "level": "extended", "onnxruntime": ort.__version__}
    assert set(record["files"]) == {ONNX_FILE, OPT_FILE} and record["files"][OPT_FILE]["size"] > 0
    enc = OnnxEncoder.from_disk(folder)
    assert enc.graph_file == OPT_FILE
    numpy.testing.assert_allclose(enc.encode(TEXTS, batch_size=4, use_cache=False), want, atol=1e-5)


def test_an_export_made_before_the_optimised_graph_loads_model_onnx(exported, tmp_path):
    folder, want = exported
    old = _copy(folder, tmp_path)
    (old / OPT_FILE).unlink()

    def drop(record):
        record.pop("optimized")
        record["files"].pop(OPT_FILE)

    _edit_export(old, drop)
    enc = OnnxEncoder.from_disk(old)  # no warning (filterwarnings = error)
    assert enc.graph_file == ONNX_FILE
    numpy.testing.assert_allclose(enc.encode(TEXTS, batch_size=4, use_cache=False), want, atol=1e-5)


@pytest.mark.parametrize("damage", ["missing", "truncated", "odd record"])
def test_a_missing_or_damaged_optimised_graph_is_a_coded_error(exported, tmp_path, damage):
    folder = _copy(exported[0], tmp_path)
    if damage == "missing":
        (folder / OPT_FILE).unlink()
        kind, why = MissingInputError, "is missing"
    elif damage == "truncated":
        data = (folder / OPT_FILE).read_bytes()
        (folder / OPT_FILE).write_bytes(data[: len(data) // 2])
        kind, why = IntegrityError, "is damaged: size"
    else:
        _edit_export(folder, lambda record: record.update(optimized="yes"))
        kind, why = MissingInputError, "a record in onnx_export.json this version does not understand"
    with pytest.raises(kind, match=rf"\[SB-E835\].*{OPT_FILE}.*{why}.*spacy-sapbert export-onnx"):
        OnnxEncoder.from_disk(folder)


def test_another_onnxruntime_version_loads_model_onnx_with_a_warning(exported, tmp_path):
    folder = _copy(exported[0], tmp_path)
    _edit_export(folder, lambda record: record["optimized"].update(onnxruntime="0.1.0"))
    with pytest.warns(UserWarning, match=r"\[SB-W816\].*onnxruntime 0\.1\.0.*loads model\.onnx"):
        enc = OnnxEncoder.from_disk(folder)
    assert enc.graph_file == ONNX_FILE
    numpy.testing.assert_allclose(enc.encode(TEXTS, batch_size=4, use_cache=False), exported[1], atol=1e-5)


def test_quantizing_keeps_the_optimised_graph_recorded(exported, tmp_path):
    folder = _copy(exported[0], tmp_path)
    quantize_export(folder)
    record = json.loads((folder / EXPORT_FILE).read_text())
    assert record["optimized"]["file"] == OPT_FILE and OPT_FILE in record["files"]
    assert OnnxEncoder.from_disk(folder).graph_file == OPT_FILE
    assert OnnxEncoder.from_disk(folder, quantized=True).graph_file == "model.int8.onnx"
