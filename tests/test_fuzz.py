"""Fuzzing with Hypothesis: every reader and the link input get random bytes, random text, mutated and
truncated copies of a valid fixture. The only outcomes allowed are a result or a coded
:class:`SapbertError`; anything else (a traceback from inside a reader) fails the test. The link-corpus
readers (``corpus_jsonl``, ``corpus_parquet``) also may not lose a document: when a shard reads, every
non-blank line (every Parquet row) is a document with an id of its own and text that can be written,
and the check before the run counts the same.

Bounded in the default run (profile ``bounded``: a few dozen examples per test, the whole file well
under a minute); ``SAPBERT_FUZZ_EXAMPLES=5000 pytest tests/test_fuzz.py`` loads the ``fuzz`` profile
with that many examples per test. Inputs that once crashed a reader are kept as ``@example``s and as
files under ``tests/fixtures/fuzz/`` (replayed by :func:`test_crash_corpus`).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from spacy_sapbert.corpus import find_shards, read_shard
from spacy_sapbert.corpus.checks import scan_shards
from spacy_sapbert.errors import SapbertError
from spacy_sapbert.mentions.abbreviation_table import AbbreviationTable
from spacy_sapbert.base.signed_json import digest as table_digest
from spacy_sapbert.mentions.datasets import read_biosyn, read_mentions_jsonl, read_mentions_tsv, read_pubtator
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.kb.readers import read_jsonl, read_medic, read_obo, read_tsv, read_umls

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "fuzz"

_COMMON = dict(deadline=None, database=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("bounded", max_examples=int(os.environ.get("SAPBERT_FUZZ_BOUNDED", "40")), **_COMMON)
settings.register_profile("fuzz", max_examples=int(os.environ.get("SAPBERT_FUZZ_EXAMPLES", "5000") or 5000),
                          **dict(_COMMON, derandomize=False))
PROFILE = "fuzz" if os.environ.get("SAPBERT_FUZZ_EXAMPLES") else "bounded"


def _kb_reader(reader: Callable) -> Callable[[Path], object]:
    """A KB reader as build-kb runs it: read every concept, then build the KB."""
    return lambda path: KnowledgeBase.from_concepts(reader(path))


def _umls(path: Path) -> object:
    folder = path.parent / "META"
    shutil.copytree(FIXTURES / "kb" / "umls", folder, dirs_exist_ok=True)
    shutil.copyfile(path, folder / "MRCONSO.RRF")
    return KnowledgeBase.from_concepts(read_umls(folder, semantic_types=None))


def _biosyn(path: Path) -> object:
    concept = path.with_suffix(".concept")
    shutil.copyfile(path, concept)
    shutil.copyfile(FIXTURES / "eval" / "biosyn" / "100.txt", concept.with_suffix(".txt"))
    return read_biosyn(concept)


def _biosyn_text(path: Path) -> object:
    """The document text beside a concept file is fuzzed instead (offsets are checked against it)."""
    concept = path.parent / "doc.concept"
    shutil.copyfile(FIXTURES / "eval" / "biosyn" / "100.concept", concept)
    shutil.copyfile(path, concept.with_suffix(".txt"))
    return read_biosyn(concept)


def _abbreviation_json(path: Path) -> object:
    """An abbreviation table file (``.json``: the digest is checked first)."""
    target = path.with_suffix(".json")
    shutil.copyfile(path, target)
    return AbbreviationTable.from_disk(target)


def _abbreviation_rehashed(path: Path) -> object:
    """An abbreviation table whose digest a forger recomputed: the entries' own checks must hold."""
    try:
        data = json.loads(path.read_bytes().decode("utf8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(data, dict) and isinstance(data.get("table"), dict):
        data["sha256"] = table_digest(data["table"])
    return AbbreviationTable.from_dict(data, path=path)


def _corpus_shard(fmt: str) -> Callable[[Path], object]:
    """A link-corpus shard as the run reads it: the check of every document (ids unique), then the documents."""

    def read(path: Path) -> object:
        shards = find_shards([path], fmt)
        counts = scan_shards(shards)
        docs = list(read_shard(shards[0]))
        assert counts == [len(docs)], "the check and the linking pass read different documents"
        assert len({doc_id for doc_id, _ in docs}) == len(docs), "two documents with one id passed"
        for doc_id, text in docs:
            (doc_id + text).encode("utf8")  # what is read can be written (no lone surrogate)
        if fmt == "jsonl":
            lines = [raw.decode("utf8") for raw in path.read_bytes().split(b"\n")]
            assert len(docs) == sum(1 for n, line in enumerate(lines) if (line[1:] if n == 0 and
                                                                          line[:1] == "\ufeff" else line).strip())
        else:
            import pyarrow.parquet as pq

            assert len(docs) == pq.read_metadata(path).num_rows, "a Parquet row was lost"
        return docs

    return read


# name → (read function on one file, valid fixture, characters its syntax is made of)
READERS: Dict[str, tuple] = {
    "medic": (_kb_reader(read_medic), FIXTURES / "kb" / "tiny_medic.txt", "|\t:#"),
    "obo": (_kb_reader(read_obo), FIXTURES / "kb" / "tiny.obo", "[]:\"!{}\\ "),
    "umls": (_umls, FIXTURES / "kb" / "umls" / "MRCONSO.RRF", "|"),
    "tsv": (_kb_reader(read_tsv), FIXTURES / "kb" / "tiny.tsv", "\t#"),
    "jsonl": (_kb_reader(read_jsonl), FIXTURES / "kb" / "tiny.jsonl", "{}[]\":,"),
    "pubtator": (read_pubtator, FIXTURES / "eval" / "test.pubtator", "|\t"),
    "biosyn": (_biosyn, FIXTURES / "eval" / "biosyn" / "100.concept", "|"),
    "biosyn_text": (_biosyn_text, FIXTURES / "eval" / "biosyn" / "100.txt", " "),
    "mentions_tsv": (read_mentions_tsv, FIXTURES / "eval" / "mentions.tsv", "\t"),
    "mentions_jsonl": (read_mentions_jsonl, FIXTURES / "eval" / "mentions.jsonl", "{}[]\":,"),
    "corpus_jsonl": (_corpus_shard("jsonl"), FIXTURES / "corpus" / "docs.jsonl", "{}[]\":,\\u"),
    "corpus_parquet": (_corpus_shard("parquet"), FIXTURES / "corpus" / "docs.parquet", "PAR1\x00\x15\x19\x1c"),
    "abbreviation_json": (_abbreviation_json, FIXTURES / "abbreviations" / "table.json", "{}[]\":,"),
    "abbreviation_rehashed": (_abbreviation_rehashed, FIXTURES / "abbreviations" / "table.json", "{}[]\":,0-"),
    "abbreviation_tsv": (AbbreviationTable.from_disk, FIXTURES / "abbreviations" / "table.tsv", "\t#"),
}
NAMES = sorted(READERS)


def _run(name: str, data: bytes, folder: Path) -> None:
    """Feed ``data`` to a reader; a SapbertError is a fine outcome, any other exception is a bug."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"input_{name}"
    path.write_bytes(data)
    try:
        READERS[name][0](path)
    except SapbertError:
        pass
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _mutate(valid: bytes, edits: List[tuple]) -> bytes:
    data = bytearray(valid)
    for op, pos, byte in edits:
        if not data and op != "insert":
            continue
        pos %= max(len(data), 1)
        if op == "flip":
            data[pos] = byte
        elif op == "insert":
            data[pos:pos] = bytes([byte])
        else:
            del data[pos : pos + 1 + byte % 8]
    return bytes(data)


EDITS = st.lists(st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.integers(0, 1 << 16),
                           st.integers(0, 255)), min_size=1, max_size=8)


def _syntax_lines(alphabet: str):
    chars = st.sampled_from(list(alphabet) + list("aZ09 -_.é\x00\u200b😀") + ["MESH:", "OMIM:", "id: ", "name: ",
                                                                               "synonym: ", "[Term]", "|t|", "|a|"])
    line = st.lists(chars, max_size=30).map("".join)
    return st.lists(line, max_size=12).map(lambda lines: "\n".join(lines).encode("utf8", "surrogatepass"))


@pytest.mark.parametrize("name", NAMES)
@settings(settings.get_profile(PROFILE))
@given(data=st.binary(max_size=600))
@example(data=b"")
@example(data=b"\xff\xfe\x00")
def test_random_bytes(name, data, tmp_path):
    _run(name, data, tmp_path / "case")


@pytest.mark.parametrize("name", NAMES)
@settings(settings.get_profile(PROFILE))
@given(data=st.data())
def test_syntax_shaped_text(name, data, tmp_path):
    _run(name, data.draw(_syntax_lines(READERS[name][2])), tmp_path / "case")


@pytest.mark.parametrize("name", NAMES)
@settings(settings.get_profile(PROFILE))
@given(edits=EDITS)
def test_mutated_fixture(name, edits, tmp_path):
    _run(name, _mutate(READERS[name][1].read_bytes(), edits), tmp_path / "case")


@pytest.mark.parametrize("name", NAMES)
def test_truncations_at_every_line(name, tmp_path):
    lines = READERS[name][1].read_bytes().splitlines(keepends=True)
    for k in range(len(lines) + 1):
        head = b"".join(lines[:k])
        _run(name, head, tmp_path / f"line{k}")
        if k < len(lines) and len(lines[k]) > 2:
            _run(name, head + lines[k][: len(lines[k]) // 2], tmp_path / f"half{k}")


def _corpus() -> List[Path]:
    return sorted(p for p in CORPUS.glob("*/*") if p.is_file()) if CORPUS.is_dir() else []


@pytest.mark.parametrize("case", _corpus(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_crash_corpus(case, tmp_path):
    """Inputs that once crashed a reader (folder name = reader name) keep giving a result or a coded error."""
    _run(case.parent.name, case.read_bytes(), tmp_path / "case")


# ---- link input ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def linking_nlp(tiny_bert_path, tmp_path_factory, every_token_ents):
    """A linker over the tiny KB, with every token an entity (pipeline mode) or the whole text (index mode)."""
    import spacy

    from spacy_sapbert.kb.readers import read_medic

    kb_dir = tmp_path_factory.mktemp("fuzz_kb") / "kb"
    KnowledgeBase.from_concepts(read_medic(FIXTURES / "kb" / "tiny_medic.txt")).to_disk(kb_dir)
    config = {"model": str(tiny_bert_path), "device": "cpu", "pooling": "mean", "threshold": -1.0}
    nlp = spacy.blank("en")
    nlp.add_pipe(every_token_ents)
    linker = nlp.add_pipe("sapbert_linker", config=config)
    linker.initialize(kb_path=str(kb_dir), show_progress=False)
    index_mode = spacy.blank("en")  # as `link INDEX_FOLDER` builds it: the linker alone
    index_mode.add_pipe("sapbert_linker", config=config).set_resources(linker.encoder, linker.index)
    return {False: nlp, True: index_mode}


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80) | st.text(
    st.sampled_from(list(".,;:!?-–()[]{}'\"/\\|@#$%^&*+=~`") + ["😀", "\u200b", "\u200d", "\ufeff", "\u0301", " ",
                                                                "\n", "\t", "a", "1", "M", "Ⅷ", "ﬁ"]), max_size=40)


@settings(settings.get_profile(PROFILE))
@given(texts=st.lists(TEXT, min_size=1, max_size=4))
@example(texts=[".", "😀", "\u200b", "", " "])
@example(texts=["⒜"])
def test_link_input_text(linking_nlp, texts):
    from spacy_sapbert.kb.concept import normalize_name
    from spacy_sapbert.commands.pipeline import link_records

    pairs = [(str(i), t) for i, t in enumerate(texts)]
    for whole_text in (False, True):
        try:
            records = list(link_records(linking_nlp[whole_text], pairs, whole_text=whole_text))
        except SapbertError:
            continue
        assert [r["id"] for r in records] == [p[0] for p in pairs]
        for record in records:
            for ent in record["ents"]:
                if not any(ch.isalnum() for ch in normalize_name(ent["text"])):  # NFKC: "⒜" is "(a)"
                    assert ent["kb_ents"] == [] and ent["kb_id"] == ""  # skip_non_alnum
                assert all(-1.0 - 1e-4 <= s <= 1.0 + 1e-4 for _, s in ent["kb_ents"])


def test_a_document_over_max_length_is_a_coded_error_before_any_record(linking_nlp):
    """spaCy's E088 (a ValueError from inside nlp.pipe) for a 1M-character document: E560 naming it, up front."""
    from spacy_sapbert.errors import DataFormatError
    from spacy_sapbert.commands.pipeline import link_records

    for whole_text, nlp in linking_nlp.items():
        pairs = [("small", "flu"), ("big.txt", "flu " * (nlp.max_length // 4 + 1))]
        with pytest.raises(DataFormatError, match=r"\[SB-E560\].*'big.txt' has 1,000,004 characters"):
            next(iter(link_records(nlp, pairs, whole_text=whole_text)))


# ---- damaged index folders: a result with scores in [-1, 1], or a coded error ------------------------
class _Enc:
    fingerprint, dim, pooling, max_length, name = "synthetic", 8, "cls", 25, "synthetic"


@pytest.fixture(scope="module")
def index_folders(tmp_path_factory):
    import numpy

    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import Concept

    root = tmp_path_factory.mktemp("fuzz_index")
    kb = KnowledgeBase.from_concepts([Concept(f"C{c:03d}", f"name {c}", (f"alias {c}",)) for c in range(40)])
    vectors = numpy.random.default_rng(0).normal(size=(len(kb.names), 8)).astype(numpy.float32)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    for kind in ("exact", "hnsw"):
        ConceptIndex.from_vectors(kb, vectors, _Enc(), kind=kind, show_progress=False).to_disk(root / kind)
    return root, kb, vectors


def _search_or_coded_error(folder, kb, vectors):
    from spacy_sapbert.index import ConceptIndex

    try:
        index = ConceptIndex.from_disk(folder, kb)
        for hits in index.search(vectors[:4], 5):
            assert all(-1.0 - 1e-2 <= score <= 1.0 + 1e-2 for _, score in hits), hits
    except SapbertError:
        pass


JSON_VALUE = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=3), max_leaves=6)


@settings(settings.get_profile(PROFILE))
@given(kind=st.sampled_from(["exact", "hnsw"]), field=st.sampled_from(
    ["kind", "n_names", "dim", "ef_search", "file", "file_size", "files", "M", "ef_construction", "languages",
     "max_length", "n_concepts", "format_version", "kb_checksum"]), value=JSON_VALUE)
@example(kind="hnsw", field="ef_search", value=-1)
@example(kind="exact", field="n_names", value="1214x")
def test_edited_index_meta(index_folders, tmp_path_factory, kind, field, value):
    import json

    from spacy_sapbert.index import META_FILE

    root, kb, vectors = index_folders
    folder = tmp_path_factory.mktemp("meta") / kind
    shutil.copytree(root / kind, folder)
    meta = json.loads((folder / META_FILE).read_text())
    (folder / META_FILE).write_text(json.dumps({**meta, field: value}))
    _search_or_coded_error(folder, kb, vectors)


@settings(settings.get_profile(PROFILE))
@given(offset=st.integers(0, 10**6), data=st.binary(min_size=1, max_size=64))
def test_overwritten_vector_bytes_with_recomputed_hashes(index_folders, tmp_path_factory, offset, data):
    """Bytes of vectors.npy overwritten and the records recomputed (so only the content checks can see it)."""
    import json

    from spacy_sapbert.index import META_FILE
    from spacy_sapbert.base.integrity import file_records

    root, kb, vectors = index_folders
    folder = tmp_path_factory.mktemp("bytes") / "exact"
    shutil.copytree(root / "exact", folder)
    path = folder / "vectors.npy"
    raw = bytearray(path.read_bytes())
    at = offset % len(raw)
    raw[at:at + len(data)] = data[: len(raw) - at]
    path.write_bytes(bytes(raw))
    meta = json.loads((folder / META_FILE).read_text())
    meta["files"] = file_records(folder, meta["files"])
    (folder / META_FILE).write_text(json.dumps(meta))
    _search_or_coded_error(folder, kb, vectors)
