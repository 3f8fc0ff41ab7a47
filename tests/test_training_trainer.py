"""The trainer on a tiny random BERT: learning, resume, checkpoints, output folders, error paths."""
from __future__ import annotations

import json
import random
import shutil

import pytest
import torch
from safetensors.torch import load_file

from spacy_sapbert.errors import ConfigError, MissingInputError, TrainingError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.config import load_config
from spacy_sapbert.training.pairs import write_kb_pairs
from spacy_sapbert.training.run import dev_set, finetune, pretrain
from spacy_sapbert.training.trainer import Trainer, load_base_model


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _concepts(n=12, seed=0):
    rng = random.Random(seed)

    def word():
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))

    return [Concept(f"C{i:02d}", word(), (word(), word())) for i in range(n)]


@pytest.fixture(scope="module")
def concepts():
    return _concepts()


@pytest.fixture(scope="module")
def kb(concepts):
    return KnowledgeBase.from_concepts(concepts, source="tiny")


@pytest.fixture(scope="module")
def dev(concepts):
    # canonical names only in the dictionary; the aliases are the queries: unrelated strings that
    # only self-alignment on the synonym pairs can link
    dev_kb = KnowledgeBase.from_concepts([Concept(c.concept_id, c.canonical_name) for c in concepts])
    return dev_set(dev_kb, [(a, (c.concept_id,)) for c in concepts for a in c.aliases])


def _config(**overrides):
    base = {"training.batch_size": 36, "training.max_steps": 6, "training.lr": 3e-3, "training.device": "cpu",
            "training.checkpoint_every": 3, "training.log_every": 1}
    base.update(overrides)
    return load_config(None, base)


def _weights(path):
    return load_file(str(path / "model.safetensors"))


def test_tiny_run_lowers_loss_and_raises_acc(tmp_path, tiny_bert_path, kb, dev):
    config = _config(**{"training.max_steps": 100, "training.log_every": 25, "training.eval_every": 50})
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    trainer = Trainer(config, kb, pairs, str(tiny_bert_path), tmp_path / "run", dev=dev)
    before = trainer.evaluate()["dev_acc@1"]
    result = trainer.run()
    losses = [r["loss"] for r in result.history if "loss" in r]
    accs = [r["dev_acc@1"] for r in result.history if "dev_acc@1" in r]
    assert len(losses) == 4 and losses[-1] < losses[0] - 0.1
    assert len(accs) == 2 and accs[-1] >= before + 0.25
    assert result.best_dev == max(accs) and result.steps == 100 and result.pairs_seen == 100 * 36
    # the output is a HF folder the Encoder loads, with the trained weights and settings
    from spacy_sapbert.encoding.torch_encoder import Encoder

    enc = Encoder.from_disk(result.model_path)
    assert enc.pooling == "cls" and enc.max_length == 25
    vecs = enc.encode(["abc", "xyz"])
    assert vecs.shape == (2, 32) and abs(float((vecs**2).sum(1)[0]) - 1) < 1e-5
    assert not torch.equal(_weights(result.model_path)["embeddings.word_embeddings.weight"],
                           _weights(tiny_bert_path)["embeddings.word_embeddings.weight"])
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {"loss", "pairs_per_s", "lr"} <= set(rows[0])


