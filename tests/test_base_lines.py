"""The one text-reading module every reader uses (spacy_sapbert.base.lines): a missing input is E001, a folder
where a file is wanted E511, bad UTF-8 E004 naming the exact line: for KB sources, mention files and corpus
shards alike."""
from __future__ import annotations

import pytest

from spacy_sapbert.base.lines import iter_lines, read_text, require_file
from spacy_sapbert.corpus.readers import find_shards, read_shard
from spacy_sapbert.errors import DataFormatError, MissingInputError
from spacy_sapbert.mentions.clinical import read_codiesp, read_xlbel
from spacy_sapbert.mentions.datasets import read_biosyn, read_mentions_jsonl, read_mentions_tsv, read_pubtator

HINT = "pass the file itself."


def test_require_file_takes_files_and_refuses_folders_unless_asked(tmp_path):
    file = tmp_path / "a.tsv"
    file.write_text("x\n", encoding="utf8")
    assert require_file(str(file), "Input", HINT) == file
    with pytest.raises(MissingInputError, match="SB-E511") as err:
        require_file(tmp_path, "Input", HINT)
    assert "a.tsv" in str(err.value) and HINT in str(err.value)  # what the folder holds, and the hint
    assert require_file(tmp_path, "Input", HINT, folder=True) == tmp_path
    for folder in (False, True):
        with pytest.raises(MissingInputError, match="SB-E001.*Input not found.*pass the file itself"):
            require_file(tmp_path / "missing", "Input", HINT, folder=folder)


def _latin1_at(path, line: int, total: int, row: str = "mention{i}\tD{i:028d}") -> None:
    """``total`` lines ``row.format(i=...)`` (i from 1) with a latin-1 byte in place of the 'e' of line ``line``."""
    rows = [row.format(i=i).encode("utf8") for i in range(1, total + 1)]
    rows[line - 1] = rows[line - 1].replace(b"e", b"\xe9", 1)
    path.write_bytes(b"\n".join(rows) + b"\n")


def test_read_text_and_iter_lines_name_the_line_of_a_bad_byte(tmp_path):
    path = tmp_path / "t.txt"
    _latin1_at(path, 150, 400)
    with pytest.raises(DataFormatError, match=r"SB-E004.*line 150\)"):
        read_text(path)
    with pytest.raises(DataFormatError, match=r"SB-E004.*line 150\)"):
        list(iter_lines(path))
    path.write_text("a\nb\n", encoding="utf8")
    assert read_text(path) == "a\nb\n" and list(iter_lines(path)) == [(1, "a"), (2, "b")]


@pytest.mark.parametrize("reader,row", [(read_mentions_tsv, "mention{i}\tD{i:028d}"),
                                        (read_codiesp, "S{i:04d}\tDIAGNOSTICO\tr52\tdolor de espalda\t0 5")])
def test_tsv_readers_name_the_exact_line_of_a_bad_byte(tmp_path, reader, row):
    # past the first 8 KB a reader decoding in chunks would blame the line where its chunk began
    path = tmp_path / "m.tsv"
    _latin1_at(path, 300, 400, row)
    with pytest.raises(DataFormatError, match=r"SB-E004.*line 300\)"):
        reader(path)


@pytest.mark.parametrize("reader", [read_pubtator, read_mentions_tsv, read_mentions_jsonl, read_xlbel, read_codiesp])
def test_file_readers_refuse_a_folder_with_e511(tmp_path, reader):
    (tmp_path / "inside.txt").write_text("x", encoding="utf8")
    with pytest.raises(MissingInputError, match="SB-E511") as err:
        reader(tmp_path)
    assert "inside.txt" in str(err.value) and "README" in str(err.value)


def test_folder_readers_still_take_a_folder_and_name_a_missing_one(tmp_path):
    (tmp_path / "1.concept").write_text("1||0|5||Disease||fever||D1\n", encoding="utf8")
    (docs,) = read_biosyn(tmp_path)
    assert [m.ids for m in docs.mentions] == [("D1",)]
    with pytest.raises(MissingInputError, match="SB-E001.*BioSyn concept file or folder not found"):
        read_biosyn(tmp_path / "missing")


def test_a_txt_shard_that_is_not_utf8_is_e004_naming_file_and_line(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"fine\nstill fine\nfi\xe8vre\n")
    (shard,) = find_shards([folder])
    with pytest.raises(DataFormatError, match=r"SB-E004.*a\.txt' is not valid UTF-8 \(line 3\)"):
        list(read_shard(shard))
