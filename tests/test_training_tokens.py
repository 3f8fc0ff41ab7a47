"""Pre-tokenised pair sets and the step loader: round trip, refusals, same inputs and same training."""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from spacy_sapbert.errors import ConfigError, DataFormatError, IncompatibleError, MissingInputError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.batching import EpochBatches
from spacy_sapbert.training.config import load_config
from spacy_sapbert.training.forward import sub_batches
from spacy_sapbert.training.loader import LiveTokens, StepInputs, cut_parts, padded_parts, rank_share
from spacy_sapbert.training.pairs import write_kb_pairs, write_task_pairs
from spacy_sapbert.training.tokens import TokenTable, load_or_write_tokens, tokenizer_fingerprint, write_pair_tokens
from spacy_sapbert.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _kb(n=15, seed=0, long_every=4):
    rng = random.Random(seed)

    def word(k=5):
        return "".join(rng.choice("abcdefghij") for _ in range(k))

    concepts = []
    for i in range(n):
        long = " ".join(word() for _ in range(8)) if i % long_every == 0 else word(3)  # > max_length tokens
        concepts.append(Concept(f"C{i:02d}", word(), (word(), long, word(7))))
    return KnowledgeBase.from_concepts(concepts, source="tiny")


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_bert_path))


def _expected(tokenizer, texts, max_length):
    return tokenizer(list(texts), max_length=max_length, truncation=True)["input_ids"]


def test_round_trip_gives_what_the_tokenizer_gives(tmp_path, tokenizer):
    kb = _kb()
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    table = write_pair_tokens(pairs, kb, tokenizer, 12, batch_size=7)  # several batches, one short
    assert len(table) == len(kb.names)
    everything = table.rows(np.arange(len(kb.names)))
    assert everything == _expected(tokenizer, kb.names, 12)
    assert max(len(r) for r in everything) == 12  # the long names were truncated
    some = [5, 0, 5, len(kb.names) - 1]
    assert table.rows(some) == _expected(tokenizer, [kb.names[i] for i in some], 12)
    reopened = TokenTable(pairs, tokenizer, 12)  # memory-mapped, checked
    assert isinstance(reopened.ids, np.memmap) and reopened.rows(some) == table.rows(some)
    assert reopened.meta["tokenizer_fingerprint"] == tokenizer_fingerprint(tokenizer)
    assert table.rows([]) == []


def test_task_pairs_tokenise_their_mention_texts_too(tmp_path, tokenizer):
    kb = _kb()
    mentions = [("a new mention", ["C01"]), ("another one", ["C02", "C03"])]
    pairs = write_task_pairs(kb, mentions, tmp_path / "pairs")
    table = write_pair_tokens(pairs, kb, tokenizer, 25)
    n = len(kb.names)
    assert len(table) == n + 2
    assert table.rows([n + 1, n, 0]) == _expected(tokenizer, ["another one", "a new mention", kb.names[0]], 25)
    ids, lengths = LiveTokens(pairs, kb, tokenizer, 25).flat([n + 1, n, 0])
    flat, lens = table.flat([n + 1, n, 0])
    assert np.array_equal(ids, flat) and np.array_equal(lengths, lens)


def test_fingerprint_ignores_truncation_state_but_not_the_tokenizer(tokenizer, tiny_bert_path):
    from transformers import BertTokenizerFast

    before = tokenizer_fingerprint(tokenizer)
    tokenizer(["x y z"] * 3, max_length=3, truncation=True, padding="max_length")
    assert tokenizer_fingerprint(tokenizer) == before
    cased = BertTokenizerFast(vocab_file=str(tiny_bert_path / "vocab.txt"), do_lower_case=False)
    assert tokenizer_fingerprint(cased) != before


def test_refuses_another_tokenizer_or_max_length(tmp_path, tokenizer, tiny_bert_path):
    from transformers import BertTokenizerFast

    kb = _kb()
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    write_pair_tokens(pairs, kb, tokenizer, 25)
    cased = BertTokenizerFast(vocab_file=str(tiny_bert_path / "vocab.txt"), do_lower_case=False)
    with pytest.raises(IncompatibleError, match=r"\[SB-E218\].*tokens.*max_length 25.*overwrite=True"):
        TokenTable(pairs, cased, 25)
    with pytest.raises(IncompatibleError, match=r"\[SB-E218\].*this run: tokenizer \w+ max_length 16"):
        load_or_write_tokens(pairs, kb, tokenizer, 16)
    with pytest.raises(ConfigError, match=r"tokens"):  # the folder exists: no silent overwrite
        write_pair_tokens(pairs, kb, tokenizer, 16)
    assert write_pair_tokens(pairs, kb, tokenizer, 16, overwrite=True).meta["max_length"] == 16


def test_refuses_the_tokens_of_another_kb(tmp_path, tokenizer):
    kb, other = _kb(), _kb(n=16, seed=1)
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    other_pairs = write_kb_pairs(other, tmp_path / "other")
    write_pair_tokens(other_pairs, other, tokenizer, 25)
    shutil.copytree(tmp_path / "other" / "tokens", tmp_path / "pairs" / "tokens")
    with pytest.raises(IncompatibleError, match=r"\[SB-E219\].*do not belong to this pair set or KB"):
        TokenTable(pairs, tokenizer, 25)
    with pytest.raises(IncompatibleError, match=r"\[SB-E203\]"):  # pairs of one KB, names of another
        write_pair_tokens(pairs, other, tokenizer, 25, overwrite=True)


