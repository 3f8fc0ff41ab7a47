"""tokenizer.json read by the ``tokenizers`` library gives the ids the folder's Hugging Face tokenizer gives: pair
batches (the re-ranker), word pieces wrapped in one sequence's special tokens (the context encoder), for a BERT
and an XLM-R tokenizer (pad id 1), with truncation."""
from __future__ import annotations

import shutil

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from spacy_sapbert.context.context_encoder import MARKERS, context_token_rows
from spacy_sapbert.encoding.tokenizer_file import TOKENIZER_FILE, PairBatches, WordPieces, pad_token_id

TEXTS = ["flu", "Influenza A virus infection", "heart attack", "", "x-linked  ADRENOLEUKODYSTROPHY",
         "café au lait spots", "ataxia-telangiectasia (A-T)", "a " * 40, "breast carcinoma of the left side"]
WORDS = st.text(alphabet=st.sampled_from(list("abcdeéAT- ()0")), max_size=30)


def _marked(source, folder):
    """A copy of ``source``'s tokenizer holding the ``<ENT>`` markers (as a context encoder's does)."""
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    tokenizer.add_special_tokens({"additional_special_tokens": list(MARKERS)})
    tokenizer.save_pretrained(folder)
    assert (folder / TOKENIZER_FILE).is_file()
    return folder


@pytest.fixture(scope="module", params=["bert", "xlmr"])
def marked_folder(request, tiny_bert_path, tiny_xlmr_path, tmp_path_factory):
    source = tiny_bert_path if request.param == "bert" else tiny_xlmr_path
    return _marked(source, tmp_path_factory.mktemp(f"marked_{request.param}"))


def hf_pairs(folder, firsts, seconds, max_length, inputs):
    encoded = AutoTokenizer.from_pretrained(str(folder))(list(firsts), list(seconds), truncation=True,
                                                          max_length=max_length, padding=True, return_tensors="np")
    return {key: numpy.asarray(encoded[key], dtype=numpy.int64) for key in inputs}


@pytest.mark.parametrize("max_length", [8, 12, 48])
def test_pair_batches_equal_the_hugging_face_tokenizer(marked_folder, max_length):
    inputs = [n for n in ("input_ids", "attention_mask", "token_type_ids")
              if n in AutoTokenizer.from_pretrained(str(marked_folder)).model_input_names]
    firsts, seconds = TEXTS, list(reversed(TEXTS))
    ours = PairBatches(marked_folder, max_length, inputs)(firsts, seconds)
    theirs = hf_pairs(marked_folder, firsts, seconds, max_length, inputs)
    assert sorted(ours) == sorted(inputs)
    for key in inputs:
        assert ours[key].dtype == numpy.int64
        numpy.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    assert ours["input_ids"].shape[1] <= max_length


def test_pad_id_is_the_tokenizers(marked_folder):
    assert pad_token_id(marked_folder) == AutoTokenizer.from_pretrained(str(marked_folder)).pad_token_id


@settings(max_examples=25, deadline=None, database=None, derandomize=True)  # the same examples every run
@given(texts=st.lists(WORDS, min_size=1, max_size=4))
def test_word_pieces_from_the_file_equal_the_hugging_face_ones(marked_folder, texts):
    ours = WordPieces.from_folder(marked_folder, probe=MARKERS[0])
    theirs = WordPieces.of(AutoTokenizer.from_pretrained(str(marked_folder)))
    assert ours.pieces(texts) == theirs.pieces(texts)
    assert (ours.prefix, ours.suffix) == (theirs.prefix, theirs.suffix) and ours.n_special == 2
    assert [ours.token_id(m) for m in MARKERS] == [theirs.token_id(m) for m in MARKERS]
    assert ours.token_id("no-such-token-here") is None and theirs.token_id("no-such-token-here") is None


@pytest.mark.parametrize("max_length", [6, 10, 32])
def test_context_rows_are_the_same_with_either_tokenizer(marked_folder, max_length):
    text = "Patients with heart attack and x-linked adrenoleukodystrophy were seen at the clinic in 2003."
    mentions = [(text, 14, 26), (text, 31, 61), (text, 0, 8), (text, 88, 92)]
    hf = AutoTokenizer.from_pretrained(str(marked_folder))
    ours = context_token_rows(WordPieces.from_folder(marked_folder, probe=MARKERS[0]), mentions, max_length)
    assert ours == context_token_rows(hf, mentions, max_length)
    assert all(len(row) <= max_length for row in ours)
    assert all(row[0] == hf.cls_token_id and row[-1] == hf.sep_token_id for row in ours)


def test_a_folder_without_tokenizer_json_goes_through_transformers(tiny_bert_path, tmp_path):
    marked_folder = _marked(tiny_bert_path, tmp_path / "fast")  # BERT: vocab.txt is its slow tokenizer
    folder = tmp_path / "slow"
    shutil.copytree(marked_folder, folder)
    (folder / TOKENIZER_FILE).unlink()
    slow = WordPieces.from_folder(folder, probe=MARKERS[0])
    fast = WordPieces.from_folder(marked_folder, probe=MARKERS[0])
    assert slow.pieces(["heart attack"]) == fast.pieces(["heart attack"])
    with pytest.raises(ValueError, match="no token"):
        WordPieces.from_folder(marked_folder, probe="<NOT-A-MARKER>")


def test_a_folder_without_tokenizer_json_and_without_transformers_names_the_extra(tiny_bert_path, tmp_path,
                                                                                  monkeypatch):
    import sys

    from spacy_sapbert.encoding.tokenizer_file import truncating_rows
    from spacy_sapbert.errors import MissingExtraError

    folder = _marked(tiny_bert_path, tmp_path / "slow")
    (folder / TOKENIZER_FILE).unlink()
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    for make in (lambda: PairBatches(folder, 16, ["input_ids"]), lambda: truncating_rows(folder, 16),
                 lambda: WordPieces.from_folder(folder, probe=MARKERS[0])):
        with pytest.raises(MissingExtraError, match=r"SB-E820.*tokenizer\.json.*spacy-sapbert\[train\]"):
            make()
