"""link-corpus never deletes its inputs, never skips or loses a document or a row silently, and answers
hostile input and a hostile file system with a coded error (exit status 1), never a traceback.

The probe table at the end (:func:`test_link_corpus_probe`) runs the real console entry point on each case;
add a case there when a new one is found."""
from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_sapbert.corpus import MANIFEST_FILE, ROWS_DIR, find_shards, link_corpus, read_shard
from spacy_sapbert.corpus.checks import scan_shards
from spacy_sapbert.errors import ConfigError, DataFormatError, SapbertError

pytestmark = pytest.mark.usefixtures("one_torch_thread")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _write_jsonl(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf8")
    return path


def _docs(prefix: str, n: int) -> list:
    return [{"id": f"{prefix}{i}", "text": f"{prefix} {i}: aspirin for the flu."} for i in range(n)]


def _tree(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes (to show nothing was deleted or changed)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _digests(out: Path) -> list:
    return [(s["output"], s["rows"], s["sha256"]) for s in json.loads((out / MANIFEST_FILE).read_text())["shards"]]


@pytest.fixture
def own_pipeline(corpus_pipeline, tmp_path):
    """A copy of the corpus pipeline that a test may put at risk."""
    return Path(shutil.copytree(corpus_pipeline, tmp_path / "pipe"))


# ---- item 2: --overwrite never deletes the pipeline or an input ------------------------------------------
def test_overwrite_never_deletes_the_pipeline_or_an_input(own_pipeline, tmp_path, write_corpus_shards):
    shards = write_corpus_shards(tmp_path / "in", sizes=(2, 3))
    pipe_before, shards_before = _tree(own_pipeline), _tree(shards)
    run = dict(show_progress=False, overwrite=True)
    with pytest.raises(ConfigError, match=r"SB-E503.*the pipeline"):
        link_corpus([shards], str(own_pipeline), own_pipeline, **run)
    with pytest.raises(ConfigError, match=r"SB-E503.*input"):
        link_corpus([shards], str(own_pipeline), shards, **run)
    with pytest.raises(ConfigError, match=r"SB-E503.*input"):  # the output holds an input file
        link_corpus([shards / "s1.jsonl"], str(own_pipeline), shards, **run)
    with pytest.raises(ConfigError, match=r"SB-E503.*input"):  # ... or holds it through a folder above
        link_corpus([shards / "s1.jsonl"], str(own_pipeline), tmp_path, **run)
    with pytest.raises(ConfigError, match=r"SB-E710.*inside.*input"):
        link_corpus([shards], str(own_pipeline), shards / "linked", **run)
    with pytest.raises(ConfigError, match=r"SB-E710.*inside.*pipeline"):
        link_corpus([shards], str(own_pipeline), own_pipeline / "linked", **run)
    link = tmp_path / "elsewhere"
    link.mkdir()
    (link / "s.jsonl").symlink_to(shards / "s0.jsonl")  # an input reached through a link into the output
    with pytest.raises(ConfigError, match=r"SB-E503"):
        link_corpus([link], str(own_pipeline), shards, **run)
    assert _tree(own_pipeline) == pipe_before and _tree(shards) == shards_before
    assert not (shards / "linked").exists() and not (own_pipeline / "linked").exists()


# ---- item 4: every input file is accounted for ----------------------------------------------------------
def test_a_folder_of_jsonl_ndjson_and_parquet_is_read_whole(tmp_path):
    folder = tmp_path / "mixed"
    _write_jsonl(folder / "a.jsonl", _docs("a", 2))
    _write_jsonl(folder / "b.ndjson", _docs("b", 3))
    pq.write_table(pa.table({"id": ["c0"], "text": ["grippe"]}), folder / "c.parquet")
    shards = find_shards([folder])
    assert [(Path(s.path).name, s.fmt) for s in shards] == [("a.jsonl", "jsonl"), ("b.ndjson", "jsonl"),
                                                            ("c.parquet", "parquet")]
    assert scan_shards(shards) == [2, 3, 1]
    (tmp_path / "pt").mkdir()
    (tmp_path / "pt" / "x.pubtator").write_text("7|t|Flu\n7|a|here.\n", encoding="utf8")
    assert [s.fmt for s in find_shards([tmp_path / "pt"])] == ["pubtator"]  # not an empty .txt folder


def test_txt_files_beside_other_formats_are_refused_naming_them(tmp_path):
    folder = tmp_path / "mixed"
    _write_jsonl(folder / "a.jsonl", _docs("a", 2))
    pq.write_table(pa.table({"id": ["c0"], "text": ["grippe"]}), folder / "c.parquet")
    (folder / "notes.txt").write_text("a note", encoding="utf8")
    with pytest.raises(ConfigError, match=r"SB-E711.*mixed.*notes\.txt.*--format"):
        find_shards([folder])


def test_files_not_read_are_reported(tmp_path, caplog):
    folder = tmp_path / "docs"
    _write_jsonl(folder / "a.jsonl", _docs("a", 2))
    (folder / "README.md").write_text("about", encoding="utf8")
    (folder / "more").mkdir()
    _write_jsonl(folder / "more" / "b.jsonl", _docs("b", 2))
    (folder / ".hidden").write_text("x")
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        shards = find_shards([folder])
    assert [Path(s.path).name for s in shards] == ["a.jsonl"]
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "SB-W701" in warned and "README.md" in warned and "more" in warned and ".hidden" not in warned
    caplog.clear()
    pq.write_table(pa.table({"id": ["c0"], "text": ["grippe"]}), folder / "c.parquet")
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        assert [s.fmt for s in find_shards([folder], "jsonl")] == ["jsonl"]
    assert "c.parquet" in " ".join(r.getMessage() for r in caplog.records)
    caplog.clear()
    notes = tmp_path / "notes"
    (notes / "ward").mkdir(parents=True)
    (notes / "n1.txt").write_text("flu", encoding="utf8")
    (notes / "ward" / "scan.pdf").write_bytes(b"%PDF")
    (notes / ".ipynb_checkpoints").mkdir()
    (notes / ".ipynb_checkpoints" / "n1-checkpoint.txt").write_text("flu", encoding="utf8")  # hidden: a copy
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        txt = find_shards([notes])
    assert [s.fmt for s in txt] == ["txt"] and list(read_shard(txt[0])) == [("n1", "flu")]
    assert "SB-W701" in caplog.text and "scan.pdf" in caplog.text and "checkpoint" not in caplog.text


# ---- item 4: finished shards are verified before they are skipped ----------------------------------------
@pytest.mark.parametrize("output_format,damage", [("jsonl", "truncate"), ("parquet", "truncate"),
                                                  ("parquet", "empty")])
def test_a_damaged_finished_shard_is_linked_again(corpus_pipeline, write_corpus_shards, tmp_path, caplog,
                                                  output_format, damage):
    shards = write_corpus_shards(tmp_path / "in", sizes=(3, 6, 2))
    out = tmp_path / "out"
    first = link_corpus([shards], str(corpus_pipeline), out, output_format=output_format, show_progress=False)
    reference = _digests(out)
    part = out / reference[1][0]
    data = part.read_bytes()
    part.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        again = link_corpus([shards], str(corpus_pipeline), out, output_format=output_format, show_progress=False)
    assert "SB-W702" in caplog.text and part.name in caplog.text
    assert (again.skipped, again.linked, again.docs, again.rows) == (2, 1, 6, first.rows)
    assert _digests(out) == reference


def test_a_shard_file_without_its_record_is_linked_again(corpus_pipeline, write_corpus_shards, tmp_path):
    """A kill between the shard file's rename and its record: the file cannot be vouched for."""
    shards = write_corpus_shards(tmp_path / "in", sizes=(3, 2))
    out = tmp_path / "out"
    link_corpus([shards], str(corpus_pipeline), out, show_progress=False)
    reference = _digests(out)
    (out / "progress.jsonl").unlink()  # a run finished by an earlier version: its manifest vouches for the files
    assert link_corpus([shards], str(corpus_pipeline), out, show_progress=False).skipped == 2
    (out / MANIFEST_FILE).unlink()
    (out / "progress.jsonl").write_text("{torn", encoding="utf8")  # a record cut off by the kill
    again = link_corpus([shards], str(corpus_pipeline), out, show_progress=False)
    assert (again.skipped, again.linked) == (0, 2) and _digests(out) == reference


# ---- item 4: bad documents anywhere stop the run before any work -----------------------------------------
def test_an_input_changed_during_the_run_is_a_coded_error(corpus_pipeline, tmp_path, monkeypatch):
    """Documents appended to a shard after the check: the run does not end as if complete (no manifest)."""
    from spacy_sapbert.corpus import checks, run

    inputs = tmp_path / "in"
    _write_jsonl(inputs / "s0.jsonl", _docs("a", 3))

    def check_then_append(shards, **kwargs):
        counts = checks.scan_shards(shards, **kwargs)
        with open(inputs / "s0.jsonl", "a", encoding="utf8") as fh:
            fh.write(json.dumps({"id": "late", "text": "flu"}) + "\n")
        return counts

    monkeypatch.setattr(run, "scan_shards", check_then_append)
    with pytest.raises(DataFormatError, match=r"SB-E716.*3 documents.*4 were linked"):
        link_corpus([inputs], str(corpus_pipeline), tmp_path / "out", show_progress=False)
    assert not (tmp_path / "out" / MANIFEST_FILE).exists()


def test_a_bad_line_in_a_later_shard_stops_the_run_before_any_work(corpus_pipeline, tmp_path):
    inputs = tmp_path / "in"
    _write_jsonl(inputs / "s0.jsonl", _docs("a", 3))
    _write_jsonl(inputs / "s1.jsonl", _docs("b", 2))
    with open(inputs / "s1.jsonl", "a", encoding="utf8") as fh:
        fh.write('{"id": "b9", "text": "flu"\n')  # line 3: cut short
    with pytest.raises(DataFormatError, match=r"SB-E552.*s1\.jsonl.*line 3"):
        link_corpus([inputs], str(corpus_pipeline), tmp_path / "out", show_progress=False)
    assert not (tmp_path / "out").exists()


def test_duplicate_document_ids_are_refused_naming_both(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", [{"id": 1, "text": "flu"}, {"id": 2, "text": "aspirin"}])
    _write_jsonl(tmp_path / "b.jsonl", [{"id": "3", "text": "flu"}, {"id": "1", "text": "grippe"}])
    with pytest.raises(DataFormatError, match=r"SB-E712.*'1'.*a\.jsonl: line 1.*b\.jsonl: line 2"):
        scan_shards(find_shards([tmp_path / "a.jsonl", tmp_path / "b.jsonl"]))
    _write_jsonl(tmp_path / "c.jsonl", [{"id": "x", "text": "flu"}, {"id": "y", "text": "a"}, {"id": "x", "text": "b"}])
    with pytest.raises(DataFormatError, match=r"SB-E712.*'x'.*c\.jsonl: line 1.*c\.jsonl: line 3"):
        scan_shards(find_shards([tmp_path / "c.jsonl"]))
    assert scan_shards(find_shards([tmp_path / "a.jsonl"])) == [2]


def test_a_digest_collision_is_not_a_duplicate(tmp_path, monkeypatch):
    from spacy_sapbert.corpus import checks

    monkeypatch.setattr(checks, "_digest", lambda doc_id: 7)  # every id collides; the ids themselves differ
    _write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "text": "flu"}, {"id": "y", "text": "a"}])
    assert scan_shards(find_shards([tmp_path / "a.jsonl"])) == [2]


