"""scripts/fetch_data.py: shared copies first (checksummed, symlinked), else official downloads."""
from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import threading
import zipfile
from pathlib import Path

import pytest
import srsly

from helpers import load_module

ROOT = Path(__file__).resolve().parents[1]


fetch = load_module(ROOT / "scripts" / "fetch_data.py", "_project_fetch_data")


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


@pytest.fixture()
def served(tmp_path):
    """A loopback HTTP server over tmp_path/www; yields (folder, base URL)."""
    www = tmp_path / "www"
    www.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(www), **kw)

        def log_message(self, *args):  # keep test output clean
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield www, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _project(tmp_path: Path, assets) -> Path:
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    srsly.write_yaml(project / "project.yml", {"title": "t", "assets": assets})
    return project / "project.yml"


def test_shared_copies_are_checked_and_symlinked(tmp_path, capsys):
    shared = tmp_path / "shared"
    (shared / "hpo").mkdir(parents=True)
    data = b"format-version: 1.2\n"
    (shared / "hpo" / "hp.obo").write_bytes(data)
    yml = _project(tmp_path, [{"dest": "assets/data/hp.obo", "url": "http://127.0.0.1:9/none", "checksum": _md5(data),
                               "shared": "hpo/hp.obo"}])
    assert fetch.main(["--project", str(yml), "--shared-data", str(shared)]) == 0
    target = yml.parent / "assets" / "data" / "hp.obo"
    assert target.is_symlink() and target.resolve() == (shared / "hpo" / "hp.obo").resolve()
    manifest = json.loads((yml.parent / "assets" / "data" / "MANIFEST.json").read_text())
    assert manifest["files"] == [{"file": "assets/data/hp.obo", "source": str(shared / "hpo" / "hp.obo"), "md5": _md5(data)}]
    # a second run finds the file in place
    assert fetch.main(["--project", str(yml), "--shared-data", str(shared)]) == 0
    assert "(present)" in capsys.readouterr().out


def test_a_shared_copy_with_another_checksum_is_refused(tmp_path, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "medic.txt").write_bytes(b"D1||a\n")
    yml = _project(tmp_path, [{"dest": "assets/data/medic.txt", "file_md5": "0" * 32, "shared": "medic.txt"}])
    assert fetch.main(["--project", str(yml), "--shared-data", str(shared)]) == 1
    err = capsys.readouterr().err
    assert "SB-E447" in err and "0" * 32 in err and "not the pinned release" in err
    assert not (yml.parent / "assets" / "data" / "MANIFEST.json").exists()


def test_missing_shared_data_and_no_network_names_every_file(tmp_path, capsys):
    yml = _project(tmp_path, [
        {"dest": "assets/data/a.txt", "url": "http://127.0.0.1:9/a.txt", "shared": "a.txt"},
        {"dest": "assets/data/b.txt", "url": "http://127.0.0.1:9/b.txt", "shared": "b.txt"},
    ])
    assert fetch.main(["--project", str(yml), "--shared-data", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "2 of 2 data files are not available" in err
    assert err.count("SB-E446") == 2 and "assets/data/a.txt" in err and "assets/data/b.txt" in err
    assert "--vars.shared_data" in err and "URLError" in err
    assert fetch.main(["--project", str(yml), "--shared-data", str(tmp_path / "nowhere"), "--offline"]) == 1
    assert "offline mode" in capsys.readouterr().err


def test_download_extracts_a_zip_member_and_checks_it(tmp_path, served):
    www, base = served
    member = b"1|t|Title.\n1|a|Abstract.\n\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("CDR_Data/train.txt", member)
    (www / "data.zip").write_bytes(buf.getvalue())
    yml = _project(tmp_path, [{"dest": "assets/downloads/data.zip", "url": f"{base}/data.zip",
                               "member": "CDR_Data/train.txt", "file": "assets/data/train.txt",
                               "file_md5": _md5(member), "shared": "nope.txt"}])
    assert fetch.main(["--project", str(yml), "--shared-data", str(tmp_path)]) == 0
    assert (yml.parent / "assets" / "data" / "train.txt").read_bytes() == member
    assert (yml.parent / "assets" / "downloads" / "data.zip").exists()


def test_a_download_that_differs_from_the_pin_needs_allow_unpinned(tmp_path, served, capsys):
    www, base = served
    (www / "hp.obo").write_bytes(b"newer release\n")
    yml = _project(tmp_path, [{"dest": "assets/downloads/hp.obo", "url": f"{base}/hp.obo", "file": "assets/data/hp.obo",
                               "file_md5": _md5(b"pinned release\n")}])
    assert fetch.main(["--project", str(yml), "--shared-data", str(tmp_path)]) == 1
    assert "SB-E447" in capsys.readouterr().err and not (yml.parent / "assets" / "data" / "hp.obo").exists()
    assert fetch.main(["--project", str(yml), "--shared-data", str(tmp_path), "--allow-unpinned"]) == 0
    assert "differs from the pinned release" in capsys.readouterr().out


def test_ctd_current_release_is_converted_to_the_medic_format(tmp_path, served, capsys):
    www, base = served
    tsv = ("# CTD header\n# Fields:\n"
           "Breast Neoplasms\tMESH:D001943\tdef\tDO:DOID:1612|OMIM:114480\tparents\ttrees\tptrees\tBreast Cancer|Breast Tumors\tslim\n"
           "Chorea\tMESH:D002819\t\t\t\t\t\tChoreatic Disorders\t\n")
    (www / "CTD_diseases.tsv.gz").write_bytes(gzip.compress(tsv.encode()))
    yml = _project(tmp_path, [{"dest": "assets/downloads/CTD_diseases.tsv.gz", "url": f"{base}/CTD_diseases.tsv.gz",
                               "file": "assets/data/medic.txt", "convert": "ctd_medic"}])
    assert fetch.main(["--project", str(yml), "--shared-data", str(tmp_path)]) == 0
    lines = (yml.parent / "assets" / "data" / "medic.txt").read_text().splitlines()
    assert lines == ["MESH:D001943|DO:DOID:1612|OMIM:114480||Breast Neoplasms|Breast Cancer|Breast Tumors",
                     "MESH:D002819||Chorea|Choreatic Disorders"]
    assert "publishes only its current release" in capsys.readouterr().out
    from spacy_sapbert.kb.readers.medic import read_medic

    concepts = list(read_medic(yml.parent / "assets" / "data" / "medic.txt"))
    assert [c.concept_id for c in concepts] == ["D001943", "D002819"]


def test_project_yml_lists_every_demo_input_with_a_pin():
    config = srsly.read_yaml(ROOT / "project.yml")
    files = {a.get("file", a["dest"]): a for a in config["assets"]}
    data_dir = config["vars"]["data_dir"]
    for name in ("medic.txt", "hp.obo", "doid.obo", "ncbi_train.txt", "ncbi_dev.txt", "ncbi_test.txt",
                 "bc5cdr_train.txt", "bc5cdr_dev.txt"):
        path = f"{data_dir}/{name}"
        assert path in files, f"{path} has no asset entry"
        entry = files[path]
        assert entry.get("url", "").startswith("https://") and entry.get("shared")
        assert entry.get("file_md5") or entry.get("checksum")


@pytest.mark.slow
def test_pinned_checksums_match_the_shared_data(shared_data):
    config = srsly.read_yaml(ROOT / "project.yml")
    for entry in config["assets"]:
        pinned = entry.get("file_md5") or entry.get("checksum")
        assert fetch.md5(shared_data / entry["shared"]) == pinned, entry["shared"]
