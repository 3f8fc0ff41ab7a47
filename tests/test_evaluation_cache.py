"""The evaluation's vector cache (one checksummed file per set of names) and the warning for an
end-to-end pipeline built on another KB."""
from __future__ import annotations

import re

import numpy as np
import pytest

from spacy_sapbert.evaluation.cache import VectorCache, encoder_key


class _FakeEncoder:
    """Deterministic vectors from the text; records what it was asked to encode."""

    fingerprint, pooling, max_length, dim = "f" * 16, "mean", 25, 4

    def __init__(self):
        self.calls = []

    def encode(self, texts, **_):
        self.calls.append(list(texts))
        out = np.array([[len(t), sum(map(ord, t)) % 97, t.count("a"), 1.0] for t in texts], np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _get(cache, enc, texts):
    return cache.get(enc, texts, batch_size=8, show_progress=False)


def test_runs_with_other_names_do_not_overwrite_each_other(tmp_path):
    enc = _FakeEncoder()
    key = encoder_key(enc)
    first = _get(VectorCache(tmp_path, key, dim=4), enc, ["alpha", "beta"])
    _get(VectorCache(tmp_path, key, dim=4), enc, ["gamma", "delta"])
    assert len(list((tmp_path / key).glob("*.npz"))) == 2
    enc.calls.clear()
    both = _get(VectorCache(tmp_path, key, dim=4), enc, ["alpha", "beta", "gamma", "delta"])
    assert enc.calls == []  # everything came from the two files
    assert np.allclose(both[:2], first) and np.allclose(both, enc.encode(["alpha", "beta", "gamma", "delta"]))


def _one_file(tmp_path, enc):
    key = encoder_key(enc)
    _get(VectorCache(tmp_path, key, dim=4), enc, ["alpha", "beta", "gamma"])
    return key, next((tmp_path / key).glob("*.npz"))


def test_names_and_vectors_that_disagree_are_detected_and_recomputed(tmp_path):
    enc = _FakeEncoder()
    key, path = _one_file(tmp_path, enc)
    with np.load(path) as data:
        names, vectors, checksum = data["names"], data["vectors"], data["checksum"]
    np.savez(path, names=names, vectors=vectors[::-1], checksum=checksum)  # rows no longer match the names
    enc.calls.clear()
    with pytest.warns(UserWarning, match=r"\[SB-W552\].*checksum"):
        got = _get(VectorCache(tmp_path, key, dim=4), enc, ["alpha", "beta", "gamma"])
    assert enc.calls == [["alpha", "beta", "gamma"]]
    assert np.allclose(got, enc.encode(["alpha", "beta", "gamma"]))
    np.savez(path, names=names[:2], vectors=vectors, checksum=checksum)
    with pytest.warns(UserWarning, match=r"\[SB-W552\].*2 names but 3 vectors"):
        VectorCache(tmp_path, key, dim=4)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other_dim"])
def test_damaged_cache_file_is_a_warning_not_a_traceback(tmp_path, damage):
    enc = _FakeEncoder()
    key, path = _one_file(tmp_path, enc)
    if damage == "garbage":
        path.write_bytes(b"\x00not a zip" * 10)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-40])
    with pytest.warns(UserWarning, match=r"\[SB-W552\]"):
        cache = VectorCache(tmp_path, key, dim=8 if damage == "other_dim" else 4)
    assert np.allclose(_get(cache, enc, ["alpha"]), enc.encode(["alpha"]))


def test_end_to_end_pipeline_on_another_kb_warns(fixtures_dir, tiny_bert_path, tmp_path):
    import spacy

    from spacy_sapbert.evaluation.run import evaluate
    from spacy_sapbert.kb import Concept, KnowledgeBase

    from test_evaluation_run import _settings  # tests/ is on sys.path (rootdir-relative test modules)

    KnowledgeBase.from_concepts([Concept("C001", "Aspirin", ("asa",), ("Chemical",))]).to_disk(tmp_path / "kb")
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert_path), "device": "cpu", "pooling": "mean"})
    nlp.get_pipe("sapbert_linker").initialize(kb_path=str(tmp_path / "kb"), show_progress=False)
    nlp.to_disk(tmp_path / "pipeline")
    settings, _ = _settings(fixtures_dir, modes=["end_to_end"],
                            systems={"pipeline": str(tmp_path / "pipeline"), "pipeline_name": "p"})
    with pytest.warns(UserWarning) as caught:
        evaluate(settings)
    found = [str(w.message) for w in caught if "SB-W553" in str(w.message)]
    assert len(found) == 1 and re.search(r"(\d+) of \1 gold concepts are not in the pipeline.s KB", found[0])
