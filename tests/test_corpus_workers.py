"""link-corpus --n-process N: forked workers that run the ONNX encoder (mentions that are not KB names), write
the same files as one process, and end with the parent on SIGTERM. Each run is a subprocess with a timeout, so
a hang fails the test instead of the test run."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import spacy

from spacy_sapbert.corpus import MANIFEST_FILE, ROWS_DIR
from spacy_sapbert.errors import Errors

pytest.importorskip("onnxruntime", reason="the onnx extra (requirements-dev.txt installs it)")
pq = pytest.importorskip("pyarrow.parquet")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; fork is the point")
REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 420  # a loaded 2-core machine takes ~1 min per run; a hang takes forever


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of ``proc`` (started with ``start_new_session``): its workers too, hung or not."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_in_own_group(args: list, timeout: float, what: str) -> tuple:
    """``(exit status, stdout, stderr)`` of ``args``; past ``timeout`` the test fails and the process and all its
    workers are killed (none is left behind to hold the output pipes or a CPU)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.communicate()
        pytest.fail(what)
    kill_group(proc)  # a worker that outlived its parent
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def encoding_pipeline(corpus_pipeline, tmp_path_factory) -> Path:
    """corpus_pipeline whose entity ruler also marks every word of 5+ letters: most are no KB name, so the
    workers run the encoder (ONNX Runtime: the pipeline holds an export and the runtime is auto)."""
    nlp = spacy.load(corpus_pipeline)
    nlp.get_pipe("entity_ruler").add_patterns([{"label": "WORD", "pattern": [{"IS_ALPHA": True, "LENGTH": {">=": 5}}]}])
    path = tmp_path_factory.mktemp("encoding_pipeline") / "pipeline"
    nlp.to_disk(path)
    assert (path / "sapbert_linker" / "encoder" / "model.onnx").is_file()
    return path


def _word_shards(folder: Path, sizes, seed: int = 0) -> Path:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for s, size in enumerate(sizes):
        with open(folder / f"s{s:03d}.jsonl", "w", encoding="utf8") as fh:
            for i in range(size):
                words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(5, 12)))
                         for _ in range(6)]
                fh.write(json.dumps({"id": f"{s}-{i}", "text": f"She took aspirin for {' and '.join(words)}."}) + "\n")
    return folder


_RUN = """
import json, sys
from spacy_sapbert.corpus import link_corpus, run as corpus_run
from spacy_sapbert.encoding.onnx_encoder import OnnxEncoder
from spacy_sapbert.encoding.torch_encoder import Encoder

shards, pipeline, out = sys.argv[1:4]
real = corpus_run.load_pipeline


runtime = "onnx"


def threaded(path):
    # the parent's encoder session has a thread pool and has run before the fork, as on any multi-core machine
    nlp, extension = real(path)
    linker = nlp.get_pipe("sapbert_linker")
    folder = path + "/sapbert_linker/encoder"
    if runtime == "onnx":
        encoder = OnnxEncoder.from_disk(folder, threads=2, cache_size=0)
    else:
        encoder = Encoder.from_disk(folder, device="cpu", cache_size=0)
    linker.set_resources(encoder, linker.index)
    linker.encoder.encode(["warm the session up", "before the fork"])
    return nlp, extension


corpus_run.load_pipeline = threaded
for n, batch_size, runtime in ((1, 3, "onnx"), (2, 3, "onnx"), (1, 8, "onnx"), (1, 3, "torch"), (2, 3, "torch")):
    result = link_corpus([shards], pipeline, f"{out}/{runtime}_n{n}_b{batch_size}", n_process=n,
                         batch_size=batch_size, show_progress=False)
    print(json.dumps([n, result.docs, result.rows]))
"""


def _digests(out: Path) -> list:
    return [(s["output"], s["rows"], s["sha256"]) for s in json.loads((out / MANIFEST_FILE).read_text())["shards"]]


