"""XLM-R (SentencePiece) encoders end to end, with the tiny XLM-R of ``conftest.build_tiny_xlmr``: ``<s>`` as the
[CLS] token, ``<pad>`` = 1 (RoBERTa's position ids skip it), no ``token_type_ids``, no ``vocab.txt``; the encoder,
the ONNX export, build-index, the linker (PyTorch and ONNX Runtime), nlp.to_disk / spacy.load, pretraining and
fine-tuning (pre-tokenised pairs and DataLoader workers). ``spacy package`` is in test_linker_package.py."""
from __future__ import annotations

import json

import numpy as np
import pytest
import spacy
from spacy.tokens import Span
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.kb import Concept, KnowledgeBase

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONCEPTS = [
    Concept("C1", "infarto de miocardio", ("heart attack", "herzinfarkt", "infarctus du myocarde")),
    Concept("C2", "gripe", ("influenza", "grippe", "griep")),
    Concept("C3", "fiebre", ("fever", "fièvre", "fieber")),
    Concept("C4", "dolor de cabeza", ("headache", "kopfschmerzen", "céphalée")),
]
TEXTS = ["gripe", "infarto de miocardio agudo con dolor", "fièvre", "übelkeit und kopfschmerzen bei großwuchs", "griep"]


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("xlmr_kb") / "kb"
    KnowledgeBase.from_concepts(CONCEPTS, source="multilingual").to_disk(path)
    return path


