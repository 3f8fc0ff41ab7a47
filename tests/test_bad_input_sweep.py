"""Bad input found by a sweep of the newer surfaces (the float16 hnsw graph's folder, abbreviation mining,
tune-hybrid, calibrate, build-index / create-pipeline settings, the name encoder's max_length): each was a raw
traceback or lost an input file; each is now a coded error (or, for a null ``ef_search``, the default)."""
from __future__ import annotations

import json

import numpy
import pytest
from typer.testing import CliRunner

from helpers import unit_rows
from spacy_sapbert.cli import app
from spacy_sapbert.errors import ConfigError, MissingInputError
from spacy_sapbert.index import META_FILE, ConceptIndex, IndexSettings
from spacy_sapbert.kb import Concept, KnowledgeBase

DIM = 8


class _Enc:
    fingerprint, dim, pooling, max_length, name = "synthetic", DIM, "cls", 25, "synthetic"


@pytest.fixture(scope="module")
def kb_and_vectors():
    kb = KnowledgeBase.from_concepts([Concept(f"C{c:03d}", f"name {c}", (f"alias {c}",)) for c in range(40)])
    return kb, unit_rows(numpy.random.default_rng(0).normal(size=(len(kb.names), DIM)))


def _saved(kb, vectors, folder, **options):
    ConceptIndex.from_vectors(kb, vectors, _Enc(), show_progress=False, **options).to_disk(folder)
    return json.loads((folder / META_FILE).read_text())


# ---- index folders ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [{"kind": "exact"}, {"kind": "hnsw"}, {"kind": "hnsw", "hnsw_vectors": "float32"}])
def test_a_null_ef_search_in_index_meta_loads_with_the_default(kb_and_vectors, tmp_path, options):
    """check_meta lets ef_search be null; every load then did int(None): a TypeError."""
    kb, vectors = kb_and_vectors
    meta = _saved(kb, vectors, tmp_path / "ix", **options)
    (tmp_path / "ix" / META_FILE).write_text(json.dumps(dict(meta, ef_search=None)))
    index = ConceptIndex.from_disk(tmp_path / "ix", kb)
    assert index.ef_search == 200
    assert index.search(vectors[:1], 1)[0][0][0] == "C000"
    result = CliRunner().invoke(app, ["verify", str(tmp_path / "ix")])  # verify reads the graph as the load does
    assert result.exit_code == 0 and "DAMAGED" not in result.stdout, result.output