def test_two_workers_encode_mentions_and_write_the_files_one_process_writes(encoding_pipeline, tmp_path):
    shards = _word_shards(tmp_path / "in", (6, 0, 11, 5))
    script = tmp_path / "run.py"
    script.write_text(_RUN)
    code, stdout, stderr = run_in_own_group([sys.executable, str(script), str(shards), str(encoding_pipeline),
                                             str(tmp_path / "out")], TIMEOUT, "link-corpus --n-process 2 hung")
    assert code == 0, stderr[-3000:]
    runs = [json.loads(line) for line in stdout.strip().splitlines()[-5:]]
    assert [r[:2] for r in runs] == [[1, 22], [2, 22], [1, 22], [1, 22], [2, 22]]
    assert len({r[2] for r in runs}) == 1 and runs[0][2] > 22 * 6
    # same batch size: the same bytes from one process (ONNX: a 2-thread session) and two workers (1 thread each);
    # with torch at one thread (link-corpus's default --threads 1) too
    assert _digests(tmp_path / "out" / "onnx_n2_b3") == _digests(tmp_path / "out" / "onnx_n1_b3")
    assert _digests(tmp_path / "out" / "torch_n2_b3") == _digests(tmp_path / "out" / "torch_n1_b3")
    rows = pq.read_table(tmp_path / "out" / "onnx_n2_b3" / ROWS_DIR / "part-00002.parquet").to_pylist()
    encoded = [r for r in rows if r["label"] == "WORD"]
    assert len(encoded) == 11 * 6 and all(r["kb_id"] for r in encoded)  # nonsense words, linked by their vectors
    # another batch size: the same rows and concepts, scores within one unit of the 6th decimal (docs/scale-out.md)
    for shard in range(4):
        name = f"part-{shard:05d}.parquet"
        _same_within(pq.read_table(tmp_path / "out" / "onnx_n1_b3" / ROWS_DIR / name).to_pylist(),
                     pq.read_table(tmp_path / "out" / "onnx_n1_b8" / ROWS_DIR / name).to_pylist())


SCORE_TOLERANCE = 1e-6 + 2e-7  # one unit of the 6th decimal, plus the float32 the files store scores in


def _same_within(rows, other):
    """What docs/scale-out.md promises across batch sizes: the same rows; the same concepts in the same order
    except where two scores lie within the tolerance (a near-tie may swap); scores within the tolerance."""
    assert [(r["doc_id"], r["start"], r["end"], r["label"]) for r in rows] == \
        [(r["doc_id"], r["start"], r["end"], r["label"]) for r in other]
    for row, alt in zip(rows, other):
        score_of = dict(zip(alt["kb_ents_ids"], alt["kb_ents_scores"]))
        assert len(row["kb_ents_ids"]) == len(alt["kb_ents_ids"])
        for cid, score, alt_cid, alt_score in zip(row["kb_ents_ids"], row["kb_ents_scores"], alt["kb_ents_ids"],
                                                  alt["kb_ents_scores"]):
            assert abs(score - alt_score) <= SCORE_TOLERANCE, (row, alt)
            assert cid == alt_cid or abs(score - score_of.get(cid, float("inf"))) <= 2 * SCORE_TOLERANCE, (row, alt)


def test_the_tolerance_check_catches_other_concepts_and_scores():
    row = {"doc_id": "d", "start": 0, "end": 3, "label": "E", "kb_ents_ids": ["A", "B"], "kb_ents_scores": [0.9, 0.5]}
    _same_within([row], [dict(row, kb_ents_scores=[0.900001, 0.5])])
    _same_within([dict(row, kb_ents_scores=[0.7, 0.7])], [dict(row, kb_ents_ids=["B", "A"], kb_ents_scores=[0.7, 0.7])])
    for bad in (dict(row, kb_ents_scores=[0.90001, 0.5]), dict(row, kb_ents_ids=["B", "A"]),
                dict(row, kb_ents_ids=["A", "C"]), dict(row, start=1)):
        with pytest.raises(AssertionError):
            _same_within([row], [bad])


def _children(pid: int) -> list:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")  # a zombie has ended; its new parent reaps it


