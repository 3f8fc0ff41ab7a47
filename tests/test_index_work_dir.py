"""build-index work folders: a damaged chunk is encoded again, a damaged work.json starts afresh, a
default work folder of another build is cleaned, and a second process cannot share one."""
from __future__ import annotations

import logging

import numpy
import pytest

from helpers import make_toy_kb

from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import ConfigError, IncompatibleError
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.index.build import LOCK_FILE, WORK_FILE
from spacy_sapbert.base.outputs import FileLock


@pytest.fixture(scope="module")
def kb():
    return make_toy_kb("D003", "C004", "C005")  # 6 names: 3 chunks of 2


@pytest.fixture(scope="module")
def enc(tiny_bert_path):
    return Encoder.load(tiny_bert_path, device="cpu")


class _Counting:
    """Counts the names the wrapped encoder encodes."""

    def __init__(self, enc):
        self.enc, self.encoded = enc, 0
        self.dim, self.pooling, self.max_length = enc.dim, enc.pooling, enc.max_length
        self.fingerprint, self.name = enc.fingerprint, enc.name

    def encode(self, texts, **kwargs):
        self.encoded += len(texts)
        return self.enc.encode(texts, **kwargs)


def _build(kb, enc, work, chunk_size=2):
    return ConceptIndex.build(kb, enc, work_dir=work, chunk_size=chunk_size, show_progress=False, exact=True)


def _messages(caplog, code):
    return [r.getMessage() for r in caplog.records if code in r.getMessage()]


@pytest.mark.parametrize("damage", [b"", b"\x93NUMPY garbage", None])
def test_a_damaged_chunk_is_encoded_again_with_a_warning(kb, enc, tmp_path, caplog, damage):
    work = tmp_path / "work"
    counting = _Counting(enc)
    first = _build(kb, counting, work)
    chunk = sorted(work.glob("chunk_*.npy"))[1]
    if damage is None:  # a readable array of the wrong shape
        numpy.save(chunk, numpy.zeros((5, 3), dtype=numpy.float32))
    else:
        chunk.write_bytes(damage)
    counting.encoded = 0
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        again = _build(kb, counting, work)
    assert counting.encoded == 2 and len(_messages(caplog, "SB-W503")) == 1
    assert str(chunk) in _messages(caplog, "SB-W503")[0]
    q = enc.encode(["flu"])
    assert again.search(q, 3) == first.search(q, 3)
    assert numpy.load(chunk).shape == (2, enc.dim)  # rewritten


@pytest.mark.parametrize("damage", [b"{not json", b"\xff\xfe", b"[1, 2]"])
def test_a_damaged_work_json_starts_the_folder_afresh(kb, enc, tmp_path, caplog, damage):
    work = tmp_path / "work"
    counting = _Counting(enc)
    _build(kb, counting, work)
    (work / WORK_FILE).write_bytes(damage)
    counting.encoded = 0
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        _build(kb, counting, work)
    assert counting.encoded == len(kb.names) and len(_messages(caplog, "SB-W502")) == 1
    assert b"encoder_fingerprint" in (work / WORK_FILE).read_bytes()


def test_another_builds_chunks_in_a_default_work_folder_are_cleaned(kb, enc, tmp_path, caplog):
    default = tmp_path / ".index.work"
    _build(kb, enc, default, chunk_size=2)
    counting = _Counting(enc)
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        _build(kb, counting, default, chunk_size=4)
    assert counting.encoded == len(kb.names) and "chunk_size" in _messages(caplog, "SB-W504")[0]
    assert len(list(default.glob("chunk_*.npy"))) == -(-len(kb.names) // 4)
    chosen = tmp_path / "my_work"  # a folder the user chose is never emptied: E112 as before
    _build(kb, enc, chosen, chunk_size=2)
    with pytest.raises(IncompatibleError, match="SB-E112"):
        _build(kb, enc, chosen, chunk_size=4)
    assert not (chosen / LOCK_FILE).exists()  # the lock was released


def test_a_work_folder_in_use_by_another_process_is_refused(kb, enc, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with FileLock(work / LOCK_FILE, "held"):
        with pytest.raises(ConfigError, match=r"SB-E509.*work"):
            _build(kb, enc, work)
    _build(kb, enc, work)
    assert not (work / LOCK_FILE).exists()
