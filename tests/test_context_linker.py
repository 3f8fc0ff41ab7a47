"""Context in the linker, the CLI and the evaluation: the same word, two concepts, two contexts.

Prototypes are built from the very sentences linked later, so the right concept's best prototype
similarity is 1 and the other's is lower, whatever the random weights of the tiny BERT."""
from __future__ import annotations

import json

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span
from typer.testing import CliRunner

from helpers import linker_nlp, write_toy_kb

from spacy_sapbert.cli import app
from spacy_sapbert.context import ContextEncoder, PrototypeStore, build_prototypes
from spacy_sapbert.errors import ConfigError, IncompatibleError
from spacy_sapbert.mentions.datasets import Document, Mention
from spacy_sapbert.kb import KnowledgeBase

pytestmark = pytest.mark.usefixtures("one_torch_thread")

IDS = ("D001", "D002", "D003", "C004")  # the toy KB without C005: "MI" names D001 and D002, one chemical
T1 = "troponin rose sharply after the MI yesterday ."
T2 = "a loud systolic murmur from the MI was heard ."
PUBTATOR = (f"1|t|{T1}\n1|a|\n1\t{T1.index('MI')}\t{T1.index('MI') + 2}\tMI\tDisease\tD001\n\n"
            f"2|t|{T2}\n2|a|\n2\t{T2.index('MI')}\t{T2.index('MI') + 2}\tMI\tDisease\tD002\n\n")


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_bert_path):
    root = tmp_path_factory.mktemp("ctx")
    kb = KnowledgeBase.from_disk(write_toy_kb(root / "kb", *IDS))
    (root / "train.pubtator").write_text(PUBTATOR, encoding="utf8")
    docs = [Document(str(i), t, [Mention("MI", (cid,), t.index("MI"), t.index("MI") + 2)])
            for i, (t, cid) in enumerate(((T1, "D001"), (T2, "D002")))]
    encoder = ContextEncoder.load(str(tiny_bert_path), pooling="mean", device="cpu")
    build_prototypes(docs, kb, encoder, show_progress=False).to_disk(root / "protos")
    return root


def make_nlp(model, files, prototypes=True, **config):
    return linker_nlp(model, files / "kb", prototypes_path=files / "protos" if prototypes else None,
                      **{"example_names": False, **config})


def linked(nlp, text, word="MI", label="DISEASE"):
    doc = nlp.make_doc(text)
    i = [t.text for t in doc].index(word)
    doc.ents = [Span(doc, i, i + 1, label=label)]
    for _, proc in nlp.pipeline:
        doc = proc(doc)
    return doc.ents[0]


def test_same_word_two_contexts_two_concepts(tiny_bert_path, files):
    nlp = make_nlp(tiny_bert_path, files, context_weight=0.5, context_fallback="name")
    first, second = linked(nlp, T1), linked(nlp, T2)
    assert first.kb_id_ == "D001" and second.kb_id_ == "D002"
    # kb_ents keeps its format: (id, float score) best first; the right concept scores 0.5 * 1 + 0.5 * 1
    assert first._.kb_ents[0] == ("D001", pytest.approx(1.0, abs=1e-5))
    assert second._.kb_ents[0] == ("D002", pytest.approx(1.0, abs=1e-5))
    assert all(isinstance(c, str) and isinstance(s, float) for c, s in first._.kb_ents)
    # D003 / C004 have no prototypes: fallback "name" -> their score stays their name score
    name_only = make_nlp(tiny_bert_path, files, prototypes=False)
    plain = dict(linked(name_only, T1)._.kb_ents)
    assert dict(first._.kb_ents)["D003"] == pytest.approx(plain["D003"], abs=1e-5)
    # without prototypes both get D001 (tie on the shared name, broken by id)
    assert linked(name_only, T2).kb_id_ == "D001"
    # context_weight 0: the name-only answer even with prototypes loaded
    assert linked(make_nlp(tiny_bert_path, files, context_weight=0.0), T2).kb_id_ == "D001"


