"""Checksums of saved folders (spacy_sapbert.base.integrity), damaged files giving coded errors, and `verify`."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import spacy
from typer.testing import CliRunner

from helpers import linker_nlp, write_toy_kb

from spacy_sapbert.cli import app
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import DataFormatError, IntegrityError, SapbertError
from spacy_sapbert.base.integrity import SAMPLE_BLOCK, SAMPLE_BLOCKS, check_files, file_records
from spacy_sapbert.kb import Concept, KnowledgeBase

pytestmark = pytest.mark.usefixtures("one_torch_thread")

IDS = ("D003", "C004")  # the toy KB's influenza and aspirin


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
    return write_toy_kb(tmp_path / "kb", *IDS)


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
    nlp = linker_nlp(tiny_bert_path, write_toy_kb(root / "kb", *IDS))
    nlp.add_pipe(every_token_ents, first=True)
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


def _with_extras(pipeline_dir, folder):
    """A copy of ``pipeline_dir`` whose linker also carries a calibration, an abbreviation table and a re-ranker
    folder (files and records only: ``verify`` reads no model)."""
    from spacy_sapbert.calibration.model import fit
    from spacy_sapbert.mentions.abbreviation_table import AbbreviationTable, Entry
    from spacy_sapbert.rerank.model import META_FILE

    shutil.copytree(pipeline_dir, folder)
    linker = folder / "sapbert_linker"
    x = np.random.default_rng(0).normal(size=(40, 2))
    fit(x, (x[:, 0] > 0).tolist(), ("top_score", "margin"), kb_checksum="kb", encoder_fingerprint="enc").to_disk(
        linker / "calibration.json")
    AbbreviationTable({"FL": Entry("flu", 2, 2)}).to_disk(linker / "abbreviations.json")
    reranker = linker / "reranker"
    reranker.mkdir()
    (reranker / "model.onnx").write_bytes(bytes(range(256)) * 64)
    (reranker / "tokenizer.json").write_text("{}")
    meta = {"format_version": 1, "max_length": 48, "kb_checksum": "kb", "encoder_fingerprint": "enc",
            "inputs": ["input_ids", "attention_mask"], "files": file_records(reranker, ["tokenizer.json"]),
            "onnx_files": file_records(reranker, ["model.onnx"])}
    (reranker / META_FILE).write_text(json.dumps(meta))
    return linker


def test_verify_checks_the_calibration_table_and_reranker_of_a_pipeline(pipeline_dir, tmp_path):
    runner = CliRunner()
    linker = _with_extras(pipeline_dir, tmp_path / "full")
    result = runner.invoke(app, ["verify", str(tmp_path / "full")])
    assert result.exit_code == 0, result.output
    checked = {line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("OK")}
    for name in ("calibration.json", "abbreviations.json", "reranker/model.onnx", "reranker/tokenizer.json"):
        assert str(linker / name) in checked, name
    # damage each: an entry of the table, a coefficient of the calibration, a byte of the re-ranker's graph
    table = linker / "abbreviations.json"
    table.write_text(table.read_text().replace('"flu"', '"flux"'))
    calibration = linker / "calibration.json"
    data = json.loads(calibration.read_text())
    data["calibration"]["coef"][0] += 1.0
    calibration.write_text(json.dumps(data))
    _flip(linker / "reranker" / "model.onnx", 100)
    result = runner.invoke(app, ["verify", str(tmp_path / "full")])
    assert result.exit_code == 1
    damaged = "\n".join(line for line in result.stdout.splitlines() if line.startswith("DAMAGED"))
    assert "SB-E798" in damaged and "SB-E791" in damaged and "model.onnx" in damaged and damaged.count("DAMAGED") == 3
    (linker / "reranker" / "sapbert_reranker.json").write_text("[1, 2]")
    result = runner.invoke(app, ["verify", str(tmp_path / "full")])
    assert result.exit_code == 1 and "SB-E802" in result.stdout


# ---- damaged indexes that still linked (issue 30, item 5) -------------------------------------------
class _Enc:
    """What an index checks queries against (no model needed to index given vectors)."""

    fingerprint, dim, pooling, max_length, name = "synthetic", 16, "cls", 25, "synthetic"


def _unit_rows(n, dim=16, seed=0):
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory):
    """100 concepts, 200 names (enough for the ivf index's 64), and their unit vectors."""
    kb = KnowledgeBase.from_concepts([Concept(f"C{c:04d}", f"name {c}", (f"alias {c}",), ("T",)) for c in range(100)])
    return kb, _unit_rows(len(kb.names))


def _rehash(folder):
    """Recompute the records of an index folder, as a forger (or a careless copy tool) would."""
    from spacy_sapbert.index import META_FILE

    meta = json.loads((folder / META_FILE).read_text())
    meta["files"] = file_records(folder, meta["files"])
    (folder / META_FILE).write_text(json.dumps(meta))


_VECTOR_FILE = {"exact": "vectors.npy", "ivf": "vectors.f16.npy", "hnsw": "vectors.f16.npy"}


@pytest.mark.parametrize("kind", ["exact", "ivf", "hnsw"])
@pytest.mark.parametrize("damage", ["x1e30", "zero"])
def test_scaled_or_zero_vectors_with_recomputed_hashes_are_refused_at_load_and_by_verify(small_kb, tmp_path, kind,
                                                                                        damage):
    from spacy_sapbert.errors import MissingInputError
    from spacy_sapbert.index import ConceptIndex

    kb, vectors = small_kb
    folder = tmp_path / kind
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind=kind, show_progress=False).to_disk(folder)
    path = folder / _VECTOR_FILE[kind]
    stored = np.load(path)
    with np.errstate(over="ignore"):  # float16 * 1e30: infinity
        np.save(path, (stored.astype(np.float32) * np.float32(1e30)).astype(stored.dtype) if damage == "x1e30"
                else np.zeros_like(stored))
    _rehash(folder)
    with pytest.raises(MissingInputError, match=r"\[SB-E107\].*not unit length"):
        ConceptIndex.from_disk(folder, kb)
    result = CliRunner().invoke(app, ["verify", str(folder)])
    assert result.exit_code == 1 and "not unit length" in result.stdout, result.output