def test_a_lone_surrogate_is_a_coded_error_naming_the_line(tmp_path):
    (tmp_path / "s.jsonl").write_text('{"id": "1", "text": "flu"}\n{"id": "2", "text": "bad \\ud800 here"}\n',
                                      encoding="utf8")
    with pytest.raises(DataFormatError, match=r"SB-E713.*s\.jsonl: line 2.*'text'.*surrogate"):
        list(read_shard(find_shards([tmp_path / "s.jsonl"])[0]))
    (tmp_path / "t.jsonl").write_text('{"id": "\\udc80", "text": "flu"}\n', encoding="utf8")
    with pytest.raises(DataFormatError, match=r"SB-E713.*t\.jsonl: line 1.*'id'"):
        scan_shards(find_shards([tmp_path / "t.jsonl"]))


def test_a_damaged_parquet_input_is_a_coded_error(tmp_path):
    table = pa.table({"id": [str(i) for i in range(3000)], "text": [f"flu {i} " * 20 for i in range(3000)]})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=500)
    data = (tmp_path / "a.parquet").read_bytes()
    damaged = bytearray(data)
    damaged[len(data) // 3: len(data) // 3 + 200] = b"\x00" * 200  # inside a data page; footer intact
    (tmp_path / "a.parquet").write_bytes(bytes(damaged))
    with pytest.raises(SapbertError, match=r"SB-E552.*a\.parquet"):
        scan_shards(find_shards([tmp_path / "a.parquet"]))


# ---- item 6: a hostile file system -----------------------------------------------------------------------
def test_an_input_that_cannot_be_read_is_a_coded_error(tmp_path):
    from spacy_sapbert.corpus.readers import shard_fingerprint

    shards = find_shards([_write_jsonl(tmp_path / "a.jsonl", _docs("a", 2))])
    (tmp_path / "a.jsonl").unlink()  # gone between the listing and the reading (a network share, a cleanup job)
    with pytest.raises(ConfigError, match=r"SB-E715.*a\.jsonl"):
        scan_shards(shards)
    with pytest.raises(ConfigError, match=r"SB-E715.*a\.jsonl"):
        shard_fingerprint(shards[0])


def test_rows_being_a_file_is_a_coded_error(corpus_pipeline, write_corpus_shards, tmp_path):
    shards = write_corpus_shards(tmp_path / "in", sizes=(2,))
    out = tmp_path / "out"
    link_corpus([shards], str(corpus_pipeline), out, show_progress=False)
    shutil.rmtree(out / ROWS_DIR)
    (out / ROWS_DIR).write_text("not a folder")
    with pytest.raises(ConfigError, match=r"SB-E714.*rows.*folder"):
        link_corpus([shards], str(corpus_pipeline), out, show_progress=False)


def _immutable(path: Path, on: bool) -> bool:
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


def test_an_unwritable_output_folder_is_a_coded_error(corpus_pipeline, write_corpus_shards, tmp_path):
    shards = write_corpus_shards(tmp_path / "in", sizes=(2,))
    out = tmp_path / "out"
    out.mkdir()
    if os.geteuid() != 0:
        out.chmod(0o500)
    elif not _immutable(out, True):  # root writes through modes; an immutable folder stops it too
        pytest.skip("cannot make a folder unwritable here (chattr +i refused)")
    try:
        with pytest.raises(ConfigError, match=r"SB-E714.*out.*(permission|not permitted)"):
            link_corpus([shards], str(corpus_pipeline), out, show_progress=False)
    finally:
        _immutable(out, False) if os.geteuid() == 0 else out.chmod(0o700)


def test_a_file_size_limit_is_a_coded_error_and_outputs_stay_whole(corpus_pipeline, write_corpus_shards, tmp_path):
    """``ulimit -f``: the kernel refuses the write (EFBIG; Python ignores SIGXFSZ). Exit 1, one coded line, no
    half-written shard file; a rerun without the limit finishes the run."""
    shards = write_corpus_shards(tmp_path / "in", sizes=(2, 30))
    out = tmp_path / "out"
    limit = 8 * 1024

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    cmd = [sys.executable, "-m", "spacy_sapbert", "link-corpus", str(shards), "-p", str(corpus_pipeline), "-o",
           str(out), "--output-format", "jsonl"]
    done = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limited, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "SB-E714" in done.stderr and "ulimit -f" in done.stderr and "Traceback" not in done.stderr
    files = sorted(p.name for p in (out / ROWS_DIR).iterdir())
    assert files == ["part-00000.jsonl"]  # the small shard; no partial file of the big one, no temporary file
    assert not (out / MANIFEST_FILE).exists()
    result = link_corpus([shards], str(corpus_pipeline), out, output_format="jsonl", show_progress=False)
    assert (result.skipped, result.linked, result.docs) == (1, 1, 30)
    lines = (out / ROWS_DIR / "part-00001.jsonl").read_text(encoding="utf8").splitlines()
    assert len(lines) == result.rows - json.loads((out / MANIFEST_FILE).read_text())["shards"][0]["rows"]


# ---- the probe table: every case gives a result or a coded error, through the real entry point ------------
def _mixed_folder(root: Path) -> list:
    _write_jsonl(root / "in" / "a.jsonl", _docs("a", 2))
    _write_jsonl(root / "in" / "b.ndjson", _docs("b", 2))
    pq.write_table(pa.table({"id": ["c0"], "text": ["grippe"]}), root / "in" / "c.parquet")
    (root / "in" / "d.txt").write_text("a note", encoding="utf8")
    return [str(root / "in")]


def _surrogate(root: Path) -> list:
    (root / "in").mkdir()
    (root / "in" / "s.jsonl").write_text('{"id": "1", "text": "flu \\ud800"}\n', encoding="utf8")
    return [str(root / "in")]


def _duplicates(root: Path) -> list:
    _write_jsonl(root / "in" / "a.jsonl", [{"id": 1, "text": "flu"}])
    _write_jsonl(root / "in" / "b.jsonl", [{"id": "1", "text": "flu"}])
    return [str(root / "in")]


def _empty_parquet(root: Path) -> list:
    (root / "in").mkdir()
    (root / "in" / "a.parquet").write_bytes(b"")
    return [str(root / "in")]


def _good(root: Path) -> list:
    _write_jsonl(root / "in" / "a.jsonl", _docs("a", 2))
    return [str(root / "in")]


PROBES = {
    # name: (inputs, output relative to the scratch folder ('PIPE': the pipeline), extra args, status, code)
    "output-is-the-pipeline": (_good, "PIPE", ["--overwrite"], 1, "SB-E503"),
    "output-is-the-input-folder": (_good, "in", ["--overwrite"], 1, "SB-E503"),
    "output-inside-the-input-folder": (_good, "in/out", [], 1, "SB-E710"),
    "output-inside-the-pipeline": (_good, "PIPE/linked", [], 1, "SB-E710"),
    "output-holds-the-input": (_good, ".", ["--overwrite"], 1, "SB-E503"),
    "mixed-formats": (_mixed_folder, "out", [], 1, "SB-E711"),
    "lone-surrogate": (_surrogate, "out", [], 1, "SB-E713"),
    "duplicate-ids": (_duplicates, "out", [], 1, "SB-E712"),
    "empty-parquet-input": (_empty_parquet, "out", [], 1, "SB-E552"),
    "good": (_good, "out", [], 0, "Linked 2 documents"),
}


@pytest.mark.parametrize("case", sorted(PROBES))
def test_link_corpus_probe(case, own_pipeline, tmp_path, monkeypatch, capsys):
    from spacy_sapbert.cli import main

    setup, output, extra, status, code = PROBES[case]
    inputs = setup(tmp_path)
    output = str(own_pipeline / output[4:].lstrip("/")) if output.startswith("PIPE") else str(tmp_path / output)
    before = _tree(tmp_path / "in"), _tree(own_pipeline)
    monkeypatch.setattr(sys, "argv", ["spacy-sapbert", "link-corpus", *inputs, "-p", str(own_pipeline), "-o", output,
                                      *extra])
    with pytest.raises(SystemExit) as exit_info:
        main()
        sys.exit(0)
    captured = capsys.readouterr()
    assert exit_info.value.code == status, captured.err
    assert code in (captured.out if status == 0 else captured.err)
    if status:
        assert captured.err.strip().startswith("Error: [SB-") and "Traceback" not in captured.err
    assert (_tree(tmp_path / "in"), _tree(own_pipeline)) == before  # no input changed, none deleted
