"""The int8 name encoder (linker precision ``int8``): ``export-onnx --quantize`` writes and records it, the
linker loads and links with it, saving keeps it (folder and bytes), and a missing, truncated or unrecorded
int8 file is a coded error at load, never a float32 fallback."""
from __future__ import annotations

import json
import shutil

import numpy
import pytest
import spacy

from helpers import linker_nlp, write_toy_kb

from spacy_sapbert.errors import ConfigError, IntegrityError, MissingInputError

pytest.importorskip("onnxruntime", reason="the onnx extra (requirements-dev.txt installs it)")
pytest.importorskip("onnx", reason="the onnx extra (requirements-dev.txt installs it)")

from spacy_sapbert.encoding.onnx_encoder import (DATA_FILE, EXPORT_FILE, INT8_DATA_FILE, INT8_FILE, ONNX_FILE,  # noqa: E402
                                                 OnnxEncoder)

DOCS = [("Aspirin and grippe poisoning .", [(0, 1), (2, 4)]), ("Acute heart attacks with zzqx .", [(1, 3), (4, 5)])]


def _cli(*args):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def fp32_pipeline(tiny_bert_path, tmp_path_factory):
    root = tmp_path_factory.mktemp("int8_pipeline")
    linker_nlp(tiny_bert_path, write_toy_kb(root / "kb")).to_disk(root / "nlp")
    return root / "nlp"


@pytest.fixture(scope="module")
def quantized_pipeline(fp32_pipeline, tmp_path_factory):
    """The saved pipeline after `export-onnx --quantize` (made once)."""
    path = tmp_path_factory.mktemp("quantized") / "nlp"
    shutil.copytree(fp32_pipeline, path)
    result = _cli("export-onnx", "--quantize", path)
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture()
def int8_pipeline(quantized_pipeline, tmp_path):
    """A copy of the quantized pipeline that a test may damage."""
    shutil.copytree(quantized_pipeline, tmp_path / "nlp")
    return tmp_path / "nlp"


def _linked(nlp):
    out = []
    for text, spans in DOCS:
        doc = nlp.make_doc(text)
        doc.ents = [spacy.tokens.Span(doc, s, e, label="E") for s, e in spans]
        doc = nlp(doc)
        out.append([(e.kb_id_, [(c, round(s, 5)) for c, s in e._.kb_ents]) for e in doc.ents])
    return out