def test_a_float16_graph_whose_neighbours_were_damaged_and_rehashed_is_refused_by_verify(small_kb, tmp_path):
    from spacy_sapbert.errors import MissingInputError
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.index.hnsw16 import NEIGHBORS_FILE

    kb, vectors = small_kb
    folder = tmp_path / "hnsw"
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="hnsw", show_progress=False).to_disk(folder)
    assert CliRunner().invoke(app, ["verify", str(folder)]).exit_code == 0
    neighbors = np.load(folder / NEIGHBORS_FILE)
    neighbors[7] = 10 ** 6  # a neighbour that does not exist: faiss would read past its arrays
    np.save(folder / NEIGHBORS_FILE, neighbors)
    _rehash(folder)
    with pytest.raises(MissingInputError, match=r"\[SB-E107\].*neighbour id is out of range"):
        ConceptIndex.from_disk(folder, kb)
    result = CliRunner().invoke(app, ["verify", str(folder)])
    assert result.exit_code == 1 and "neighbour id is out of range" in result.stdout, result.output


def test_flipped_bytes_in_an_unsampled_block_of_an_exact_index_never_link(tmp_path):
    """The issue's case: 64 bytes flipped where the load's sampled hash does not look linked with 120.3."""
    from spacy_sapbert.errors import MissingInputError
    from spacy_sapbert.index import ConceptIndex

    kb = KnowledgeBase.from_concepts([Concept(f"C{c:05d}", f"name {c}") for c in range(20_000)])
    vectors = _unit_rows(len(kb.names), seed=3)  # 1.3 MB: more than the 16 sampled blocks of 64 KiB
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact").to_disk(tmp_path / "ix")
    path = tmp_path / "ix" / "vectors.npy"
    block_1 = (path.stat().st_size - SAMPLE_BLOCK) // (SAMPLE_BLOCKS - 1)  # where the second sampled block starts
    assert block_1 - SAMPLE_BLOCK > 1000
    offset = (SAMPLE_BLOCK + block_1) // 2  # between the first two sampled blocks: the load's hash does not see it
    _flip(path, offset, 64)
    with pytest.raises(MissingInputError, match=r"\[SB-E107\].*vectors.npy.*not unit length"):
        ConceptIndex.from_disk(tmp_path / "ix", kb)
    verdict = CliRunner().invoke(app, ["verify", str(tmp_path / "ix")])
    assert verdict.exit_code == 1 and "DAMAGED" in verdict.stdout


def test_scores_outside_minus_one_one_never_leave_an_index(small_kb):
    """The guard behind every search: an index whose vectors were never checked (built in memory from bad
    vectors) gives E556, not a link; queries that are not unit length are the caller's E562."""
    from spacy_sapbert.errors import ConfigError
    from spacy_sapbert.index import ConceptIndex

    kb, vectors = small_kb
    index = ConceptIndex.from_vectors(kb, vectors * 120, _Enc(), kind="exact")
    with pytest.raises(IntegrityError, match=r"\[SB-E556\].*the index at '<memory>'"):
        index.search(vectors[:3], 5)
    with pytest.raises(IntegrityError, match=r"\[SB-E556\]"):
        index.name_vectors([0])  # a mention that is a KB name reuses this vector as its query
    good = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact")
    with pytest.raises(ConfigError, match=r"\[SB-E562\].*norm 3"):
        good.search(vectors[:2] * 3, 5)
    assert all(-1.0 <= s <= 1.0 + 1e-5 for hits in good.search(vectors[:3], 5) for _, s in hits)


