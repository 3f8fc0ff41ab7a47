"""Shared fixtures. Everything here is built locally: no test reaches the model hub."""
from __future__ import annotations

import os
import string
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURES = Path(__file__).parent / "fixtures"
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _tiny_vocab() -> list:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    return specials + chars + ["##" + c for c in string.ascii_lowercase + string.digits]


def build_tiny_bert(path: Path, seed: int = 0, hidden_size: int = 32) -> Path:
    """A random 2-layer BERT with a character-level WordPiece vocab, saved as a HF folder."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    vocab_file = path / "vocab.txt"
    vocab_file.write_text("\n".join(_tiny_vocab()) + "\n", encoding="utf8")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)
    config = BertConfig(
        vocab_size=len(_tiny_vocab()),
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    model = BertModel(config)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_bert_path(tmp_path_factory) -> Path:
    """Path of a tiny random BERT folder (config, model.safetensors, tokenizer). Read-only: copy it
    before you change it."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert") / "model", seed=0)


@pytest.fixture(scope="session")
def other_tiny_bert_path(tmp_path_factory) -> Path:
    """A second tiny BERT with different weights (to test fingerprint mismatches)."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert_other") / "model", seed=1)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a test module (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``):
    with tiny models on a busy CPU, thread hand-offs cost far more than they save (10x seen here)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class EveryTokenEnts:
    """Stands in for NER: every non-space token is an entity (module level, so ``n_process=2`` can pickle it)."""

    def __call__(self, doc):
        from spacy.tokens import Span

        doc.ents = [Span(doc, i, i + 1, label="E") for i in range(len(doc)) if not doc[i].is_space]
        return doc


def _make_every_token_ents(nlp, name):
    return EveryTokenEnts()


@pytest.fixture(scope="session")
def every_token_ents() -> str:
    """The name of a registered factory that makes :class:`EveryTokenEnts` (add it before a linker)."""
    import spacy

    name = "_test_every_token_ents"
    if name not in spacy.registry.factories.get_all():
        spacy.Language.factory(name)(_make_every_token_ents)
    return name


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data; tests using it must be marked ``slow`` and are skipped when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
