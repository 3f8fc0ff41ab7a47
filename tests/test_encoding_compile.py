"""build-index --compile (issue 31, item 4): the PyTorch encoder's forward pass through torch.compile. The option's
checks, that it reaches the encoder (the driver's and each Ray actor's), E835 when compiling fails; a real compile
of the tiny BERT (slow: ~10 s) gives the eager vectors."""
from __future__ import annotations

import numpy
import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.commands.pipeline import build_index_dir
from spacy_sapbert.encoding.bulk import bulk_encoder, check_bulk_options, ray_encoder_options, resolve_runtime
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import ConfigError
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.kb import Concept, KnowledgeBase

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAMES = ["influenza", "flu", "acetylsalicylic acid", "aspirin", "a - b", "ibuprofen", "x"]


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("compile") / "kb"
    KnowledgeBase.from_concepts([Concept(f"C{i}", name, ()) for i, name in enumerate(NAMES)]).to_disk(path)
    return path


@pytest.fixture()
def compile_calls(monkeypatch):
    """Encoder.compile recorded and left out (a real compile takes seconds: the slow test below runs one)."""
    calls = []

    def spy(self):
        calls.append(self)
        return self

    monkeypatch.setattr(Encoder, "compile", spy)
    return calls


@pytest.mark.parametrize("runtime,precision", [("onnx", "fp32"), ("auto", "int8"), ("onnx", "int8")])
def test_compile_with_onnx_runtime_or_int8_is_e831(runtime, precision):
    with pytest.raises(ConfigError, match="SB-E831.*--compile"):
        check_bulk_options(runtime, precision, "cpu", compile=True)
    check_bulk_options("torch", "bf16", "cpu", compile=True)
    check_bulk_options("auto", "fp32", "cpu", compile=True)


def test_compile_makes_auto_run_torch():
    assert resolve_runtime("auto", "fp32", "cpu", 10 ** 7) == "onnx"
    assert resolve_runtime("auto", "fp32", "cpu", 10 ** 7, compile=True) == "torch"
    assert resolve_runtime("auto", "auto", "cpu", 10 ** 7, compile=True) == "torch"


def test_compile_with_onnx_fails_on_the_command_line_before_any_work(kb_dir, tiny_bert_path, tmp_path):
    out = tmp_path / "index"
    result = CliRunner().invoke(app, ["build-index", str(kb_dir), "-m", str(tiny_bert_path), "-o", str(out),
                                      "--compile", "--runtime", "onnx"])
    message = result.output + str(result.exception)
    assert result.exit_code == 1 and "SB-E831" in message, message
    assert not out.exists()


@pytest.mark.parametrize("compile", [True, False])
def test_build_index_compiles_the_encoder_only_when_asked(kb_dir, tiny_bert_path, tmp_path, compile_calls,
                                                          compile):
    index = build_index_dir(kb_dir, str(tiny_bert_path), tmp_path / "index", kind="exact", device="cpu",
                            runtime="auto", compile=compile, show_progress=False)
    assert len(compile_calls) == (1 if compile else 0)
    assert index.meta["n_names"] == len(NAMES)


def test_the_command_line_passes_compile_on(kb_dir, tiny_bert_path, tmp_path, compile_calls):
    out = tmp_path / "index"
    result = CliRunner().invoke(app, ["build-index", str(kb_dir), "-m", str(tiny_bert_path), "-o", str(out),
                                      "--compile", "--device", "cpu", "--kind", "exact"])
    assert result.exit_code == 0, result.output + str(result.exception)
    assert len(compile_calls) == 1 and (out / "index_meta.json").exists()


def test_a_ray_actor_compiles_its_own_encoder(kb_dir, tiny_bert_path, compile_calls):
    from spacy_sapbert.index.ray_build import EncodeChunks

    enc = Encoder.load(tiny_bert_path, device="cpu")
    torch_options = {"pooling": "cls", "max_length": 25, "device": "cpu", "precision": "fp32"}
    assert ray_encoder_options(enc, torch_options) == torch_options
    enc._compiled = object()  # what compile() leaves (the spy leaves none)
    options = ray_encoder_options(enc, torch_options)
    assert options == dict(torch_options, compile=True)
    actor = EncodeChunks(str(kb_dir), str(tiny_bert_path), options, batch_size=4, threads=1)
    assert compile_calls == [actor.enc] and actor.enc.fingerprint == enc.fingerprint


def test_a_failed_compile_is_e835_naming_the_encoder(tiny_bert_path):
    from torch._dynamo.exc import BackendCompilerFailed

    enc = Encoder.load(tiny_bert_path, device="cpu", cache_size=0)
    eager = enc.encode(NAMES[:3])

    def fails(**batch):
        raise BackendCompilerFailed("inductor", RuntimeError("InvalidCxxCompiler: No working C++ compiler found"), None)

    enc._compiled = fails
    assert enc.compiled
    with pytest.raises(ConfigError, match=r"SB-E835.*tiny.*on cpu.*C\+\+ compiler"):
        enc.encode(NAMES[:3])
    enc._compiled = None
    numpy.testing.assert_array_equal(enc.encode(NAMES[:3]), eager)


@pytest.mark.slow
def test_a_compiled_encoder_gives_the_eager_vectors_and_builds_the_same_index(kb_dir, tiny_bert_path, tmp_path):
    enc = Encoder.load(tiny_bert_path, device="cpu", pooling="mean", cache_size=0)
    eager = enc.encode(NAMES, batch_size=3)
    assert bulk_encoder(enc, "torch", "fp32", tmp_path / "unused", compile=True) is enc and enc.compiled
    numpy.testing.assert_allclose(enc.encode(NAMES, batch_size=3), eager, atol=1e-5)
    numpy.testing.assert_allclose(enc.encode(NAMES[::-1], batch_size=2), eager[::-1], atol=1e-5)  # other shapes
    built = {}
    for compile in (False, True):
        build_index_dir(kb_dir, str(tiny_bert_path), tmp_path / f"index{compile}", kind="exact", device="cpu",
                        runtime="torch", pooling="mean", compile=compile, show_progress=False)
        built[compile] = ConceptIndex.from_disk(tmp_path / f"index{compile}", KnowledgeBase.from_disk(kb_dir))
    numpy.testing.assert_allclose(built[True].name_vectors(range(len(NAMES))), built[False].name_vectors(range(len(NAMES))),
                                  atol=1e-5)


@pytest.mark.slow
def test_no_cpp_compiler_is_e835(tiny_bert_path, monkeypatch):
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config.cpp, "cxx", (None, "/nonexistent/g++"))
    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    enc = Encoder.load(tiny_bert_path, device="cpu", cache_size=0).compile()
    with pytest.raises(ConfigError, match=r"SB-E835.*InvalidCxxCompiler"):
        enc.encode(["influenza"])


@pytest.mark.gpu
def test_a_compiled_encoder_on_a_gpu_gives_the_eager_vectors(tiny_bert_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    eager = Encoder.load(tiny_bert_path, device="cpu", cache_size=0).encode(NAMES)
    for precision, atol in (("fp32", 1e-4), ("auto", 2e-2)):
        enc = Encoder.load(tiny_bert_path, device="cuda", precision=precision, cache_size=0).compile()
        numpy.testing.assert_allclose(enc.encode(NAMES, batch_size=4), eager, atol=atol)
