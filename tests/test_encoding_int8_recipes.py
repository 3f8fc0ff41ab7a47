"""The int8 recipes (spacy_sapbert.encoding.int8_recipes): `export-onnx --quantize` writes the package's recipe
(per-channel weights, the first transformer layer float32) and records it; `--recipe dynamic` still writes the
older one; a pipeline whose record predates recipe names loads, links and saves as before; an unknown recipe is
E828 before anything is written; a recipe whose float layers the graph lacks warns (W812)."""
from __future__ import annotations

import json
import shutil

import pytest
import spacy

pytest.importorskip("onnxruntime", reason="the onnx extra (requirements-dev.txt installs it)")
onnx = pytest.importorskip("onnx", reason="the onnx extra (requirements-dev.txt installs it)")

from spacy_sapbert.encoding.int8_recipes import NAME_RECIPE, RECIPES, Int8Recipe, recorded_recipe  # noqa: E402
from spacy_sapbert.encoding.onnx_encoder import (EXPORT_FILE, INT8_FILE, OnnxEncoder, export_onnx,  # noqa: E402
                                                 quantize_export, recorded_export)
from spacy_sapbert.errors import ConfigError, MissingInputError  # noqa: E402

from test_encoding_int8 import _cli, _linked, fp32_pipeline, quantized_pipeline  # noqa: E402,F401  (fixtures)


@pytest.fixture(scope="module")
def exported(tiny_bert_path, tmp_path_factory):
    """An encoder folder with its float32 ONNX export (made once; copy it before quantizing)."""
    from spacy_sapbert.encoding.torch_encoder import Encoder

    folder = tmp_path_factory.mktemp("recipes") / "enc"
    encoder = Encoder.load(str(tiny_bert_path), pooling="mean", device="cpu")
    encoder.to_disk(folder)
    export_onnx(encoder, folder)
    return folder


def _copy(exported, tmp_path):
    shutil.copytree(exported, tmp_path / "enc")
    return tmp_path / "enc"


def _ops(path):
    return {node.name: node.op_type for node in onnx.load(str(path)).graph.node}


def test_the_default_recipe_keeps_the_first_layer_float32_and_is_recorded(exported, tmp_path):
    folder = _copy(exported, tmp_path)
    quantize_export(folder)
    recorded = recorded_export(folder)
    assert NAME_RECIPE == "dynamic-pc-l0" and recorded["int8_recipe"] == NAME_RECIPE
    kept = recorded["int8_options"]["exclude_nodes"]
    assert kept and all("/layer.0/" in name for name in kept)
    fp32_matmuls = {n for n, op in _ops(folder / "model.onnx").items() if op == "MatMul" and "/layer.0/" in n}
    weight_matmuls = {n for n in fp32_matmuls if n.endswith(("query/MatMul", "key/MatMul", "value/MatMul",
                                                             "dense/MatMul"))}
    assert weight_matmuls <= set(kept)
    ops = _ops(folder / INT8_FILE)
    assert all(ops.get(name) == "MatMul" for name in kept)  # left float32
    layer1 = [op for name, op in ops.items() if "/layer.1/" in name]
    assert "MatMulInteger" in layer1 and recorded["int8_options"]["per_channel"] is True
    # the per-channel weights: one scale per output column of a quantized weight
    model = onnx.load(str(folder / INT8_FILE))
    scales = {i.name: i for i in model.graph.initializer if i.name.endswith("_scale")}
    assert any(len(s.dims) == 1 and s.dims[0] > 1 for s in scales.values())
    vectors = OnnxEncoder(folder, quantized=True).encode(["aspirin poisoning", "grippe"], use_cache=False)
    fp32 = OnnxEncoder(folder).encode(["aspirin poisoning", "grippe"], use_cache=False)
    assert (vectors * fp32).sum(axis=1).min() > 0.9 and vectors.shape == fp32.shape


