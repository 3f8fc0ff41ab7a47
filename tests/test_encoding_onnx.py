"""The ONNX Runtime encoder: same vectors as the torch encoder, stale/missing exports refused, the
linker's ``runtime`` setting, fork safety and a load path that imports neither torch nor transformers."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy
import pytest
import spacy

from helpers import linker_nlp, run_script_or_fail_on_hang, write_toy_kb

from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.base.integrity import file_records
from spacy_sapbert.errors import ConfigError, IntegrityError, MissingExtraError, MissingInputError

pytest.importorskip("onnxruntime", reason="the onnx extra (requirements-dev.txt installs it)")
pytest.importorskip("onnx", reason="the onnx extra (requirements-dev.txt installs it)")

from spacy_sapbert.encoding.onnx_encoder import DATA_FILE, EXPORT_FILE, ONNX_FILE, OnnxEncoder, export_onnx  # noqa: E402

TEXTS = ["Heart attack", "flu", "a", "Acetylsalicylic acid (ASA) poisoning in a child of 3 years and a very long tail",
         "MI", "mitral regurgitation", "zz-top 42", "Heart attack"]

DOCS = [("Aspirin and grippe .", [(0, 1), (2, 3)]), ("Acute heart attack with zzqx .", [(1, 3), (4, 5)]),
        ("nothing here", [])]


def _export(model_path, folder, pooling):
    enc = Encoder.load(model_path, pooling=pooling, device="cpu")
    enc.to_disk(folder)
    export_onnx(enc, folder)
    return enc


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_onnx_vectors_and_token_ids_match_torch(tiny_bert_path, tmp_path, pooling):
    enc = _export(tiny_bert_path, tmp_path / "enc", pooling)
    onnx_enc = OnnxEncoder.from_disk(tmp_path / "enc")
    assert (onnx_enc.fingerprint, onnx_enc.dim, onnx_enc.pooling, onnx_enc.max_length) == \
        (enc.fingerprint, enc.dim, enc.pooling, enc.max_length)
    want_ids = enc.tokenizer(TEXTS, truncation=True, max_length=enc.max_length, padding=False)["input_ids"]
    assert onnx_enc._tokenize(TEXTS) == want_ids
    assert max(len(r) for r in want_ids) == enc.max_length  # the long text was truncated
    got = onnx_enc.encode(TEXTS, batch_size=3, use_cache=False)  # padded batches of mixed lengths
    want = enc.encode(TEXTS, batch_size=3, use_cache=False)
    assert got.dtype == numpy.float32 and got.shape == want.shape
    numpy.testing.assert_allclose(numpy.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    numpy.testing.assert_allclose(got, want, atol=1e-5)
    assert not numpy.allclose(got[0], got[1], atol=1e-3)  # different inputs, different vectors


def test_sessions_plan_no_memory_pattern(tiny_bert_path, tmp_path):
    """Batches change shape every call: the session runs without ONNX Runtime's memory pattern (a lower peak, the
    same vectors: benchmarks/studies/load_path.py onnx), also the one remade after a fork."""
    _export(tiny_bert_path, tmp_path / "enc", "mean")
    enc = OnnxEncoder.from_disk(tmp_path / "enc")
    assert enc._sessions.get().get_session_options().enable_mem_pattern is False
    assert enc._make_session(1).get_session_options().enable_mem_pattern is False


def _spin_entry(session) -> str:
    try:
        return session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
    except RuntimeError:  # never set: ONNX Runtime's default, spinning
        return ""


def test_the_linkers_encoder_does_not_spin_and_encodes_the_same(tiny_bert_path, tmp_path):
    """A saved pipeline's encoder (load_saved_encoder) runs a session whose threads sleep between batches (the
    index search after it gets the cores); a bulk encoder keeps ONNX Runtime's spinning. Same vectors both ways."""
    from spacy_sapbert.encoding.onnx_encoder import load_saved_encoder, quantize_export

    _export(tiny_bert_path, tmp_path / "enc", "mean")
    bulk = OnnxEncoder.from_disk(tmp_path / "enc", cache_size=0)
    linking = load_saved_encoder(tmp_path / "enc", runtime="auto", device="auto", precision="auto")
    assert isinstance(linking, OnnxEncoder) and (bulk.spinning, linking.spinning) == (True, False)
    assert _spin_entry(linking._sessions.get()) == "0"
    assert _spin_entry(bulk._sessions.get()) == ""
    assert _spin_entry(linking._make_session(1)) == "0"  # the session remade after a fork too
    numpy.testing.assert_array_equal(linking.encode(TEXTS, batch_size=3, use_cache=False),
                                     bulk.encode(TEXTS, batch_size=3, use_cache=False))
    quantize_export(tmp_path / "enc")
    int8 = load_saved_encoder(tmp_path / "enc", runtime="auto", device="auto", precision="int8")
    assert int8.precision == "int8" and _spin_entry(int8._sessions.get()) == "0"
    bulk8 = OnnxEncoder.from_disk(tmp_path / "enc", cache_size=0, quantized=True)
    numpy.testing.assert_array_equal(int8.encode(TEXTS, batch_size=3, use_cache=False),
                                     bulk8.encode(TEXTS, batch_size=3, use_cache=False))