@pytest.mark.parametrize("edit", ["float32", "absent"])
def test_a_float16_graph_whose_meta_says_hnswlib_is_a_coded_error(kb_and_vectors, tmp_path, edit):
    """meta ``vectors`` "float32" (or none: an older hnswlib index) over the float16 graph's files: the load
    looked for names.hnsw and raised FileNotFoundError."""
    kb, vectors = kb_and_vectors
    meta = _saved(kb, vectors, tmp_path / "ix", kind="hnsw")
    assert meta["vectors"] == "float16"
    if edit == "absent":
        meta.pop("vectors")
    else:
        meta["vectors"] = edit
    (tmp_path / "ix" / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(MissingInputError, match=r"SB-E107.*names\.hnsw.*no such file"):
        ConceptIndex.from_disk(tmp_path / "ix", kb)


@pytest.mark.parametrize("name,value", [("M", 10**20), ("M", 5000), ("ef_construction", 10**20),
                                        ("num_threads", 10**20), ("seed", 10**20)])
def test_index_settings_beyond_what_faiss_hnswlib_or_the_meta_take(name, value):
    """M 10**20: faiss TypeError; M 5,000: an index built whose load refused it (E557, M up to 4,096);
    ef_construction, num_threads, seed 10**20: OverflowError / TypeError inside faiss or hnswlib."""
    with pytest.raises(ConfigError, match=f"SB-E559.*{name}"):
        IndexSettings(**{name: value})
    IndexSettings(M=4096, ef_construction=1_000_000, num_threads=8, seed=(1 << 31) - 1)  # the bounds themselves


def test_a_sparse_k_beyond_max_k_is_a_coded_error(kb_and_vectors):
    """sparse_k 10**20 (tune-hybrid --sparse-k, a linker or evaluate config): numpy's 'Maximum allowed
    dimension exceeded' in the sparse search."""
    from spacy_sapbert.evaluation.hybrid import check_tuner_settings
    from spacy_sapbert.index.hybrid import gather
    from spacy_sapbert.index.sparse import SparseIndex
    from spacy_sapbert.linker.settings import LinkerSettings

    kb, vectors = kb_and_vectors
    index = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact", show_progress=False)
    sparse = SparseIndex.from_kb(kb, encoder_fingerprint="synthetic")
    with pytest.raises(ConfigError, match="SB-E559.*sparse_k"):
        gather(index, sparse, ["name 1"], vectors[:1], k=3, sparse_k=10**20)
    with pytest.raises(ConfigError, match="SB-E785.*--sparse-k"):
        check_tuner_settings(10, "score", [], 10**20)
    with pytest.raises(ConfigError, match="SB-E784.*sparse_k"):
        LinkerSettings(sparse_k=1_000_000)
    assert check_tuner_settings(10, "score", [], 20) == []


# ---- the name encoder -------------------------------------------------------------------------------------------
def test_a_max_length_beyond_the_models_positions_is_a_coded_error(tiny_bert_path):
    """The tiny BERT reads 64 positions: --max-length 65 or more gave a RuntimeError in the embeddings at the first
    long name or mention, 10**20 an OverflowError in the tokenizer."""
    from spacy_sapbert.encoding.torch_encoder import Encoder

    long_name = " ".join("abcdefghij" * 15)  # 150 word pieces
    encoder = Encoder.load(tiny_bert_path, max_length=64, device="cpu", pooling="mean")
    assert encoder.encode([long_name]).shape == (1, 32)
    for value in (65, 10**20):
        with pytest.raises(ConfigError, match=r"SB-E131.*max_length = .* \(64, from its max_position_embeddings\)"):
            Encoder.load(tiny_bert_path, max_length=value, device="cpu", pooling="mean")


def test_xlmr_positions_start_after_the_padding_id():
    from transformers import XLMRobertaConfig

    from spacy_sapbert.encoding.torch_encoder import _position_limit

    assert _position_limit(XLMRobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    assert _position_limit(None) == 1 << 20


def test_create_pipeline_index_path_that_is_a_file(tiny_bert_path, toy_kb_path, tmp_path):
    """create-pipeline --index FILE: the names were encoded, then to_disk's mkdir raised FileExistsError."""
    import spacy

    target = tmp_path / "notes.txt"
    target.write_text("mine", encoding="utf8")
    linker = spacy.blank("en").add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu",
                                                                  "pooling": "mean"})
    with pytest.raises(ConfigError, match="SB-E502.*notes.txt"):
        linker.initialize(kb_path=str(toy_kb_path), index_path=str(target), show_progress=False)
    with pytest.raises(ConfigError, match="SB-E505"):
        linker.initialize(kb_path=str(toy_kb_path), index_path=str(target / "ix"), show_progress=False)
    assert target.read_text(encoding="utf8") == "mine"


# ---- calibrate --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option,match", [({"seed": -1}, "SB-E796.*seed"), ({"bins": 10**20}, "SB-E796.*bins"),
                                          ({"bins": 10**8}, "SB-E796.*bins"), ({"output": "FILE"}, "SB-E502"),
                                          ({"output": "FILE/sub"}, "SB-E505")])
def test_calibrate_options_and_output_are_checked_before_the_pipeline_loads(tmp_path, option, match):
    """--seed -1: numpy's ValueError; --bins 10**20: OverflowError (10**8: out of memory); -o FILE: FileExistsError
    (-o FILE/sub: NotADirectoryError), all after the dev set was linked. Now refused first: the pipeline given
    here does not even exist."""
    from spacy_sapbert.evaluation.calibration_fit import calibrate

    (tmp_path / "FILE").write_text("x", encoding="utf8")
    if "output" in option:
        option = {"output": tmp_path / option["output"]}
    with pytest.raises(ConfigError, match=match):
        calibrate(tmp_path / "dev.pubtator", tmp_path / "no-pipeline", **option)