def test_the_older_recipe_stays_available_and_differs(exported, tmp_path):
    folder = _copy(exported, tmp_path)
    result = _cli("export-onnx", "--quantize", "--recipe", "dynamic", folder)
    assert result.exit_code == 0, result.output
    recorded = recorded_export(folder)
    assert recorded["int8_recipe"] == "dynamic" and recorded["int8_options"] == {
        "per_channel": False, "reduce_range": False, "op_types": [], "exclude_nodes": []}
    assert not any(op == "MatMul" and "/layer.0/" in name and name.endswith("dense/MatMul")
                   for name, op in _ops(folder / INT8_FILE).items())  # every layer quantized
    assert set(RECIPES) == {"dynamic", "dynamic-pc-l0"}


def test_a_pipeline_recorded_before_recipe_names_still_loads_and_saves(quantized_pipeline, tmp_path):
    """A pipeline quantized by the older recipe, its record without ``int8_recipe`` (as written before it
    existed): it loads with precision int8, links, and saving it keeps its int8 file byte for byte."""
    path = tmp_path / "nlp"
    shutil.copytree(quantized_pipeline, path)
    folder = path / "sapbert_linker" / "encoder"
    quantize_export(folder, "dynamic")
    recorded = json.loads((folder / EXPORT_FILE).read_text())
    del recorded["int8_recipe"]
    (folder / EXPORT_FILE).write_text(json.dumps(recorded))
    assert recorded_recipe(recorded_export(folder)) == "dynamic"
    old_bytes = (folder / INT8_FILE).read_bytes()
    nlp = spacy.load(path)
    assert nlp.get_pipe("sapbert_linker").encoder.precision == "int8"
    linked = _linked(nlp)
    assert all(ents and kb_id for doc in linked for kb_id, ents in doc)
    nlp.to_disk(tmp_path / "again")
    again = tmp_path / "again" / "sapbert_linker" / "encoder"
    assert (again / INT8_FILE).read_bytes() == old_bytes  # not re-quantized by the new recipe
    assert "int8_recipe" not in json.loads((again / EXPORT_FILE).read_text())
    assert _linked(spacy.load(tmp_path / "again")) == linked


def test_an_unknown_recipe_is_refused_before_anything_is_written(quantized_pipeline, exported, tmp_path):
    path = tmp_path / "nlp"
    shutil.copytree(quantized_pipeline, path)
    before = {p: p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
    result = _cli("export-onnx", "--quantize", "--recipe", "int4", path)
    assert isinstance(result.exception, ConfigError) and "SB-E828" in str(result.exception)
    assert "dynamic-pc-l0" in str(result.exception) and "'int4'" in str(result.exception)
    assert {p: p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()} == before
    folder = _copy(exported, tmp_path)
    with pytest.raises(ConfigError, match="SB-E828"):
        quantize_export(folder, "int4")
    assert not (folder / INT8_FILE).exists()
    with pytest.raises(MissingInputError, match="SB-E123"):  # a folder without an export: as before
        quantize_export(tmp_path / "nothing")


def test_a_recipe_whose_layers_the_graph_lacks_warns_and_quantizes_everything(exported, tmp_path):
    folder = _copy(exported, tmp_path)
    recipe = Int8Recipe("layer-9-float", per_channel=True, float_layers=(9,))
    with pytest.warns(UserWarning, match="SB-W812"):
        quantize_export(folder, recipe)
    recorded = recorded_export(folder)
    assert recorded["int8_recipe"] == "layer-9-float" and recorded["int8_options"]["exclude_nodes"] == []
    assert OnnxEncoder(folder, quantized=True).precision == "int8"


def test_build_index_int8_keeps_the_recipe_its_benchmark_measured(tiny_bert_path, exported, tmp_path):
    """build-index --precision int8 (the KB names) stays on `dynamic`, the recipe encode_speed measured, even over
    a work folder that holds another recipe's int8 copy."""
    from spacy_sapbert.encoding.bulk import bulk_encoder
    from spacy_sapbert.encoding.torch_encoder import Encoder

    folder = _copy(exported, tmp_path)
    quantize_export(folder)  # the name encoder's default: not what build-index runs
    enc = Encoder.load(str(tiny_bert_path), pooling="mean", device="cpu")
    runner = bulk_encoder(enc, "onnx", "int8", folder)
    assert runner.precision == "int8" and recorded_export(folder)["int8_recipe"] == "dynamic"
    assert recorded_export(folder)["int8_options"]["per_channel"] is False
