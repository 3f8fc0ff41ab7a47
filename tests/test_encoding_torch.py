"""Encoder: loading, pooling, normalisation, ordering, cache, fingerprint, errors."""
from __future__ import annotations

import json
import shutil

import numpy
import pytest
import torch

from spacy_sapbert.encoding.torch_encoder import Encoder, pad_token_rows, pool, weights_fingerprint
from spacy_sapbert.errors import ConfigError, MissingInputError

NAMES = ["heart attack", "myocardial infarction", "a", "type 2 diabetes mellitus with complications", "flu"]


@pytest.fixture(scope="module")
def enc(tiny_bert_path):
    return Encoder.load(tiny_bert_path, device="cpu")


def _reference(enc: Encoder, texts, pooling="cls"):
    """Encode one text at a time, no batching, no cache: the reference for batched encoding."""
    rows = []
    with torch.inference_mode():
        for text in texts:
            batch = enc.tokenizer([text], truncation=True, max_length=enc.max_length, return_tensors="pt")
            hidden = enc.model(**batch).last_hidden_state
            vec = pool(hidden, batch["attention_mask"], pooling)
            rows.append(torch.nn.functional.normalize(vec, dim=-1)[0].numpy())
    return numpy.stack(rows)


def test_encode_shape_dtype_and_unit_norm(enc):
    out = enc.encode(NAMES, batch_size=2)
    assert out.shape == (len(NAMES), 32)
    assert out.dtype == numpy.float32
    numpy.testing.assert_allclose(numpy.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    assert enc.dim == 32 and enc.pooling == "cls" and enc.max_length == 25


def test_sorted_batches_give_same_vectors_as_one_by_one(enc):
    enc.clear_cache()
    out = enc.encode(NAMES, batch_size=2, use_cache=False)
    numpy.testing.assert_allclose(out, _reference(enc, NAMES), atol=1e-5)


def test_mean_pooling_differs_from_cls_and_matches_reference(tiny_bert_path):
    mean = Encoder.load(tiny_bert_path, pooling="mean", device="cpu")
    out = mean.encode(NAMES, batch_size=3)
    numpy.testing.assert_allclose(out, _reference(mean, NAMES, "mean"), atol=1e-5)
    cls = Encoder.load(tiny_bert_path, device="cpu").encode(NAMES)
    assert not numpy.allclose(out, cls)


def test_pool_mean_ignores_padding():
    hidden = torch.tensor([[[1.0, 1.0], [3.0, 5.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.equal(pool(hidden, mask, "mean"), torch.tensor([[2.0, 3.0]]))
    assert torch.equal(pool(hidden, mask, "cls"), torch.tensor([[1.0, 1.0]]))
    with pytest.raises(ConfigError, match="SB-E002"):
        pool(hidden, mask, "max")


def test_duplicates_and_cache(enc):
    enc.clear_cache()
    out = enc.encode(["flu", "flu", "cold"])
    numpy.testing.assert_array_equal(out[0], out[1])
    assert set(enc._cache) == {"flu", "cold"}
    again = enc.encode(["cold"])
    numpy.testing.assert_array_equal(again[0], out[2])


def test_cache_is_bounded(tiny_bert_path):
    small = Encoder.load(tiny_bert_path, device="cpu", cache_size=3)
    small.encode([f"name {i}" for i in range(10)])
    assert list(small._cache) == ["name 7", "name 8", "name 9"]
    small.encode(["name 7", "new"])  # 7 becomes most recent, 8 is evicted
    assert list(small._cache) == ["name 9", "name 7", "new"]


def test_empty_input_and_long_input_truncated(enc):
    assert enc.encode([]).shape == (0, 32)
    long = " ".join(["word"] * 200)
    longer = long + " extra words at the end"
    out = enc.encode([long, longer], use_cache=False)
    numpy.testing.assert_allclose(out[0], out[1], atol=1e-6)  # both cut at max_length word pieces


def test_fingerprint_stable_and_changes_with_weights(tiny_bert_path, other_tiny_bert_path, tmp_path):
    a = Encoder.load(tiny_bert_path, device="cpu")
    b = Encoder.load(tiny_bert_path, device="cpu")
    assert a.fingerprint == b.fingerprint
    assert Encoder.load(other_tiny_bert_path, device="cpu").fingerprint != a.fingerprint
    with torch.no_grad():
        b.model.encoder.layer[0].output.dense.weight[3, 5] += 1e-3  # one weight
    assert weights_fingerprint(b.model) != a.fingerprint


def test_to_disk_from_disk_round_trip(enc, tmp_path):
    enc.to_disk(tmp_path / "enc")
    assert (tmp_path / "enc" / "model.safetensors").exists()
    settings = json.loads((tmp_path / "enc" / "sapbert_encoder.json").read_text())
    assert settings["pooling"] == "cls" and settings["fingerprint"] == enc.fingerprint
    back = Encoder.from_disk(tmp_path / "enc", device="cpu")
    assert back.fingerprint == enc.fingerprint
    numpy.testing.assert_allclose(back.encode(NAMES), enc.encode(NAMES), atol=1e-6)


def test_folder_without_tokenizer_is_a_coded_error(tiny_bert_path, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_bert_path / name, bare / name)
    with pytest.raises(MissingInputError, match="SB-E100"):
        Encoder.load(bare)


def test_missing_folder_config_and_unreachable_hub(tmp_path, tiny_bert_path):
    with pytest.raises(MissingInputError, match="SB-E001"):
        Encoder.load(tmp_path / "nope")
    no_config = tmp_path / "noconfig"
    no_config.mkdir()
    shutil.copy(tiny_bert_path / "vocab.txt", no_config / "vocab.txt")
    with pytest.raises(MissingInputError, match="SB-E101"):
        Encoder.load(no_config)
    with pytest.raises(MissingInputError, match="SB-E512"):  # HF_HUB_OFFLINE=1 in conftest: at once
        Encoder.load("no-such-org/no-such-model-xyz")
    with pytest.raises(MissingInputError, match="SB-E104"):
        Encoder.from_disk(tiny_bert_path)


def test_bad_options_are_coded_errors(tiny_bert_path):
    with pytest.raises(ConfigError, match="SB-E002"):
        Encoder.load(tiny_bert_path, pooling="max")
    with pytest.raises(ConfigError, match="SB-E102"):
        Encoder.load(tiny_bert_path, device="cpu", precision="fp16")
    with pytest.raises(ConfigError, match="SB-E002"):
        Encoder.load(tiny_bert_path, device="cpu", precision="fp8")
    with pytest.raises(ConfigError, match="SB-E103"):
        Encoder.load(tiny_bert_path, device="cpu", max_length=1)
    with pytest.raises(ConfigError, match="SB-E105"):
        Encoder.load(tiny_bert_path, device="cpu").encode(["x"], batch_size=0)


def test_bf16_on_cpu_is_autocast_close_to_fp32(tiny_bert_path):
    """precision='bf16' on CPU keeps fp32 weights and runs the forward pass under bf16 autocast;
    'auto' on CPU never switches it on."""
    full = Encoder.load(tiny_bert_path, device="cpu", precision="auto", cache_size=0)
    bf16 = Encoder.load(tiny_bert_path, device="cpu", precision="bf16", cache_size=0)
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())
    assert bf16.fingerprint == full.fingerprint
    a, b = full.encode(NAMES), bf16.encode(NAMES)
    assert b.dtype == numpy.float32
    numpy.testing.assert_allclose(numpy.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert not numpy.array_equal(a, b)  # bf16 arithmetic really ran
    assert float(numpy.min(numpy.sum(a * b, axis=1))) > 0.99


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_half_precision_on_gpu_close_to_fp32(tiny_bert_path):
    full = Encoder.load(tiny_bert_path, device="cpu").encode(NAMES)
    half = Encoder.load(tiny_bert_path, device="cuda", precision="auto")
    assert half.fingerprint == Encoder.load(tiny_bert_path, device="cpu").fingerprint
    numpy.testing.assert_allclose(half.encode(NAMES), full, atol=2e-2)


@pytest.mark.parametrize("lengths", [(1,), (3, 1, 5), (4, 4, 4), (2, 7, 1, 7, 3)])
def test_pad_token_rows_pads_each_row_to_the_longest_with_its_mask(lengths):
    rows = [[100 * (j + 1) + i for i in range(n)] for j, n in enumerate(lengths)]
    ids, mask = pad_token_rows(rows, 0, torch.device("cpu"))
    assert ids.dtype == mask.dtype == torch.long and ids.shape == mask.shape == (len(rows), max(lengths))
    for j, row in enumerate(rows):
        assert ids[j].tolist() == row + [0] * (max(lengths) - len(row))
        assert mask[j].tolist() == [1] * len(row) + [0] * (max(lengths) - len(row))
    assert pad_token_rows([[5, 6]], 9, "cpu")[0].tolist() == [[5, 6]]