def test_token_budget_batches_keep_to_the_row_and_token_budgets():
    from spacy_sapbert.encoding.cached import length_order, token_budget_batches

    rows = [[1] * n for n in (3, 9, 2, 2, 30, 5, 5, 5, 9, 4)]
    order = length_order(rows)
    for size, tokens in [(4, None), (64, 20), (3, 12), (64, 1)]:
        batches = list(token_budget_batches(rows, order, size, tokens))
        assert [i for b in batches for i in b] == order  # every row once, shortest first
        assert all(len(b) <= size for b in batches)
        for b in batches:  # padded to its longest row, within the budget unless a lone row is longer
            assert tokens is None or len(b) * max(len(rows[i]) for i in b) <= tokens or len(b) == 1
    assert [len(b) for b in token_budget_batches(rows, order, 64, 20)] == [4, 3, 2, 1]  # 2,2,3,4 | 5,5,5 | 9,9 | 30
    assert [len(b) for b in token_budget_batches(rows, order, 4, None)] == [4, 4, 2]


def test_onnx_batches_keep_to_the_token_budget_and_give_the_same_vectors(tiny_bert_path, tmp_path):
    """ONNX Runtime's arena grows to a call's largest batch: OnnxEncoder caps a batch at ``batch_tokens`` token
    slots (768) as well as ``batch_size`` rows; the vectors do not depend on how rows are batched."""
    _export(tiny_bert_path, tmp_path / "enc", "mean")
    enc = OnnxEncoder.from_disk(tmp_path / "enc", cache_size=0)
    assert enc.batch_tokens == 768
    texts = [f"disease number {i} " + "long " * (i % 12) for i in range(90)]
    unbounded = OnnxEncoder.from_disk(tmp_path / "enc", cache_size=0)
    unbounded.batch_tokens = None
    want = unbounded.encode(texts, batch_size=64)
    shapes = []
    run = enc._encode_batch
    enc._encode_batch = lambda rows: (shapes.append((len(rows), max(len(r) for r in rows))), run(rows))[1]
    enc.batch_tokens = 60
    got = enc.encode(texts, batch_size=64)
    assert shapes and all(n <= 64 and n * width <= 60 for n, width in shapes) and sum(n for n, _ in shapes) == 90
    numpy.testing.assert_allclose(got, want, atol=1e-5)


