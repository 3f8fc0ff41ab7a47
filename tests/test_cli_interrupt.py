"""The console entry point: SIGINT / SIGTERM exit 130 / 143 with one line saying what was kept (and leave
no partial output), usage errors print click's usage line and exit 2, never a traceback."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spacy_sapbert.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _sigint_as_from_a_terminal():
    """SIGINT handled as Python does by default, for the tests that call ``main()`` here, whatever the test run
    inherited (see :func:`_default_signals`)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _default_signals() -> None:
    """In the child: SIGINT handled as a terminal's Ctrl-C would be. A test run started in the background
    (``pytest &``) ignores SIGINT, its children inherit that, and the CLI rightly keeps a signal its caller
    ignores (``test_a_signal_the_caller_ignores_stays_ignored``)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                OMP_NUM_THREADS="1")


@pytest.fixture(scope="module")
def big_obo(tmp_path_factory) -> Path:
    """An ontology that takes build-kb a few seconds to read."""
    path = tmp_path_factory.mktemp("big") / "big.obo"
    with path.open("w") as fh:
        fh.write("format-version: 1.2\n\n")
        for i in range(60_000):
            fh.write(f'[Term]\nid: X:{i:07d}\nname: term number {i}\nsynonym: "alias {i}" EXACT []\n\n')
    return path


@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_build_kb_exits_with_the_signal_status_and_writes_nothing(big_obo, tmp_path, signum, status):
    out = tmp_path / "kb"
    proc = subprocess.Popen([sys.executable, "-m", "spacy_sapbert", "build-kb", str(big_obo), "-f", "obo", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=tmp_path,
                            preexec_fn=_default_signals)
    assert proc.stderr is not None
    started = time.monotonic()
    for raw in proc.stderr:  # wait until it is reading the source
        if b"Reading" in raw or time.monotonic() - started > 120:
            break
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    last = err.decode().replace("\r", "\n").strip().splitlines()[-1]
    assert proc.returncode == status, err.decode()[-2000:]
    assert last == f"[SB-E500] Interrupted by {signal.Signals(signum).name}; nothing written (outputs are replaced only when complete)."
    assert b"Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # no kb, no .kb.*.tmp, no .kb.lock


def _run_main(monkeypatch, capsys, *argv: str):
    monkeypatch.setattr("sys.argv", ["spacy-sapbert", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return exit_info.value.code, capsys.readouterr().err


@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_download_says_the_partial_download_is_kept(monkeypatch, capsys, tmp_path, signum, status):
    def interrupted_download(*args, **kwargs):
        os.kill(os.getpid(), signum)  # the handler main() installed raises here, in the main thread
        time.sleep(10)
        raise AssertionError("the signal did not interrupt the command")

    def no_handler(*args):
        raise AssertionError("main() installed no handler for the signal")

    monkeypatch.setattr("spacy_sapbert.cli.assets.download_umls", interrupted_download)
    previous = signal.signal(signum, no_handler)  # without main()'s handler the signal must not end pytest
    try:
        code, err = _run_main(monkeypatch, capsys, "download-umls", "--release", "2024AB", "-o", str(tmp_path / "umls"))
        assert signal.getsignal(signum) is no_handler  # main() put the handler back
    finally:
        signal.signal(signum, previous)
    assert code == status
    assert err.strip() == (f"[SB-E500] Interrupted by {signal.Signals(signum).name}; partial download kept, "
                           "rerun to resume.")


def test_a_keyboard_interrupt_raised_by_a_library_also_exits_130(monkeypatch, capsys, tmp_path):
    def raises(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("spacy_sapbert.commands.pipeline.build_index_dir", raises)
    code, err = _run_main(monkeypatch, capsys, "build-index", str(tmp_path), "-m", "x", "-o", str(tmp_path / "index"))
    assert code == 130
    assert err.strip() == ("[SB-E500] Interrupted by SIGINT; no index written; the encoded chunks are kept in the "
                           "work folder, rerun to resume.")


def test_a_signal_the_caller_ignores_stays_ignored(monkeypatch, capsys, tmp_path):
    def ignored_signal(path, quantize=False, recipe=None):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        return [tmp_path]

    monkeypatch.setattr("spacy_sapbert.commands.pipeline.export_onnx_dir", ignored_signal)
    monkeypatch.setattr("sys.argv", ["spacy-sapbert", "export-onnx", str(tmp_path)])
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as for `spacy-sapbert ... &` in a script
    try:
        main()  # finishes: no SystemExit
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "ONNX export written to" in capsys.readouterr().out


@pytest.mark.parametrize("output,kept", [([], "the JSON lines printed so far cover only part of the input"),
                                         (["-o", "out.jsonl"], "nothing written (outputs are replaced only when complete)")])
def test_an_interrupted_link_says_whether_its_output_is_partial(monkeypatch, capsys, tmp_path, output, kept):
    def interrupted_load(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)

    monkeypatch.setattr("spacy_sapbert.commands.pipeline.load_linking_nlp", interrupted_load)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"flu\n")))
    monkeypatch.chdir(tmp_path)
    code, err = _run_main(monkeypatch, capsys, "link", str(tmp_path), *output)
    assert code == 130 and err.strip() == f"[SB-E500] Interrupted by SIGINT; {kept}."
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv,expected", [
    (["bogus"], "Error: No such command 'bogus'."),
    (["build-kb", "x.obo", "-f", "obo", "--outptu", "kb"], "Error: No such option: --outptu"),
    (["build-kb", "-f", "obo", "-o", "kb"], "Error: Missing argument"),
    (["link", "index", "--batch-size", "0"], "Error: Invalid value for '--batch-size'"),
])
def test_usage_errors_print_the_usage_line_and_exit_2(monkeypatch, capsys, argv, expected):
    code, err = _run_main(monkeypatch, capsys, *argv)
    assert code == 2
    assert err.startswith("Usage: ") and "--help' for help." in err and expected in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 5


def test_usage_error_from_the_console_script_process():
    proc = subprocess.run([sys.executable, "-m", "spacy_sapbert", "bogus"], capture_output=True, text=True,
                          env=_env(), timeout=120)
    assert proc.returncode == 2
    assert "No such command 'bogus'" in proc.stderr and "Traceback" not in proc.stderr


def test_an_interrupted_build_index_keeps_its_chunks(tiny_bert_path, tmp_path):
    import numpy

    from spacy_sapbert.kb import Concept, KnowledgeBase

    kb = tmp_path / "kb"
    KnowledgeBase.from_concepts([Concept(f"C{i}", f"concept number {i}", (f"alias {i}",)) for i in range(5_000)]).to_disk(kb)
    out, work = tmp_path / "index", tmp_path / ".index.work"
    argv = ["build-index", str(kb), "-m", str(tiny_bert_path), "-o", str(out), "--pooling", "mean", "--device", "cpu",
            "--exact", "--batch-size", "64"]
    proc = subprocess.Popen([sys.executable, "-m", "spacy_sapbert", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(), cwd=tmp_path, preexec_fn=_default_signals)
    deadline = time.monotonic() + 300
    while not (work / "chunk_000000.npy").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert err.decode().strip().endswith("the encoded chunks are kept in the work folder, rerun to resume.")
    assert numpy.load(work / "chunk_000000.npy").shape == (8192, 32)  # complete: a rerun resumes from it
    assert not (work / "work.lock").exists() and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index.work", "kb"]  # no .index.*.tmp, no lock