def test_sigterm_ends_link_corpus_and_its_workers(encoding_pipeline, tmp_path):
    shards = _word_shards(tmp_path / "in", [60] * 40, seed=1)
    out = tmp_path / "out"
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "wb") as err_file:  # a file, not a pipe: a surviving worker cannot block reading it
        proc = subprocess.Popen([sys.executable, "-m", "spacy_sapbert", "link-corpus", str(shards), "-p",
                                 str(encoding_pipeline), "-o", str(out), "--n-process", "2", "--batch-size", "4"],
                                stdout=subprocess.DEVNULL, stderr=err_file, env=_env(), cwd=tmp_path,
                                start_new_session=True)
    workers: list = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (out / ROWS_DIR).is_dir() or not any((out / ROWS_DIR).glob("part-*.parquet")):
            assert proc.poll() is None, stderr.read_text()[-3000:]
            assert time.monotonic() < deadline, "no shard written (hung?)"
            time.sleep(0.05)
        workers = _children(proc.pid)
        assert len(workers) >= 2, workers  # both workers run: shards are left for each
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("link-corpus did not exit within 60 s of SIGTERM")
        took = time.monotonic() - started
        print(f"link-corpus exited {took:.2f} s after SIGTERM")
        time.sleep(0.5)
        left = [pid for pid in workers if not _gone(pid)]
    finally:
        kill_group(proc)  # whatever is left, so that a failing run leaves no orphan
    err = stderr.read_bytes()
    assert proc.returncode == 143, err.decode()[-3000:]
    last = err.decode().replace("\r", "\n").strip().splitlines()[-1]
    assert last == Errors.E500.format(signal="SIGTERM", kept="the shards finished so far are kept in the output "
                                                             "folder, rerun the same command to resume")
    assert b"Traceback" not in err
    assert took < 30, took
    assert left == [], f"workers {left} outlived link-corpus"
    done = sorted(p.name for p in (out / ROWS_DIR).glob("part-*.parquet"))
    assert 0 < len(done) < 40 and not (out / MANIFEST_FILE).exists()


def _dies(pairs):
    """A worker killed from outside (the system ran out of memory)."""
    os.kill(os.getpid(), signal.SIGKILL)


def _fails(pairs):
    """An exception that cannot be pickled back to the parent."""
    class Local(Exception):
        pass

    raise Local("a component failed")


def test_worker_errors_are_coded_errors_in_the_parent(corpus_pipeline, tmp_path, monkeypatch):
    from spacy_sapbert.corpus import find_shards, link_corpus
    from spacy_sapbert.corpus.workers import fork_context, link_in_workers
    from spacy_sapbert.errors import ConfigError, DataFormatError, SapbertError

    shards = find_shards([_word_shards(tmp_path / "in", (2, 2, 2))])
    options = dict(id_field="id", text_field="text")
    written = []
    with pytest.raises(SapbertError, match=r"SB-E770.*'link-corpus-worker-\d'.*exit status -9"):
        link_in_workers(shards, n_process=2, link=_dies, on_shard=lambda *a: written.append(a), **options)
    with pytest.raises(SapbertError, match=r"SB-E771.*Local: a component failed"):
        link_in_workers(shards, n_process=2, link=_fails, on_shard=lambda *a: written.append(a), **options)
    assert written == []
    # a coded error inside a worker (a bad document after the first, which is checked up front) comes back as is
    with open(tmp_path / "in" / "s001.jsonl", "a", encoding="utf8") as fh:
        fh.write(json.dumps({"id": "1-2", "text": 42}) + "\n")
    with pytest.raises(DataFormatError, match="SB-E703"):
        link_corpus([tmp_path / "in"], str(corpus_pipeline), tmp_path / "out", n_process=2, batch_size=2,
                    show_progress=False)
    monkeypatch.setattr("multiprocessing.get_all_start_methods", lambda: ["spawn"])
    with pytest.raises(ConfigError, match="SB-E772.*spawn"):
        fork_context()