def test_tiny_xlmr_is_a_sentencepiece_xlmr(tiny_xlmr_path):
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_xlmr_path))
    assert type(tok).__name__ == "XLMRobertaTokenizerFast" and AutoConfig.from_pretrained(str(tiny_xlmr_path)).model_type == "xlm-roberta"
    assert (tok.cls_token, tok.cls_token_id, tok.pad_token_id, tok.sep_token_id, tok.unk_token_id) == ("<s>", 0, 1, 2, 3)
    assert tok.mask_token_id == len(tok) - 1 and not (tiny_xlmr_path / "vocab.txt").exists()
    out = tok("fièvre")
    assert "token_type_ids" not in out and out["input_ids"][0] == 0 and out["input_ids"][-1] == 2
    assert tok.convert_ids_to_tokens(out["input_ids"])[1].startswith("\u2581")  # SentencePiece word start
    assert tok.unk_token_id not in tok("Schädel-Hirn-Trauma, céphalée")["input_ids"]  # accents are in the vocab


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_encoder_pools_s_and_pads_with_the_pad_id(tiny_xlmr_path, tmp_path, pooling):
    import torch

    enc = Encoder.load(tiny_xlmr_path, pooling=pooling, device="cpu")
    rows = enc._token_rows(TEXTS)
    assert all(r[0] == 0 and r[-1] == 2 for r in rows)
    batch = enc.encode(TEXTS, batch_size=8, use_cache=False)  # one padded batch of mixed lengths
    single = np.stack([enc.encode([t], use_cache=False)[0] for t in TEXTS])
    np.testing.assert_allclose(batch, single, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    if pooling == "cls":  # the vector of <s>, the first token
        with torch.inference_mode():
            hidden = enc.model(input_ids=torch.tensor([rows[0]])).last_hidden_state[:, 0]
        np.testing.assert_allclose(batch[0], torch.nn.functional.normalize(hidden, dim=-1)[0].numpy(), atol=1e-5)
    enc.to_disk(tmp_path / "enc")
    again = Encoder.from_disk(tmp_path / "enc", device="cpu")
    assert again.fingerprint == enc.fingerprint and again.pooling == pooling
    np.testing.assert_allclose(again.encode(TEXTS, use_cache=False), batch, atol=1e-6)


def test_context_encoder_marks_mentions_with_xlmr_special_tokens(tiny_xlmr_path):
    from spacy_sapbert.context.context_encoder import MARKERS, ContextEncoder

    ctx = ContextEncoder.load(str(tiny_xlmr_path), max_length=16, device="cpu")
    text = "El paciente tiene gripe y fiebre alta desde ayer por la tarde"
    row = ctx.token_rows([(text, 18, 23)])[0]
    tok = ctx.encoder.tokenizer
    open_id, close_id = (tok.convert_tokens_to_ids(m) for m in MARKERS)
    assert len(row) == 16 and (row[0], row[-1]) == (0, 2)  # <s> ... </s>, within max_length
    inside = tok.decode(row[row.index(open_id) + 1 : row.index(close_id)]).strip()
    assert inside == "gripe"
    assert ctx.encode([(text, 18, 23), ("gripe", 0, 5)]).shape == (2, 32)


def test_onnx_export_of_xlmr_matches_torch(tiny_xlmr_path, tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from spacy_sapbert.encoding.onnx_encoder import ONNX_FILE, OnnxEncoder, export_onnx

    enc = Encoder.load(tiny_xlmr_path, pooling="mean", device="cpu")
    enc.to_disk(tmp_path / "enc")
    export_onnx(enc, tmp_path / "enc")
    graph = onnx.load(str(tmp_path / "enc" / ONNX_FILE)).graph
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask"]  # XLM-R takes no token_type_ids
    runtime = OnnxEncoder.from_disk(tmp_path / "enc")
    assert runtime._tokenize(TEXTS) == enc._token_rows(TEXTS)
    assert runtime.pad_id == 1
    np.testing.assert_allclose(runtime.encode(TEXTS, batch_size=3, use_cache=False),
                               enc.encode(TEXTS, batch_size=3, use_cache=False), atol=1e-5)


def test_released_layout_with_only_a_sentencepiece_model(tmp_path):
    """The released XLM-R SapBERT folders hold ``sentencepiece.bpe.model`` (``<unk>``, ``<s>``, ``</s>`` first, shifted
    by one id as fairseq does) and no ``tokenizer.json``: the encoder
    loads them (transformers converts the model to a fast tokenizer) and saves ``tokenizer.json``, which ONNX
    Runtime's tokenizer then reads: the same ids as the PyTorch encoder."""
    import io

    import sentencepiece  # a dev requirement (the [multilingual] extra): a missing one fails, never skips
    pytest.importorskip("onnxruntime")
    from conftest import _xlmr_training_names
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder, export_onnx

    folder = tmp_path / "released"
    folder.mkdir()
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_xlmr_training_names()), model_writer=model, vocab_size=300, model_type="unigram",
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, character_coverage=1.0, minloglevel=2, hard_vocab_limit=False)
    (folder / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    slow = XLMRobertaTokenizer(str(folder / "sentencepiece.bpe.model"))
    slow.save_pretrained(folder)
    XLMRobertaModel(XLMRobertaConfig(vocab_size=len(slow), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=66, type_vocab_size=1)).save_pretrained(folder)
    assert not (folder / "tokenizer.json").exists()
    enc = Encoder.load(folder, pooling="cls", device="cpu")
    assert enc._token_rows(TEXTS) == slow(TEXTS, truncation=True, max_length=25)["input_ids"]
    enc.to_disk(tmp_path / "saved")
    assert (tmp_path / "saved" / "tokenizer.json").is_file()
    export_onnx(enc, tmp_path / "saved")
    runtime = OnnxEncoder.from_disk(tmp_path / "saved")
    assert runtime._tokenize(TEXTS) == enc._token_rows(TEXTS) and runtime.pad_id == 1


def _link(nlp, text, spans):
    doc = nlp.make_doc(text)
    doc.ents = [Span(doc, s, e, label="E") for s, e in spans]
    for _, proc in nlp.pipeline:
        doc = proc(doc)
    return [(ent.kb_id_, ent._.kb_ents) for ent in doc.ents]


def test_build_index_and_linker_with_torch_and_onnx_runtime(tiny_xlmr_path, kb_dir, tmp_path):
    res = CliRunner().invoke(app, ["build-index", str(kb_dir), "-m", str(tiny_xlmr_path), "-o", str(tmp_path / "index"),
                                   "--pooling", "mean", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    nlp = spacy.blank("es")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_xlmr_path), "device": "cpu", "pooling": "mean",
                                                    "threshold": -1.0})
    linker.initialize(kb_path=str(kb_dir), index_path=str(tmp_path / "index"), show_progress=False)
    text, spans = "gripe y fièvre con herzinfarkt", [(0, 1), (2, 3), (4, 5)]
    linked = _link(nlp, text, spans)
    assert [kb_id for kb_id, _ in linked] == ["C2", "C3", "C1"]  # exact KB names in three languages
    assert all(ents[0][1] == pytest.approx(1.0, abs=1e-5) for _, ents in linked)
    nlp.to_disk(tmp_path / "nlp")
    for runtime, kind in (("auto", "OnnxEncoder"), ("torch", "Encoder")):
        loaded = spacy.load(tmp_path / "nlp", config={"components": {"sapbert_linker": {"runtime": runtime}}})
        assert type(loaded.get_pipe("sapbert_linker").encoder).__name__ == kind
        again = _link(loaded, text, spans)
        assert [k for k, _ in again] == [k for k, _ in linked]
        assert [s for _, ents in again for _, s in ents] == pytest.approx([s for _, ents in linked for _, s in ents], abs=1e-5)


