"""link-corpus, local back-end: readers, rows, shard bookkeeping, resume, bad input, CLI (no Ray here)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.corpus import COLUMNS, MANIFEST_FILE, ROWS_DIR, RUN_FILE, find_shards, link_corpus, read_shard
from spacy_sapbert.corpus import local as local_backend
from spacy_sapbert.errors import ConfigError, DataFormatError, MissingInputError

pytestmark = pytest.mark.usefixtures("one_torch_thread")
pq = pytest.importorskip("pyarrow.parquet")


def _manifest(out: Path) -> dict:
    return json.loads((out / MANIFEST_FILE).read_text())


def _digests(out: Path) -> list:
    return [(s["output"], s["rows"], s["sha256"]) for s in _manifest(out)["shards"]]


@pytest.fixture(scope="module")
def shards(tmp_path_factory, write_corpus_shards):
    return write_corpus_shards(tmp_path_factory.mktemp("corpus") / "in")


@pytest.fixture(scope="module")
def reference(shards, corpus_pipeline, tmp_path_factory):
    """An uninterrupted local run, one process."""
    out = tmp_path_factory.mktemp("corpus_ref") / "out"
    result = link_corpus([shards], str(corpus_pipeline), out, batch_size=4, show_progress=False)
    return out, result


def test_local_run_writes_one_file_per_shard_with_the_entity_rows(reference, corpus_pipeline):
    out, result = reference
    assert (result.shards, result.skipped, result.linked, result.docs) == (4, 0, 4, 17)
    files = sorted((out / ROWS_DIR).iterdir())
    assert [f.name for f in files] == [f"part-{i:05d}.parquet" for i in range(4)]
    assert pq.read_table(files[1]).num_rows == 0  # the empty shard has a file too (it is done)
    table = pq.read_table(files[0]).to_pylist()
    assert list(table[0]) == list(COLUMNS)
    assert result.rows == _manifest(out)["rows"] == sum(pq.read_table(f).num_rows for f in files)
    first = table[0]  # "Doc 0-0: she took aspirin for the aspirin, then aspirin."
    assert (first["doc_id"], first["text"], first["label"], first["kb_id"]) == ("0-0", "aspirin", "CHEMICAL", "C004")
    text = "Doc 0-0: she took aspirin for the aspirin, then aspirin."
    assert text[first["start"]:first["end"]] == "aspirin"
    assert first["kb_ents_ids"][0] == "C004" and len(first["kb_ents_ids"]) == len(first["kb_ents_scores"])
    assert first["kb_ents_scores"] == sorted(first["kb_ents_scores"], reverse=True)
    nlp = spacy.load(corpus_pipeline)
    assert first["pipeline"] == f"en_{nlp.meta['name']}" and first["pipeline_version"] == nlp.meta["version"]
    assert first["kb_checksum"] == nlp.get_pipe("sapbert_linker").kb.checksum
    run = json.loads((out / RUN_FILE).read_text())
    assert [Path(i["path"]).name for i in run["inputs"]] == ["s0.jsonl", "s1.jsonl", "s2.jsonl", "s3.jsonl"]


def test_two_processes_write_the_same_files(reference, shards, corpus_pipeline, tmp_path):
    out, _ = reference
    result = link_corpus([shards], str(corpus_pipeline), tmp_path / "out", n_process=2, batch_size=4,
                         show_progress=False)
    assert result.docs == 17
    assert _digests(tmp_path / "out") == _digests(out)


def test_rows_do_not_depend_on_what_the_process_linked_before(reference, shards, corpus_pipeline, tmp_path):
    """Shard 2 alone gives the same file as shard 2 after shards 0 and 1 (no cache, batches start per shard)."""
    out, _ = reference
    import torch

    before = torch.get_num_threads()
    link_corpus([shards / "s2.jsonl"], str(corpus_pipeline), tmp_path / "one", batch_size=4, threads=2,
                show_progress=False)
    assert _digests(tmp_path / "one")[0][1:] == _digests(out)[2][1:]
    assert torch.get_num_threads() == before  # the caller's torch setting is restored


def test_a_killed_run_resumes_without_losing_or_duplicating_rows(reference, shards, corpus_pipeline, tmp_path,
                                                                  monkeypatch):
    out, _ = reference
    real = local_backend.write_shard
    written = []

    def die_after_two(output, shard, columns, fmt):
        if len(written) == 2:
            raise KeyboardInterrupt("killed")  # what SIGINT/SIGTERM raise in the CLI
        real(output, shard, columns, fmt)
        written.append(shard)

    monkeypatch.setattr(local_backend, "write_shard", die_after_two)
    with pytest.raises(KeyboardInterrupt):
        link_corpus([shards], str(corpus_pipeline), tmp_path / "out", batch_size=4, show_progress=False)
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "out" / ROWS_DIR).iterdir()) == ["part-00000.parquet",
                                                                                "part-00001.parquet"]
    assert not (tmp_path / "out" / MANIFEST_FILE).exists()
    (tmp_path / "out" / ROWS_DIR / ".part-00002.parquet.abcd1234.tmp").write_bytes(b"half")  # a SIGKILL's leftover
    result = link_corpus([shards], str(corpus_pipeline), tmp_path / "out", batch_size=4, show_progress=False)
    assert (result.skipped, result.linked, result.docs) == (2, 2, 12)
    assert _digests(tmp_path / "out") == _digests(out)
    assert sorted(p.name for p in (tmp_path / "out" / ROWS_DIR).iterdir()) == [f"part-{i:05d}.parquet"
                                                                                for i in range(4)]
    again = link_corpus([shards], str(corpus_pipeline), tmp_path / "out", show_progress=False)
    assert (again.skipped, again.docs, again.rows) == (4, 0, result.rows)


def test_an_output_folder_of_another_run_is_refused_unless_overwrite(reference, shards, corpus_pipeline, tmp_path):
    out = tmp_path / "out"
    link_corpus([shards / "s0.jsonl"], str(corpus_pipeline), out, show_progress=False)
    with pytest.raises(ConfigError, match=r"SB-E705.*different inputs"):
        link_corpus([shards / "s2.jsonl"], str(corpus_pipeline), out, show_progress=False)
    with pytest.raises(ConfigError, match=r"SB-E705.*different output_format"):
        link_corpus([shards / "s0.jsonl"], str(corpus_pipeline), out, output_format="jsonl", show_progress=False)
    result = link_corpus([shards / "s2.jsonl"], str(corpus_pipeline), out, overwrite=True, show_progress=False)
    assert result.docs == 9 and [s["input"] for s in _manifest(out)["shards"]] == [str((shards / "s2.jsonl").resolve())]
    stranger = tmp_path / "mine"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="SB-E003"):
        link_corpus([shards / "s0.jsonl"], str(corpus_pipeline), stranger, show_progress=False)
    with pytest.raises(ConfigError, match="SB-E501"):
        link_corpus([shards / "s0.jsonl"], str(corpus_pipeline), stranger, overwrite=True, show_progress=False)
    assert (stranger / "notes.txt").read_text() == "keep me"


def test_readers_parquet_pubtator_and_txt_folders(tmp_path):
    import pyarrow as pa

    pq.write_table(pa.table({"pmid": ["1", "2"], "abstract": ["flu here", "aspirin there"]}), tmp_path / "a.parquet")
    (tmp_path / "b.pubtator").write_text("7|t|Flu title\n7|a|and aspirin.\n7\t0\t3\tFlu\tDisease\tD003\n\n"
                                         "8|t|None\n8|a|here\n", encoding="utf8")
    (tmp_path / "notes" / "ward").mkdir(parents=True)
    (tmp_path / "notes" / "n1.txt").write_text("grippe", encoding="utf8")
    (tmp_path / "notes" / "ward" / "n2.txt").write_text("ibuprofen", encoding="utf8")
    shards = find_shards([tmp_path / "a.parquet", tmp_path / "b.pubtator", tmp_path / "notes"])
    assert [s.fmt for s in shards] == ["parquet", "pubtator", "txt"]
    assert list(read_shard(shards[0], id_field="pmid", text_field="abstract")) == [("1", "flu here"),
                                                                                  ("2", "aspirin there")]
    assert list(read_shard(shards[1])) == [("7", "Flu title and aspirin."), ("8", "None here")]
    assert list(read_shard(shards[2])) == [("n1", "grippe"), ("ward/n2", "ibuprofen")]
    with pytest.raises(DataFormatError, match=r"SB-E702.*a.parquet: schema: no field 'text'.*pmid, abstract"):
        list(read_shard(shards[0], id_field="pmid"))
    (tmp_path / "c.jsonl").write_text('{"id": 1, "text": "flu"}\n{"id": 2, "body": "x"}\n{"id": 3, "text": 4}\n')
    jsonl = find_shards([tmp_path / "c.jsonl"])[0]
    with pytest.raises(DataFormatError, match=r"SB-E702.*c.jsonl: line 2: no field 'text' \(--text-field\).*id, body"):
        list(read_shard(jsonl))
    (tmp_path / "d.jsonl").write_text('{"id": 3, "text": 4}\n')
    with pytest.raises(DataFormatError, match=r"SB-E703.*d.jsonl: line 1: field 'text' is int"):
        list(read_shard(find_shards([tmp_path / "d.jsonl"])[0]))


def test_bad_inputs_are_coded_errors_before_any_work(shards, corpus_pipeline, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "body": "flu"}\n', encoding="utf8")
    with pytest.raises(DataFormatError, match=r"SB-E702.*bad.jsonl: line 1: no field 'text'"):
        link_corpus([bad], str(corpus_pipeline), tmp_path / "out", show_progress=False)
    assert not (tmp_path / "out").exists()
    blank = tmp_path / "blank_pipeline"
    spacy.blank("en").to_disk(blank)
    with pytest.raises(ConfigError, match=r"SB-E704.*no sapbert_linker"):
        link_corpus([shards], str(blank), tmp_path / "out", show_progress=False)
    with pytest.raises(ConfigError, match="SB-E707"):
        link_corpus([shards / "s0.jsonl", shards], str(corpus_pipeline), tmp_path / "out", show_progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingInputError, match="SB-E706"):
        link_corpus([tmp_path / "empty"], str(corpus_pipeline), tmp_path / "out", input_format="jsonl",
                    show_progress=False)
    with pytest.raises(ConfigError, match="SB-E002.*back-end"):
        link_corpus([shards], str(corpus_pipeline), tmp_path / "out", backend="spark", show_progress=False)
    with pytest.raises(ConfigError, match="SB-E111.*n_process"):
        link_corpus([shards], str(corpus_pipeline), tmp_path / "out", n_process=0, show_progress=False)


def test_missing_ray_is_a_coded_error_naming_the_extra(shards, corpus_pipeline, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(ConfigError, match=r"SB-E700.*spacy-sapbert\[ray\]"):
        link_corpus([shards], str(corpus_pipeline), tmp_path / "out", backend="ray", show_progress=False)
    assert not (tmp_path / "out").exists()


def test_importing_the_package_and_cli_does_not_import_ray():
    code = ("import sys, spacy_sapbert, spacy_sapbert.corpus, spacy_sapbert.cli, spacy_sapbert.commands.pipeline; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_link_corpus_jsonl_output_and_resume(reference, shards, corpus_pipeline, tmp_path):
    out = tmp_path / "out"
    args = ["link-corpus", str(shards), "-p", str(corpus_pipeline), "-o", str(out), "--output-format", "jsonl",
            "--batch-size", "4"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Linked 17 documents of 4 shards (0 done before)" in result.output and "docs/s" in result.output
    rows = [json.loads(line) for line in (out / ROWS_DIR / "part-00000.jsonl").read_text().splitlines()]
    parquet_rows = pq.read_table(reference[0] / ROWS_DIR / "part-00000.parquet").to_pylist()
    assert [(r["doc_id"], r["start"], r["kb_id"], r["kb_ents_ids"]) for r in rows] == [
        (r["doc_id"], r["start"], r["kb_id"], r["kb_ents_ids"]) for r in parquet_rows]
    assert [r["kb_ents_scores"] for r in rows] == [[round(s, 6) for s in r["kb_ents_scores"]] for r in parquet_rows]
    again = CliRunner().invoke(app, args)
    assert "Linked 0 documents of 0 shards (4 done before)" in again.output
    other = CliRunner().invoke(app, args[:-2] + ["--text-field", "body"])
    assert isinstance(other.exception, DataFormatError) and "SB-E702" in str(other.exception)