def test_pipe_batches_and_round_trip(tiny_bert_path, files, tmp_path):
    nlp = make_nlp(tiny_bert_path, files)  # the default weights (0.1, fallback 0)
    docs = []
    for text in (T1, T2, T1):
        doc = nlp.make_doc(text)
        i = [t.text for t in doc].index("MI")
        doc.ents = [Span(doc, i, i + 1, label="DISEASE")]
        docs.append(doc)
    out = list(nlp.get_pipe("sapbert_linker").pipe(docs, batch_size=3))
    assert [d.ents[0].kb_id_ for d in out] == ["D001", "D002", "D001"]
    nlp.to_disk(tmp_path / "nlp")
    assert (tmp_path / "nlp" / "sapbert_linker" / "prototypes" / "vectors.npy").exists()
    loaded = spacy.load(tmp_path / "nlp")
    store = loaded.get_pipe("sapbert_linker").prototypes
    assert isinstance(store.vectors, np.memmap)
    assert [linked(loaded, t).kb_id_ for t in (T1, T2)] == ["D001", "D002"]
    assert linked(loaded, T2)._.kb_ents == linked(nlp, T2)._.kb_ents
    again = spacy.blank("en")
    again.add_pipe("sapbert_linker", config={"device": "cpu", "example_names": False})
    again.get_pipe("sapbert_linker").from_bytes(nlp.get_pipe("sapbert_linker").to_bytes())
    assert linked(again, T2).kb_id_ == "D002"


def test_prototypes_of_another_kb_are_refused(tiny_bert_path, files, tmp_path):
    write_toy_kb(tmp_path / "kb3", *IDS[:3])
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu", "pooling": "mean"})
    with pytest.raises(IncompatibleError, match="SB-E606"):
        linker.initialize(kb_path=str(tmp_path / "kb3"), prototypes_path=str(files / "protos"), show_progress=False)


def test_type_priors_in_the_linker(tiny_bert_path, files):
    nlp = make_nlp(tiny_bert_path, files, prototypes=False,
                   type_priors={"CHEMICAL": ["Chemical"], "HEART": ["D001*", "D003*"]})
    assert [c for c, _ in linked(nlp, T1, label="CHEMICAL")._.kb_ents] == ["C004"]
    heart = linked(nlp, T2, label="HEART")._.kb_ents
    assert {c for c, _ in heart} == {"D001", "D003"} and heart[0][0] == "D001"
    # a label without a prior: every concept, as before
    assert len(linked(nlp, T2, label="DISEASE")._.kb_ents) == 4
    with pytest.raises(ConfigError, match="SB-E611"):
        make_nlp(tiny_bert_path, files, prototypes=False, type_priors={"X": ["Drug"]})


@pytest.mark.parametrize("config,code", [
    ({"context_weight": 1.5}, "E608"), ({"context_fallback": "zero"}, "E609"), ({"type_priors": {"X": []}}, "E610"),
])
def test_bad_context_config_is_a_coded_error(config, code):
    nlp = spacy.blank("en")
    with pytest.raises(ConfigError, match=f"SB-{code}"):
        nlp.add_pipe("sapbert_linker", config=config)


def test_numeric_fallback_through_the_config(tiny_bert_path, files):
    nlp = make_nlp(tiny_bert_path, files, context_weight=0.5, context_fallback=0.0)
    scores = dict(linked(nlp, T1)._.kb_ents)
    plain = dict(linked(make_nlp(tiny_bert_path, files, prototypes=False), T1)._.kb_ents)
    assert scores["D003"] == pytest.approx(0.5 * plain["D003"], abs=1e-5)


