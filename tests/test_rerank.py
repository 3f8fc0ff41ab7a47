"""The cross-encoder re-ranker: training groups, training (deterministic, resumable), its files and their
checks, the int8 graph, re-ordering, and the command."""
from __future__ import annotations

import json
import shutil

import numpy
import pytest

from helpers import linker_nlp, run_script_or_fail_on_hang

from spacy_sapbert.errors import ConfigError, DataFormatError, EmptyResultError, IncompatibleError, IntegrityError, \
    MissingInputError
from spacy_sapbert.mentions.records import Document, Mention
from spacy_sapbert.kb import Concept, KnowledgeBase

CONCEPTS = [
    Concept("D001", "Heart attack", ("myocardial infarction", "cardiac infarction"), ("Disease",)),
    Concept("D002", "Mitral insufficiency", ("mitral regurgitation",), ("Disease",)),
    Concept("D003", "Influenza", ("flu", "grippe"), ("Disease",)),
    Concept("D004", "Breast carcinoma", ("carcinoma of the breast", "breast cancer"), ("Disease",)),
    Concept("D005", "Fever", ("pyrexia",), ("Disease",)),
]
TRAIN = [("infarction of the heart", "D001"), ("mitral valve regurgitation", "D002"), ("influenza virus", "D003"),
         ("cancer of the breast", "D004"), ("high fever", "D005"), ("heart infarct", "D001")]


def docs_of(pairs):
    doc = Document(doc_id="1", text="")
    doc.mentions.extend(Mention(text=t, ids=(c,), start=0, end=len(t), type="Disease", doc_id="1") for t, c in pairs)
    return [doc]


@pytest.fixture(scope="module")
def linker_parts(tiny_bert_path):
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.index import ConceptIndex

    kb = KnowledgeBase.from_concepts(CONCEPTS)
    encoder = Encoder.load(str(tiny_bert_path), pooling="mean", max_length=25, device="cpu")
    index = ConceptIndex.build(kb, encoder, kind="exact", show_progress=False)
    return kb, index, encoder


def settings(**kw):
    from spacy_sapbert.rerank import RerankerSettings

    base = dict(k=3, epochs=2, batch_mentions=2, lr=1e-3, max_length=24, seed=7, checkpoint_every=2, log_every=1)
    base.update(kw)
    return RerankerSettings(**base)


def train(linker_parts, tiny_bert_path, out, **kw):
    from spacy_sapbert.rerank import train_reranker

    kb, index, encoder = linker_parts
    onnx = kw.pop("onnx", False)
    resume = kw.pop("resume", False)
    return train_reranker(docs_of(TRAIN), kb, index, encoder, out, base=str(tiny_bert_path), settings=settings(**kw),
                          device="cpu", onnx=onnx, resume=resume, show_progress=False)


def weights(folder):
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


def test_groups_gold_first_hard_negatives_and_pseudo_mentions_exclude_their_row(linker_parts):
    from spacy_sapbert.rerank.examples import make_groups, pseudo_mentions

    kb, index, encoder = linker_parts
    pseudo = pseudo_mentions(kb, 10, seed=0)
    assert pseudo and all(len(kb.rows_of_concept(c)) >= 2 and kb.names[r] == n for n, c, r in pseudo)
    assert len({c for _, c, _ in pseudo}) == len(pseudo)  # one per concept
    groups = make_groups([("cancer of the breast", "D004")], pseudo, kb, index, encoder, k=3)
    first = groups[0]
    assert first.mention == "cancer of the breast" and not first.pseudo
    assert first.names[0] in kb.names_of_concept("D004") and 2 <= len(first.names) <= 3
    assert all(n not in kb.names_of_concept("D004") for n in first.names[1:])
    for g in groups[1:]:
        assert g.pseudo and g.names[0] != g.mention  # the synonym's own row is never its gold name


def test_no_usable_mention_is_a_coded_error(linker_parts):
    from spacy_sapbert.rerank.examples import make_groups

    kb, index, encoder = linker_parts
    with pytest.raises(EmptyResultError, match="SB-E809"):
        make_groups([], [], kb, index, encoder, k=3)


def test_training_is_deterministic_and_writes_records(linker_parts, tiny_bert_path, tmp_path):
    one = train(linker_parts, tiny_bert_path, tmp_path / "a", epochs=1)
    train(linker_parts, tiny_bert_path, tmp_path / "b", epochs=1)
    assert one["steps"] == 3 and one["groups"] == len(TRAIN)
    a, b = weights(tmp_path / "a" / "model"), weights(tmp_path / "b" / "model")
    assert a.keys() == b.keys() and all(numpy.array_equal(a[k], b[k]) for k in a)
    meta = json.loads((tmp_path / "a" / "model" / "sapbert_reranker.json").read_text())
    kb, _, encoder = linker_parts
    assert meta["kb_checksum"] == kb.checksum and meta["encoder_fingerprint"] == encoder.fingerprint
    assert "model.safetensors" in meta["files"] and not (tmp_path / "a" / "checkpoints").exists()
    with pytest.raises(ConfigError, match="SB-E807"):  # an existing run without --resume
        train(linker_parts, tiny_bert_path, tmp_path / "a", epochs=1)
    mine = tmp_path / "mine"  # a folder of someone else's: its model/ is never replaced
    (mine / "model").mkdir(parents=True)
    (mine / "model" / "weights.bin").write_bytes(b"theirs")
    with pytest.raises(ConfigError, match="SB-E806.*run.json.*not empty"):
        train(linker_parts, tiny_bert_path, mine, epochs=1)
    assert (mine / "model" / "weights.bin").read_bytes() == b"theirs" and sorted(mine.iterdir()) == [mine / "model"]
    killed = tmp_path / "killed"  # a first run stopped while it wrote run.json: only atomic_write's temporary file
    killed.mkdir()
    (killed / ".run.json.x1y2.tmp").write_text("{")
    assert train(linker_parts, tiny_bert_path, killed, epochs=1)["steps"] == 3
    (mine / ".run.json.x1y2.tmp").write_text("{")  # beside someone's files it changes nothing
    with pytest.raises(ConfigError, match="SB-E806.*run.json.*not empty"):
        train(linker_parts, tiny_bert_path, mine, epochs=1)


def test_training_lowers_the_group_loss(linker_parts, tiny_bert_path, tmp_path):
    from spacy_sapbert.rerank import CrossEncoder
    from spacy_sapbert.rerank.examples import read_groups
    from spacy_sapbert.rerank.train import group_loss

    train(linker_parts, tiny_bert_path, tmp_path / "run", epochs=12, lr=5e-3, warmup=0.0, batch_mentions=3)
    groups, _ = read_groups(tmp_path / "run")
    import torch

    with torch.no_grad():
        torch.manual_seed(7)  # the run's seed: the same fresh head it started from
        fresh = CrossEncoder.start(str(tiny_bert_path), max_length=24)
        fresh.model.eval()
        before = float(group_loss(fresh, groups))
        after = float(group_loss(CrossEncoder.from_disk(tmp_path / "run" / "model"), groups))
    assert after < 0.8 * before


def test_a_reranker_from_the_first_layers_of_its_base(linker_parts, tiny_bert_path, tmp_path):
    """train-reranker --layers N: the cross-encoder starts from the base's first N transformer layers (their
    weights, not fresh ones); the run records N, a resume with another N is refused, and more layers than the base
    has is refused before any group is made."""
    import torch
    from safetensors.numpy import load_file

    from spacy_sapbert.rerank import CrossEncoder
    from spacy_sapbert.rerank.train import RUN_FILE, _check_run, _identity

    base = load_file(str(tiny_bert_path / "model.safetensors"))
    cut = CrossEncoder.start(str(tiny_bert_path), max_length=24, layers=1)
    assert cut.model.config.num_hidden_layers == 1 and len(cut.model.base_model.encoder.layer) == 1
    ours = {k.split("encoder.", 1)[1]: v.detach().numpy() for k, v in cut.model.state_dict().items()
            if "encoder.layer." in k}
    theirs = {k.split("encoder.", 1)[1]: v for k, v in base.items() if "encoder.layer." in k}
    assert ours and set(ours) == {k for k in theirs if k.startswith("layer.0.")}  # layer 1 is not there
    assert all(numpy.array_equal(ours[k], theirs[k]) for k in ours)
    full = CrossEncoder.start(str(tiny_bert_path), max_length=24)
    assert full.model.config.num_hidden_layers == 2
    with pytest.raises(ConfigError, match="SB-E808.*layers.*from 0 to 2"):
        CrossEncoder.start(str(tiny_bert_path), max_length=24, layers=3)
    with pytest.raises(ConfigError, match="SB-E808.*layers"):
        train(linker_parts, tiny_bert_path, tmp_path / "too_many", epochs=1, layers=3)
    assert not (tmp_path / "too_many" / "examples.json").exists()

    summary = train(linker_parts, tiny_bert_path, tmp_path / "run", epochs=1, layers=1, onnx=True)
    model = tmp_path / "run" / "model"
    assert json.loads((model / "config.json").read_text())["num_hidden_layers"] == 1
    assert not any(".layer.1." in k for k in weights(model))
    meta = json.loads((model / "sapbert_reranker.json").read_text())
    assert meta["trained"]["layers"] == 1 and summary["steps"] == 3
    loaded = CrossEncoder.from_disk(model)
    with torch.no_grad():
        assert loaded.logits(["heart infarct"], ["heart attack"]).shape == (1,)
    kb, _, encoder = linker_parts
    assert json.loads((tmp_path / "run" / RUN_FILE).read_text())["settings"]["layers"] == 1
    with pytest.raises(ConfigError, match="SB-E806.*settings.layers"):
        _check_run(tmp_path / "run", _identity(settings(epochs=1), str(tiny_bert_path), kb, encoder), resume=True)


