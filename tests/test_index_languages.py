"""Searching only the names in some languages (ConceptIndex, build-index, the linker) on one index, and
cross-lingual training pairs."""
from __future__ import annotations

import numpy as np
import pytest
import spacy
from spacy.tokens import Span

from spacy_sapbert.errors import ConfigError, EmptyResultError
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.pairs import PairSet, write_kb_pairs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Enc:
    fingerprint, pooling, max_length, name = "fake", "mean", 25, "fake"

    def __init__(self, dim: int) -> None:
        self.dim = dim


def _concepts(n: int = 60):
    rng = np.random.default_rng(0)
    langs = ["en", "es", "fr", "de"]
    out = []
    for i in range(n):
        names = [f"name {i} {lang} {j}" for lang in langs for j in range(int(rng.integers(0, 3)))] or [f"name {i} en"]
        codes = [(name.split()[2],) for name in names]
        out.append(Concept(f"C{i:03d}", names[0], tuple(names[1:]), languages=tuple(codes)))
    out.append(Concept("C999", "shared name", (), languages=(("es", "en"),)))
    return out


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.from_concepts(_concepts())


def _by_hand(kb, names_vec, queries, langs, k):
    """Exact search restricted by hand: every row in ``langs``, max over a concept's rows, ties by id."""
    mask = kb.row_language_mask(langs)
    scores = queries @ names_vec.T
    out = []
    for q in scores:
        best = {}
        for row in np.flatnonzero(mask):
            for cid in kb.concepts_of_row(int(row)):
                best[cid] = max(best.get(cid, -np.inf), float(q[row]))
        out.append([c for c, _ in sorted(best.items(), key=lambda x: (-x[1], x[0]))[:k]])
    return out


