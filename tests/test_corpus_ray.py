"""The Ray back-ends: link-corpus on Ray Data actors gives the local back-end's files; build-index --ray
gives the local build's vectors and neighbours; an unreachable cluster is a coded error. One local Ray
(2 CPUs, no dashboard) serves the whole module."""
from __future__ import annotations

import json
import logging
import os

import numpy
import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from spacy_sapbert.corpus import MANIFEST_FILE, link_corpus  # noqa: E402
from spacy_sapbert.errors import ConfigError, DataFormatError  # noqa: E402
from spacy_sapbert.index import ConceptIndex  # noqa: E402
from spacy_sapbert.kb import Concept, KnowledgeBase  # noqa: E402
from spacy_sapbert.commands.pipeline import build_index_dir  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _digests(out):
    return [(s["output"], s["rows"], s["sha256"]) for s in json.loads((out / MANIFEST_FILE).read_text())["shards"]]


def test_ray_back_end_writes_the_files_of_the_local_back_end_and_resumes(corpus_pipeline, write_corpus_shards,
                                                                         tmp_path, caplog):
    import shutil

    shards = write_corpus_shards(tmp_path / "in")
    local = link_corpus([shards], str(corpus_pipeline), tmp_path / "local", batch_size=4, show_progress=False)
    with pytest.raises(ConfigError, match="SB-E701.*127.0.0.1:1"):
        link_corpus([shards], str(corpus_pipeline), tmp_path / "x", backend="ray", address="127.0.0.1:1",
                    show_progress=False)
    # a run killed after one shard (its file written, the others not), resumed on Ray: Ray links the other
    # three, and the folder equals the uninterrupted local run's
    shutil.copytree(tmp_path / "local", tmp_path / "ray")
    for name in ("rows/part-00000.parquet", "rows/part-00002.parquet", "rows/part-00003.parquet", MANIFEST_FILE):
        (tmp_path / "ray" / name).unlink()
    address = ray.get_runtime_context().gcs_address  # reachable: checked, then the running Ray is used (W700)
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        result = link_corpus([shards], str(corpus_pipeline), tmp_path / "ray", backend="ray", actors=2,
                             batch_size=4, address=address, show_progress=False)
    assert "SB-W700" in caplog.text
    assert (result.shards, result.skipped, result.linked, result.docs, result.rows) == (4, 1, 3, 17, local.rows)
    assert _digests(tmp_path / "ray") == _digests(tmp_path / "local")


def test_actor_errors_come_back_as_the_coded_error(corpus_pipeline, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "text": "flu"}\n{"id": "2", "body": "no text"}\n')
    with pytest.raises(DataFormatError, match=r"SB-E702.*bad.jsonl: line 2: no field 'text'"):
        link_corpus([bad], str(corpus_pipeline), tmp_path / "out", backend="ray", actors=1, show_progress=False)


def test_build_index_on_ray_equals_the_local_build(tiny_bert_path, tmp_path):
    names = ["influenza", "flu", "grippe", "aspirin", "acetylsalicylic acid", "ibuprofen", "fever", "pyrexia",
             "headache", "cephalalgia", "asthma"]
    concepts = [Concept(f"C{i:03d}", name, (), ("T",)) for i, name in enumerate(names)]
    KnowledgeBase.from_concepts(concepts).to_disk(tmp_path / "kb")
    options = dict(pooling="mean", device="cpu", kind="hnsw", chunk_size=3, show_progress=False)
    local = build_index_dir(tmp_path / "kb", str(tiny_bert_path), tmp_path / "local", **options)
    with pytest.raises(ConfigError, match="SB-E701"):
        build_index_dir(tmp_path / "kb", str(tiny_bert_path), tmp_path / "x", ray=True, address="ray://127.0.0.1:1",
                        **options)
    on_ray = build_index_dir(tmp_path / "kb", str(tiny_bert_path), tmp_path / "ray", ray=True, actors=2, **options)
    rows = list(range(len(names)))
    numpy.testing.assert_allclose(on_ray.name_vectors(rows), local.name_vectors(rows), atol=1e-6)
    queries = local.name_vectors(rows)
    assert (on_ray.search_names(queries, 4)[0] == local.search_names(queries, 4)[0]).all()
    assert ConceptIndex.read_meta(tmp_path / "ray")["encoder_fingerprint"] == local.meta["encoder_fingerprint"]
    assert not (tmp_path / ".ray.work").exists()  # chunks removed once the index is written
