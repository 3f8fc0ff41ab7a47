"""The int8 context encoder (``ContextEncoder.quantize``, ``build-prototypes --quantize``): ONNX Runtime over
a dynamically quantized copy of the export. The store records it, loads it so, and the linker re-ranks with
it: the same word, two concepts, two contexts (prototypes built from the very sentences linked later, so the
right concept's best prototype similarity is 1 whatever the weights)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import spacy
from typer.testing import CliRunner

from helpers import linker_nlp, write_toy_kb

from spacy_sapbert.cli import app
from spacy_sapbert.context import ContextEncoder, PrototypeStore, build_prototypes
from spacy_sapbert.encoding.onnx_encoder import INT8_FILE, OnnxEncoder, export_onnx, quantize_export
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import ConfigError, DataFormatError, IntegrityError, MissingInputError
from spacy_sapbert.mentions.datasets import Document, Mention
from spacy_sapbert.kb import KnowledgeBase

from test_context_linker import IDS, T1, T2, linked

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MENTIONS = [(T1, T1.index("MI"), T1.index("MI") + 2), (T2, T2.index("MI"), T2.index("MI") + 2)]


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_bert_path):
    root = tmp_path_factory.mktemp("ctx_int8")
    kb = KnowledgeBase.from_disk(write_toy_kb(root / "kb", *IDS))
    docs = [Document(str(i), t, [Mention("MI", (cid,), s, e)])
            for i, ((t, s, e), cid) in enumerate(zip(MENTIONS, ("D001", "D002")))]
    ctx = ContextEncoder.load(str(tiny_bert_path), pooling="mean", max_length=32, device="cpu")
    quantized = ctx.quantize(root / "encoder_int8")
    build_prototypes(docs, kb, quantized, show_progress=False).to_disk(root / "protos")
    return root


def test_quantize_keeps_the_encoder_and_round_trips(files, tiny_bert_path):
    ctx = ContextEncoder.load(str(tiny_bert_path), pooling="mean", max_length=32, device="cpu")
    q = ContextEncoder.from_disk(files / "encoder_int8", quantized=True)
    assert q.quantized and isinstance(q.encoder, OnnxEncoder) and q.encoder.precision == "int8"
    assert (q.fingerprint, q.dim, q.pooling, q.max_length) == (ctx.fingerprint, ctx.dim, ctx.pooling, 32)
    assert q.settings()["quantized"] is True and "quantized" not in ctx.settings()
    assert q.token_rows(MENTIONS) == ctx.token_rows(MENTIONS)  # the same markers and word pieces
    full, small = ctx.encode(MENTIONS), q.encode(MENTIONS)
    assert small.dtype == np.float32 and np.allclose(np.linalg.norm(small, axis=1), 1.0, atol=1e-5)
    assert (full * small).sum(axis=1).min() > 0.9  # close to float32, not equal
    assert not np.allclose(full, small, atol=1e-6)
    assert q.quantize(files / "unused") is q and not (files / "unused").exists()
    # the context encoder keeps the recipe its benchmarks measured, not the name encoder's default
    recorded = json.loads((files / "encoder_int8" / "onnx_export.json").read_text())
    assert recorded["int8_recipe"] == "dynamic" and recorded["int8_options"]["per_channel"] is False


def test_store_records_and_loads_the_int8_encoder(files):
    store = PrototypeStore.from_disk(files / "protos", device="cpu")
    assert store.meta["encoder"]["quantized"] is True
    assert store.encoder.quantized and isinstance(store.encoder.encoder, OnnxEncoder)
    assert (store.encoder.encoder.folder / INT8_FILE).is_file()
    # the prototypes were encoded by the int8 encoder: encoding the same mentions again gives them back
    again = store.encoder.encode(MENTIONS)
    assert np.allclose(np.sort(np.asarray(store.vectors), axis=0), np.sort(again, axis=0), atol=1e-5)


def test_linker_reranks_with_the_int8_encoder_and_saves_it(tiny_bert_path, files, tmp_path):
    nlp = linker_nlp(tiny_bert_path, files / "kb", prototypes_path=files / "protos", example_names=False,
                     context_weight=0.5, context_fallback="name")
    first, second = linked(nlp, T1), linked(nlp, T2)
    assert (first.kb_id_, second.kb_id_) == ("D001", "D002")
    assert second._.kb_ents[0] == ("D002", pytest.approx(1.0, abs=1e-4))
    nlp.to_disk(tmp_path / "nlp")
    saved = tmp_path / "nlp" / "sapbert_linker" / "prototypes" / "encoder"
    assert (saved / INT8_FILE).is_file()
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("sapbert_linker").prototypes.encoder.quantized
    assert linked(loaded, T2)._.kb_ents == second._.kb_ents
    again = spacy.blank("en")  # the bytes round trip carries the int8 file too
    again.add_pipe("sapbert_linker", config={"device": "cpu", "example_names": False, "context_weight": 0.5,
                                             "context_fallback": "name"})
    again.get_pipe("sapbert_linker").from_bytes(nlp.get_pipe("sapbert_linker").to_bytes())
    assert again.get_pipe("sapbert_linker").prototypes.encoder.quantized
    assert linked(again, T2)._.kb_ents == second._.kb_ents
    # the runtime install (no torch, no transformers: the int8 context encoder reads tokenizer.json) links the same
    from test_lean_runtime import lean_kb_ents

    i = T2.split().index("MI")
    lean = lean_kb_ents(tmp_path / "nlp", T2, [(i, i + 1, "DISEASE")])
    assert lean["tried"] == [] and set(lean["imported"]) <= {"scispacy"}
    assert [cid for cid, _ in lean["kb_ents"][0]] == [cid for cid, _ in second._.kb_ents]
    assert [s for _, s in lean["kb_ents"][0]] == pytest.approx([s for _, s in second._.kb_ents], abs=1e-6)


def test_missing_or_foreign_int8_files_are_coded_errors(files, tmp_path, tiny_bert_path):
    broken = tmp_path / "protos"
    shutil.copytree(files / "protos", broken)
    (broken / "encoder" / INT8_FILE).unlink()
    with pytest.raises(MissingInputError, match="SB-E126"):
        PrototypeStore.from_disk(broken, device="cpu")
    # an int8 file the export record does not know (copied in from elsewhere) is refused the same way
    record = broken / "encoder" / "onnx_export.json"
    meta = json.loads(record.read_text())
    meta.pop("int8")
    record.write_text(json.dumps(meta))
    shutil.copyfile(files / "protos" / "encoder" / INT8_FILE, broken / "encoder" / INT8_FILE)
    with pytest.raises(MissingInputError, match="SB-E126"):
        PrototypeStore.from_disk(broken, device="cpu")
    # a damaged int8 file: its recorded size / hash no longer match
    shutil.rmtree(broken)
    shutil.copytree(files / "protos", broken)
    with open(broken / "encoder" / INT8_FILE, "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(IntegrityError, match="SB-E551"):
        PrototypeStore.from_disk(broken, device="cpu")
    # a plain name-encoder folder (no markers) quantized is not a context encoder; float32 ONNX is refused
    plain = tmp_path / "plain"
    enc = Encoder.load(str(tiny_bert_path), pooling="mean", max_length=16, device="cpu")
    enc.to_disk(plain)
    export_onnx(enc, plain)
    with pytest.raises(ConfigError, match="SB-E600"):
        ContextEncoder(OnnxEncoder(plain))
    quantize_export(plain)
    with pytest.raises(DataFormatError, match="SB-E636"):
        ContextEncoder(OnnxEncoder(plain, quantized=True))
    with pytest.raises(MissingInputError, match="SB-E123"):
        quantize_export(tmp_path / "nothing")


def test_cli_build_prototypes_quantize(tiny_bert_path, files, tmp_path):
    (tmp_path / "train.pubtator").write_text(
        "".join(f"{i}|t|{t}\n{i}|a|\n{i}\t{s}\t{e}\tMI\tDisease\t{cid}\n\n"
                for i, ((t, s, e), cid) in enumerate(zip(MENTIONS, ("D001", "D002")))), encoding="utf8")
    out = tmp_path / "p"
    res = CliRunner().invoke(app, ["build-prototypes", str(tmp_path / "train.pubtator"), "--kb", str(files / "kb"),
                                   "--model", str(tiny_bert_path), "--output", str(out), "--device", "cpu",
                                   "--max-length", "32", "--name-model", "none", "--quantize"])
    assert res.exit_code == 0, res.output
    assert "int8 context encoder" in res.output
    store = PrototypeStore.from_disk(out, device="cpu")
    assert store.encoder.quantized and store.meta["encoder"]["max_length"] == 32
    expected = PrototypeStore.from_disk(files / "protos", device="cpu")
    assert np.allclose(np.asarray(store.vectors), np.asarray(expected.vectors), atol=1e-5)