def test_export_quantize_writes_records_and_the_pipeline_runs_it(int8_pipeline, fp32_pipeline):
    folder = int8_pipeline / "sapbert_linker" / "encoder"
    recorded = json.loads((folder / EXPORT_FILE).read_text())
    assert recorded["int8"] == INT8_FILE and recorded["files"][INT8_FILE]["size"] == (folder / INT8_FILE).stat().st_size
    assert set(recorded["files"]) == {ONNX_FILE, DATA_FILE, INT8_FILE, INT8_DATA_FILE}
    assert recorded["int8_data"] == INT8_DATA_FILE  # the int8 weights beside the graph, mapped at load
    import onnx

    graph = onnx.load(str(folder / INT8_FILE), load_external_data=False).graph
    outside = [t.name for t in graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert outside and all(e.value == INT8_DATA_FILE for t in graph.initializer for e in t.external_data
                           if e.key == "location")
    assert recorded["int8_recipe"] == "dynamic-pc-l0"  # the package's recipe (tests/test_encoding_int8_recipes.py)
    assert recorded["int8_options"]["per_channel"] is True
    assert 'precision = "int8"' in (int8_pipeline / "config.cfg").read_text()
    nlp = spacy.load(int8_pipeline)
    encoder = nlp.get_pipe("sapbert_linker").encoder
    assert isinstance(encoder, OnnxEncoder) and encoder.precision == "int8" and encoder.graph_file == INT8_FILE
    linked = _linked(nlp)
    assert all(ents and kb_id for doc in linked for kb_id, ents in doc)
    assert all(-1.0 <= s <= 1.0 for doc in linked for _, ents in doc for _, s in ents)
    fp32 = spacy.load(fp32_pipeline)  # untouched: float32 ONNX Runtime, other query vectors
    assert fp32.get_pipe("sapbert_linker").encoder.precision == "fp32"
    texts = ["grippe poisoning", "zzqx"]
    got = encoder.encode(texts, use_cache=False)
    want = fp32.get_pipe("sapbert_linker").encoder.encode(texts, use_cache=False)
    numpy.testing.assert_allclose(numpy.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert not numpy.allclose(got, want, atol=1e-6)


def test_export_quantize_on_an_encoder_folder(tiny_bert_path, tmp_path):
    from spacy_sapbert.encoding.torch_encoder import Encoder

    Encoder.load(tiny_bert_path, pooling="mean", device="cpu").to_disk(tmp_path / "enc")
    assert _cli("export-onnx", tmp_path / "enc").exit_code == 0
    with pytest.raises(MissingInputError, match="SB-E126"):  # a float32 export only
        OnnxEncoder(tmp_path / "enc", quantized=True)
    result = _cli("export-onnx", "--quantize", tmp_path / "enc")
    assert result.exit_code == 0 and "int8" in result.output, result.output
    assert OnnxEncoder(tmp_path / "enc", quantized=True).precision == "int8"


@pytest.mark.parametrize("damage", ["missing", "truncated", "unrecorded", "bytes", "weights missing",
                                    "weights truncated", "weights bytes"])
def test_a_bad_int8_file_is_a_coded_error_at_load(int8_pipeline, damage):
    folder = int8_pipeline / "sapbert_linker" / "encoder"
    path = folder / INT8_FILE
    data = folder / INT8_DATA_FILE
    if damage == "missing":
        path.unlink()
    elif damage == "weights missing":
        data.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "weights truncated":
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    elif damage == "weights bytes":
        data.write_bytes(bytes(b ^ 0xFF for b in data.read_bytes()))
    elif damage == "unrecorded":
        recorded = json.loads((folder / EXPORT_FILE).read_text())
        del recorded["int8"], recorded["files"][INT8_FILE]
        (folder / EXPORT_FILE).write_text(json.dumps(recorded))
    else:  # same size, every byte changed: the sampled hash differs
        path.write_bytes(bytes(b ^ 0xFF for b in path.read_bytes()))
    kind = MissingInputError if damage in ("missing", "unrecorded") else IntegrityError
    with pytest.raises(kind) as err:
        spacy.load(int8_pipeline)
    message = str(err.value)
    assert "SB-E826" in message and str(path) in message
    assert f"export-onnx --quantize {int8_pipeline}" in message
    assert {"missing": "is missing", "truncated": "truncated", "unrecorded": "not recorded",
            "bytes": "bytes changed", "weights missing": f"{INT8_DATA_FILE}: the file is missing",
            "weights truncated": f"{INT8_DATA_FILE}: size", "weights bytes": "bytes changed"}[damage] in message
    from spacy_sapbert.commands.verify import verify_folder

    bad = [c for c in verify_folder(int8_pipeline) if c.status != "ok"]
    assert INT8_FILE in [c.path.name for c in bad]  # verify reports it too
    result = _cli("export-onnx", "--quantize", int8_pipeline)  # the fix the message gives
    assert result.exit_code == 0, result.output
    assert spacy.load(int8_pipeline).get_pipe("sapbert_linker").encoder.precision == "int8"


def test_an_int8_copy_with_its_weights_inside_still_loads(int8_pipeline, quantized_pipeline):
    """Copies written before 2026-12-04 keep the weights inside model.int8.onnx and record no ``int8_data``."""
    import onnx

    from spacy_sapbert.base.integrity import file_records

    folder = int8_pipeline / "sapbert_linker" / "encoder"
    onnx.save_model(onnx.load(str(folder / INT8_FILE)), str(folder / INT8_FILE))  # weights inline again
    (folder / INT8_DATA_FILE).unlink()
    recorded = json.loads((folder / EXPORT_FILE).read_text())
    del recorded["int8_data"], recorded["files"][INT8_DATA_FILE]
    recorded["files"].update(file_records(folder, [INT8_FILE]))
    (folder / EXPORT_FILE).write_text(json.dumps(recorded))
    old = spacy.load(int8_pipeline)
    assert old.get_pipe("sapbert_linker").encoder.precision == "int8"
    assert _linked(old) == _linked(spacy.load(quantized_pipeline))  # the same int8 graph, stored the old way


def test_save_and_bytes_round_trips_keep_int8(int8_pipeline, tmp_path):
    nlp = spacy.load(int8_pipeline)
    want = _linked(nlp)
    nlp.to_disk(tmp_path / "again")
    encoder_dir = tmp_path / "again" / "sapbert_linker" / "encoder"
    source = int8_pipeline / "sapbert_linker" / "encoder" / INT8_FILE
    assert (encoder_dir / INT8_FILE).read_bytes() == source.read_bytes()
    assert (encoder_dir / INT8_DATA_FILE).read_bytes() == (source.parent / INT8_DATA_FILE).read_bytes()
    again = spacy.load(tmp_path / "again")
    assert again.get_pipe("sapbert_linker").encoder.precision == "int8"
    assert _linked(again) == want
    blank = spacy.load(int8_pipeline)
    blank.get_pipe("sapbert_linker").from_bytes(nlp.get_pipe("sapbert_linker").to_bytes())
    assert blank.get_pipe("sapbert_linker").encoder.precision == "int8"
    assert _linked(blank) == want


def test_initialize_with_precision_int8(tiny_bert_path, fp32_pipeline, tmp_path):
    nlp = linker_nlp(tiny_bert_path, fp32_pipeline.parent / "kb", precision="int8")
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.encoder.precision == "int8"
    # the index holds the float32 name vectors: the same as the float32 pipeline's
    fp32 = spacy.load(fp32_pipeline).get_pipe("sapbert_linker")
    numpy.testing.assert_allclose(linker.index.name_vectors([0, 1, 2]), fp32.index.name_vectors([0, 1, 2]), atol=1e-5)
    want = _linked(nlp)
    nlp.to_disk(tmp_path / "nlp")
    assert (tmp_path / "nlp" / "sapbert_linker" / "encoder" / INT8_FILE).is_file()
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("sapbert_linker").encoder.precision == "int8" and _linked(loaded) == want


def test_encoder_and_precision_must_agree(fp32_pipeline, tmp_path):
    linker = spacy.load(fp32_pipeline).get_pipe("sapbert_linker")
    int8_linker = spacy.blank("en").add_pipe("sapbert_linker", config={"precision": "int8"})
    with pytest.raises(ConfigError, match="SB-E827"):  # float32 now, int8 once saved: refused
        int8_linker.set_resources(linker.encoder, linker.index)
    folder = tmp_path / "enc"
    shutil.copytree(fp32_pipeline / "sapbert_linker" / "encoder", folder)
    assert _cli("export-onnx", "--quantize", folder).exit_code == 0
    int8 = OnnxEncoder(folder, quantized=True)
    with pytest.raises(ConfigError, match="SB-E827"):  # int8 now, float32 once saved: refused
        spacy.blank("en").add_pipe("sapbert_linker").set_resources(int8, linker.index)
    int8_linker.set_resources(int8, linker.index)  # agreeing: fine
    assert int8_linker.encoder is int8


@pytest.mark.parametrize("setting", [{"runtime": "torch"}, {"device": "cuda:0"}])
def test_int8_with_torch_or_a_gpu_is_refused(setting, fp32_pipeline, tmp_path):
    with pytest.raises(ConfigError, match="SB-E825"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"precision": "int8", **setting})
    path = tmp_path / "nlp"
    shutil.copytree(fp32_pipeline, path)
    config = (path / "config.cfg").read_text()
    key = next(iter(setting))
    before = (path / "config.cfg").read_text().replace(f'{key} = "auto"', f'{key} = "{setting[key]}"')
    if key == "device":
        before = before.replace('device = "cpu"', f'device = "{setting[key]}"')
    assert before != config
    (path / "config.cfg").write_text(before)
    result = _cli("export-onnx", "--quantize", path)
    assert isinstance(result.exception, ConfigError) and "SB-E825" in str(result.exception)
    assert (path / "config.cfg").read_text() == before  # nothing written
    assert not (path / "sapbert_linker" / "encoder" / INT8_FILE).exists()


def test_the_vector_cache_keeps_int8_vectors_apart(int8_pipeline, fp32_pipeline):
    from spacy_sapbert.evaluation.cache import encoder_key

    int8 = spacy.load(int8_pipeline).get_pipe("sapbert_linker").encoder
    fp32 = spacy.load(fp32_pipeline).get_pipe("sapbert_linker").encoder
    assert int8.fingerprint == fp32.fingerprint and encoder_key(int8) != encoder_key(fp32)
