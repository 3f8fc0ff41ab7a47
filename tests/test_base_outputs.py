"""Safe output folders: the marker, --overwrite refusing folders we did not write, the lock against a
second writer, recovery after a kill between the two renames, stale temporary folders, bad paths."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from spacy_sapbert.errors import ConfigError
from spacy_sapbert.base.outputs import MARKER_FILE, check_output, exchange, output_lock
from spacy_sapbert.base.util import atomic_dir, atomic_write


def _write(path: Path, text: str, overwrite: bool = True) -> None:
    with atomic_dir(path, overwrite=overwrite) as tmp:
        (tmp / "data.txt").write_text(text)


def test_every_output_folder_carries_the_marker_and_nothing_else_is_left(tmp_path):
    target = tmp_path / "out"
    _write(target, "1", overwrite=False)
    marker = json.loads((target / MARKER_FILE).read_text())
    assert marker["written_by"] == "spacy-sapbert" and marker["version"]
    _write(target, "2")
    assert (target / "data.txt").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no lock, .old or .tmp left


def test_overwrite_refuses_a_folder_spacy_sapbert_did_not_write(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"SB-E501.*precious"):
        _write(precious, "x")
    assert (precious / "notes.txt").read_text() == "mine"
    with pytest.raises(ConfigError, match="SB-E501"):
        check_output(precious, overwrite=True)
    afile = tmp_path / "afile"
    afile.write_text("keep")
    with pytest.raises(ConfigError, match="SB-E502.*a file, not a folder"):
        _write(afile, "x")
    link = tmp_path / "link"
    link.symlink_to(precious)
    with pytest.raises(ConfigError, match="SB-E502.*symbolic link"):
        _write(link, "x")
    assert afile.read_text() == "keep" and (precious / "notes.txt").exists()


def test_overwrite_accepts_an_empty_folder_and_an_older_output_with_a_warning(tmp_path, caplog):
    empty = tmp_path / "empty"
    empty.mkdir()
    _write(empty, "1")
    assert (empty / MARKER_FILE).exists()
    old_kb = tmp_path / "old_kb"
    old_kb.mkdir()
    (old_kb / "kb.json").write_text("{}")
    old_pipeline = tmp_path / "old_pipeline"
    old_pipeline.mkdir()
    (old_pipeline / "meta.json").write_text("{}")
    (old_pipeline / "config.cfg").write_text('[components.sapbert_linker]\nfactory = "sapbert_linker"\n')
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        _write(old_kb, "kb")
        _write(old_pipeline, "pipeline")
    warnings = [r.getMessage() for r in caplog.records if "SB-W500" in r.getMessage()]
    assert len(warnings) == 2 and "kb.json" in warnings[0] and "sapbert_linker" in warnings[1]
    assert (old_kb / "data.txt").read_text() == "kb" and not (old_kb / "kb.json").exists()
    other_pipeline = tmp_path / "spacy_pipeline"  # a spaCy pipeline without our linker is not ours
    other_pipeline.mkdir()
    (other_pipeline / "meta.json").write_text("{}")
    (other_pipeline / "config.cfg").write_text('[components.ner]\nfactory = "ner"\n')
    with pytest.raises(ConfigError, match="SB-E501"):
        _write(other_pipeline, "x")


def test_a_second_writer_gets_a_coded_error_while_the_lock_is_held(tmp_path):
    target = tmp_path / "out"
    _write(target, "1")
    with output_lock(target):
        with pytest.raises(ConfigError, match=r"SB-E504\] Another spacy-sapbert process is writing"):
            _write(target, "2")
    assert (target / "data.txt").read_text() == "1"
    _write(target, "3")  # released: the next writer goes ahead
    assert (target / "data.txt").read_text() == "3"


WRITER = """
import sys, time
from pathlib import Path
from spacy_sapbert.errors import ConfigError
from spacy_sapbert.base.util import atomic_dir
try:
    with atomic_dir(Path(sys.argv[1]), overwrite=True) as tmp:
        for i in range(20):  # slow enough for the writers to meet
            (tmp / f"part{i}.txt").write_text(sys.argv[2])
            time.sleep(0.01)
    print("ok")
except ConfigError as err:
    print(str(err)[:10])
