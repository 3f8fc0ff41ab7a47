"""Checksums of saved folders (spacy_sapbert.integrity), damaged files giving coded errors, and `verify`."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import spacy
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import DataFormatError, IntegrityError, SapbertError
from spacy_sapbert.integrity import SAMPLE_BLOCK, SAMPLE_BLOCKS, check_files, file_records
from spacy_sapbert.kb import Concept, KnowledgeBase

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONCEPTS = [
    Concept("D003", "Influenza", ("flu", "grippe"), ("Disease",)),
    Concept("C004", "Aspirin", ("acetylsalicylic acid",), ("Chemical",)),
]


def _flip(path, offset, n=1):
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + n):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


# ---- the integrity module -----------------------------------------------------------------------
def test_file_records_and_checks(tmp_path):
    small = tmp_path / "small.bin"
    small.write_bytes(b"abc" * 100)
    big = tmp_path / "big.bin"
    big.write_bytes(np.random.default_rng(0).integers(0, 256, SAMPLE_BLOCKS * SAMPLE_BLOCK * 3, np.uint8).tobytes())
    records = file_records(tmp_path, ["small.bin", "big.bin"])
    assert set(records) == {"small.bin", "big.bin"}
    assert records["small.bin"]["size"] == 300 and len(records["small.bin"]["sha256"]) == 64
    check_files(tmp_path, records, what="test")
    check_files(tmp_path, records, full=True, what="test")
    # a byte in a sampled block of the big file (the first one): the fast check finds it
    _flip(big, 10)
    with pytest.raises(IntegrityError, match=r"\[SB-E551\].*big.bin.*sample_sha256.*spacy-sapbert verify"):
        check_files(tmp_path, records, what="test")
    _flip(big, 10)
    # a byte between sampled blocks: only the full check finds it
    _flip(big, SAMPLE_BLOCK + 7)
    check_files(tmp_path, records, what="test")
    with pytest.raises(IntegrityError, match=r"big.bin.*sha256"):
        check_files(tmp_path, records, full=True, what="test")
    # the blocks cover every byte of a file up to 1 MiB
    mib = tmp_path / "mib.bin"
    mib.write_bytes(bytes(SAMPLE_BLOCKS * SAMPLE_BLOCK))
    mib_records = file_records(tmp_path, ["mib.bin"])
    for offset in (0, 65_535, 500_001, SAMPLE_BLOCKS * SAMPLE_BLOCK - 1):
        _flip(mib, offset)
        with pytest.raises(IntegrityError, match=r"mib.bin"):
            check_files(tmp_path, mib_records, what="test")
        _flip(mib, offset)
    # small files: truncation and deletion are named
    _flip(small, 150)
    with pytest.raises(IntegrityError, match=r"small.bin"):
        check_files(tmp_path, {"small.bin": records["small.bin"]}, what="test")
    small.write_bytes(b"abc")
    with pytest.raises(IntegrityError, match=r"small.bin.*size 3 bytes, 300 recorded"):
        check_files(tmp_path, {"small.bin": records["small.bin"]}, what="test")
    small.unlink()
    with pytest.raises(IntegrityError, match=r"small.bin.*missing"):
        check_files(tmp_path, {"small.bin": records["small.bin"]}, what="test")


# ---- knowledge bases ------------------------------------------------------------------------------
@pytest.fixture()
def kb_dir(tmp_path):
    path = tmp_path / "kb"
    KnowledgeBase.from_concepts(CONCEPTS).to_disk(path)
    return path


def test_kb_records_files_and_damaged_blob_is_caught_at_load(kb_dir):
    meta = json.loads((kb_dir / "kb.json").read_text())
    assert "name_blob.npy" in meta["files"] and meta["files"]["name_blob.npy"]["size"] > 0
    blob = kb_dir / "name_blob.npy"
    _flip(blob, blob.stat().st_size - 3)  # inside the UTF-8 text of the names
    with pytest.raises(IntegrityError, match=r"\[SB-E551\].*name_blob.npy"):
        KnowledgeBase.from_disk(kb_dir)


def _without_records(kb_dir):
    meta = json.loads((kb_dir / "kb.json").read_text())
    meta.pop("files")
    (kb_dir / "kb.json").write_text(json.dumps(meta))


def test_damaged_kb_blob_without_records_gives_a_coded_error_not_unicode_error(kb_dir):
    _without_records(kb_dir)
    blob = kb_dir / "name_blob.npy"
    _flip(blob, blob.stat().st_size - 3)
    with pytest.warns(UserWarning, match=r"\[SB-W550\]"):
        kb = KnowledgeBase.from_disk(kb_dir)
    with pytest.raises(DataFormatError, match=r"\[SB-E554\].*not UTF-8"):
        list(kb.names)
    with pytest.raises(DataFormatError, match=r"\[SB-E554\]"):
        kb.row_of_name("influenza")


@pytest.mark.parametrize("records", [True, False])
def test_truncated_kb_npy(kb_dir, records):
    if not records:
        _without_records(kb_dir)
    path = kb_dir / "row_ptr.npy"
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.warns(UserWarning) if not records else _nothing():
        with pytest.raises(SapbertError, match=r"\[SB-E55[12]\].*row_ptr.npy"):
            KnowledgeBase.from_disk(kb_dir)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---- encoders -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def enc_dir(tiny_bert_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("integrity_enc") / "enc"
    Encoder.load(tiny_bert_path, pooling="mean", device="cpu").to_disk(path)
    return path


def test_encoder_records_and_checks(enc_dir, tmp_path):
    settings = json.loads((enc_dir / "sapbert_encoder.json").read_text())
    assert {"model.safetensors", "config.json", "vocab.txt"} <= set(settings["files"])
    Encoder.from_disk(enc_dir, device="cpu")
    copy = tmp_path / "enc"
    shutil.copytree(enc_dir, copy)
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(IntegrityError, match=r"\[SB-E551\].*model.safetensors.*size"):
        Encoder.from_disk(copy, device="cpu")


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", json.dumps({"pooling": "mean", "max_length": "25"})])
def test_corrupt_encoder_settings(enc_dir, tmp_path, content):
    copy = tmp_path / "enc"
    shutil.copytree(enc_dir, copy)
    (copy / "sapbert_encoder.json").write_text(content)
    with pytest.raises(DataFormatError, match=r"\[SB-E552\].*sapbert_encoder.json"):
        Encoder.from_disk(copy, device="cpu")


def test_non_finite_vectors_are_refused(enc_dir):
    import torch

    enc = Encoder.from_disk(enc_dir, device="cpu")
    with torch.no_grad():
        enc.model.embeddings.word_embeddings.weight.fill_(float("nan"))
    with pytest.raises(DataFormatError, match=r"\[SB-E553\].*non-finite"):
        enc.encode(["flu"])


# ---- ONNX export and pipelines, verify ------------------------------------------------------------
@pytest.fixture(scope="module")
def pipeline_dir(tiny_bert_path, tmp_path_factory, every_token_ents):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    root = tmp_path_factory.mktemp("integrity_pipeline")
    KnowledgeBase.from_concepts(CONCEPTS).to_disk(root / "kb")
    nlp = spacy.blank("en")
    nlp.add_pipe(every_token_ents)
    cfg = {"model": str(tiny_bert_path), "device": "cpu", "pooling": "mean", "threshold": -1.0}
    nlp.add_pipe("sapbert_linker", config=cfg).initialize(kb_path=str(root / "kb"), show_progress=False)
    nlp.to_disk(root / "pipeline")
    return root / "pipeline"


def test_onnx_export_recorded_and_damage_is_a_coded_error(pipeline_dir, tmp_path):
    assert spacy.load(pipeline_dir)("flu").ents[0].kb_id_ == "D003"
    export = json.loads((pipeline_dir / "sapbert_linker" / "encoder" / "onnx_export.json").read_text())
    assert "model.onnx" in export["files"]
    for damage in ("truncate", "flip"):
        copy = tmp_path / damage
        shutil.copytree(pipeline_dir, copy)
        onnx_file = copy / "sapbert_linker" / "encoder" / "model.onnx"
        if damage == "truncate":
            onnx_file.write_bytes(onnx_file.read_bytes()[: onnx_file.stat().st_size // 2])
        else:
            _flip(onnx_file, onnx_file.stat().st_size // 2, 200)
        with pytest.raises(IntegrityError, match=r"\[SB-E551\].*model.onnx"):
            spacy.load(copy)


def test_damaged_onnx_without_records_is_a_coded_error(pipeline_dir, tmp_path):
    copy = tmp_path / "old"
    shutil.copytree(pipeline_dir, copy)
    enc = copy / "sapbert_linker" / "encoder"
    export = json.loads((enc / "onnx_export.json").read_text())
    export.pop("files")
    (enc / "onnx_export.json").write_text(json.dumps(export))
    onnx_file = enc / "model.onnx"
    onnx_file.write_bytes(onnx_file.read_bytes()[:1000])
    with pytest.warns(UserWarning, match=r"\[SB-W550\]"), pytest.raises(DataFormatError, match=r"\[SB-E552\].*model.onnx"):
        spacy.load(copy)


def test_verify_command(pipeline_dir, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["verify", str(pipeline_dir)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(line.startswith("OK") for line in lines)
    for name in ("model.safetensors", "model.onnx", "name_blob.npy"):
        assert any(line.split()[1].rstrip(":").endswith(name) for line in lines), name
    assert any("/index/" in line for line in lines)
    for sub in ("encoder", "kb", "index"):  # each kind of folder on its own
        part = runner.invoke(app, ["verify", str(pipeline_dir / "sapbert_linker" / sub)])
        assert part.exit_code == 0 and part.stdout.strip(), part.output
    copy = tmp_path / "damaged"
    shutil.copytree(pipeline_dir, copy)
    _flip(copy / "sapbert_linker" / "encoder" / "model.safetensors", 5000)
    index_file = next(p for p in (copy / "sapbert_linker" / "index").iterdir() if p.name != "index_meta.json")
    index_file.write_bytes(index_file.read_bytes()[:-8])
    result = runner.invoke(app, ["verify", str(copy)])
    assert result.exit_code == 1
    damaged = [line for line in result.stdout.splitlines() if line.startswith("DAMAGED")]
    assert len(damaged) == 2 and "model.safetensors" in damaged[0] + damaged[1] and index_file.name in "".join(damaged)
    nothing = runner.invoke(app, ["verify", str(tmp_path)])
    assert isinstance(nothing.exception, DataFormatError) and "SB-E555" in str(nothing.exception)