@pytest.mark.parametrize("batching", ["random", "similar"])
def test_resume_gives_the_same_weights_as_an_uninterrupted_run(tmp_path, tiny_bert_path, kb, batching):
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    extra = {"training.batch_size": 8, "training.batching": batching, "training.warmup_steps": 2}
    full = Trainer(_config(**{"training.max_steps": 7, **extra}), kb, pairs, str(tiny_bert_path), tmp_path / "full").run()
    # "crash" after step 3 (a checkpoint at 3, none later), then resume to 7 steps: crosses an epoch (5 batches)
    Trainer(_config(**{"training.max_steps": 4, "training.checkpoint_every": 3, **extra}), kb, pairs,
            str(tiny_bert_path), tmp_path / "cut").run()
    cut = tmp_path / "cut"
    shutil.rmtree(cut / "checkpoints" / "step-000004")
    shutil.rmtree(cut / "model")
    resumed = Trainer(_config(**{"training.max_steps": 7, **extra}), kb, pairs, str(tiny_bert_path), cut).run(resume=True)
    assert resumed.steps == 7 and resumed.pairs_seen == full.pairs_seen
    a, b = _weights(full.model_path), _weights(resumed.model_path)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    steps = [json.loads(x)["step"] for x in (cut / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and len(steps) == len(set(steps)) == 7
    # the optimizer state is plain tensors: loadable with weights_only=True
    last = sorted((cut / "checkpoints").iterdir())[-1]
    state = torch.load(last / "optimizer.pt", weights_only=True)
    assert state["state"] and json.loads((last / "state.json").read_text())["global_step"] == 7
    assert len(list((cut / "checkpoints").iterdir())) == 2  # keep_checkpoints


def test_output_folder_checks(tmp_path, tiny_bert_path, kb):
    out = tmp_path / "run"
    pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 1}))
    with pytest.raises(ConfigError, match=r"\[SB-E209\].*--resume"):
        pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 1}))
    with pytest.raises(ConfigError, match=r"\[SB-E208\].*config.training.lr"):
        pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.lr": 1e-4}), resume=True)
    with pytest.raises(ConfigError, match=r"\[SB-E208\].*pairs.seed"):
        pretrain(kb, str(tiny_bert_path), out, config=_config(**{"pairs.seed": 5}), resume=True)
    # a longer budget continues the same run
    more = pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 2}), resume=True)
    assert more.steps == 2
    with pytest.raises(MissingInputError, match=r"\[SB-E210\]"):
        pretrain(kb, str(tiny_bert_path), tmp_path / "new", config=_config(), resume=True)
    shutil.rmtree(out / "checkpoints")  # the run is known but nothing was saved yet
    with pytest.raises(TrainingError, match=r"\[SB-E210\].*no checkpoint"):
        pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 3}), resume=True)
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine", encoding="utf8")
    with pytest.raises(ConfigError, match=r"\[SB-E208\].*not empty"):
        pretrain(kb, str(tiny_bert_path), stranger, config=_config())


def test_corrupt_checkpoint_is_a_coded_error(tmp_path, tiny_bert_path, kb):
    out = tmp_path / "run"
    pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 3}))
    last = sorted((out / "checkpoints").iterdir())[-1]
    (last / "model.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(TrainingError, match=r"\[SB-E207\].*step-000003"):
        pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 6}), resume=True)
    (last / "optimizer.pt").write_bytes(b"not a torch file")
    shutil.copy(out / "model" / "model.safetensors", last / "model.safetensors")
    with pytest.raises(TrainingError, match=r"\[SB-E207\].*optimizer|\[SB-E207\]"):
        pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 6}), resume=True)


def test_fp16_on_cpu_is_refused_and_bad_amp_values_too(tmp_path, tiny_bert_path, kb):
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    with pytest.raises(ConfigError, match=r"\[SB-E204\].*fp16.*cpu"):
        Trainer(_config(**{"training.amp": "fp16"}), kb, pairs, str(tiny_bert_path), tmp_path / "a")
    with pytest.raises(ConfigError, match=r"\[SB-E002\].*training.amp"):
        _config(**{"training.amp": "int8"})


def test_bf16_autocast_on_cpu_trains(tmp_path, tiny_bert_path, kb):
    """--amp bf16 on CPU is CPU autocast: the step runs its matmuls in bf16, the weights stay fp32."""
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    trainer = Trainer(_config(**{"training.amp": "bf16"}), kb, pairs, str(tiny_bert_path), tmp_path / "run")
    seen = []
    trainer.module.encoder.layer[0].attention.self.query.register_forward_hook(
        lambda mod, args, out: seen.append(out.dtype))
    loss = trainer.step(trainer.batches.batch(0, 0), 0)
    assert seen and all(d == torch.bfloat16 for d in seen)
    assert all(p.dtype == torch.float32 for p in trainer.module.parameters())
    assert loss == loss and loss > 0  # finite, positive (not NaN)