def test_export_keeps_the_weights_beside_the_graph(tiny_bert_path, tmp_path):
    """The weights go to model.onnx.data (ONNX external data, which ONNX Runtime maps), recorded with the graph; an
    export written before (the weights inside model.onnx) loads as it did, with the same vectors; a missing or
    truncated weight file is refused at load with a coded error."""
    import onnx

    folder = tmp_path / "enc"
    _export(tiny_bert_path, folder, "mean")
    export = json.loads((folder / EXPORT_FILE).read_text())
    assert set(export["files"]) == {ONNX_FILE, DATA_FILE}
    graph = onnx.load(str(folder / ONNX_FILE), load_external_data=False)
    outside = {t.name: {e.key: e.value for e in t.external_data}.get("location") for t in graph.graph.initializer
               if t.data_location == onnx.TensorProto.EXTERNAL}
    assert outside and set(outside.values()) == {DATA_FILE}  # every weight of 1 KB or more, in that one file
    assert all(len(t.raw_data) < 1024 for t in graph.graph.initializer if t.name not in outside)
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # nothing of the staging left
    want = OnnxEncoder.from_disk(folder).encode(TEXTS, use_cache=False)
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    onnx.save_model(onnx.load(str(folder / ONNX_FILE)), str(old / ONNX_FILE))  # the weights back inside
    (old / DATA_FILE).unlink()
    (old / EXPORT_FILE).write_text(json.dumps(dict(export, files=file_records(old, [ONNX_FILE]))))
    numpy.testing.assert_allclose(OnnxEncoder.from_disk(old).encode(TEXTS, use_cache=False), want, atol=1e-6)
    # exported again over the old layout: the weights beside the graph again, the same vectors
    export_onnx(Encoder.from_disk(old, device="cpu"), old)
    assert set(json.loads((old / EXPORT_FILE).read_text())["files"]) == {ONNX_FILE, DATA_FILE}
    numpy.testing.assert_allclose(OnnxEncoder.from_disk(old).encode(TEXTS, use_cache=False), want, atol=1e-6)
    data = (folder / DATA_FILE).read_bytes()
    (folder / DATA_FILE).write_bytes(data[: len(data) // 2])
    with pytest.raises(IntegrityError, match="SB-E551"):
        OnnxEncoder.from_disk(folder)
    (folder / DATA_FILE).unlink()
    with pytest.raises(IntegrityError, match="SB-E551"):
        OnnxEncoder.from_disk(folder)

def test_stale_and_missing_exports_are_refused(tiny_bert_path, other_tiny_bert_path, tmp_path):
    folder = tmp_path / "enc"
    _export(tiny_bert_path, folder, "mean")
    export = json.loads((folder / EXPORT_FILE).read_text())
    (folder / EXPORT_FILE).write_text(json.dumps(dict(export, fingerprint="0" * 16)))
    with pytest.raises(ConfigError, match="E121"):
        OnnxEncoder(folder)
    # saving other weights into the folder drops the export made from the old ones
    (folder / EXPORT_FILE).write_text(json.dumps(export))
    Encoder.load(other_tiny_bert_path, pooling="mean", device="cpu").to_disk(folder)
    assert not (folder / ONNX_FILE).exists() and not (folder / EXPORT_FILE).exists()
    with pytest.raises(MissingInputError, match="E123"):
        OnnxEncoder(folder)
    # the same weights saved again keep their export
    again = _export(other_tiny_bert_path, folder, "mean")
    again.to_disk(folder)
    assert (folder / ONNX_FILE).exists()


@pytest.fixture(scope="module")
def saved_pipeline(tiny_bert_path, tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx_pipeline")
    nlp = linker_nlp(tiny_bert_path, write_toy_kb(root / "kb"))
    nlp.to_disk(root / "nlp")
    return nlp, root / "nlp"


def _linked(nlp, docs=DOCS):
    out = []
    for text, spans in docs:
        doc = nlp.make_doc(text)
        doc.ents = [spacy.tokens.Span(doc, s, e, label="E") for s, e in spans]
        for _, proc in nlp.pipeline:
            doc = proc(doc)
        out.append([(e.kb_id_, [c for c, _ in e._.kb_ents], [s for _, s in e._.kb_ents]) for e in doc.ents])
    return out


def _same_links(got, want):
    assert [[(k, c) for k, c, _ in doc] for doc in got] == [[(k, c) for k, c, _ in doc] for doc in want]
    for doc_got, doc_want in zip(got, want):
        for (_, _, s_got), (_, _, s_want) in zip(doc_got, doc_want):
            assert s_got == pytest.approx(s_want, abs=1e-5)


def test_saved_pipeline_links_with_onnx_runtime_by_default(saved_pipeline):
    in_memory, path = saved_pipeline
    assert (path / "sapbert_linker" / "encoder" / ONNX_FILE).exists()
    loaded = spacy.load(path)
    assert isinstance(loaded.get_pipe("sapbert_linker").encoder, OnnxEncoder)
    _same_links(_linked(loaded), _linked(in_memory))
    torch_run = spacy.load(path, config={"components": {"sapbert_linker": {"runtime": "torch"}}})
    assert isinstance(torch_run.get_pipe("sapbert_linker").encoder, Encoder)
    _same_links(_linked(torch_run), _linked(in_memory))
    # saved again from the ONNX-run pipeline: the folder is copied, export included, and still loads
    loaded.to_disk(path.parent / "again")
    _same_links(_linked(spacy.load(path.parent / "again")), _linked(in_memory))


def test_runtime_settings_and_their_errors(saved_pipeline, tmp_path, monkeypatch):
    in_memory, path = saved_pipeline
    for bad in ({"runtime": "onnx", "precision": "bf16"}, {"runtime": "onnx", "device": "cuda"}):
        with pytest.raises(ConfigError, match="E122"):
            spacy.load(path, config={"components": {"sapbert_linker": bad}})
    with pytest.raises(ConfigError, match="runtime"):
        spacy.load(path, config={"components": {"sapbert_linker": {"runtime": "tensorrt"}}})
    # bf16 asked for with runtime auto: PyTorch runs it
    bf16 = spacy.load(path, config={"components": {"sapbert_linker": {"precision": "bf16"}}})
    assert isinstance(bf16.get_pipe("sapbert_linker").encoder, Encoder)
    # a pipeline saved with runtime='torch' has no export: auto falls back, 'onnx' says what to do
    in_memory.get_pipe("sapbert_linker").cfg["runtime"] = "torch"
    try:
        in_memory.to_disk(tmp_path / "torch_only")
    finally:
        in_memory.get_pipe("sapbert_linker").cfg["runtime"] = "auto"
    assert not (tmp_path / "torch_only" / "sapbert_linker" / "encoder" / ONNX_FILE).exists()
    assert isinstance(spacy.load(tmp_path / "torch_only").get_pipe("sapbert_linker").encoder, Encoder)
    with pytest.raises(MissingInputError, match="E123"):
        spacy.load(tmp_path / "torch_only", config={"components": {"sapbert_linker": {"runtime": "onnx"}}})
    # without onnxruntime, auto runs PyTorch
    monkeypatch.setattr("spacy_sapbert.encoding.onnx_encoder.onnxruntime_available", lambda: False)
    assert isinstance(spacy.load(path).get_pipe("sapbert_linker").encoder, Encoder)


class _SetEnts:
    def __call__(self, doc):
        doc.ents = [spacy.tokens.Span(doc, s, e, label="E") for s, e in dict(DOCS)[doc.text]]
        return doc


@spacy.Language.factory("_onnx_test_set_ents")
def _make_set_ents(nlp, name):
    return _SetEnts()


def test_onnx_pipeline_with_two_processes(saved_pipeline):
    _, path = saved_pipeline
    nlp = spacy.load(path)
    nlp.add_pipe("_onnx_test_set_ents", first=True)
    nlp.get_pipe("sapbert_linker").encoder.encode(["warm the session up in the parent"])
    texts = [t for t, _ in DOCS] * 2

    def ents(docs):
        return [[(e.kb_id_, [c for c, _ in e._.kb_ents]) for e in d.ents] for d in docs]

    single = ents(nlp.pipe(texts, batch_size=2))
    assert ents(nlp.pipe(texts, batch_size=2, n_process=2)) == single
    assert single[0][0][0] == "C004"


_FORKED_PIPE = """
import sys
import spacy
from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder

path = sys.argv[1]
nlp = spacy.load(path)
nlp.add_pipe("entity_ruler", first=True).add_patterns([{"label": "E", "pattern": [{"IS_ALPHA": True}]}])
linker = nlp.get_pipe("sapbert_linker")
# a session with a thread pool, used before the fork: what a machine with several cores has by default
linker.set_resources(OnnxEncoder.from_disk(path + "/sapbert_linker/encoder", threads=2), linker.index)
linker.encoder.encode(["warm the session up", "in the parent", "before the fork"], use_cache=False)
linker.encoder.clear_cache()
texts = [f"patient {i} had zzq{c}x and a wob{c}ly heart" for i, c in enumerate("abcdefghijkl")]
assert all(linker.kb.row_of_name(w) < 0 for w in ("patient", "zzqax", "wobaly", "had"))  # the workers encode


def links(docs):
    return [[(e.text, e.kb_id_) for e in doc.ents] for doc in docs]


single = links(nlp.pipe(texts, batch_size=2))
linker.encoder.clear_cache()
assert links(nlp.pipe(texts, batch_size=2, n_process=2)) == single
print("same links", sum(len(d) for d in single))
"""


def test_two_processes_encode_mentions_with_a_session_made_before_the_fork(saved_pipeline, tmp_path):
    """Workers forked after the parent ran a multi-threaded ONNX Runtime session encode mentions that are
    not KB names. Destroying the inherited session in a worker hung (pthread_cond_destroy) or crashed it;
    run in a subprocess with a timeout so that a hang fails the test."""
    _, path = saved_pipeline
    out = run_script_or_fail_on_hang(_FORKED_PIPE, [path], tmp_path, timeout=300,
                                     what="nlp.pipe(n_process=2) with the ONNX encoder")
    assert out.strip().splitlines()[-1] == "same links 84"


_GARBAGE_BEFORE_FORK = """
import gc
import os
import sys
import time

from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder

gc.disable()  # the dropped encoder below stays unreachable garbage until a collection
dropped = [OnnxEncoder.from_disk(sys.argv[1], threads=2)]  # e.g. a pipeline's, replaced by another
dropped[0].encode(["warm the session up"], use_cache=False)
dropped.append(dropped)  # a reference cycle: only the garbage collector frees it
del dropped
time.sleep(1)  # its session's pool threads now wait on their condition variables
pid = os.fork()  # as multiprocessing's fork start method does (nlp.pipe(n_process=2), link-corpus workers)
if pid == 0:
    gc.collect()  # the worker's first collection
    os._exit(0)
os.waitpid(pid, 0)
print("worker collected")
"""


def test_workers_collecting_a_dropped_session_do_not_hang(saved_pipeline, tmp_path):
    """An encoder dropped inside a reference cycle before ``nlp.pipe(n_process=2)`` left its ONNX Runtime session
    to the workers' garbage collection, which waited forever on the session's condition variables (a
    ``link-corpus --n-process 2`` worker hung so in the test suite). The package collects garbage before
    every fork (``spacy_sapbert.base.processes``)."""
    _, path = saved_pipeline
    out = run_script_or_fail_on_hang(_GARBAGE_BEFORE_FORK, [path / "sapbert_linker" / "encoder"], tmp_path,
                                     timeout=180, what="a worker collecting a dropped ONNX Runtime session")
    assert out.strip().splitlines()[-1] == "worker collected"


def test_onnx_encoder_loads_without_torch_or_transformers(saved_pipeline):
    _, path = saved_pipeline
    code = (
        "import sys\n"
        "from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder\n"
        f"enc = OnnxEncoder({str(path / 'sapbert_linker' / 'encoder')!r})\n"
        "v = enc.encode(['heart attack', 'flu'])\n"
        "assert v.shape == (2, enc.dim), v.shape\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_missing_onnx_packages_give_coded_errors(saved_pipeline, tiny_bert_path, tmp_path, monkeypatch):
    _, path = saved_pipeline
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    with pytest.raises(ConfigError, match="E119"):
        spacy.load(path, config={"components": {"sapbert_linker": {"runtime": "onnx"}}})
    assert isinstance(spacy.load(path).get_pipe("sapbert_linker").encoder, Encoder)  # auto falls back
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(MissingExtraError, match=r"E820.*spacy-sapbert\[train\]"):
        export_onnx(Encoder.load(tiny_bert_path, device="cpu"), tmp_path / "enc")


def test_export_onnx_cli_on_a_pipeline_and_an_encoder_folder(saved_pipeline, tiny_bert_path, tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    _, path = saved_pipeline
    encoder_dir = tmp_path / "enc"
    Encoder.load(tiny_bert_path, pooling="mean", device="cpu").to_disk(encoder_dir)
    runner = CliRunner()
    result = runner.invoke(app, ["export-onnx", str(encoder_dir)])
    assert result.exit_code == 0, result.output
    assert OnnxEncoder(encoder_dir).pooling == "mean"
    pipeline = tmp_path / "nlp"
    spacy.load(path, config={"components": {"sapbert_linker": {"runtime": "torch"}}}).to_disk(pipeline)
    assert not (pipeline / "sapbert_linker" / "encoder" / ONNX_FILE).exists()  # runtime torch: no export
    result = runner.invoke(app, ["export-onnx", str(pipeline)])
    assert result.exit_code == 0 and "sapbert_linker" in result.output, result.output
    assert isinstance(spacy.load(pipeline).get_pipe("sapbert_linker").encoder, Encoder)  # its config says torch
    auto = spacy.load(pipeline, config={"components": {"sapbert_linker": {"runtime": "auto"}}})
    assert isinstance(auto.get_pipe("sapbert_linker").encoder, OnnxEncoder)
    result = runner.invoke(app, ["export-onnx", str(tmp_path / "nothing")])
    assert isinstance(result.exception, MissingInputError) and "SB-E104" in str(result.exception)
