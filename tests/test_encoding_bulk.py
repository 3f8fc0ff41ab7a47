"""Encoding big KBs (issue 31, item 4): identical token rows run once, length-sorted batches come back
in input order, build-index's runtime / precision options (ONNX Runtime float32 and int8), and the work
folder never mixing chunks of different precisions."""
from __future__ import annotations

import json

import numpy
import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.encoding.bulk import (BF16_CPU_BULK_BATCH_SIZE, BULK_BATCH_SIZE, ONNX_AUTO_MIN_NAMES,
                                         bulk_batch_size, check_bulk_options, names_precision, resolve_runtime)
from spacy_sapbert.encoding.cached import unique_rows
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import ConfigError, IncompatibleError
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.commands.pipeline import build_index_dir

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONCEPTS = [("D1", "Influenza", ("flu", "grippe", "fièvre")), ("C2", "Aspirin", ("acetylsalicylic acid", "a-b")),
            ("C3", "Ibuprofen", ("fievre", "a - b", "a-b acid"))]


@pytest.fixture(scope="module")
def enc(tiny_bert_path):
    return Encoder.load(tiny_bert_path, device="cpu", cache_size=0)


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("bulk") / "kb"
    KnowledgeBase.from_concepts([Concept(c, n, a) for c, n, a in CONCEPTS]).to_disk(path)
    return path


def _alone(enc, texts):
    return numpy.stack([enc.encode([t], use_cache=False)[0] for t in texts])


def test_unique_rows_inverts_back_to_every_row():
    rows = [[2, 5, 3], [2, 6, 7, 3], [2, 5, 3], [2, 3], [2, 6, 7, 3]]
    unique, inverse = unique_rows(rows)
    assert unique == [[2, 5, 3], [2, 6, 7, 3], [2, 3]]
    assert [unique[j] for j in inverse] == rows
    assert unique_rows([[1], [2]]) == ([[1], [2]], None)


def test_rows_the_tokenizer_folds_together_run_once_and_keep_their_vectors(enc, monkeypatch):
    # the uncased vocabulary folds case and accents; BERT's pre-tokenizer splits punctuation off
    texts = ["Fever", "fever", "FÉVER", "a-b", "a - b", "cough", "fever"]
    ran = []
    original = type(enc)._encode_batch

    def counting(self, rows):
        ran.extend(tuple(r) for r in rows)
        return original(self, rows)

    expected = _alone(enc, texts)
    monkeypatch.setattr(type(enc), "_encode_batch", counting)
    got = enc.encode(texts, batch_size=2, use_cache=False)
    assert len(ran) == len(set(ran)) == 3  # fever, a-b, cough
    numpy.testing.assert_allclose(got, expected, atol=1e-5)
    numpy.testing.assert_array_equal(got[0], got[1])
    numpy.testing.assert_array_equal(got[3], got[4])


def test_length_sorted_batches_come_back_in_input_order(enc):
    texts = ["a much longer name of a disease", "flu", "acetylsalicylic acid", "b", "medium name", "x y z w v u"]
    got = enc.encode(texts, batch_size=2, use_cache=False)
    numpy.testing.assert_allclose(got, _alone(enc, texts), atol=1e-5)
    assert len({tuple(numpy.round(v, 5)) for v in got}) == len(texts)


@pytest.mark.parametrize("runtime,precision,device,code", [
    ("tensorflow", "fp32", "cpu", "E830"), ("auto", "int4", "cpu", "E830"), ("torch", "int8", "cpu", "E831"),
    ("auto", "int8", "cuda", "E831"), ("onnx", "bf16", "cpu", "E831"), ("onnx", "fp32", "cuda:0", "E831")])
def test_bad_runtime_and_precision_are_coded_errors(runtime, precision, device, code):
    with pytest.raises(ConfigError, match=f"SB-{code}"):
        check_bulk_options(runtime, precision, device)


