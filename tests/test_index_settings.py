"""IndexSettings: one typed object for building an index, its defaults, checks and round trip, and every door
(ConceptIndex.build / from_vectors, build-index, create-pipeline, the linker's initialize and its config) passing
each setting down to the index it builds."""
from __future__ import annotations

import json

import numpy
import pytest
import spacy
from helpers import write_toy_kb
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.commands.pipeline import build_index_dir, create_pipeline
from spacy_sapbert.errors import ConfigError
from spacy_sapbert.index import DEFAULT_EF_CONSTRUCTION, DEFAULT_EF_SEARCH, DEFAULT_M, META_FILE, ConceptIndex
from spacy_sapbert.index import IndexSettings
from spacy_sapbert.index.settings import DEFAULTS, FIELDS, IVF_RESCORE
from spacy_sapbert.kb import Concept, KnowledgeBase

DIM = 16


class _Enc:
    fingerprint, dim, pooling, max_length, name = "synthetic", DIM, "cls", 25, "synthetic"


@pytest.fixture(scope="module")
def small():
    rng = numpy.random.default_rng(7)
    concepts = [Concept(f"C{c:03d}", f"name {c}", (f"alias {c}",), ("T1",), "") for c in range(100)]
    kb = KnowledgeBase.from_concepts(concepts)
    X = rng.normal(size=(len(kb.names), DIM)).astype(numpy.float32)
    return kb, X / numpy.linalg.norm(X, axis=1, keepdims=True)


def test_defaults_live_in_one_place():
    s = IndexSettings()
    assert s == DEFAULTS and s.kind == "auto" and s.exact is None
    assert (s.M, s.ef_construction) == (DEFAULT_M, DEFAULT_EF_CONSTRUCTION) == (32, 200)
    assert (s.ef_search, s.rescore, s.lists) == (None, None, None) and DEFAULT_EF_SEARCH == 200 and IVF_RESCORE == 512
    assert (s.num_threads, s.seed, s.languages, s.sparse, s.sparse_ngrams) == (1, 100, None, False, (2, 3))
    with pytest.raises(Exception):  # frozen
        s.M = 8  # type: ignore[misc]


@pytest.mark.parametrize("options,code", [
    ({"kind": "compact"}, "E124"), ({"kind": "annoy"}, "E124"), ({"M": 1}, "E111"), ({"M": "32"}, "E834"),
    ({"M": True}, "E834"), ({"ef_construction": 0}, "E111"), ({"ef_search": 0}, "E111"),
    ({"ef_search": 10 ** 12}, "E559"), ({"rescore": 0}, "E111"), ({"rescore": 1.5}, "E834"), ({"lists": -1}, "E111"),
    ({"num_threads": 0}, "E111"), ({"seed": -1}, "E111"), ({"exact": "yes"}, "E834"), ({"sparse": 1}, "E834"),
    ({"sparse_ngrams": (3, 2)}, "E780"), ({"sparse_ngrams": "2,3"}, "E780"), ({"languages": "en"}, "E834"),
    ({"languages": ["en", 3]}, "E834"), ({"depth": 3}, "E833"),
])
def test_bad_settings_are_coded_errors_when_made(options, code):
    with pytest.raises(ConfigError, match=rf"\[SB-{code}\]"):
        IndexSettings.of(None, **options)


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"SB-E833.*ef_serach in the index settings.*kind, exact, M"):
        IndexSettings.from_dict({"ef_serach": 3})
    with pytest.raises(ConfigError, match=r"SB-E833.*candidate_dims"):  # a compact-only option, gone with it
        IndexSettings().replace(candidate_dims=0)
    with pytest.raises(ConfigError, match=r"SB-E834"):
        IndexSettings.from_dict(["kind", "ivf"])  # type: ignore[arg-type]


def test_dict_round_trip_through_json():
    s = IndexSettings(kind="ivf", ef_search=64, rescore=128, lists=16, num_threads=2, seed=3, languages=("es", "en"),
                      sparse=True, sparse_ngrams=(1, 4))
    data = json.loads(json.dumps(s.to_dict()))
    assert set(data) == set(FIELDS) and data["languages"] == ["es", "en"] and data["sparse_ngrams"] == [1, 4]
    assert IndexSettings.from_dict(data) == s
    assert IndexSettings.of(data) == s and IndexSettings.of(s, M=8) == s.replace(M=8) != s
    assert IndexSettings(languages=[]).languages is None  # an empty list means no restriction


def test_from_vectors_builds_what_the_settings_say(small):
    kb, X = small
    hnsw = ConceptIndex.from_vectors(kb, X, _Enc(), IndexSettings(kind="hnsw", M=8, ef_construction=40, ef_search=17),
                                     show_progress=False)
    assert (hnsw.kind, hnsw.meta["M"], hnsw.meta["ef_construction"], hnsw.meta["ef_search"]) == ("hnsw", 8, 40, 17)
    same = ConceptIndex.from_vectors(kb, X, _Enc(), kind="hnsw", M=8, ef_construction=40, ef_search=17,
                                     show_progress=False)  # keywords: the same settings
    assert same.meta["M"] == 8 and same.search(X[:5], 3) == hnsw.search(X[:5], 3)
    ivf = ConceptIndex.from_vectors(kb, X, _Enc(), IndexSettings(kind="ivf", lists=8, rescore=20, ef_search=3),
                                    show_progress=False)
    assert (ivf.meta["lists"], ivf.meta["rescore"], ivf.meta["ef_search"]) == (8, 20, 3)
    sparse = ConceptIndex.from_vectors(kb, X, _Enc(), IndexSettings(kind="exact", sparse=True, sparse_ngrams=(1, 2)),
                                       show_progress=False)
    assert sparse.sparse is not None and tuple(sparse.sparse.meta["ngram_range"]) == (1, 2)
    assert ConceptIndex.from_vectors(kb, X, _Enc(), exact=False, show_progress=False).kind == "hnsw"
    with pytest.raises(ConfigError, match="SB-E833"):
        ConceptIndex.from_vectors(kb, X, _Enc(), connectivity=48)