def test_cli_build_and_tune(tiny_bert_path, files, tmp_path):
    runner = CliRunner()
    out = tmp_path / "p"
    res = runner.invoke(app, ["build-prototypes", str(files / "train.pubtator"), "--kb", str(files / "kb"),
                              "--model", str(tiny_bert_path), "--output", str(out), "--device", "cpu",
                              "--name-pooling", "mean"])
    assert res.exit_code == 0, res.output
    assert "2 prototypes" in res.output and "example names by" in res.output
    assert PrototypeStore.from_disk(out, device="cpu").meta["n_concepts"] == 2
    res = runner.invoke(app, ["build-prototypes", str(files / "train.pubtator"), "--kb", str(files / "kb"),
                              "--model", str(tiny_bert_path), "--output", str(out)])
    assert res.exit_code != 0 and "SB-E003" in str(res.exception)
    grid = tmp_path / "grid.json"
    res = runner.invoke(app, ["tune-context", str(files / "train.pubtator"), "--kb", str(files / "kb"),
                              "--model", str(tiny_bert_path), "--prototypes", str(out), "--pooling", "mean",
                              "--device", "cpu", "--step", "0.5", "--output", str(grid)])
    assert res.exit_code == 0, res.output
    result = json.loads(grid.read_text())
    assert result["mentions"] == 2 and result["best_acc@1"] == 1.0
    assert result["best"]["context_weight"] > 0  # name-only ties "MI" -> D001 for both: 1 of 2
    assert "name-only strict acc@1 50.0" in res.output
    # "MI" is an example mention of both concepts: example names alone leave the tie, context breaks it
    assert {row["example_names"] for row in result["grid"]} == {False, True}
    assert all(row["acc@1"] == 0.5 for row in result["grid"] if row["context_weight"] == 0)
    # tuned at the linker's defaults (ties re-ranked, one sense per document); with --cache-dir the KB names'
    # vectors come from (and go to) evaluate's vector cache, and the result is the same
    assert result["best"]["context_margin"] == 0.0 and result["best"]["one_sense_per_document"] is True
    assert all(row["context_margin"] == 0.0 for row in result["grid"])
    cache = tmp_path / "cache"
    cached = tmp_path / "cached.json"
    res = runner.invoke(app, ["tune-context", str(files / "train.pubtator"), "--kb", str(files / "kb"),
                              "--model", str(tiny_bert_path), "--prototypes", str(out), "--pooling", "mean",
                              "--device", "cpu", "--step", "0.5", "--output", str(cached), "--cache-dir", str(cache)])
    assert res.exit_code == 0, res.output
    assert json.loads(cached.read_text())["grid"] == result["grid"] and list(cache.glob("*/*.npz"))
    res = runner.invoke(app, ["tune-context", str(files / "train.pubtator"), "--kb", str(files / "kb"),
                              "--model", str(tiny_bert_path), "--prototypes", str(out), "--pooling", "mean",
                              "--device", "cpu", "--step", "0.5", "--margin", "none", "--every-mention",
                              "--output", str(cached)])
    assert res.exit_code == 0, res.output
    every = json.loads(cached.read_text())["best"]
    assert every["context_margin"] is None and every["one_sense_per_document"] is False
    res = runner.invoke(app, ["tune-context", str(files / "train.pubtator"), "--kb", str(files / "kb"),
                              "--model", str(tiny_bert_path), "--prototypes", str(out), "--margin", "wide"])
    assert res.exit_code != 0 and "SB-E619" in str(res.exception)
    # the names were made with mean pooling: a tune run with another pooling is refused
    res = runner.invoke(app, ["tune-context", str(files / "train.pubtator"), "--kb", str(files / "kb"),
                              "--model", str(tiny_bert_path), "--prototypes", str(out), "--pooling", "cls",
                              "--device", "cpu", "--step", "0.5"])
    assert res.exit_code != 0 and "SB-E635" in str(res.exception)


def test_docbin_and_jsonl_documents(tiny_bert_path, files, tmp_path):
    from spacy_sapbert.context import read_documents

    nlp = spacy.blank("en")
    doc = nlp.make_doc(T2)
    i = [t.text for t in doc].index("MI")
    doc.ents = [Span(doc, i, i + 1, label="Disease", kb_id="D002")]
    DocBin(docs=[doc, Doc(nlp.vocab, words=["nothing"])]).to_disk(tmp_path / "d.spacy")
    (docs, _empty) = read_documents(tmp_path / "d.spacy")
    assert docs.mentions[0].ids == ("D002",) and docs.text[docs.mentions[0].start:docs.mentions[0].end] == "MI"
    row = {"mention": "MI", "ids": "D001", "context": T1, "start": T1.index("MI"), "end": T1.index("MI") + 2}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n", encoding="utf8")
    (jdoc,) = read_documents(tmp_path / "m.jsonl")
    assert jdoc.mentions[0].ids == ("D001",) and jdoc.mentions[0].start == T1.index("MI")
    (tmp_path / "bad.spacy").write_bytes(b"not a docbin")
    with pytest.raises(Exception, match="SB-E613"):
        read_documents(tmp_path / "bad.spacy")
    with pytest.raises(ConfigError, match="SB-E612"):
        read_documents(tmp_path / "m.jsonl", format="xml")