# ---- index_meta.json edited (issue 30, item 6) --------------------------------------------------------
@pytest.mark.parametrize("kind", ["exact", "hnsw", "ivf"])
@pytest.mark.parametrize("field,value", [("ef_search", 10**12), ("ef_search", -1), ("ef_search", 1.5),
                                         ("ef_search", True), ("n_names", "1214x"), ("dim", "16"), ("kind", "flat"),
                                         ("files", {"/etc/passwd": {"size": 1}}), ("file", "../x"), ("M", "32")])
def test_edited_index_meta_is_a_coded_error_at_load_and_in_verify(small_kb, tmp_path, kind, field, value):
    from spacy_sapbert.errors import MissingInputError
    from spacy_sapbert.index import META_FILE, ConceptIndex

    kb, vectors = small_kb
    folder = tmp_path / kind
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind=kind, show_progress=False).to_disk(folder)
    meta = json.loads((folder / META_FILE).read_text())
    (folder / META_FILE).write_text(json.dumps({**meta, field: value}))
    with pytest.raises(MissingInputError, match=rf"\[SB-E557\].*'{field}'"):
        ConceptIndex.from_disk(folder, kb)
    result = CliRunner().invoke(app, ["verify", str(folder)])
    assert result.exit_code == 1 and "SB-E557" in result.stdout, result.output


def test_index_meta_that_is_not_json_names_the_right_fix(small_kb, tmp_path):
    from spacy_sapbert.index import META_FILE, ConceptIndex

    kb, vectors = small_kb
    ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact").to_disk(tmp_path / "ix")
    (tmp_path / "ix" / META_FILE).write_text("{broken")
    result = CliRunner().invoke(app, ["verify", str(tmp_path / "ix")])
    assert isinstance(result.exception, DataFormatError), result.output
    assert "SB-E552" in str(result.exception) and "encoder" not in str(result.exception)
    assert "rebuild the index" in str(result.exception)


def test_set_ef_and_k_have_an_upper_bound(small_kb):
    from spacy_sapbert.errors import ConfigError
    from spacy_sapbert.index import ConceptIndex

    kb, vectors = small_kb
    index = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact")
    with pytest.raises(ConfigError, match=r"\[SB-E559\].*ef_search"):
        index.set_ef(10**12)
    for k in (10**20, 2.5):
        with pytest.raises(ConfigError, match=r"\[SB-E559\].*\bk\b"):
            index.search(vectors[:1], k)
        with pytest.raises(ConfigError, match=r"\[SB-E559\]"):
            index.search_names(vectors[:1], k)


# ---- records naming paths outside the folder (issue 30, item 7) ------------------------------------
@pytest.mark.parametrize("name", ["/etc/passwd", "../outside.bin", "a/../../outside.bin"])
def test_verify_never_reads_a_path_outside_the_folder(kb_dir, tmp_path, monkeypatch, name):
    import spacy_sapbert.base.integrity as integrity

    (tmp_path / "outside.bin").write_bytes(b"secret")
    meta = json.loads((kb_dir / "kb.json").read_text())
    meta["files"][name] = {"size": 6, "sha256": "0" * 64, "sample_sha256": "0" * 64}
    (kb_dir / "kb.json").write_text(json.dumps(meta))
    read = []
    real = integrity.file_sha256
    monkeypatch.setattr(integrity, "file_sha256", lambda p: read.append(str(p)) or real(p))
    result = CliRunner().invoke(app, ["verify", str(kb_dir)])
    assert result.exit_code == 1
    assert any(line.startswith("DAMAGED") and "outside the folder" in line for line in result.stdout.splitlines())
    assert all(str(kb_dir.resolve()) in str(__import__("pathlib").Path(p).resolve()) for p in read), read


# ---- prototype stores: records, lengths, similarities (issue 30, items 5 and 6) --------------------
class _CtxEnc:
    """A stand-in for a context encoder's identity in hand-built stores."""

    dim, pooling, max_length, fingerprint = 16, "mean", 64, "hand"

    def settings(self):
        return {"dim": 16, "pooling": "mean", "max_length": 64, "fingerprint": "hand", "name": "hand"}


def _store(tmp_path, n=40):
    from spacy_sapbert.context import PrototypeStore

    concepts = [f"C{i % 10:04d}" for i in range(n)]
    store = PrototypeStore.from_rows(_unit_rows(n, seed=7), concepts, [0] * n, encoder=_CtxEnc(), kb_checksum="x")
    store.encoder = None  # the identity is in the meta; no encoder folder to write
    store.to_disk(tmp_path / "p")
    return tmp_path / "p"


