"""The ivf index (faiss inverted lists of fast-scan product codes + float16 re-scoring): recall against exact
search, filters, the round trip through plain arrays, and damaged or crafted files refused before faiss sees
them."""
from __future__ import annotations

import json

import numpy
import pytest

from spacy_sapbert.errors import ConfigError, IntegrityError, MissingInputError
from spacy_sapbert.index import META_FILE, ConceptIndex
from spacy_sapbert.index.ivf import (CENTROIDS_FILE, CODES_FILE, IDS_FILE, OFFSETS_FILE, default_lists,
                                     default_probes)
from spacy_sapbert.base.integrity import file_records

from test_index_compact import _Enc, clustered  # noqa: F401  (clustered: the module's fixture)


@pytest.fixture(scope="module")
def built(clustered):  # noqa: F811
    kb, vectors, queries = clustered
    exact = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="exact")
    ivf = ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="ivf", show_progress=False)
    return kb, vectors, queries, exact, ivf


def test_defaults_follow_the_kb_size():
    assert default_lists(1_000_000) == 4096 and default_lists(3_000_000) == 8192
    assert default_lists(10_000_000) == 16384 and default_lists(100) == 12  # at most one cell per 8 names
    assert default_probes(1_000_000, 4096) == 2048 and default_probes(3_000_000, 8192) == 2048
    assert default_lists(64) == 8 and default_probes(64, 8) == 4


def test_ivf_matches_exact_search_and_round_trips(built, tmp_path):
    kb, vectors, queries, exact, ivf = built
    assert ivf.kind == "ivf" and ivf.meta["rescore"] == 512 and ivf.meta["lists"] == default_lists(len(kb.names))
    got, want = ivf.search(queries, 5), exact.search(queries, 5)
    top1 = numpy.mean([g[0][0] == w[0][0] for g, w in zip(got, want)])
    recall5 = numpy.mean([len({c for c, _ in g} & {c for c, _ in w}) / 5 for g, w in zip(got, want)])
    assert top1 >= 0.99 and recall5 >= 0.99
    for g, w in zip(got[:20], want[:20]):  # exact inner products of the float16 vectors, not code estimates
        if g[0][0] == w[0][0]:
            assert abs(g[0][1] - w[0][1]) < 2e-3
    ivf.to_disk(tmp_path / "ix")
    meta = json.loads((tmp_path / "ix" / META_FILE).read_text())
    assert meta["kind"] == "ivf" and set(meta["files"]) >= {CODES_FILE, IDS_FILE, "vectors.f16.npy"}
    assert not [f.name for f in (tmp_path / "ix").iterdir() if f.name.startswith(".")]  # no work file left behind
    on_disk = {name: numpy.load(tmp_path / "ix" / name) for name in (IDS_FILE, CODES_FILE)}
    in_memory = ivf._backend._arrays()  # what a pickle of an index built in memory carries: the same arrays
    assert all(numpy.array_equal(on_disk[name], in_memory[name]) for name in on_disk)
    back = ConceptIndex.from_disk(tmp_path / "ix", kb)
    assert back.kind == "ivf" and back.search(queries, 5) == got
    back.to_disk(tmp_path / "again")  # saved from a loaded index: the same files
    assert ConceptIndex.from_disk(tmp_path / "again", kb).search(queries[:20], 5) == got[:20]
    # pickled (nlp.pipe with n_process under spawn): from its folder, or whole when built in memory
    import pickle

    assert pickle.loads(pickle.dumps(back)).search(queries[:20], 5) == got[:20]
    assert pickle.loads(pickle.dumps(ivf)).search(queries[:20], 5) == got[:20]
    # fewer cells scanned: other (worse) answers; set_ef is the cells scanned
    back.set_ef(1)
    assert back.search(queries, 5) != got


def test_ivf_filters_equal_exact_filters(built):
    kb, _vectors, queries, exact, ivf = built
    for kwargs in ({"semantic_types": ["T1"]}, {"require_definition": True}):
        got, want = ivf.search(queries, 5, **kwargs), exact.search(queries, 5, **kwargs)
        assert all(kb.cui_to_entity[c].types == ("T1",) for r in got for c, _ in r) or "semantic_types" not in kwargs
        agree = numpy.mean([[c for c, _ in g] == [c for c, _ in w] for g, w in zip(got, want)])
        assert agree >= 0.97, kwargs


def _craft(folder, name, array):
    """Replace an array and rewrite its record, as someone handing over a crafted folder would."""
    numpy.save(folder / name, array, allow_pickle=False)
    meta = json.loads((folder / META_FILE).read_text())
    meta["files"].update(file_records(folder, [name]))
    (folder / META_FILE).write_text(json.dumps(meta))