def test_group_loss_with_a_teacher_adds_the_kl_to_its_softmax(linker_parts, tiny_bert_path):
    """distill 0: the gold name's cross-entropy, whatever the targets; a teacher whose logits are the student's own
    adds nothing (KL 0), so the loss is (1 - distill) x the cross-entropy; another teacher adds its KL."""
    import torch

    from spacy_sapbert.rerank import CrossEncoder
    from spacy_sapbert.rerank.examples import Group
    from spacy_sapbert.rerank.train import group_loss

    model = CrossEncoder.start(str(tiny_bert_path), max_length=24)
    model.model.eval()  # no dropout: the same logits every call
    groups = [Group("heart infarct", ("heart attack", "fever", "flu"), True, False),
              Group("high fever", ("fever", "influenza"), True, False)]
    with torch.no_grad():
        own = [model.score_groups([(g.mention, g.names)])[0] for g in groups]
        ce = float(group_loss(model, groups))
        assert float(group_loss(model, groups, [numpy.zeros(3), numpy.zeros(2)], 0.0)) == pytest.approx(ce)
        assert float(group_loss(model, groups, own, 0.5)) == pytest.approx(0.5 * ce, abs=1e-5)
        other = [numpy.array([0.0, 5.0, 0.0]), numpy.array([-3.0, 3.0])]
        logp = [torch.log_softmax(torch.tensor(o), 0) for o in own]
        logq = [torch.log_softmax(torch.tensor(o), 0) for o in other]
        kl = numpy.mean([float(torch.sum(q.exp() * (q - p))) for p, q in zip(logp, logq)])
        assert float(group_loss(model, groups, other, 1.0)) == pytest.approx(kl, abs=1e-5)
        assert kl > 0.5


def test_distillation_scores_the_groups_with_the_teacher_once_and_records_it(linker_parts, tiny_bert_path, tmp_path):
    """A student from one layer distilled from a two-layer teacher: the teacher's logits of every group's pairs are
    written once (one per pair, what the teacher scores), the student differs from one trained without them, the
    run and the model record the teacher; a damaged logits file is scored again; a teacher without a weight, a
    weight without a teacher, another teacher on resume and a teacher of another KB are refused."""
    from spacy_sapbert.rerank import CrossEncoder
    from spacy_sapbert.rerank.examples import read_groups
    from spacy_sapbert.rerank.train import TEACHER_FILE, teacher_checksum, train_reranker

    train(linker_parts, tiny_bert_path, tmp_path / "teacher", epochs=1)
    teacher = tmp_path / "teacher" / "model"
    plain = train(linker_parts, tiny_bert_path, tmp_path / "plain", epochs=1, layers=1)
    kb, index, encoder = linker_parts

    def student(out, **kw):
        given = kw.pop("teacher", teacher)
        return train_reranker(docs_of(TRAIN), kb, index, encoder, out, base=str(tiny_bert_path),
                              settings=settings(**{"epochs": 1, "layers": 1, "distill": 0.5, **kw}), device="cpu",
                              onnx=False, show_progress=False, teacher=given)

    summary = student(tmp_path / "student")
    assert summary["steps"] == plain["steps"]
    run = tmp_path / "student"
    flat = numpy.load(run / TEACHER_FILE, allow_pickle=False)
    groups, _ = read_groups(run)
    scored = CrossEncoder.from_disk(teacher).score_groups([(g.mention, g.names) for g in groups], batch_size=16)
    assert flat.shape == (sum(len(g.names) for g in groups),)
    numpy.testing.assert_allclose(flat, numpy.concatenate(scored), atol=1e-5)
    assert any(not numpy.array_equal(a, b) for a, b in zip(weights(run / "model").values(),
                                                            weights(tmp_path / "plain" / "model").values()))
    meta = json.loads((run / "model" / "sapbert_reranker.json").read_text())
    checksum = teacher_checksum(json.loads((teacher / "sapbert_reranker.json").read_text()))
    assert meta["trained"]["distill"] == 0.5 and meta["trained"]["teacher"] == checksum
    assert json.loads((run / "run.json").read_text())["teacher"] == checksum

    numpy.save(tmp_path / "short.npy", flat[:-1])
    (run / "model" / "sapbert_reranker.json").unlink()  # the run not finished: it resumes and reads the file
    (tmp_path / "short.npy").replace(run / TEACHER_FILE)
    train_reranker(docs_of(TRAIN), kb, index, encoder, run, base=str(tiny_bert_path),
                   settings=settings(epochs=1, layers=1, distill=0.5), device="cpu", onnx=False, show_progress=False,
                   teacher=teacher, resume=True)
    numpy.testing.assert_array_equal(numpy.load(run / TEACHER_FILE, allow_pickle=False), flat)  # scored again

    with pytest.raises(ConfigError, match="SB-E816.*no teacher"):
        student(tmp_path / "no_teacher", teacher=None)
    with pytest.raises(ConfigError, match="SB-E816.*distill = 0"):
        student(tmp_path / "no_weight", distill=0.0)
    train(linker_parts, tiny_bert_path, tmp_path / "teacher2", epochs=1, lr=2e-3)
    with pytest.raises(ConfigError, match="SB-E806.*teacher"):
        train_reranker(docs_of(TRAIN), kb, index, encoder, run, base=str(tiny_bert_path),
                       settings=settings(epochs=1, layers=1, distill=0.5), device="cpu", onnx=False,
                       show_progress=False, teacher=tmp_path / "teacher2" / "model", resume=True)
    other = tmp_path / "other_kb"
    shutil.copytree(teacher, other)
    doc = json.loads((other / "sapbert_reranker.json").read_text())
    (other / "sapbert_reranker.json").write_text(json.dumps({**doc, "kb_checksum": "other"}))
    with pytest.raises(IncompatibleError, match="SB-E811.*KB \\(other\\) than this run's"):
        student(tmp_path / "other_student", teacher=other)
    assert not (tmp_path / "other_student").exists() and not (tmp_path / "no_teacher").exists()