def test_bad_options_fail_on_the_command_line_before_any_work(kb_dir, tiny_bert_path, tmp_path):
    runner = CliRunner()
    out = tmp_path / "index"
    for args, code in ((["--runtime", "tensorflow"], "SB-E012"), (["--precision", "int8", "--runtime", "torch"], "SB-E831")):
        result = runner.invoke(app, ["build-index", str(kb_dir), "-m", str(tiny_bert_path), "-o", str(out), *args])
        message = result.output + str(result.exception)
        assert result.exit_code == 1 and code in message, message
    assert not out.exists()


def test_auto_runtime_is_onnx_only_for_big_cpu_fp32_jobs():
    assert resolve_runtime("auto", "auto", "cpu", ONNX_AUTO_MIN_NAMES) == "onnx"
    assert resolve_runtime("auto", "fp32", "cpu", ONNX_AUTO_MIN_NAMES - 1) == "torch"
    assert resolve_runtime("auto", "bf16", "cpu", 10 ** 7) == "torch"
    assert resolve_runtime("auto", "int8", "cpu", 10) == "onnx"
    assert resolve_runtime("torch", "fp32", "cpu", 10 ** 7) == "torch"
    assert resolve_runtime("auto", "fp32", "cpu", 10 ** 7, ray=True) == "torch"
    assert resolve_runtime("onnx", "fp32", "cpu", 10, ray=True) == "onnx"


def test_bulk_batches_are_larger_only_for_bf16_on_a_cpu_unless_given():
    assert BF16_CPU_BULK_BATCH_SIZE > BULK_BATCH_SIZE
    assert bulk_batch_size(None, "bf16", "cpu") == BF16_CPU_BULK_BATCH_SIZE
    for precision in ("auto", "fp32", "int8"):
        assert bulk_batch_size(None, precision, "cpu") == BULK_BATCH_SIZE
    assert bulk_batch_size(None, "bf16", "cpu", gpus_per_actor=1.0) == BULK_BATCH_SIZE  # Ray actors on GPUs
    assert bulk_batch_size(48, "bf16", "cpu") == 48
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match="SB-E105"):
            bulk_batch_size(bad, "fp32", "cpu")


@pytest.mark.filterwarnings("ignore:.*SB-W814")  # bf16 on a CI CPU without bf16 instructions: emulated, still runs
@pytest.mark.parametrize("precision,given,expected", [
    ("bf16", None, BF16_CPU_BULK_BATCH_SIZE), ("fp32", None, BULK_BATCH_SIZE), ("bf16", 2, 2)])
def test_build_index_encodes_in_the_resolved_batch_size(kb_dir, tiny_bert_path, tmp_path, monkeypatch,
                                                         precision, given, expected):
    import spacy_sapbert.index.concept_index as concept_index

    seen = []
    original = concept_index._encode_names

    def spy(kb, enc, *, batch_size, **kwargs):
        seen.append(batch_size)
        return original(kb, enc, batch_size=batch_size, **kwargs)

    monkeypatch.setattr(concept_index, "_encode_names", spy)
    build_index_dir(kb_dir, str(tiny_bert_path), tmp_path / "index", kind="exact", device="cpu", runtime="torch",
                    precision=precision, batch_size=given, show_progress=False)
    assert seen == [expected]


def test_onnx_build_equals_torch_build_and_int8_is_recorded(kb_dir, tiny_bert_path, tmp_path):
    kb = KnowledgeBase.from_disk(kb_dir)
    vectors = {}
    for runtime, precision in (("torch", "fp32"), ("onnx", "fp32"), ("onnx", "int8")):
        out = tmp_path / f"{runtime}-{precision}"
        build_index_dir(kb_dir, str(tiny_bert_path), out, kind="exact", device="cpu", runtime=runtime,
                        precision=precision, show_progress=False)
        meta = json.loads((out / "index_meta.json").read_text(encoding="utf8"))
        assert meta["names_precision"] == ("int8" if precision == "int8" else "fp32")
        assert not out.with_name(f".{out.name}.work").exists()  # the export went with the work folder
        vectors[runtime, precision] = ConceptIndex.from_disk(out, kb).name_vectors(list(range(len(kb.names))))
    numpy.testing.assert_allclose(vectors["onnx", "fp32"], vectors["torch", "fp32"], atol=1e-5)
    cos = (vectors["onnx", "int8"] * vectors["torch", "fp32"]).sum(axis=1)
    assert 0.5 < cos.min() and not numpy.allclose(vectors["onnx", "int8"], vectors["torch", "fp32"], atol=1e-5)