def test_prototype_store_records_its_files_and_load_checks_them(tmp_path):
    from spacy_sapbert.context import PrototypeStore

    folder = _store(tmp_path)
    meta = json.loads((folder / "prototypes_meta.json").read_text())
    assert sorted(meta["files"]) == ["concept_ids.npy", "kinds.npy", "offsets.npy", "vectors.npy"]
    loaded = PrototypeStore.from_disk(folder, load_encoder=False)
    assert loaded.path == folder
    verdict = CliRunner().invoke(app, ["verify", str(folder)])
    assert verdict.exit_code == 0 and verdict.stdout.count("OK") == 4 and "vectors.npy" in verdict.stdout
    _flip(folder / "vectors.npy", 400, 64)
    with pytest.raises(IntegrityError, match=r"\[SB-E551\].*vectors.npy"):
        PrototypeStore.from_disk(folder, load_encoder=False)
    assert CliRunner().invoke(app, ["verify", str(folder)]).exit_code == 1


def test_prototype_store_without_records_warns_and_damaged_vectors_are_refused(tmp_path):
    from spacy_sapbert.context import PrototypeStore

    folder = _store(tmp_path)
    meta = json.loads((folder / "prototypes_meta.json").read_text())
    del meta["files"]  # a store written before the records
    (folder / "prototypes_meta.json").write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match=r"\[SB-W554\].*build-prototypes"):
        PrototypeStore.from_disk(folder, load_encoder=False)
    vectors = np.load(folder / "vectors.npy")
    np.save(folder / "vectors.npy", vectors * np.float32(2e5))  # the scores of ~2e5
    with pytest.warns(UserWarning, match="SB-W554"), pytest.raises(DataFormatError, match=r"\[SB-E558\].*not unit"):
        PrototypeStore.from_disk(folder, load_encoder=False)
    verdict = CliRunner().invoke(app, ["verify", str(folder)])
    assert verdict.exit_code == 1 and "not unit length" in verdict.stdout, verdict.output


def test_prototype_similarities_outside_minus_one_one_are_refused(tmp_path):
    """Damage the load's sample does not see: every similarity a query computes is checked (E556)."""
    from spacy_sapbert.context import PrototypeStore

    folder = _store(tmp_path, n=3000)
    meta = json.loads((folder / "prototypes_meta.json").read_text())
    del meta["files"]
    (folder / "prototypes_meta.json").write_text(json.dumps(meta))
    vectors = np.load(folder / "vectors.npy")
    vectors[1] *= 1e5  # row 1 of 3000 lies between the 1024 rows sampled
    np.save(folder / "vectors.npy", vectors)
    with pytest.warns(UserWarning, match="SB-W554"):
        store = PrototypeStore.from_disk(folder, load_encoder=False)
    concept = store.concept_ids[0]
    with pytest.raises(IntegrityError, match=r"\[SB-E556\].*prototype store"):
        store.similarities(vectors[0], [concept])


@pytest.mark.parametrize("name", ["vectors.npy", "kinds.npy"])
def test_pickle_bearing_prototype_array_is_a_coded_error(tmp_path, name):
    """Refused before too, but by a bare ValueError from numpy: now E558 naming the file."""
    from spacy_sapbert.context import PrototypeStore

    folder = _store(tmp_path)
    np.save(folder / name, np.array([{"x": 1}] * 40, dtype=object), allow_pickle=True)
    meta = json.loads((folder / "prototypes_meta.json").read_text())
    meta["files"] = file_records(folder, meta["files"])  # records rewritten to match
    (folder / "prototypes_meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataFormatError, match=rf"\[SB-E558\].*{name}"):
        PrototypeStore.from_disk(folder, load_encoder=False)
    verdict = CliRunner().invoke(app, ["verify", str(folder)])
    assert verdict.exit_code == 1 and "cannot be read as a plain array" in verdict.stdout, verdict.output


# ---- hints that pointed the wrong way (issue 30, item 7) -------------------------------------------
def test_hints_say_what_is_wrong(tmp_path):
    from spacy_sapbert.corpus.readers import find_shards, read_shard
    from spacy_sapbert.errors import ConfigError
    from spacy_sapbert.base.outputs import check_output

    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ConfigError, match=r"\[SB-E502\]") as refused:
        check_output(tmp_path / "a_file", overwrite=True)
    assert str(refused.value).count("not a folder") == 1  # was "a file, not a folder, not a folder"
    for line in ("{broken", "[1, 2]"):  # not a field problem: no "Pass --text-field"
        (tmp_path / "docs.jsonl").write_text('{"id": "1", "text": "flu"}\n' + line + "\n")
        with pytest.raises(DataFormatError, match=r"\[SB-E552\].*line 2") as bad:
            list(read_shard(find_shards([tmp_path / "docs.jsonl"])[0]))
        assert "--text-field" not in str(bad.value)
