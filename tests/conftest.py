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
ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


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


# Names the tiny XLM-R tokenizer is trained on: the KB fixtures' names, the linker tests' names and
# clinical terms in several languages (accents included), so that pieces are words or word parts.
_XLMR_NAMES = """heart attack|myocardial infarction|mi|mitral insufficiency|mitral regurgitation|influenza|flu|grippe
aspirin|acetylsalicylic acid|ibuprofen|fever|pyrexia|common cold|coryza|abnormality of the heart|cardiac abnormality
heart defect|cardiac anomalies|congenital heart disease|seizure|epileptic fit|tall stature|increased body height
diabetes mellitus|diabetes|hypertension|asthma|pneumonia|headache|migraine|cancer|breast cancer|lung cancer
infarto de miocardio|ataque al corazón|gripe|fiebre|dolor de cabeza|cáncer de mama|diabetes sacarina|hipertensión
neumonía|asma|insuficiencia mitral|convulsión|estatura alta|anomalía cardíaca|resfriado común|ácido acetilsalicílico
infarctus du myocarde|crise cardiaque|grippe saisonnière|fièvre|céphalée|mal de tête|cancer du sein|diabète sucré
hypertension artérielle|pneumonie|insuffisance mitrale|crise d'épilepsie|grande taille|anomalie cardiaque|rhume
herzinfarkt|myokardinfarkt|grippe|fieber|kopfschmerzen|brustkrebs|zuckerkrankheit|bluthochdruck|lungenentzündung
mitralinsuffizienz|krampfanfall|großwuchs|herzfehler|erkältung|acetylsalicylsäure|übelkeit|schädel-hirn-trauma
hartinfarct|griep|koorts|hoofdpijn|borstkanker|suikerziekte|hoge bloeddruk|longontsteking|verkoudheid|misselijkheid
infarto do miocárdio|febre|dor de cabeça|câncer de mama|pressão alta|pneumonia grave|náusea|convulsão|resfriado"""


def _xlmr_training_names() -> list:
    names = [n for line in _XLMR_NAMES.splitlines() for n in line.split("|")]
    # each name also capitalised and in short combinations: a few hundred lines in all
    names += [n.capitalize() for n in names] + [f"{a} {b}" for a, b in zip(names, reversed(names))]
    return names + [string.ascii_letters + string.digits + string.punctuation + "áàâäãçéèêëíìîïñóòôöõúùûüßœæ"]