def test_evaluate_reports_the_context_system_and_its_subsets(fixtures_dir, tiny_bert_path):
    from thinc.api import Config

    from spacy_sapbert.evaluation.run import evaluate
    from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

    f = fixtures_dir / "eval"
    block = {"dataset": {"path": str(f / "test.pubtator"), "train": [str(f / "train.pubtator")]},
             "kb": {"sources": [[str(f / "kb_medic.txt"), "medic"]]}, "show_progress": False,
             "exclude_composite": False,
             "systems": {"tfidf": False, "scispacy": False, "exact_match": False, "base_encoder": str(tiny_bert_path),
                         "pooling": "mean", "device": "cpu", "context": True, "context_weight": 0.0,
                         "example_names": False}}
    settings = settings_from_config(merge_config(default_config(), Config({"evaluate": block}), {}))
    with pytest.warns(UserWarning):
        r = evaluate(settings)
    results = r["results"]["mention_only"]
    assert set(results) == {"base encoder", "base encoder + context"}
    # train prototypes: "Mammary cancers" (D001) and "WD" (D006); test golds D001 x3 (1, 6, 7) and D006 x2 (4, 5)
    assert r["counts"]["subsets"]["seen_in_prototypes"] == 5
    assert r["counts"]["subsets"]["unseen_in_prototypes"] == 6
    assert r["counts"]["subsets"]["ambiguous"] >= 1
    # weight 0: the context system ranks exactly as the name-only one (strict)
    for subset in ("full", "ambiguous", "seen_in_prototypes"):
        assert results["base encoder + context"][subset]["strict"] == results["base encoder"][subset]["strict"]
    assert results["base encoder + context"]["full"]["lenient"] is None
    assert r["systems"]["base encoder + context"]["prototypes"]["n_examples"] == 2


@pytest.mark.slow
def test_prototypes_travel_with_spacy_package(tiny_bert_path, files, tmp_path):
    """nlp.to_disk -> spacy package -> wheel -> pip install --target -> spacy.load: the prototypes come
    along (memory-mapped from the installed package) while the name encoder runs with ONNX Runtime."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    def run(args, **kwargs):
        result = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        return result

    nlp = make_nlp(tiny_bert_path, files, context_weight=0.5)
    nlp.meta.update({"name": "ctxtest", "version": "0.0.1"})
    nlp.to_disk(tmp_path / "nlp")
    (tmp_path / "packages").mkdir()
    run([sys.executable, "-m", "spacy", "package", str(tmp_path / "nlp"), str(tmp_path / "packages"),
         "--name", "ctxtest", "--version", "0.0.1", "--build", "none"])
    pkg = tmp_path / "packages" / "en_ctxtest-0.0.1"
    run([sys.executable, "-m", "build", "--no-isolation", "--wheel"], cwd=pkg)
    (wheel,) = (pkg / "dist").glob("*.whl")
    run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(tmp_path / "site"),
         str(wheel)])
    code = (
        "import json, spacy\nfrom spacy.tokens import Span\nnlp = spacy.load('en_ctxtest')\nids = []\n"
        f"for t in ({T1!r}, {T2!r}):\n"
        "    doc = nlp.make_doc(t); i = [x.text for x in doc].index('MI'); doc.ents = [Span(doc, i, i + 1, 'D')]\n"
        "    for _, p in nlp.pipeline: doc = p(doc)\n"
        "    ids.append(doc.ents[0].kb_id_)\n"
        "lk = nlp.get_pipe('sapbert_linker')\n"
        "print(json.dumps({'ids': ids, 'enc': type(lk.encoder).__name__, 'vectors': str(lk.prototypes.vectors.filename)}))\n")
    # this checkout first on the path: the installed package's factory must be the code under test
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(root)]), HF_HUB_OFFLINE="1")
    loaded = json.loads(run([sys.executable, "-c", code], env=env, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert loaded["ids"] == ["D001", "D002"]
    assert loaded["enc"] == "OnnxEncoder"
    assert loaded["vectors"].startswith(str(tmp_path / "site"))