def test_languages_setting_becomes_the_default_restriction():
    concepts = [Concept(f"C{i}", f"name {i}", (), ("T",), "", languages=(("es",) if i % 2 else ("en",),))
                for i in range(10)]
    kb = KnowledgeBase.from_concepts(concepts)
    X = numpy.eye(len(kb.names), DIM, dtype=numpy.float32) + 0.01
    X /= numpy.linalg.norm(X, axis=1, keepdims=True)
    index = ConceptIndex.from_vectors(kb, X, _Enc(), languages=["es"], kind="exact")
    assert index.languages == ("es",) and index.meta["languages"] == ["es"]
    assert all(int(c[1:]) % 2 for r in index.search(X, 3) for c, _ in r)


def _kb(tmp_path):
    return write_toy_kb(tmp_path / "kb", "D003", "C004")


def _pipeline_meta(folder):
    return json.loads((folder / "sapbert_linker" / "index" / META_FILE).read_text())


def test_every_door_passes_every_setting_to_the_built_index(tiny_bert_path, tmp_path):
    kb_dir = _kb(tmp_path)
    model = str(tiny_bert_path)
    runner = CliRunner()
    hnsw = ["--M", "8", "--ef-construction", "40", "--ef-search", "17", "--threads", "2", "--sparse",
            "--sparse-ngrams", "1,2"]
    # build-index
    result = runner.invoke(app, ["build-index", str(kb_dir), "-m", model, "-o", str(tmp_path / "ix"), "--device", "cpu",
                                 "--pooling", "mean", "--kind", "hnsw", *hnsw])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "ix" / META_FILE).read_text())
    assert (meta["kind"], meta["M"], meta["ef_construction"], meta["ef_search"]) == ("hnsw", 8, 40, 17)
    assert (tmp_path / "ix" / "sparse_meta.json").exists()
    # create-pipeline (the command): the same options, the index built inside the pipeline
    result = runner.invoke(app, ["create-pipeline", str(tmp_path / "p"), "--kb", str(kb_dir), "-m", model,
                                 "--device", "cpu", "--pooling", "mean", "--runtime", "torch", "--index-kind", "hnsw",
                                 *hnsw])
    assert result.exit_code == 0, result.output
    meta = _pipeline_meta(tmp_path / "p")
    assert (meta["kind"], meta["M"], meta["ef_construction"], meta["ef_search"]) == ("hnsw", 8, 40, 17)
    nlp = spacy.load(tmp_path / "p")
    assert nlp.get_pipe("sapbert_linker").index.sparse is not None
    recorded = nlp.config["initialize"]["components"]["sapbert_linker"]["index_settings"]
    assert recorded == {"kind": "hnsw", "M": 8, "ef_construction": 40, "ef_search": 17, "num_threads": 2,
                        "sparse": True, "sparse_ngrams": [1, 2]}  # the settings that differ from the defaults
    # create_pipeline (the function) with an IndexSettings
    config = {"device": "cpu", "pooling": "mean", "runtime": "torch"}
    create_pipeline(tmp_path / "p2", kb_path=kb_dir, model=model, config=config, show_progress=False,
                    index_settings=IndexSettings(kind="hnsw", M=6, ef_construction=30))
    assert (_pipeline_meta(tmp_path / "p2")["M"], _pipeline_meta(tmp_path / "p2")["ef_construction"]) == (6, 30)
    # initialize from a config: [initialize.components.sapbert_linker.index_settings]
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config=dict(config, model=model))
    nlp.config["initialize"]["components"]["sapbert_linker"] = {
        "kb_path": str(kb_dir), "index_path": str(tmp_path / "ix3"), "show_progress": False,
        "index_settings": {"kind": "hnsw", "M": 4, "ef_construction": 20}}
    nlp.initialize()
    meta = json.loads((tmp_path / "ix3" / META_FILE).read_text())
    assert (meta["kind"], meta["M"], meta["ef_construction"]) == ("hnsw", 4, 20)
    # build_index_dir with keywords
    index = build_index_dir(kb_dir, model, tmp_path / "ix4", kind="hnsw", M=5, device="cpu", pooling="mean",
                            show_progress=False)
    assert index.meta["M"] == 5


def test_bad_settings_fail_at_every_door_before_any_work(tiny_bert_path, tmp_path):
    kb_dir = _kb(tmp_path)
    runner = CliRunner()
    for cmd in (["build-index", str(kb_dir), "-m", str(tiny_bert_path), "-o", str(tmp_path / "x"), "--M", "1"],
                ["create-pipeline", str(tmp_path / "y"), "--kb", str(kb_dir), "-m", str(tiny_bert_path), "--M", "1"]):
        result = runner.invoke(app, cmd)
        out = result.output + str(result.exception)
        assert result.exit_code != 0 and "SB-E111" in out and "M must be >= 2" in out, cmd
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    linker = spacy.blank("en").add_pipe("sapbert_linker", config={"model": "/nonexistent/model"})
    with pytest.raises(ConfigError, match="SB-E833.*connectivity"):  # before the (missing) model is loaded
        linker.initialize(kb_path=str(kb_dir), index_settings={"connectivity": 48})