def test_resume_after_an_interruption_gives_the_uninterrupted_weights(linker_parts, tiny_bert_path, tmp_path,
                                                                      monkeypatch):
    import spacy_sapbert.rerank.train as train_module

    whole = train(linker_parts, tiny_bert_path, tmp_path / "whole")
    real, calls = train_module.group_loss, []

    def interrupted(model, groups, *teacher):
        calls.append(1)
        if len(calls) == 4:  # during step 4: the checkpoint of step 2 exists
            raise KeyboardInterrupt
        return real(model, groups, *teacher)

    monkeypatch.setattr(train_module, "group_loss", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(linker_parts, tiny_bert_path, tmp_path / "cut")
    assert [p.name for p in (tmp_path / "cut" / "checkpoints").iterdir()] == ["step-000002"]
    monkeypatch.setattr(train_module, "group_loss", real)
    with pytest.raises(ConfigError, match="SB-E806"):  # other settings than the run started with
        train(linker_parts, tiny_bert_path, tmp_path / "cut", resume=True, lr=2e-3)
    resumed = train(linker_parts, tiny_bert_path, tmp_path / "cut", resume=True)
    assert resumed["steps"] == whole["steps"]
    a, b = weights(tmp_path / "whole" / "model"), weights(tmp_path / "cut" / "model")
    assert all(numpy.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_variant_mentions_read_like_text_never_a_kb_name_and_never_of_two_concepts(linker_parts):
    from spacy_sapbert.rerank.examples import variant_mentions

    kb, _, _ = linker_parts
    assert variant_mentions(TRAIN, kb, 0, seed=0) == []
    found = variant_mentions(TRAIN + [("Infarction of the heart", "D001")], kb, 2, seed=0)
    assert ("heart infarction", "D001") in found  # word order ("cancer of the breast" -> "breast cancer": a KB name)
    assert all(kb.row_of_name(v) < 0 for v, _ in found) and not {v for v, _ in found} & {t for t, _ in TRAIN}
    assert len({v for v, _ in found}) == len(found)  # the repeated mention gives its variants once
    assert found == variant_mentions(TRAIN, kb, 2, seed=0)
    # the same text annotated with two concepts: its variants could mean either, so none is kept
    assert variant_mentions([("ovarian cysts", "D001"), ("ovarian cysts", "D002")], kb, 2, seed=0) == []
    assert ("ovarian cyst", "D001") in variant_mentions([("ovarian cysts", "D001")], kb, 2, seed=0)


def test_training_on_mention_like_variants_records_and_flags_them(linker_parts, tiny_bert_path, tmp_path):
    from spacy_sapbert.rerank.examples import candidate_recall, pseudo_mentions, read_groups, variant_mentions
    from spacy_sapbert.rerank.train import RUN_FILE, _check_run, _identity

    kb, _, encoder = linker_parts
    summary = train(linker_parts, tiny_bert_path, tmp_path / "run", epochs=1, mention_like=2, pseudo_mentions=2)
    groups, meta = read_groups(tmp_path / "run")
    variants = [g for g in groups if g.variant]
    assert summary["variant_groups"] == len(variants) > 0 and not any(g.pseudo for g in variants)
    assert meta["settings"]["mention_like"] == 2 and meta["settings"]["variants"] >= len(variants)
    made = variant_mentions(TRAIN + [(n, c) for n, c, _ in pseudo_mentions(kb, 2, seed=7)], kb, 2, seed=7)
    assert {g.mention for g in variants} <= {v for v, _ in made}  # the run's seed (7)
    assert all(kb.row_of_name(g.names[0]) >= 0 and kb.row_of_name(g.mention) < 0 for g in variants)
    annotated = [g for g in groups if not (g.pseudo or g.variant)]
    assert candidate_recall(groups) == sum(g.gold_in_top_k for g in annotated) / len(annotated)
    recorded = json.loads((tmp_path / "run" / RUN_FILE).read_text())
    assert recorded["settings"]["mention_like"] == 2
    # a run folder written before the setting existed resumes as a run without variants, and only as one
    del recorded["settings"]["mention_like"]
    (tmp_path / "run" / RUN_FILE).write_text(json.dumps(recorded))
    _check_run(tmp_path / "run", _identity(settings(epochs=1, pseudo_mentions=2), str(tiny_bert_path), kb, encoder),
               resume=True)
    with pytest.raises(ConfigError, match="SB-E806.*mention_like"):
        _check_run(tmp_path / "run", _identity(settings(epochs=1, pseudo_mentions=2, mention_like=2),
                                               str(tiny_bert_path), kb, encoder), resume=True)


def test_int8_graph_scores_like_torch_and_files_are_checked(linker_parts, tiny_bert_path, tmp_path):
    from spacy_sapbert.rerank import CrossEncoder, OnnxCrossEncoder, load_reranker

    train(linker_parts, tiny_bert_path, tmp_path / "run", onnx=True, epochs=1)
    folder = tmp_path / "run" / "model"
    torch_model = CrossEncoder.from_disk(folder)
    onnx_model = load_reranker(folder)
    assert isinstance(onnx_model, OnnxCrossEncoder)
    mentions, names = ["heart infarct", "flu", "cancer of the breast"], ["heart attack", "grippe", "breast cancer"]
    exact, quick = torch_model.score(mentions, names), onnx_model.score(mentions, names)
    assert exact.shape == (3,) and numpy.all(numpy.isfinite(quick))
    assert numpy.max(numpy.abs(exact - quick)) < 0.1 * max(1.0, float(numpy.max(numpy.abs(exact))))
    import onnx

    # one weight scale per output channel: with one scale per tensor a trained MiniLM re-ranker's int8 scores
    # correlated 0.930 with its PyTorch scores, per channel 0.983 (benchmarks/reranker_int8.py)
    graph = onnx.load(str(folder / "model.int8.onnx")).graph
    scales = [list(t.dims) for t in graph.initializer if t.name.endswith("_scale") and "MatMul" in t.name]
    assert scales and all(len(d) == 1 and d[0] > 1 for d in scales)
    assert isinstance(load_reranker(folder, runtime="torch"), CrossEncoder)
    with pytest.raises(ConfigError, match="SB-E805"):
        load_reranker(folder, runtime="tensorrt")
    # each graph's weights beside it (external data), recorded and checked with the graphs
    from spacy_sapbert.rerank.model import DATA_FILES, read_meta

    recorded = read_meta(folder)["onnx_files"]
    assert set(recorded) == {"model.onnx", "model.int8.onnx", *DATA_FILES.values()}
    for graph_file, data_file in DATA_FILES.items():
        initializers = onnx.load(str(folder / graph_file), load_external_data=False).graph.initializer
        assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in initializers)
        assert {e.value for t in initializers for e in t.external_data if e.key == "location"} == {data_file}
    weights = folder / DATA_FILES["model.int8.onnx"]
    original = weights.read_bytes()
    weights.write_bytes(original[: len(original) // 2])
    with pytest.raises(IntegrityError, match="SB-E551.*model.int8.onnx.data"):
        load_reranker(folder)
    weights.write_bytes(original)
    data = bytearray((folder / "model.int8.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (folder / "model.int8.onnx").write_bytes(bytes(data[:-10]))
    with pytest.raises(IntegrityError, match="SB-E551"):
        load_reranker(folder)


def test_meta_errors(tmp_path, linker_parts):
    from spacy_sapbert.rerank import check_compatible, read_meta

    with pytest.raises(MissingInputError, match="SB-E801"):
        read_meta(tmp_path)
    (tmp_path / "sapbert_reranker.json").write_text("{not json")
    with pytest.raises(DataFormatError, match="SB-E802"):
        read_meta(tmp_path)
    (tmp_path / "sapbert_reranker.json").write_text(json.dumps({
        "format_version": 1, "max_length": 10 ** 6, "kb_checksum": "x", "encoder_fingerprint": "y", "files": {},
        "inputs": ["input_ids"]}))
    with pytest.raises(DataFormatError, match="max_length"):
        read_meta(tmp_path)
    kb, _, encoder = linker_parts
    with pytest.raises(IncompatibleError, match=r"SB-E811.*KB \(other\) than the linker's \("):
        check_compatible({"kb_checksum": "other", "encoder_fingerprint": encoder.fingerprint},
                         kb_checksum=kb.checksum, encoder_fingerprint=encoder.fingerprint)
    with pytest.raises(IncompatibleError, match="SB-E811.*name encoder"):
        check_compatible({"kb_checksum": kb.checksum, "encoder_fingerprint": "other"},
                         kb_checksum=kb.checksum, encoder_fingerprint=encoder.fingerprint)


@pytest.mark.parametrize("bad", [dict(k=1), dict(lr=float("nan")), dict(lr=0.0), dict(epochs=True),
                                 dict(warmup=1.5), dict(max_length=4), dict(mention_like=-1), dict(mention_like=101),
                                 dict(layers=-1), dict(layers=1001), dict(layers=1.5)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ConfigError, match="SB-E808"):
        settings(**bad).check()


class _Prefers:
    """A fake re-ranker: a high logit for the pairs whose name is in ``liked``."""

    def __init__(self, liked):
        self.liked, self.calls = set(liked), []

    def score_groups(self, groups, batch_size=64):
        self.calls.append([(m, n) for m, names in groups for n in names])
        return [numpy.array([4.0 if n in self.liked else -4.0 for n in names], dtype=numpy.float32)
                for _, names in groups]


def test_rerank_reorders_close_calls_only_with_probabilities(linker_parts):
    from spacy_sapbert.rerank import rerank

    kb, index, encoder = linker_parts
    mentions = ["cancer of the breast", "flu"]
    vectors = encoder.encode(mentions)
    ranked = [[("D001", 0.90), ("D004", 0.89), ("D003", 0.10)], [("D003", 0.95), ("D001", 0.40)]]
    liked = set(kb.names_of_concept("D004")) | set(kb.names_of_concept("D001"))
    fake = _Prefers(liked)
    out = rerank(fake, index, mentions, vectors, ranked, k=3, margin=0.2, dense_weight=0.0)  # the re-ranker alone
    assert out[1] == ranked[1]  # margin 0.55 > 0.2: left alone
    assert len(fake.calls) == 1 and {m for m, _ in fake.calls[0]} == {"cancer of the breast"}
    assert [c for c, _ in out[0]] == ["D001", "D004", "D003"]  # two equal probabilities: by concept id
    probs = numpy.exp([4.0, 4.0, -4.0]) / numpy.exp([4.0, 4.0, -4.0]).sum()  # a softmax over the re-ranked three
    assert [s for _, s in out[0]] == pytest.approx(probs.tolist()) and sum(s for _, s in out[0]) == pytest.approx(1)
    every = rerank(_Prefers(set(kb.names_of_concept("D001"))), index, mentions, vectors, ranked, k=2, margin=1.0,
                   dense_weight=0.0)
    assert [c for c, _ in every[1]] == ["D001", "D003"] and len(every[0]) == 2
    for bad in (dict(k=1), dict(margin=-0.1), dict(margin=float("nan"))):
        with pytest.raises(ConfigError, match="SB-E810"):
            rerank(fake, index, mentions, vectors, ranked, **{"k": 3, "margin": 1.0, **bad})


def test_the_window_reads_only_the_candidates_close_to_the_best(linker_parts):
    """reranker_window: of the top k, the candidates within the window of the best score are read (the best two
    whatever their scores), and a re-ranked list holds those; 1.0: all k; a bad window is E810."""
    from spacy_sapbert.rerank import rerank, window_size

    top = [("A", 0.90), ("B", 0.88), ("C", 0.83), ("D", 0.81)]
    assert [window_size(top, 4, w) for w in (0.0, 0.05, 0.08, 0.1, 1.0)] == [2, 2, 3, 4, 4]
    assert window_size(top, 3, 1.0) == 3 and window_size(top, 2, 0.5) == 2 and window_size(top[:1], 4, 0.0) == 1
    assert window_size([("A", 0.9), ("B", 0.2), ("C", 0.1)], 3, 0.0) == 2  # the runner-up is read however far
    kb, index, encoder = linker_parts
    mentions = ["cancer of the breast"]
    vectors = encoder.encode(mentions)
    ranked = [[("D001", 0.90), ("D004", 0.89), ("D003", 0.85), ("D002", 0.70)]]
    for window, read in ((0.08, ["D001", "D004", "D003"]), (1.0, ["D001", "D004", "D003", "D002"]),
                         (0.0, ["D001", "D004"])):
        fake = _Prefers(set(kb.names_of_concept("D003")))
        out = rerank(fake, index, mentions, vectors, ranked, k=4, margin=0.2, dense_weight=0.0, window=window)
        names = [n for _, n in fake.calls[0]]
        assert len(names) == len(read) and {c for c, _ in out[0]} == set(read)
        assert out[0][0][0] == ("D003" if "D003" in read else "D001")
    for bad in (-0.1, float("nan"), True, "wide"):
        with pytest.raises(ConfigError, match="SB-E810.*reranker_window"):
            rerank(fake, index, mentions, vectors, ranked, k=4, margin=0.2, window=bad)


def test_nearest_names_reads_the_stored_vectors_once_per_group_with_the_same_answers(linker_parts, monkeypatch):
    from spacy_sapbert.rerank import nearest_names

    kb, index, encoder = linker_parts
    mentions = ["cancer of the breast", "flu", "heart infarct", "fever", "mitral valve"]
    vectors = encoder.encode(mentions)
    candidates = [["D004", "D001", "D003"], ["D003", "D005"], ["D001", "D002", "D004", "D005"], ["D005"],
                  ["D002", "D001"]]
    exclude = [-1, kb.row_of_name("flu"), -1, -1, -1]
    reads = []
    real = index.name_vectors
    monkeypatch.setattr(index, "name_vectors", lambda rows: reads.append(list(rows)) or real(rows))

    def expected(q, skip=None):  # each concept's row with the best vector . query, ties to the lower row
        out = []
        for cid in candidates[q]:
            rows = [r for r in kb.rows_of_concept(cid) if r != (exclude[q] if skip is None else skip)]
            sims = real(rows) @ vectors[q]
            out.append(kb.names[max(zip(sims.tolist(), [-r for r in rows]))[1] * -1] if rows else None)
        return out

    want = [expected(q) for q in range(len(mentions))]
    reads.clear()
    assert nearest_names(index, vectors, candidates, exclude_rows=exclude) == want
    assert len(reads) == 1  # every query's rows in one read
    reads.clear()
    assert nearest_names(index, vectors, candidates, exclude_rows=exclude, rows_per_read=4) == want
    one_query = max(len({r for cid in cids for r in kb.rows_of_concept(cid)}) for cids in candidates)
    assert len(reads) > 1 and max(len(r) for r in reads) <= max(4, one_query)
    assert nearest_names(index, vectors[:2], [[], candidates[1]]) == [[], expected(1, skip=-1)]


def test_dense_weight_adds_the_name_score_to_the_logit(linker_parts):
    from spacy_sapbert.rerank import rerank

    kb, index, encoder = linker_parts
    mentions = ["heart infarct"]
    vectors = encoder.encode(mentions)
    ranked = [[("D001", 0.90), ("D004", 0.60), ("D003", 0.10)]]
    fake = _Prefers(set(kb.names_of_concept("D004")))  # logits: D004 +4, the others -4

    def order(weight):
        out = rerank(fake, index, mentions, vectors, ranked, k=3, margin=1.0, dense_weight=weight)[0]
        return [c for c, _ in out], [s for _, s in out]

    assert order(0.0)[0] == ["D004", "D001", "D003"]  # the re-ranker alone
    assert order(10.0)[0] == ["D004", "D001", "D003"]  # 4 + 6 > -4 + 9
    ids, scores = order(30.0)  # -4 + 27 > 4 + 18: the name score overrules a weak preference
    assert ids == ["D001", "D004", "D003"]
    values = numpy.array([-4 + 30 * 0.90, 4 + 30 * 0.60, -4 + 30 * 0.10])
    assert scores == pytest.approx((numpy.exp(values - values.max()) / numpy.exp(values - values.max()).sum()).tolist())
    for bad in (-1.0, float("nan"), float("inf"), 1e6, True, "2"):
        with pytest.raises(ConfigError, match="SB-E813"):
            rerank(fake, index, mentions, vectors, ranked, k=3, margin=1.0, dense_weight=bad)


def test_train_reranker_command(linker_parts, tiny_bert_path, tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    kb, index, _ = linker_parts
    kb.to_disk(tmp_path / "kb")
    index.to_disk(tmp_path / "index")
    pubtator = tmp_path / "train.pubtator"
    text = "Patients with heart infarct and high fever ."
    lines = [f"1|t|{text}", "1|a|", f"1\t14\t27\theart infarct\tDisease\tD001", f"1\t32\t42\thigh fever\tDisease\tD005", ""]
    pubtator.write_text("\n".join(lines) + "\n")
    args = [str(pubtator), "--kb", str(tmp_path / "kb"), "--index", str(tmp_path / "index"), "--model",
            str(tiny_bert_path), "--pooling", "mean", "--output", str(tmp_path / "run"), "--k", "3",
            "--pseudo-mentions", "3", "--batch-mentions", "2", "--max-steps", "2", "--no-onnx", "--device", "cpu"]
    result = CliRunner().invoke(app, ["train-reranker"] + args)
    assert result.exit_code == 0, result.output
    assert "Trained 2 steps on 5 groups (3 of KB synonyms)" in result.output
    assert (tmp_path / "run" / "model" / "sapbert_reranker.json").is_file()
    bad = CliRunner().invoke(app, ["train-reranker"] + args[:-9] + ["--lr", "nan", "--device", "cpu"])
    assert bad.exit_code != 0 and "SB-E808" in str(bad.exception)
    args[args.index("--output") + 1] = str(tmp_path / "run2")
    result = CliRunner().invoke(app, ["train-reranker"] + args + ["--mention-like", "2"])
    assert result.exit_code == 0, result.output
    assert "of mention-like variants)" in result.output and "distilled" not in result.output
    assert json.loads((tmp_path / "run2" / "run.json").read_text())["settings"]["mention_like"] == 2
    args[args.index("--output") + 1] = str(tmp_path / "run3")
    result = CliRunner().invoke(app, ["train-reranker"] + args + ["--layers", "1"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run3" / "run.json").read_text())["settings"]["layers"] == 1
    assert json.loads((tmp_path / "run3" / "model" / "config.json").read_text())["num_hidden_layers"] == 1
    args[args.index("--output") + 1] = str(tmp_path / "run4")
    result = CliRunner().invoke(app, ["train-reranker"] + args + ["--layers", "1", "--teacher",
                                                                  str(tmp_path / "run" / "model")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run4" / "model" / "sapbert_reranker.json").read_text())["trained"]["distill"] == 0.5
    assert "distilled from" in result.output and "(weight 0.5)" in result.output  # the summary says so
    assert (tmp_path / "run4" / "teacher_logits.npy").is_file()
    args[args.index("--output") + 1] = str(tmp_path / "run5")
    bad = CliRunner().invoke(app, ["train-reranker"] + args + ["--distill", "0.3"])  # no teacher
    assert bad.exit_code != 0 and "SB-E816" in str(bad.exception)
    assert not (tmp_path / "run5").exists()


@pytest.fixture(scope="module")
def trained_reranker(linker_parts, tiny_bert_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("reranker") / "run"
    train(linker_parts, tiny_bert_path, out, onnx=True, epochs=1)
    return out / "model"


def linked(nlp, text, spans):
    from spacy.tokens import Span

    doc = nlp.make_doc(text)
    doc.ents = [Span(doc, s, e, label="Disease") for s, e in spans]
    return nlp(doc)


def test_a_mentions_scores_do_not_depend_on_the_mentions_linked_with_it(linker_parts, trained_reranker):
    """The int8 graph quantizes activations per batch: each mention's pairs are one batch, so a mention re-ranked
    alone or among others gets the same logits (bit for bit) and the same list."""
    from spacy_sapbert.rerank import candidate_logits, rerank
    from spacy_sapbert.rerank.model import OnnxCrossEncoder

    kb, index, encoder = linker_parts
    model = OnnxCrossEncoder(trained_reranker)
    texts = ["heart infarct", "high fever", "a very long description of an infarction of the heart muscle", "flu"]
    vectors = encoder.encode(texts)
    ranked = index.search(vectors, 4)
    together = candidate_logits(model, index, texts, vectors, ranked, list(range(len(texts))), k=4)
    for q in range(len(texts)):
        alone = candidate_logits(model, index, texts, vectors, ranked, [q], k=4)
        assert alone[q] == together[q]
        assert rerank(model, index, [texts[q]], vectors[q:q + 1], [ranked[q]], k=4, margin=1.0) == \
            [rerank(model, index, texts, vectors, ranked, k=4, margin=1.0)[q]]


def test_linker_reranks_saves_and_loads_the_reranker(linker_parts, tiny_bert_path, trained_reranker, tmp_path):
    import spacy

    kb, _, _ = linker_parts
    kb.to_disk(tmp_path / "kb")
    nlp = linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker, reranker_k=3,
                     reranker_margin=1.0, reranker_dense_weight=2.5)
    doc = linked(nlp, "a heart infarct and high fever", [(1, 3), (4, 6)])
    for ent in doc.ents:
        scores = [s for _, s in ent._.kb_ents]
        assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    plain = linker_nlp(tiny_bert_path, tmp_path / "kb")
    dense = linked(plain, "a heart infarct and high fever", [(1, 3), (4, 6)])
    assert any(s > 0 for ent in dense.ents for _, s in ent._.kb_ents)
    assert [e._.kb_ents for e in doc.ents] != [e._.kb_ents for e in dense.ents]  # the re-ranker's probabilities
    nlp.to_disk(tmp_path / "pipe")
    assert (tmp_path / "pipe" / "sapbert_linker" / "reranker" / "model.int8.onnx").is_file()
    again = spacy.load(tmp_path / "pipe")
    assert again.get_pipe("sapbert_linker").cfg["reranker_dense_weight"] == 2.5  # saved with the pipeline
    assert [e._.kb_ents for e in linked(again, "a heart infarct and high fever", [(1, 3), (4, 6)]).ents] == \
        [e._.kb_ents for e in doc.ents]
    blob = nlp.get_pipe("sapbert_linker").to_bytes()
    other = spacy.blank("en")
    other.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu", "threshold": -1.0,
                                             "pooling": "mean", "reranker_k": 3, "reranker_margin": 1.0,
                                             "reranker_dense_weight": 2.5}).from_bytes(blob)
    assert [e._.kb_ents for e in linked(other, "a heart infarct and high fever", [(1, 3), (4, 6)]).ents] == \
        [e._.kb_ents for e in doc.ents]
    # the runtime install (no torch, no transformers: the pair tokenizer reads tokenizer.json) links the same
    from test_lean_runtime import lean_kb_ents

    lean = lean_kb_ents(tmp_path / "pipe", "a heart infarct and high fever", [(1, 3, "Disease"), (4, 6, "Disease")])
    assert lean["tried"] == [] and set(lean["imported"]) <= {"scispacy"}
    assert [[cid for cid, _ in ents] for ents in lean["kb_ents"]] == [[cid for cid, _ in e._.kb_ents] for e in doc.ents]
    assert [[s for _, s in ents] for ents in lean["kb_ents"]] == \
        [pytest.approx([s for _, s in e._.kb_ents], abs=1e-6) for e in doc.ents]


def test_linker_refuses_a_reranker_of_another_kb_bad_settings_and_context(linker_parts, tiny_bert_path,
                                                                          trained_reranker, tmp_path):
    import spacy

    smaller = KnowledgeBase.from_concepts(CONCEPTS[:4])
    smaller.to_disk(tmp_path / "kb4")
    with pytest.raises(IncompatibleError, match=r"SB-E811.*KB .* than the linker's \("):
        linker_nlp(tiny_bert_path, tmp_path / "kb4", reranker_path=trained_reranker)
    for bad in ({"reranker_k": 1}, {"reranker_margin": -1.0}):
        with pytest.raises(ConfigError, match="SB-E810"):
            spacy.blank("en").add_pipe("sapbert_linker", config={"model": "x", **bad})
    from spacy_sapbert.linker import SapbertLinker

    with pytest.raises(ConfigError, match="SB-E810"):  # NaN cannot pass through a spaCy config, but through Python
        SapbertLinker(spacy.blank("en").vocab, reranker_margin=float("nan"))
    with pytest.raises(ConfigError, match="SB-E813"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": "x", "reranker_dense_weight": -1.0})
    with pytest.raises(ConfigError, match="SB-E813"):
        SapbertLinker(spacy.blank("en").vocab, reranker_dense_weight=float("nan"))
    from spacy_sapbert.linker import DEFAULT_CONFIG
    from spacy_sapbert.rerank import DEFAULT_DENSE_WEIGHT, DEFAULT_RERANK_MARGIN

    # the linker's defaults are the ones benchmarks/reranker_unseen.py measures as "linker defaults"
    assert (DEFAULT_CONFIG["reranker_margin"], DEFAULT_CONFIG["reranker_dense_weight"]) == \
        (DEFAULT_RERANK_MARGIN, DEFAULT_DENSE_WEIGHT)
    kb, _, _ = linker_parts
    kb.to_disk(tmp_path / "kb")
    with pytest.raises(ConfigError, match="SB-E812"):
        linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker,
                   type_priors={"Disease": ["Disease"]})


def test_exporting_the_reranker_without_onnx_names_the_extra(monkeypatch, tmp_path):
    """A runtime-only install (no onnx) asked to export a re-ranker gets E820 naming [train], not E120 / an ImportError."""
    import sys

    from spacy_sapbert.errors import MissingExtraError
    from spacy_sapbert.rerank.model import export_int8

    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError(name="onnx")
    with pytest.raises(MissingExtraError, match=r"SB-E820.*spacy-sapbert\[train\]"):
        export_int8(None, tmp_path)  # type: ignore[arg-type]


def test_ties_keep_the_candidate_stages_order():
    """Two concepts sharing the mention's name get the same logit and dense score: the one the candidate stage put
    first (whose preferred name it is) stays first, whatever the ids; unequal values still decide."""
    from spacy_sapbert.rerank import combine

    tied = combine(["D9", "D1", "D5"], [1.0, 1.0, 0.7], [2.0, 2.0, 3.0], dense_weight=30.0)
    assert [cid for cid, _ in tied] == ["D9", "D1", "D5"]
    assert tied[0][1] == tied[1][1] and sum(p for _, p in tied) == pytest.approx(1.0)
    assert [cid for cid, _ in combine(["D9", "D1"], [1.0, 1.0], [2.0, 2.5], dense_weight=30.0)] == ["D1", "D9"]
    assert [cid for cid, _ in combine(["D1", "D9"], [1.0, 1.0], [2.0, 2.0], dense_weight=0.0)] == ["D1", "D9"]


_FORKED_RERANKER = """
import os
import sys
import time

from spacy_sapbert.rerank.model import OnnxCrossEncoder

model = OnnxCrossEncoder(sys.argv[1], threads=2)
groups = [("flu", ["influenza", "fever"]), ("high temperature", ["fever", "pyrexia", "influenza"])]
parent = [g.tolist() for g in model.score_groups(groups)]
time.sleep(1)  # the session's pool threads now wait on their condition variables
read, write = os.pipe()
pid = os.fork()  # as nlp.pipe(n_process=2) and link-corpus workers do
if pid == 0:
    child = [g.tolist() for g in model.score_groups(groups)]  # a session of its own; the inherited one kept
    os.write(write, repr(child == parent).encode())
    os._exit(0)
os.close(write)
os.waitpid(pid, 0)
print("same logits", os.read(read, 100).decode())
"""


def test_a_forked_worker_scores_with_a_session_of_its_own_without_hanging(trained_reranker, tmp_path):
    """The worker replaced the inherited session, and so destroyed it, which waited forever on its pool's condition
    variables; it keeps it now, as the name encoder does."""
    out = run_script_or_fail_on_hang(_FORKED_RERANKER, [trained_reranker], tmp_path, timeout=120,
                                     what="a forked worker's re-ranker")
    assert out.strip().splitlines()[-1] == "same logits True"


def test_the_linker_re_ranks_the_top_four_candidates_by_default(linker_parts, tiny_bert_path, trained_reranker,
                                                                 tmp_path):
    """reranker_k defaults to 4 (16 until 2026-11-29): a re-ranked mention keeps its top 4 candidates, re-ordered
    (reranker_window 1.0, the default: all 4); with a window, those within it of the best (the best two at least)."""
    from spacy_sapbert.rerank import DEFAULT_RERANK_K, DEFAULT_RERANK_WINDOW

    kb, _, _ = linker_parts
    kb.to_disk(tmp_path / "kb")
    assert DEFAULT_RERANK_K == 4 and len(kb.concept_ids) > DEFAULT_RERANK_K
    text, spans = "a heart infarct and high fever", [(1, 3), (4, 6)]
    dense = linked(linker_nlp(tiny_bert_path, tmp_path / "kb"), text, spans)
    nlp = linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker, reranker_margin=1.0)
    assert nlp.get_pipe("sapbert_linker").cfg["reranker_k"] == DEFAULT_RERANK_K
    assert nlp.get_pipe("sapbert_linker").cfg["reranker_window"] == DEFAULT_RERANK_WINDOW == 1.0
    for ent, plain in zip(linked(nlp, text, spans).ents, dense.ents):
        assert len(ent._.kb_ents) == DEFAULT_RERANK_K
        assert {c for c, _ in ent._.kb_ents} == {c for c, _ in plain._.kb_ents[:DEFAULT_RERANK_K]}
    nlp = linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker, reranker_margin=1.0,
                     reranker_window=0.08)
    for ent, plain in zip(linked(nlp, text, spans).ents, dense.ents):
        best = plain._.kb_ents[0][1]
        within = [c for i, (c, score) in enumerate(plain._.kb_ents[:DEFAULT_RERANK_K])
                  if i < 2 or score >= best - 0.08]
        assert {c for c, _ in ent._.kb_ents} == set(within)
    tight = linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker, reranker_margin=1.0,
                       reranker_window=0.0)
    assert [len(e._.kb_ents) for e in linked(tight, text, spans).ents] == [2, 2]
    import spacy

    from spacy_sapbert.linker import SapbertLinker

    for bad in (-0.5, float("nan")):  # NaN cannot pass through a spaCy config, but through Python
        with pytest.raises(ConfigError, match="SB-E810.*reranker_window"):
            SapbertLinker(spacy.blank("en").vocab, reranker_window=bad)


@pytest.mark.parametrize("kind", ["mention_like", "layers", "layers_lr", "distill"])
def test_ablations_train_both_runs_alike_and_write_both(bench_scripts, tiny_bert_path, tmp_path, monkeypatch, kind):
    """benchmarks/reranker_unseen.py --mention-like N / --layers N [N ...]: per set, the run without the setting and
    a run with each N for the first's number of steps, all from the --trained-on set's train split (--distill: the
    shallower runs distilled from the first's model); all evaluated and written to one table per set, the name
    encoder's row once."""
    from types import SimpleNamespace

    bench = bench_scripts.load("reranker_unseen")
    monkeypatch.setattr(bench, "split_docs", lambda key, *_: ([f"{key}-train"], [f"{key}-tune"]))
    trained = []

    def fake_train(key, docs, kb, index, encoder, model, args, mention_like=0, max_steps=None, layers=0, lr=None,
                   distill=0.0, teacher=None):
        assert (teacher == tmp_path / bench.run_name(key, args) / "model") if distill else teacher is None
        trained.append((key, tuple(docs), mention_like, layers, max_steps) + ((lr,) if lr else ())
                       + ((distill,) if distill else ()))
        folder = tmp_path / bench.run_name(key, args, mention_like, max_steps, layers, lr, distill) / "model"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sapbert_reranker.json").write_text(json.dumps({"trained": {"steps": 945}}))
        (folder.parent / "examples.json").write_text(json.dumps({"n_groups": 10 + mention_like, "settings": {}}))
        return folder, None

    def fake_evaluate(key, kb, index, encoder, folder, tune_docs, test_path, types, args, rerank_k):
        assert tune_docs == [f"{key}-tune"] and rerank_k == 4
        hit = 50.0 + ("_ml" in folder.parent.name or "_L" in folder.parent.name)
        return ([["name encoder (dense top-1)", 9] + [40.0] * 12,
                 [f"re-ranked top {rerank_k}: linker defaults", 9] + [hit] * 12]), {"dense_weight": 30.0, "grid": []}

    monkeypatch.setattr(bench, "train", fake_train)
    monkeypatch.setattr(bench, "evaluate_set", fake_evaluate)
    args = SimpleNamespace(sets=["ncbi", "bc5cdr"], trained_on="ncbi", reranker_precision="int8", mention_like=2 if kind == "mention_like" else 0,
                           layers=[] if kind == "mention_like" else [1, 2], rerank_k=[4], k=16, epochs=3,
                           max_steps=0, pseudo_mentions=1000, lr=4e-5, batch_mentions=8, no_write=False,
                           layers_lr=1e-4 if kind in ("layers_lr", "distill") else None,
                           distill=0.5 if kind == "distill" else None)
    bench.ablation(args, None, None, None, str(tiny_bert_path))
    # each set evaluates the NCBI runs: without the setting at --max-steps, with it (each value) at the first's steps
    others = [(2, 0)] if kind == "mention_like" else [(0, 1), (0, 2)]
    if kind == "layers_lr":  # the shallower runs at their own learning rate
        others = [o + (945, 1e-4) for o in others]
    elif kind == "distill":  # ... and distilled from the first run
        others = [o + (945, 1e-4, 0.5) for o in others]
    else:
        others = [o + (945,) for o in others]
    assert trained == ([("ncbi", ("ncbi-train",), 0, 0, None)] + [("ncbi", ("ncbi-train",), *o) for o in others]) * 2
    name = {"mention_like": "reranker_mention_like", "layers": "reranker_layers",
            "layers_lr": "reranker_layers_lr0.0001", "distill": "reranker_layers_lr0.0001_distill0.5"}[kind]
    doc = json.loads((bench_scripts.results / f"{name}.json").read_text())
    tables = list(doc["tables"])
    assert len(tables) == 2 and "trained on NCBI-disease train" in tables[1] and "trained on" not in tables[0]
    rows = doc["tables"][tables[0]]["rows"]
    at = {"layers_lr": ", lr 0.0001", "distill": ", lr 0.0001, distilled (0.5)"}.get(kind, "")
    labels = ["annotated + KB synonyms", "+ mention-like variants (at most 2 each)"] if kind == "mention_like" else \
        ["all 2 layers", f"first 1 of 2 layers{at}", f"first 2 of 2 layers{at}"]  # the tiny base model's 2 layers
    assert [r[0] for r in rows] == ["name encoder (dense top-1)"] + [f"{label}: linker defaults" for label in labels]
    assert [r[2] for r in rows] == [40.0, 50.0] + [51.0] * len(others)
    figures = doc["figures"]["bc5cdr"]
    assert figures["trained_on"] == "ncbi train split"
    assert figures[labels[1]]["groups"] == (12 if kind == "mention_like" else 10)
    assert figures[labels[0]]["run"] == bench.run_name("ncbi", args)
    assert figures[labels[1]]["run"].endswith({"mention_like": "_ml2", "distill": "_L1_d0.5"}.get(kind, "_L1"))
    assert ("_lr0.0001_" in figures[labels[1]]["run"]) == (kind in ("layers_lr", "distill"))


def test_a_name_two_candidates_share_is_read_once_with_the_same_logits(trained_reranker):
    """group_batches runs each group's distinct names only and gives a shared name's logit to every candidate that
    reads it; for the int8 graph that is the logit the repeated row got, bit for bit (the batch's extremes and its
    padded length do not change)."""
    from spacy_sapbert.rerank.model import OnnxCrossEncoder, group_batches

    runs = []

    def run(mentions, names):
        runs.append(list(names))
        return numpy.array([len(n) + 0.5 for n in names], dtype=numpy.float32)

    out = group_batches([("m", ["bb", "a", "bb", "ccc", "a"]), ("n", ["x"])], 2, run)
    assert runs == [["bb", "a"], ["ccc"], ["x"]]  # distinct names, in batches of 2, per group
    assert [o.tolist() for o in out] == [[2.5, 1.5, 2.5, 3.5, 1.5], [1.5]]
    model = OnnxCrossEncoder(trained_reranker)
    session = model._sessions.get()
    for mention, names in [("heart infarct", ["heart attack", "fever", "heart attack", "flu"]),
                           ("high fever", ["fever", "fever", "pyrexia"])]:
        every_row = session.run(None, model._pairs([mention] * len(names), names))[0]
        assert model.score_groups([(mention, names)])[0].tolist() == every_row.tolist()


def test_length_batches_read_each_distinct_pair_once_in_batches_of_one_length():
    """length_batches: every distinct (mention, name) pair of all groups once, in batches of at most batch_size pairs
    of one token length (cut to it: no padding), shortest first; each group gets its pairs' logits back."""
    from spacy_sapbert.rerank.model import length_batches

    def encode(mentions, names):  # a token a character, padded to the longest pair
        rows = [[ord(c) for c in m + n] for m, n in zip(mentions, names)]
        ids = numpy.zeros((len(rows), max(map(len, rows))), dtype=numpy.int64)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = row
        return {"input_ids": ids, "attention_mask": (ids > 0).astype(numpy.int64)}

    shapes = []

    def run(feed):
        shapes.append(feed["input_ids"].shape)
        assert feed["attention_mask"].all()  # cut to the batch's one length
        return feed["input_ids"].sum(axis=1).astype(numpy.float32)

    groups = [("ab", ["c", "dd", "c"]), ("x", ["yy", "c", "zz"]), ("ab", ["dd"])]
    out = length_batches(groups, 2, encode, run)
    assert [o.tolist() for o in out] == [[float(sum(map(ord, m + n))) for n in ns] for m, ns in groups]
    # distinct pairs by length: 2 (x, c); 3 (ab, c), (x, yy), (x, zz); 4 (ab, dd)
    assert shapes == [(1, 2), (2, 3), (1, 3), (1, 4)]
    assert length_batches([], 2, encode, run) == []


def test_the_float32_graph_gives_a_pair_its_logit_in_any_batch(trained_reranker, linker_parts, tmp_path):
    """reranker_precision float32: the pairs of all groups batched by length give each pair the logit it gets alone
    (and close to PyTorch's), so a window's logits are the full list's, cut; E804 for a folder without the
    float32 graph, E810 for an unknown precision."""
    from spacy_sapbert.rerank import CrossEncoder, candidate_logits, load_reranker
    from spacy_sapbert.rerank.model import META_FILE, OnnxCrossEncoder

    model = load_reranker(trained_reranker, precision="float32")
    assert isinstance(model, OnnxCrossEncoder) and model.file == "model.onnx"
    groups = [("heart infarct", ["heart attack", "fever", "heart attack", "flu"]), ("high fever", ["fever", "pyrexia"]),
              ("a very long description of an infarction of the heart muscle", ["heart attack", "infarct"])]
    together = model.score_groups(groups, batch_size=3)
    for (mention, names), logits in zip(groups, together):
        alone = [float(model.score_groups([(mention, [name])])[0][0]) for name in names]
        assert logits.tolist() == pytest.approx(alone, abs=1e-5)
    exact = CrossEncoder.from_disk(trained_reranker)
    flat = numpy.concatenate(together)
    reference = exact.score([m for m, ns in groups for _ in ns], [n for _, ns in groups for n in ns])
    assert numpy.max(numpy.abs(flat - reference)) < 1e-3
    kb, index, encoder = linker_parts
    texts = ["heart infarct", "high fever", "flu"]
    vectors = encoder.encode(texts)
    ranked = index.search(vectors, 4)
    full = candidate_logits(model, index, texts, vectors, ranked, [0, 1, 2], k=4)
    cut = candidate_logits(model, index, texts, vectors, ranked, [0, 1, 2], k=4, window=0.0)  # the best two
    for q in range(3):
        assert cut[q][0] == full[q][0][:2] and cut[q][2] == pytest.approx(full[q][2][:2], abs=1e-5)
    with pytest.raises(ConfigError, match="SB-E810.*reranker_precision"):
        load_reranker(trained_reranker, precision="fp16")
    shutil.copytree(trained_reranker, tmp_path / "no_float32")
    meta = json.loads((tmp_path / "no_float32" / META_FILE).read_text(encoding="utf8"))
    del meta["onnx_files"]["model.onnx"]
    (tmp_path / "no_float32" / META_FILE).write_text(json.dumps(meta), encoding="utf8")
    with pytest.raises(MissingInputError, match="SB-E804.*float32"):
        OnnxCrossEncoder(tmp_path / "no_float32", precision="float32")
    assert OnnxCrossEncoder(tmp_path / "no_float32").file == "model.int8.onnx"


def test_the_linker_at_reranker_precision_float32_saves_it_and_links_alike_in_any_batch(
        linker_parts, tiny_bert_path, trained_reranker, tmp_path):
    import spacy

    kb, _, _ = linker_parts
    kb.to_disk(tmp_path / "kb")
    nlp = linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker, reranker_k=3,
                     reranker_margin=1.0, reranker_dense_weight=2.5, reranker_precision="float32")
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.reranker.precision == "float32" and linker.reranker.model.file == "model.onnx"
    text, spans = "a heart infarct and high fever", [(1, 3), (4, 6)]
    together = [e._.kb_ents for e in linked(nlp, text, spans).ents]
    linker.clear_cache()
    alone = [linked(nlp, text, [span]).ents[0]._.kb_ents for span in spans]
    assert [[c for c, _ in ents] for ents in alone] == [[c for c, _ in ents] for ents in together]
    assert [[s for _, s in ents] for ents in alone] == [pytest.approx([s for _, s in e], abs=1e-5) for e in together]
    nlp.to_disk(tmp_path / "pipe")
    again = spacy.load(tmp_path / "pipe")
    assert again.get_pipe("sapbert_linker").cfg["reranker_precision"] == "float32"
    assert again.get_pipe("sapbert_linker").reranker.model.file == "model.onnx"
    reloaded = [e._.kb_ents for e in linked(again, text, spans).ents]
    assert [[c for c, _ in ents] for ents in reloaded] == [[c for c, _ in ents] for ents in together]
    assert [[s for _, s in ents] for ents in reloaded] == [pytest.approx([s for _, s in e], abs=1e-5) for e in together]
    with pytest.raises(ConfigError, match="SB-E810.*reranker_precision"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": "x", "reranker_precision": "fp16"})


def test_the_stage_remembers_the_groups_it_scored_with_the_same_logits(trained_reranker):
    """RerankStage.score_groups: a group scored before comes from its LRU cache (the model is not run), equal to
    scoring it again; the arrays are the caller's; cache_size bounds it, 0 turns it off; clear_cache empties it;
    a group split into other batches (more distinct names than batch_size) is scored, not served."""
    from spacy_sapbert.rerank.stage import DEFAULT_CACHE_SIZE, RerankStage

    stage = RerankStage(trained_reranker)
    assert stage.cache_size == DEFAULT_CACHE_SIZE
    real, scored = stage.model.score_groups, []

    def counting(groups, batch_size=64):
        scored.extend(m for m, _ in groups)
        return real(groups, batch_size=batch_size)

    stage.model.score_groups = counting
    groups = [("heart infarct", ["heart attack", "fever", "flu"]), ("high fever", ["fever", "pyrexia"]),
              ("heart infarct", ["heart attack", "fever", "flu"])]
    first = stage.score_groups(groups)
    assert scored == ["heart infarct", "high fever"]  # the repeated group once
    first[0][:] = 99.0  # the caller's copy
    again = stage.score_groups(groups[:2])
    assert scored == ["heart infarct", "high fever"]  # nothing run: both remembered
    assert [a.tolist() for a in again] == [g.tolist() for g in real(groups[:2])]
    stage.score_groups([("heart infarct", ["heart attack", "fever", "flu"])], batch_size=2)  # two batches: its own
    assert scored[-1] == "heart infarct" and len(scored) == 3
    stage.clear_cache()
    stage.score_groups(groups[:1])
    assert len(scored) == 4
    stage.cache_size = 1
    stage.score_groups(groups[1:2])  # scored, and evicts the least recently used group ...
    stage.score_groups(groups[:1])  # ... which is scored again
    assert len(scored) == 6 and list(stage._cache)[0][0] == "heart infarct" and len(stage._cache) == 1
    stage.cache_size = 0
    stage.clear_cache()
    stage.score_groups(groups[:1])
    stage.score_groups(groups[:1])
    assert len(scored) == 8 and not stage._cache


def test_the_linker_scores_a_text_of_a_later_batch_from_the_cache_and_clear_cache_empties_both(
        linker_parts, tiny_bert_path, trained_reranker, tmp_path):
    """The same text in two nlp.pipe batches: re-ranked once, the same kb_ents both times and as a cold pipeline
    gives; SapbertLinker.clear_cache forgets the encoder's vectors and the re-ranker's logits."""
    kb, _, _ = linker_parts
    kb.to_disk(tmp_path / "kb")
    nlp = linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker, reranker_margin=1.0)
    linker = nlp.get_pipe("sapbert_linker")
    real, scored = linker.reranker.model.score_groups, []

    def counting(groups, batch_size=64):
        scored.extend(m for m, _ in groups)
        return real(groups, batch_size=batch_size)

    linker.reranker.model.score_groups = counting

    def docs():
        from spacy.tokens import Span

        made = []
        for text, spans in [("a heart infarct and high fever", [(1, 3), (4, 6)]), ("heart infarct", [(0, 2)])]:
            doc = nlp.make_doc(text)
            doc.ents = [Span(doc, s, e, label="Disease") for s, e in spans]
            made.append(doc)
        return made

    out = [[e._.kb_ents for e in doc.ents] for doc in nlp.get_pipe("sapbert_linker").pipe(docs(), batch_size=1)]
    assert sorted(scored) == ["heart infarct", "high fever"]  # the second doc's mention served from the cache
    # the same list up to the dense scores' last bits (the exact search's product depends on the queries batched)
    assert [c for c, _ in out[1][0]] == [c for c, _ in out[0][0]]
    assert [s for _, s in out[1][0]] == pytest.approx([s for _, s in out[0][0]], abs=1e-5)
    cold = linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker, reranker_margin=1.0)
    assert [[e._.kb_ents for e in doc.ents] for doc in cold.get_pipe("sapbert_linker").pipe(docs(), batch_size=1)] \
        == out
    assert linker.encoder._cache and linker.reranker._cache
    linker.clear_cache()
    assert not linker.encoder._cache and not linker.reranker._cache
    assert [[e._.kb_ents for e in doc.ents] for doc in linker.pipe(docs(), batch_size=1)] == out
    assert len(scored) == 4


def test_the_trigger_study_re_ranks_only_the_mentions_each_rule_picks(bench_scripts):
    """reranker_unseen.trigger_rows: 'margin M' re-ranks the close calls; '..., not a KB name' leaves a mention that
    is a KB name as the dense stage ranked it; '..., best name score below B' only those under the bar."""
    bench = bench_scripts.load("reranker_unseen")

    class Names:
        def row_of_name(self, text):
            return 0 if text == "kb name" else -1

    # three mentions, each a close call whose logits put the second candidate first
    ranked = [[("A", 1.0), ("B", 0.99)], [("A", 0.85), ("B", 0.84)], [("A", 0.6), ("B", 0.595)]]
    scored = [(["A", "B"], [a[1], b[1]], [0.0, 5.0]) for a, b in ranked]
    parts = {"texts": ["kb name", "close", "far"], "ranked": ranked, "scored": scored, "max_margin": 0.2}
    golds = [{"B"}, {"B"}, {"B"}]
    seen = []

    def row(name, lists, share):
        seen.append([r[0][0] for r in lists])
        cells = [None] * len(bench.COLUMNS)
        cells[bench.COLUMNS.index("overall")] = share
        return cells

    rows = {r[0]: r for r in bench.trigger_rows(Names(), parts, parts, golds, row, 0.2)}
    assert rows["margin 0.05"][1] == 100.0 and rows["margin 0.05"][2] == 100.0  # every one re-ranked, all right
    assert rows["margin 0.05, not a KB name"][1] == pytest.approx(66.7) and \
        rows["margin 0.05, not a KB name"][2] == pytest.approx(66.7)
    assert rows["margin 0.2, best name score below 0.8"][1] == pytest.approx(33.3)
    assert rows["margin 0.2, best name score below 0.9"][2] == pytest.approx(66.7)
    assert "margin 1" not in rows and len(rows) == 2 * 6 + 4  # margins up to --max-margin, each with and without
    order = [r[0] for r in bench.trigger_rows(Names(), parts, parts, golds, row, 0.2)]
    assert seen[order.index("margin 0.05, not a KB name")] == ["A", "B", "B"]
    assert rows["margin 0.05"][3] == 6 and rows["margin 0.05, not a KB name"][3] == 4  # candidates read
    # a window's rows use the logits scored with that window: here only "close" was read, its best candidate alone
    narrow = {**parts, "scored": [None, (["A"], [0.85], [0.0]), None]}
    rows = {r[0]: r for r in bench.trigger_rows(Names(), parts, parts, golds, row, 0.2, {0.01: (narrow, narrow)})}
    assert rows["margin 0.05, not a KB name, window 0.01"][1:4] == [0.0, pytest.approx(33.3), 1]
    assert len(rows) == 2 * 6 + 4 + 1


def test_reranker_skip_names_leaves_a_mention_that_is_a_kb_name_as_ranked(linker_parts, tiny_bert_path,
                                                                          trained_reranker, tmp_path):
    """reranker_skip_names (the default): 'pyrexia' (a KB name) keeps the name-only list, 'heart infarct' is
    re-ranked as with the key off, where both are."""
    kb, _, _ = linker_parts
    kb.to_disk(tmp_path / "kb")
    spans = [(0, 2), (3, 4)]
    text = "heart infarct and pyrexia"
    plain = [e._.kb_ents for e in linked(linker_nlp(tiny_bert_path, tmp_path / "kb", k=4), text, spans).ents]
    every = [e._.kb_ents for e in linked(linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker,
                                                    reranker_margin=1.0, reranker_skip_names=False), text, spans).ents]
    nlp = linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_path=trained_reranker, reranker_margin=1.0,
                     reranker_skip_names=True)
    assert nlp.get_pipe("sapbert_linker").cfg["reranker_skip_names"] is True
    skipped = [e._.kb_ents for e in linked(nlp, text, spans).ents]
    assert every[1] != plain[1]  # re-ranked: the softmax's probabilities
    assert skipped == [every[0], plain[1]]
    from confection import ConfigValidationError

    with pytest.raises(ConfigValidationError, match="reranker_skip_names"):
        linker_nlp(tiny_bert_path, tmp_path / "kb", reranker_skip_names="yes")