def test_damaged_or_missing_tables_get_coded_errors(tmp_path, tokenizer):
    kb = _kb()
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    with pytest.raises(MissingInputError, match=r"\[SB-E001\].*write_pair_tokens"):
        TokenTable(pairs, tokenizer, 25)
    write_pair_tokens(pairs, kb, tokenizer, 25)
    ids = tmp_path / "pairs" / "tokens" / "ids.bin"
    ids.write_bytes(ids.read_bytes()[:-4])
    with pytest.raises(DataFormatError, match=r"\[SB-E220\].*ids.bin: \d+ bytes, expected"):
        TokenTable(pairs, tokenizer, 25)
    (tmp_path / "pairs" / "tokens" / "meta.json").write_text("{not json", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E220\].*meta.json"):
        TokenTable(pairs, tokenizer, 25)
    with pytest.raises(ConfigError, match=r"\[SB-E012\].*max_length"):
        write_pair_tokens(pairs, kb, tokenizer, 0, overwrite=True)


@pytest.mark.parametrize("size", [0, 1, 4, 7])
def test_padded_parts_equal_sub_batches(size, tokenizer):
    rng = random.Random(size)
    ids = [[rng.randrange(5, 40) for _ in range(rng.randint(1, 9))] for _ in range(23)]
    parts, inverse = sub_batches(ids, size, 0, torch.device("cpu"))
    lengths = np.asarray([len(r) for r in ids])
    mine, mine_inverse = padded_parts(np.asarray([t for r in ids for t in r], dtype=np.int32), lengths, size, 0)
    assert torch.equal(inverse, mine_inverse) and len(parts) == len(mine)
    for (a, ma), (b, mb) in zip(parts, mine):
        assert torch.equal(a, b) and torch.equal(ma, mb) and b.dtype == torch.long


def test_rank_shares_cover_the_batch():
    rows = np.arange(30, dtype=np.int64).reshape(10, 3)
    ids0, labels = rank_share(rows, 2, 0)
    ids1, labels1 = rank_share(rows, 2, 1)
    assert ids0.tolist() == [0, 3, 6, 9, 12, 1, 4, 7, 10, 13] and ids1[0] == 15
    assert np.array_equal(labels, labels1) and labels.tolist()[:5] == [2, 5, 8, 11, 14]


def test_step_inputs_through_a_dataloader_with_workers_equal_in_process_ones(tmp_path, tokenizer):
    from torch.utils.data import DataLoader

    kb = _kb()
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    table = write_pair_tokens(pairs, kb, tokenizer, 25)
    batches = EpochBatches(pairs, kb, 8, "random", 3)
    n = batches.n_batches() * 2 + 1  # crosses two epoch borders
    live = StepInputs(pairs, batches, LiveTokens(pairs, kb, tokenizer, 25), first_step=2, n_steps=n, pad_id=0)
    loaded = list(DataLoader(StepInputs(pairs, batches, table, first_step=2, n_steps=n, pad_id=0),
                             batch_size=None, num_workers=2))
    assert len(loaded) == n
    with pytest.raises(IndexError):
        live[n]
    for k, got in enumerate(loaded):
        assert all(torch.equal(a, b) for a, b in zip(got, live[k]))
    epoch, index = divmod(2, batches.n_batches())
    rows = pairs.pairs[batches.batch(epoch, index)]
    ids, lengths, inverse, labels = loaded[0]
    assert torch.equal(labels[:4], torch.from_numpy(rows[:4, 2].copy()))
    texts = [kb.names[int(i)] for i in rows[:, 0]] + [kb.names[int(i)] for i in rows[:, 1]]
    parts, want_inverse = sub_batches(_expected(tokenizer, texts, 25), 4, 0, torch.device("cpu"))
    assert torch.equal(inverse, want_inverse)
    assert all(torch.equal(a, b) and torch.equal(m, mm) for (a, m), (b, mm) in zip(parts, cut_parts(ids, lengths, 4)))


def test_training_with_pretokenized_names_and_loader_workers_is_identical(tmp_path, tiny_bert_path):
    kb = _kb(n=12)
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    common = {"training.batch_size": 16, "training.max_steps": 5, "training.lr": 3e-3, "training.device": "cpu",
              "training.checkpoint_every": 100, "model.max_length": 12}
    plain = Trainer(load_config(None, common), kb, pairs, str(tiny_bert_path), tmp_path / "plain").run()
    fast_config = load_config(None, {**common, "training.pretokenize": True, "training.loader_workers": 2})
    fast = Trainer(fast_config, kb, pairs, str(tiny_bert_path), tmp_path / "fast").run()
    assert (tmp_path / "pairs" / "tokens" / "meta.json").is_file()
    a, b = load_file(str(plain.model_path / "model.safetensors")), load_file(str(fast.model_path / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["loss"] for r in plain.history] == [r["loss"] for r in fast.history]
    with pytest.raises(ConfigError, match=r"loader_workers must be >= 0"):
        load_config(None, {**common, "training.loader_workers": -1})