def test_damaged_and_crafted_files_are_refused(built, tmp_path):
    kb, _vectors, queries, _exact, ivf = built
    ivf.to_disk(tmp_path / "ix")
    good = {name: numpy.load(tmp_path / "ix" / name) for name in (CENTROIDS_FILE, IDS_FILE, OFFSETS_FILE, CODES_FILE)}
    path = tmp_path / "ix" / CODES_FILE
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(IntegrityError, match="SB-E551.*size"):
        ConceptIndex.from_disk(tmp_path / "ix", kb)
    path.write_bytes(raw)
    ids = good[IDS_FILE].copy()
    ids[3] = ids[4]  # a row twice (and one missing)
    crafted = [(IDS_FILE, ids, "out of range or repeated"),
               (IDS_FILE, numpy.where(ids == ids.max(), len(kb.names) + 5, good[IDS_FILE]), "out of range"),
               (OFFSETS_FILE, good[OFFSETS_FILE][::-1].copy(), "do not cover"),
               (CODES_FILE, good[CODES_FILE][:-32].copy(), "expected"),
               (CENTROIDS_FILE, numpy.full_like(good[CENTROIDS_FILE], numpy.nan), "not finite")]
    for name, array, why in crafted:
        _craft(tmp_path / "ix", name, array)
        with pytest.raises(MissingInputError, match=f"SB-E107.*{name}.*{why}"):
            ConceptIndex.from_disk(tmp_path / "ix", kb)
        _craft(tmp_path / "ix", name, good[name])
    assert ConceptIndex.from_disk(tmp_path / "ix", kb).search(queries[:5], 5) == ivf.search(queries[:5], 5)
    (tmp_path / "ix" / IDS_FILE).unlink()
    with pytest.raises(IntegrityError, match="SB-E551.*missing"):
        ConceptIndex.from_disk(tmp_path / "ix", kb)


def test_bad_ivf_settings_are_coded_errors(clustered):  # noqa: F811
    kb, vectors, _ = clustered
    with pytest.raises(ConfigError, match="SB-E584"):
        ConceptIndex.from_vectors(kb, vectors, _Enc(), kind="ivf", lists=len(kb.names), show_progress=False)
    from spacy_sapbert.kb import Concept, KnowledgeBase

    small = KnowledgeBase.from_concepts([Concept(f"C{i}", f"n{i}") for i in range(10)])
    with pytest.raises(ConfigError, match="SB-E583"):
        ConceptIndex.from_vectors(small, vectors[:10], _Enc(), kind="ivf", show_progress=False)


def test_build_index_and_linker_with_ivf(tiny_bert_path, tmp_path):
    """`build-index --kind ivf` end to end with an encoder, then a pipeline that links with it, saved and loaded."""
    import spacy
    from spacy.tokens import Doc, Span
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.kb import Concept, KnowledgeBase

    KnowledgeBase.from_concepts([Concept(f"C{i:04d}", f"disease number {i}", (f"syndrome {i}",), ("T1",))
                                 for i in range(200)]).to_disk(tmp_path / "kb")
    runner = CliRunner()
    args = ["build-index", str(tmp_path / "kb"), "--model", str(tiny_bert_path), "--kind", "ivf", "--device", "cpu",
            "--pooling", "mean"]
    res = runner.invoke(app, [*args, "--output", str(tmp_path / "bad"), "--lists", "1000"])
    assert res.exit_code != 0 and "SB-E584" in str(res.exception) and not (tmp_path / "bad").exists()
    res = runner.invoke(app, [*args, "--output", str(tmp_path / "ix"), "--lists", "16"])
    assert res.exit_code == 0, res.output
    assert "(ivf, dim" in res.output
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu", "pooling": "mean",
                                           "threshold": -1.0}).initialize(
        kb_path=str(tmp_path / "kb"), index_path=str(tmp_path / "ix"), show_progress=False)
    doc = nlp.make_doc("the patient has disease number 7 today")
    doc.ents = [Span(doc, 3, 6, label="DISEASE")]
    doc = nlp.get_pipe("sapbert_linker")(doc)
    assert doc.ents[0].kb_id_ == "C0007"  # the exact name: score 1, found by the ivf index
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("sapbert_linker").index.kind == "ivf"
    words = [t.text for t in doc]
    same = Doc(loaded.vocab, words=words, ents=["O", "O", "O", "B-DISEASE", "I-DISEASE", "I-DISEASE", "O"])
    assert loaded.get_pipe("sapbert_linker")(same).ents[0]._.kb_ents == doc.ents[0]._.kb_ents