"""


def test_concurrent_writers_never_leave_a_partial_or_missing_output(tmp_path):
    import subprocess
    import sys

    target = tmp_path / "out"
    _write(target, "start")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(4)]
    outcomes = [proc.communicate(timeout=120) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outcomes
    said = [out.strip() for out, _ in outcomes]
    assert set(said) <= {"ok", "[SB-E504]"} and "ok" in said, outcomes
    texts = {(target / f"part{i}.txt").read_text() for i in range(20)}
    assert len(texts) == 1 and texts <= {"0", "1", "2", "3"} and (target / MARKER_FILE).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_kill_between_the_two_renames_is_recovered_at_the_next_run(tmp_path, caplog):
    target = tmp_path / "out"
    _write(target, "old")
    # What a writer killed after `out` → `.out.old` and before `.out.XXXXXXXX.tmp` → `out` leaves:
    target.rename(tmp_path / ".out.old")
    half = tmp_path / ".out.abcd1234.tmp"
    half.mkdir()
    (half / "data.txt").write_text("half")
    other = tmp_path / ".out.v2.abcd1234.tmp"  # another output's (out.v2) temporary folder: not ours
    other.mkdir()
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        with pytest.raises(ConfigError, match="SB-E003"):  # restored, so it exists again
            _write(target, "new", overwrite=False)
    assert any("SB-W501" in r.getMessage() for r in caplog.records)
    assert (target / "data.txt").read_text() == "old"
    assert not half.exists() and other.exists() and not (tmp_path / ".out.old").exists()
    # Killed after the second rename, before `.out.old` was removed: the new output stays.
    (tmp_path / ".out.old").mkdir()
    _write(target, "newer")
    assert (target / "data.txt").read_text() == "newer" and not (tmp_path / ".out.old").exists()


def test_an_error_in_the_second_rename_puts_the_old_output_back(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr("spacy_sapbert.base.outputs.exchange", lambda a, b: False)  # the two-rename way
    target = tmp_path / "out"
    _write(target, "old")
    real_replace = os.replace

    def failing_replace(src, dst):
        if Path(src).name.endswith(".tmp"):
            raise OSError("disk gone")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk gone"):
        _write(target, "new")
    monkeypatch.undo()
    assert (target / "data.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_replacing_swaps_in_one_step_where_the_system_can(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "name.txt").write_text(folder.name)
    swapped = exchange(a, b)
    assert (a / "name.txt").read_text() == ("b" if swapped else "a")
    assert (b / "name.txt").read_text() == ("a" if swapped else "b")
    calls = []
    monkeypatch.setattr("spacy_sapbert.base.outputs.exchange", lambda x, y: calls.append((x, y)) or exchange(x, y))
    target = tmp_path / "out"
    _write(target, "old")
    _write(target, "new")
    assert len(calls) == 1 and calls[0][1] == target  # the first write had nothing to swap with
    assert (target / "data.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "out"]


def test_an_output_under_a_regular_file_is_a_coded_error(tmp_path):
    somefile = tmp_path / "somefile"
    somefile.write_text("x")
    with pytest.raises(ConfigError, match=r"SB-E505.*somefile"):
        _write(somefile / "sub", "x")
    with pytest.raises(ConfigError, match="SB-E505"):
        with atomic_write(somefile / "sub" / "out.jsonl") as fh:
            fh.write("x")
    with pytest.raises(ConfigError, match="SB-E505"):
        check_output(somefile / "sub", overwrite=True)
    with pytest.raises(ConfigError, match="SB-E502.*a folder, not a file"):
        with atomic_write(tmp_path) as fh:
            fh.write("x")
    assert somefile.read_text() == "x"


def test_an_output_may_not_be_an_input_but_may_share_a_name_with_a_hub_id(tmp_path):
    source = tmp_path / "in.obo"
    source.write_text("x")
    with pytest.raises(ConfigError, match=r"SB-E503.*in\.obo"):
        check_output(source, folder=False, inputs=[("the source", source)])
    with pytest.raises(ConfigError, match="SB-E503"):
        check_output(tmp_path, overwrite=True, inputs=[("the source", source)])
    check_output(tmp_path / "new", inputs=[("the source", source), ("the model", "org/model")])


def test_an_output_that_cannot_be_created_is_a_coded_error(tmp_path):
    (tmp_path / ".out.lock").mkdir()  # the lock file cannot be opened (as a permission error would do)
    with pytest.raises(ConfigError, match=r"SB-E510.*Is a directory"):
        _write(tmp_path / "out", "x")
    with pytest.raises(ConfigError, match=r"SB-E510.*File name too long"):
        _write(tmp_path / ("x" * 300) / "out", "x")
    assert not (tmp_path / "out").exists()