@pytest.mark.parametrize("kind", ["exact", "hnsw", "ivf"])
def test_language_restriction_equals_exact_search_restricted_by_hand(kb, kind, tmp_path):
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(len(kb.names), 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    queries = rng.normal(size=(20, 16)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    index = ConceptIndex.from_vectors(kb, vecs, _Enc(16), kind=kind, show_progress=False)
    for langs in (["es", "en"], ["FRE"], ["de"]):
        got = [[c for c, _ in r] for r in index.search(queries, 5, languages=langs)]
        assert got == _by_hand(kb, vecs, queries, langs, 5), (kind, langs)
    # a default restriction, saved with the index; an explicit one overrides it
    index.set_languages(["es"])
    index.to_disk(tmp_path / "index")
    back = ConceptIndex.from_disk(tmp_path / "index", kb)
    assert back.languages == ("es",)
    assert [[c for c, _ in r] for r in back.search(queries, 3)] == _by_hand(kb, vecs, queries, ["es"], 3)
    assert [[c for c, _ in r] for r in back.search(queries, 3, languages=["en"])] == _by_hand(kb, vecs, queries, ["en"], 3)
    back.set_languages(None)
    every = [[c for c, _ in r] for r in back.search(queries, 3)]
    assert back.languages is None and every == _by_hand(kb, vecs, queries, ["en", "es", "fr", "de"], 3)


def test_language_restriction_errors(kb):
    vecs = np.eye(len(kb.names), 8, dtype=np.float32) + 0.01
    index = ConceptIndex.from_vectors(kb, vecs / np.linalg.norm(vecs, axis=1, keepdims=True), _Enc(8),
                                      kind="exact", show_progress=False)
    with pytest.raises(EmptyResultError, match=r"\[SB-E739\].*\['pt'\].*'en': \d+"):
        index.set_languages(["pt"])
    with pytest.raises(ConfigError, match=r"\[SB-E735\].*'spanish'"):
        index.search(vecs[:1], 3, languages=["spanish"])
    # combined with a type filter: both masks apply
    assert index.search(vecs[:1], 3, languages=["en"], require_definition=False)


def test_linker_languages_setting_is_saved_with_the_pipeline(tiny_bert_path, tmp_path):
    kb_path = tmp_path / "kb"
    KnowledgeBase.from_concepts([
        Concept("C1", "fever", ("fiebre",), languages=(("en",), ("es",))),
        Concept("C2", "fiebre amarilla", ("yellow fever",), languages=(("es",), ("en",))),
        Concept("C3", "headache", ("cefalea",), languages=(("en",), ("es",))),
    ]).to_disk(kb_path)
    cfg = {"model": str(tiny_bert_path), "device": "cpu", "threshold": -1.0, "pooling": "mean",
           "languages": ["SPA"]}
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config=cfg)
    linker.initialize(kb_path=str(kb_path), show_progress=False)
    assert linker.cfg["languages"] == ["es"] and linker.index.languages == ("es",)

    def link(pipeline, text):
        doc = pipeline.make_doc(text)
        doc.ents = [Span(doc, 0, len(doc), label="X")]
        return pipeline.get_pipe("sapbert_linker")(doc).ents[0]._.kb_ents

    vec = linker.encoder.encode(["fever"], batch_size=8)
    expected = linker.index.search(vec, 3, languages=["es"])[0]
    got = link(nlp, "fever")
    assert [c for c, _ in got] == [c for c, _ in expected]
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    assert loaded.get_pipe("sapbert_linker").cfg["languages"] == ["es"]
    assert [c for c, _ in link(loaded, "fever")] == [c for c, _ in got]
    with pytest.raises(ConfigError, match=r"\[SB-E735\]"):
        spacy.blank("en").add_pipe("sapbert_linker", config=dict(cfg, languages=["xx-klingon"]))
    bad = spacy.blank("en").add_pipe("sapbert_linker", config=dict(cfg, languages=["fr"]))
    with pytest.raises(EmptyResultError, match=r"\[SB-E739\]"):
        bad.initialize(kb_path=str(kb_path), show_progress=False)


def test_build_index_languages_default_and_link_in_index_mode(tiny_bert_path, tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.commands.pipeline import load_linking_nlp

    kb_path = tmp_path / "kb"
    KnowledgeBase.from_concepts([Concept("C1", "fever", ("fiebre",), languages=(("en",), ("es",))),
                                 Concept("C2", "cough", ("tos",), languages=(("en",), ("es",)))]).to_disk(kb_path)
    out = tmp_path / "index"
    result = CliRunner().invoke(app, ["build-index", str(kb_path), "-m", str(tiny_bert_path), "-o", str(out),
                                      "--pooling", "mean", "--device", "cpu", "--languages", "es"])
    assert result.exit_code == 0, result.output
    assert ConceptIndex.read_meta(out)["languages"] == ["es"]
    nlp, whole = load_linking_nlp(out, device="cpu")
    assert whole and nlp.get_pipe("sapbert_linker").index.languages == ("es",)
    result = CliRunner().invoke(app, ["build-index", str(kb_path), "-m", str(tiny_bert_path), "-o",
                                      str(tmp_path / "i2"), "--languages", "es,zz"])
    assert result.exit_code != 0 and "SB-E735" in str(result.exception or result.output)


def test_cross_lingual_pairs(kb, tmp_path):
    pairs = write_kb_pairs(kb, tmp_path / "p", cross_lingual=True)
    bits = kb.row_languages()
    rows = np.asarray(pairs.pairs)
    assert len(rows) and np.all((bits[rows[:, 0]] & bits[rows[:, 1]]) == 0)
    # every cross-lingual pair of every concept is there (no cap hit here)
    expected = set()
    for ci, cid in enumerate(kb.concept_ids):
        own = kb.rows_of_concept(cid)
        expected |= {(a, b, ci) for i, a in enumerate(own) for b in own[i + 1:]
                     if kb.languages_of_row(a) and kb.languages_of_row(b)
                     and not set(kb.languages_of_row(a)) & set(kb.languages_of_row(b))}
    assert {tuple(int(x) for x in r) for r in rows} == expected
    assert pairs.meta["cross_lingual"] is True and pairs.meta["n_concepts"] == len({c for _, _, c in expected})
    capped = write_kb_pairs(kb, tmp_path / "cap", cross_lingual=True, max_pairs_per_concept=1, seed=3)
    labels = np.asarray(capped.pairs)[:, 2]
    assert np.bincount(labels).max() == 1 and set(labels.tolist()) == {c for _, _, c in expected}
    assert {tuple(r) for r in np.asarray(capped.pairs).tolist()} <= expected
    again = write_kb_pairs(kb, tmp_path / "cap2", cross_lingual=True, max_pairs_per_concept=1, seed=3)
    assert np.array_equal(np.asarray(again.pairs), np.asarray(capped.pairs))
    only = write_kb_pairs(kb, tmp_path / "es_en", cross_lingual=True, languages=["es", "en"])
    langs = {kb.languages_of_row(int(r)) for r in np.asarray(only.pairs)[:, :2].ravel()}
    assert langs <= {("en",), ("es",), ("en", "es")} and only.meta["languages"] == ["es", "en"]
    mono = KnowledgeBase.from_concepts([Concept("C1", "a", ("b",), languages=(("en",), ("en",)))])
    with pytest.raises(EmptyResultError, match=r"\[SB-E743\]"):
        write_kb_pairs(mono, tmp_path / "none", cross_lingual=True)


def test_pair_settings_in_the_training_config():
    from spacy_sapbert.training.config import load_config

    cfg = load_config(overrides={"pairs.cross_lingual": True, "pairs.languages": ["SPA", "en"]})
    assert cfg.pairs.cross_lingual and cfg.pairs.languages == ["es", "en"]
    with pytest.raises(ConfigError, match=r"\[SB-E735\]"):
        load_config(overrides={"pairs.languages": ["spanish"]})


def test_pretrain_with_cross_lingual_pairs_runs_the_existing_trainer(tiny_bert_path, tmp_path):
    from spacy_sapbert.training.config import load_config
    from spacy_sapbert.training.run import pretrain

    kb = KnowledgeBase.from_concepts([
        Concept(f"C{i}", f"disease {i}", (f"enfermedad {i}", f"maladie {i}"), languages=(("en",), ("es",), ("fr",)))
        for i in range(6)])
    config = load_config(overrides={"pairs.cross_lingual": True, "pairs.languages": ["en", "es"],
                                    "training.batch_size": 4, "training.max_steps": 2, "training.device": "cpu",
                                    "model.pooling": "mean"})
    result = pretrain(kb, str(tiny_bert_path), tmp_path / "run", config=config)
    assert result.steps == 2 and (result.model_path / "config.json").is_file()
    pairs = [(a, b) for a, b, _ in PairSet(tmp_path / "run" / "pairs").iter_pairs(kb)]
    assert len(pairs) == 6 and all({a.split()[0], b.split()[0]} == {"disease", "enfermedad"} for a, b in pairs)
    # a resume with other pair settings is refused
    other = load_config(overrides={"pairs.cross_lingual": False, "training.batch_size": 4, "training.max_steps": 2,
                                   "training.device": "cpu", "model.pooling": "mean"})
    with pytest.raises(ConfigError, match=r"\[SB-E208\].*pairs.cross_lingual"):
        pretrain(kb, str(tiny_bert_path), tmp_path / "run", config=other, resume=True)