def test_a_work_folder_of_fp32_chunks_is_not_reused_for_int8(kb_dir, tiny_bert_path, tmp_path):
    work = tmp_path / "work"
    kb = KnowledgeBase.from_disk(kb_dir)
    enc = Encoder.load(tiny_bert_path, device="cpu")
    ConceptIndex.build(kb, enc, kind="exact", work_dir=work, show_progress=False)
    assert json.loads((work / "work.json").read_text(encoding="utf8"))["precision"] == "fp32"
    with pytest.raises(IncompatibleError, match="SB-E112.*precision"):
        build_index_dir(kb_dir, str(tiny_bert_path), tmp_path / "index", kind="exact", device="cpu",
                        precision="int8", work_dir=work, show_progress=False)


def test_a_work_json_from_before_the_precision_field_still_resumes(kb_dir, tiny_bert_path, tmp_path):
    work = tmp_path / "work"
    kb = KnowledgeBase.from_disk(kb_dir)
    enc = Encoder.load(tiny_bert_path, device="cpu")
    ConceptIndex.build(kb, enc, kind="exact", work_dir=work, show_progress=False)
    record = json.loads((work / "work.json").read_text(encoding="utf8"))
    del record["precision"]
    (work / "work.json").write_text(json.dumps(record), encoding="utf8")
    ConceptIndex.build(kb, enc, kind="exact", work_dir=work, show_progress=False)  # no E112
    assert names_precision(enc) == "fp32"


def test_bf16_on_a_cpu_without_bf16_instructions_warns(tmp_path):
    from spacy_sapbert.encoding.bulk import warn_emulated_bf16

    without, with_ = tmp_path / "zen3", tmp_path / "spr"
    without.write_text("model name\t: AMD EPYC\nflags\t\t: fpu avx avx2 fma\n", encoding="utf8")
    with_.write_text("model name\t: Intel Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16\n", encoding="utf8")
    with pytest.warns(UserWarning, match="SB-W814.*AMD EPYC"):
        assert warn_emulated_bf16("bf16", "cpu", str(without))
    assert not warn_emulated_bf16("bf16", "cpu", str(with_))
    assert not warn_emulated_bf16("fp32", "cpu", str(without))
    assert not warn_emulated_bf16("bf16", "cpu", str(tmp_path / "missing"))


def test_a_ray_actor_runs_the_drivers_onnx_export(kb_dir, tiny_bert_path, tmp_path):
    from spacy_sapbert.encoding.bulk import bulk_encoder, ray_encoder_options
    from spacy_sapbert.index.ray_build import EncodeChunks

    kb = KnowledgeBase.from_disk(kb_dir)
    enc = Encoder.load(tiny_bert_path, device="cpu")
    onnx = bulk_encoder(enc, "onnx", "fp32", tmp_path / "encoder")
    options = ray_encoder_options(onnx, {"pooling": "cls", "max_length": 25, "device": "cpu", "precision": "fp32"})
    assert options == {"onnx_folder": str((tmp_path / "encoder").resolve()), "quantized": False}
    assert ray_encoder_options(enc, {"device": "cpu"}) == {"device": "cpu"}
    actor = EncodeChunks(str(kb_dir), str(tiny_bert_path), options, batch_size=4, threads=1)
    assert type(actor.enc).__name__ == "OnnxEncoder" and actor.enc.fingerprint == enc.fingerprint
    n = len(kb.names)
    out = actor({"chunk": numpy.array([0]), "start": numpy.array([0]), "stop": numpy.array([n])})
    got = numpy.frombuffer(out["vectors"][0], dtype=numpy.float32).reshape(n, enc.dim)
    numpy.testing.assert_allclose(got, enc.encode(list(kb.names), use_cache=False), atol=1e-5)