def test_split_documents_refuses_a_negative_seed():
    from spacy_sapbert.evaluation.calibration_fit import split_documents

    with pytest.raises(ConfigError, match="SB-E796.*seed"):
        split_documents(10, 0.3, -1)
    assert split_documents(10, 0.3, 10**30).sum() == 3


# ---- tune-hybrid ------------------------------------------------------------------------------------------------
def test_tune_hybrid_never_writes_over_its_dev_set(tmp_path):
    """-o DEV replaced the dev set with the tuning's JSON after the run (lost data)."""
    dev = tmp_path / "dev.pubtator"
    dev.write_text("1|t|flu\n1|a|\n1\t0\t3\tflu\tDisease\tD003\n\n", encoding="utf8")
    before = dev.read_bytes()
    result = CliRunner().invoke(app, ["tune-hybrid", str(dev), "--kb", str(tmp_path / "kb"), "-m",
                                      str(tmp_path / "model"), "-o", str(dev)])
    assert result.exit_code != 0 and "SB-E503" in str(result.exception), result.output
    assert dev.read_bytes() == before


def test_a_cache_dir_that_is_a_file_is_a_coded_error(tmp_path):
    """tune-hybrid / evaluate --cache-dir FILE: NotADirectoryError at the first save."""
    from spacy_sapbert.evaluation.cache import VectorCache

    (tmp_path / "FILE").write_text("x", encoding="utf8")
    for folder in (tmp_path / "FILE", tmp_path / "FILE" / "sub"):
        with pytest.raises(ConfigError, match="SB-E505"):
            VectorCache(folder, "key")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "key").write_text("x", encoding="utf8")
    with pytest.raises(ConfigError, match="SB-E502"):
        VectorCache(tmp_path / "cache", "key")


# ---- mine-abbreviations -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["txt", "jsonl"])
def test_mine_abbreviations_never_writes_over_a_file_of_an_input_folder(tmp_path, layout):
    """``mine-abbreviations DOCS -o DOCS/a.txt`` replaced the document a.txt with the table (the folder was
    checked, not the files it holds)."""
    pytest.importorskip("scispacy")
    docs = tmp_path / "docs"
    docs.mkdir()
    if layout == "txt":
        source = docs / "a.txt"
        source.write_text("Patients with myotonic dystrophy (DM) were seen.", encoding="utf8")
        outputs = [source, docs / "new.txt"]  # new.txt: a rerun would read the table as a document
    else:
        source = docs / "a.jsonl"
        source.write_text(json.dumps({"id": "1", "text": "myotonic dystrophy (DM)"}) + "\n", encoding="utf8")
        outputs = [source]
    before = source.read_bytes()
    for output in outputs:
        result = CliRunner().invoke(app, ["mine-abbreviations", str(docs), "-o", str(output)])
        assert result.exit_code != 0 and "SB-E503" in str(result.exception), result.output
    assert source.read_bytes() == before
    result = CliRunner().invoke(app, ["mine-abbreviations", str(docs), "-o", str(docs / "table.json")])
    assert result.exit_code == 0, result.output  # a table beside the documents is fine


@pytest.mark.parametrize("options, edit", [({"kind": "hnsw"}, {"vectors": "float32"}),
                                           ({"kind": "hnsw"}, {"kind": "exact", "vectors": None}),
                                           ({"kind": "exact"}, {"kind": "hnsw"})])
def test_verify_refuses_an_index_whose_meta_names_files_it_does_not_record(kb_and_vectors, tmp_path, options, edit):
    """``verify`` checked the recorded files and said OK while the load, reading the files the edited meta names,
    failed; both refuse it now."""
    kb, vectors = kb_and_vectors
    meta = _saved(kb, vectors, tmp_path / "ix", **options)
    meta.update(edit)
    (tmp_path / "ix" / META_FILE).write_text(json.dumps({k: v for k, v in meta.items() if v is not None}))
    with pytest.raises(MissingInputError, match=r"SB-E107"):
        ConceptIndex.from_disk(tmp_path / "ix", kb)
    result = CliRunner().invoke(app, ["verify", str(tmp_path / "ix")])
    assert result.exit_code == 1 and "DAMAGED" in result.stdout and "does not record" in result.stdout, result.output