@pytest.mark.parametrize("size", [1, 5, 0])
def test_sub_batches_give_the_vectors_of_one_padded_pass(tiny_bert_path, size):
    """Length-sorted sub-batches, each padded to its own longest name, return the same pooled
    vectors, in the input order, as one pass padding every name to the batch's longest."""
    from spacy_sapbert.encoding.torch_encoder import pool
    from spacy_sapbert.training.forward import SubBatchEncoder, sub_batches

    tokenizer, model = load_base_model(str(tiny_bert_path))
    model.eval()
    texts = ["a much longer name of a disease with many words", "flu", "breast cancer", "x", "type 2 diabetes",
             "cystic fibrosis of the pancreas", "gout"]
    for pooling in ("cls", "mean"):
        ids = tokenizer(texts, max_length=25, truncation=True)["input_ids"]
        parts, inverse = sub_batches(ids, size, tokenizer.pad_token_id, torch.device("cpu"))
        assert len(parts) == (1 if size == 0 else -(-len(texts) // size))
        with torch.no_grad():
            got = SubBatchEncoder(model, pooling)(parts, inverse)
            enc = tokenizer(texts, max_length=25, truncation=True, padding=True, return_tensors="pt")
            want = pool(model(**enc).last_hidden_state, enc["attention_mask"], pooling)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_out_of_memory_on_the_first_batch_suggests_a_smaller_batch(tmp_path, tiny_bert_path, kb, monkeypatch):
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    trainer = Trainer(_config(**{"training.batch_size": 32}), kb, pairs, str(tiny_bert_path), tmp_path / "run")

    def boom(texts):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(trainer, "_embed", boom)
    with pytest.raises(TrainingError, match=r"\[SB-E206\].*32 pairs = 64 names.*--training.batch_size 16"):
        trainer.run()
    trainer2 = Trainer(_config(), kb, pairs, str(tiny_bert_path), tmp_path / "run2")

    def other(texts):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(trainer2, "_embed", other)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        trainer2.run()


def test_non_finite_loss_stops_with_a_coded_error(tmp_path, tiny_bert_path, kb, monkeypatch):
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    trainer = Trainer(_config(), kb, pairs, str(tiny_bert_path), tmp_path / "run")
    monkeypatch.setattr(trainer, "loss_fn", lambda emb, labels, pairs=None: emb.sum() * float("nan"))
    with pytest.raises(TrainingError, match=r"\[SB-E214\].*nan.*step 0"):
        trainer.run()


def test_base_model_that_is_not_an_encoder(tmp_path):
    with pytest.raises(ConfigError, match=r"\[SB-E205\]"):
        load_base_model(str(tmp_path / "nothing"))
    from transformers import GPT2Config

    folder = tmp_path / "gpt"
    folder.mkdir()
    GPT2Config(n_layer=1, n_head=2, n_embd=8, is_decoder=True).save_pretrained(folder)
    with pytest.raises(ConfigError, match=r"\[SB-E205\].*decoder"):
        load_base_model(str(folder))


def test_finetune_on_task_mentions_keeps_the_best_dev_model(tmp_path, tiny_bert_path, concepts, kb, dev):
    train = [(a, (c.concept_id,)) for c in concepts for a in c.aliases]
    config = load_config(None, {"training.batch_size": 24, "training.max_steps": 40, "training.lr": 3e-3,
                                "training.device": "cpu", "training.eval_every": 10, "training.checkpoint_every": 10,
                                "training.log_every": 10}, task="finetune")
    assert config.training.keep_best and config.pairs.max_pairs_per_concept == 20
    result = finetune(kb, train, str(tiny_bert_path), tmp_path / "ft", config=config, dev=dev)
    accs = [r["dev_acc@1"] for r in result.history if "dev_acc@1" in r]
    assert result.best_dev == max(accs) and result.best_dev >= accs[0] + 0.2
    best = _weights(tmp_path / "ft" / "best")
    final = _weights(result.model_path)
    assert all(torch.equal(best[k], final[k]) for k in best)
    meta = json.loads((tmp_path / "ft" / "pairs" / "meta.json").read_text())
    assert meta["kind"] == "task" and meta["n_mentions"] == len(train)


def test_a_run_recorded_before_a_setting_existed_still_resumes(tmp_path, tiny_bert_path, kb):
    out = tmp_path / "run"
    pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 1}))
    run_file = out / "run.json"
    recorded = json.loads(run_file.read_text(encoding="utf8"))
    # as an older version wrote it: no [meta] section, no select_unseen_weight setting
    del recorded["config"]["meta"]
    del recorded["config"]["training"]["select_unseen_weight"]
    run_file.write_text(json.dumps(recorded), encoding="utf8")
    assert pretrain(kb, str(tiny_bert_path), out, config=_config(**{"training.max_steps": 2}), resume=True).steps == 2
    # a new setting away from its default is still another run
    with pytest.raises(ConfigError, match=r"\[SB-E208\].*select_unseen_weight"):
        pretrain(kb, str(tiny_bert_path), out, resume=True,
                 config=_config(**{"training.max_steps": 3, "training.select_unseen_weight": 0.5}))