def test_pretrain_with_pretokenised_pairs_and_workers_then_finetune(tiny_xlmr_path, kb_dir, tmp_path):
    from transformers import AutoTokenizer

    runner = CliRunner()
    out = tmp_path / "pre"
    res = runner.invoke(app, ["pretrain", str(kb_dir), "-m", str(tiny_xlmr_path), "-o", str(out), "--device", "cpu",
                              "--training.batch_size", "4", "--training.max_steps", "3", "--training.lr", "0.001",
                              "--training.pretokenize", "true", "--training.loader_workers", "1",
                              "--model.pooling", "mean"])
    assert res.exit_code == 0, res.output
    assert "Trained 3 steps" in res.output
    meta = json.loads(next(out.rglob("tokens/meta.json")).read_text())
    assert meta["n_texts"] >= len(KnowledgeBase.from_disk(kb_dir).names)
    saved = out / "model"
    tok = AutoTokenizer.from_pretrained(str(saved))
    assert type(tok).__name__ == "XLMRobertaTokenizerFast" and tok.pad_token_id == 1
    trained = Encoder.from_disk(saved, device="cpu")
    assert trained.fingerprint != Encoder.load(tiny_xlmr_path, pooling="mean", device="cpu").fingerprint

    train = tmp_path / "train.tsv"
    train.write_text("mention\tids\ninfarto agudo de miocardio\tC1\ngripe estacional\tC2\nfiebre alta\tC3\n"
                     "dolores de cabeza\tC4\n", encoding="utf8")
    ft = tmp_path / "ft"
    res = runner.invoke(app, ["finetune", str(kb_dir), str(train), "-m", str(saved), "-o", str(ft), "--dev", str(train),
                              "--device", "cpu", "--training.batch_size", "4", "--training.max_steps", "2",
                              "--model.pooling", "mean"])
    assert res.exit_code == 0, res.output
    assert Encoder.from_disk(ft / "model", device="cpu").encode(["gripe"]).shape == (1, 32)


class _BigVocabTokenizer:
    """A stand-in for XLM-R's 250,002-piece vocabulary: ids above 65,535 (they would wrap in uint16)."""

    backend_tokenizer = None

    def __call__(self, texts, max_length, **_):
        return {"input_ids": [[0] + [250_000 - ord(c) for c in t][: max_length - 2] + [2] for t in texts]}

    def get_vocab(self):
        return {"<s>": 0, "</s>": 2}


def test_token_table_keeps_ids_of_a_250k_vocabulary(tmp_path):
    from spacy_sapbert.training.loader import LiveTokens
    from spacy_sapbert.training.pairs import write_kb_pairs
    from spacy_sapbert.training.tokens import TokenTable, write_pair_tokens

    kb = KnowledgeBase.from_concepts(CONCEPTS, source="multilingual")
    pairs = write_kb_pairs(kb, tmp_path / "pairs")
    tok = _BigVocabTokenizer()
    write_pair_tokens(pairs, kb, tok, 12)
    table = TokenTable(pairs, tok, 12)
    everything = list(range(len(kb.names)))
    assert table.rows(everything) == tok(list(kb.names), 12)["input_ids"]
    assert int(table.ids.max()) > 2**16
    flat, lengths = LiveTokens(pairs, kb, tok, 12).flat(everything)
    np.testing.assert_array_equal(flat, table.flat(everything)[0])