def build_tiny_xlmr(path: Path, seed: int = 0, hidden_size: int = 32) -> Path:
    """A random 2-layer XLM-R with a small SentencePiece-style Unigram tokenizer trained here, saved as a HF
    folder (``tokenizer.json`` of an ``XLMRobertaTokenizerFast``: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2,
    ``<unk>`` 3, ``<mask>`` last, as in the released XLM-R)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    backend = Tokenizer(models.Unigram())
    backend.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(" {2,}", " ")])
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                      unk_token="<unk>", show_progress=False)
    backend.train_from_iterator(_xlmr_training_names(), trainer=trainer)
    backend.add_special_tokens(["<mask>"])
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", backend.token_to_id("<s>")), ("</s>", backend.token_to_id("</s>"))])
    tokenizer = XLMRobertaTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                        cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    config = XLMRobertaConfig(
        vocab_size=backend.get_vocab_size(), hidden_size=hidden_size, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=66, type_vocab_size=1, pad_token_id=1, bos_token_id=0,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    XLMRobertaModel(config).save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_xlmr_path(tmp_path_factory) -> Path:
    """Path of a tiny random XLM-R folder (SentencePiece-style tokenizer, no download). Read-only."""
    return build_tiny_xlmr(tmp_path_factory.mktemp("tiny_xlmr") / "model", seed=0)


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


@pytest.fixture(scope="module")
def toy_kb():
    """The toy KnowledgeBase of ``helpers.TOY_CONCEPTS`` (five concepts, "MI" shared by D001 and D002), one per
    test module (``kb.add_alias`` changes it: build your own with ``helpers.make_toy_kb`` to do that)."""
    from helpers import make_toy_kb

    return make_toy_kb()


@pytest.fixture(scope="module")
def toy_kb_path(tmp_path_factory) -> Path:
    """The toy KB of ``toy_kb`` saved to a folder, one per test module. Read-only."""
    from helpers import write_toy_kb

    return write_toy_kb(tmp_path_factory.mktemp("toy_kb") / "kb")


@pytest.fixture(scope="session")
def corpus_pipeline(tiny_bert_path, tmp_path_factory) -> Path:
    """A saved pipeline: an entity ruler (flu, grippe → DISEASE; aspirin, ibuprofen → CHEMICAL) + a
    sapbert_linker (tiny BERT, mean pooling, CPU, threshold -1) over the toy KB's D003, C004, C005. Read-only."""
    import spacy

    from helpers import write_toy_kb

    from spacy_sapbert.commands.pipeline import create_pipeline

    root = tmp_path_factory.mktemp("corpus_pipeline")
    write_toy_kb(root / "kb", "D003", "C004", "C005")
    base = spacy.blank("en")
    base.add_pipe("entity_ruler").add_patterns(
        [{"label": "DISEASE", "pattern": p} for p in ("flu", "grippe")]
        + [{"label": "CHEMICAL", "pattern": p} for p in ("aspirin", "ibuprofen")])
    base.to_disk(root / "base")
    create_pipeline(root / "pipeline", kb_path=root / "kb", model=str(tiny_bert_path), base=root / "base",
                    config={"pooling": "mean", "device": "cpu", "threshold": -1.0}, show_progress=False)
    return root / "pipeline"


def _write_corpus_shards(folder: Path, sizes=(5, 0, 9, 3)) -> Path:
    import json

    folder.mkdir(parents=True, exist_ok=True)
    words = ["aspirin", "flu", "grippe", "ibuprofen", "fever"]
    for s, size in enumerate(sizes):
        with open(folder / f"s{s}.jsonl", "w", encoding="utf8") as fh:
            for i in range(size):
                text = f"Doc {s}-{i}: she took {words[i % 5]} for the {words[(i + s) % 5]}, then {words[(2 * i) % 5]}."
                fh.write(json.dumps({"id": f"{s}-{i}", "text": text}) + "\n")
    return folder


@pytest.fixture(scope="session")
def write_corpus_shards():
    """``write(folder, sizes=(5, 0, 9, 3))``: JSONL shards ``s<i>.jsonl`` of ``sizes`` documents each (an
    empty shard included by default) with ids ``<shard>-<i>``; returns the folder."""
    return _write_corpus_shards


@pytest.fixture()
def bench_scripts(monkeypatch, tmp_path):
    """The benchmark scripts without their data: ``load(name)`` imports ``benchmarks/<name>.py`` (or
    ``benchmarks/studies/<name>.py``) afresh, whose results files go to ``results`` (``tmp_path/results``, through
    ``results_io``); ``render`` is ``scripts/render_benchmarks.py`` and ``rendered()`` the benchmarks page made
    from ``results``."""
    import importlib
    import sys
    from types import SimpleNamespace

    from helpers import load_module

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "studies"))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    results_io = importlib.import_module("results_io")
    monkeypatch.setattr(results_io, "RESULTS_DIR", tmp_path / "results")
    render = load_module(ROOT / "scripts" / "render_benchmarks.py")
    loaded = []

    def load(name: str):
        sys.modules.pop(name, None)
        loaded.append(name)
        return importlib.import_module(name)

    yield SimpleNamespace(load=load, results=tmp_path / "results", results_io=results_io, render=render,
                          rendered=lambda: render.render_all(tmp_path / "results"))
    for name in loaded:
        sys.modules.pop(name, None)
