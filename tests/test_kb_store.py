"""KnowledgeBase: views, rows, alternate ids, add_alias, merge, persistence, checksum, errors."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from spacy_sapbert.errors import ConfigError, DataFormatError, IntegrityError, MissingInputError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.kb._strings import StrArray, pack_strings


def _concepts():
    return [
        Concept("C2", "Heart Attack", ("MI", "Myocardial infarction"), ("T047",), "Death of heart muscle.", ("OMIM:1",)),
        Concept("C1", "Fever", ("Pyrexia", "MI"), ("T184",)),
        Concept("C3", "Épilepsie  Totale", (), (), None, ("MESH:D3",)),
    ]


@pytest.fixture
def kb():
    return KnowledgeBase.from_concepts(_concepts(), source="toy")


def test_views_and_rows(kb):
    assert len(kb) == 3
    assert list(kb.concept_ids) == ["C1", "C2", "C3"]
    assert list(kb.names) == sorted(["heart attack", "mi", "myocardial infarction", "fever", "pyrexia", "épilepsie totale"])
    row_mi = list(kb.names).index("mi")
    assert kb.concepts_of_row(row_mi) == ("C1", "C2")
    assert kb.alias_to_cuis["mi"] == {"C1", "C2"}
    assert kb.alias_to_cuis["  MI "] == {"C1", "C2"}  # keys are normalised on lookup
    assert "unknown" not in kb.alias_to_cuis
    with pytest.raises(KeyError):
        kb.alias_to_cuis["unknown"]
    assert kb.names_of_concept("C2") == ("heart attack", "mi", "myocardial infarction")
    assert [kb.names[r] for r in kb.rows_of_concept("C1")] == ["fever", "pyrexia", "mi"]
    entity = kb.cui_to_entity["C2"]
    assert entity == Concept("C2", "Heart Attack", ("MI", "Myocardial infarction"), ("T047",),
                             "Death of heart muscle.", ("OMIM:1",))
    assert kb.cui_to_entity["C3"].definition is None and kb.cui_to_entity["C3"].types == ()
    assert "C9" not in kb.cui_to_entity and len(kb.cui_to_entity) == 3
    with pytest.raises(KeyError):
        kb.rows_of_concept("C9")
    assert kb.stats()["ambiguous_names"] == 1


def test_resolve_id(kb):
    assert kb.resolve_id("C2") == "C2"
    assert kb.resolve_id("OMIM:1") == "C2"
    assert kb.resolve_id("MESH:D3") == "C3"
    assert kb.resolve_id("D3") is None


def test_duplicate_ids_are_merged_and_real_ids_beat_alt_ids():
    kb = KnowledgeBase.from_concepts([
        Concept("A", "Alpha", ("a1",), ("T1",), None, ("X",)),
        Concept("B", "Beta", (), (), "def B", ("X", "A")),
        Concept("A", "alpha", ("a2", "a1"), ("T2",), "def A", ("Y",)),
    ])
    a = kb.cui_to_entity["A"]
    assert a.canonical_name == "Alpha" and a.aliases == ("a1", "alpha", "a2")
    assert a.types == ("T1", "T2") and a.definition == "def A" and a.alt_ids == ("X", "Y")
    assert kb.resolve_id("A") == "A"  # B's alt id "A" does not hijack concept A
    assert kb.resolve_id("X") == "A"  # shared alt id: the smallest concept id


def test_add_alias_new_and_existing_name(kb):
    before = kb.checksum
    n = len(kb.names)
    kb.add_alias("OMIM:1", "Coronary  thrombosis")  # alternate ids are accepted
    assert kb.checksum != before
    assert len(kb.names) == n + 1 and kb.names[n] == "coronary thrombosis"  # appended, rows stable
    assert kb.concepts_of_row(n) == ("C2",)
    assert "Coronary  thrombosis" in kb.cui_to_entity["C2"].aliases
    kb.add_alias("C3", "pyrexia")  # existing row gains a concept
    assert kb.alias_to_cuis["pyrexia"] == {"C1", "C3"}
    assert kb.stats()["ambiguous_names"] == 2
    checksum = kb.checksum
    kb.add_alias("C3", "PYREXIA")  # already there: no change
    assert kb.checksum == checksum and len(kb.names) == n + 1
    ptr, idx = kb.row_concept_csr()
    assert len(ptr) == len(kb.names) + 1
    for row in range(len(kb.names)):
        assert tuple(kb.concept_ids[j] for j in idx[ptr[row]:ptr[row + 1]]) == kb.concepts_of_row(row)


def test_add_alias_errors(kb):
    with pytest.raises(ConfigError, match=r"\[SB-E008\].*'C404'"):
        kb.add_alias("C404", "x")
    with pytest.raises(ConfigError, match=r"\[SB-E009\]"):
        kb.add_alias("C1", "  \t ")


def test_round_trip_is_memory_mapped_and_keeps_additions(kb, tmp_path):
    kb.add_alias("C1", "high temperature")
    kb.to_disk(tmp_path / "kb")
    loaded = KnowledgeBase.from_disk(tmp_path / "kb")
    assert isinstance(loaded._a["name_blob"], np.memmap)
    assert loaded.checksum == kb.checksum
    assert list(loaded.names) == list(kb.names)
    assert list(loaded.concept_ids) == list(kb.concept_ids)
    for cid in kb.concept_ids:
        assert loaded.cui_to_entity[cid] == kb.cui_to_entity[cid]
        assert loaded.rows_of_concept(cid) == kb.rows_of_concept(cid)
    assert loaded.resolve_id("OMIM:1") == "C2"
    assert loaded.stats() == kb.stats()
    # add_alias on a loaded KB works (in memory) and never touches the files
    files = {f.name: f.read_bytes() for f in (tmp_path / "kb").iterdir()}
    loaded.add_alias("C2", "cardiac arrest")
    assert loaded.checksum != kb.checksum
    assert {f.name: f.read_bytes() for f in (tmp_path / "kb").iterdir()} == files
    # saving over the folder it was loaded from
    loaded.to_disk(tmp_path / "kb")
    again = KnowledgeBase.from_disk(tmp_path / "kb")
    assert again.checksum == loaded.checksum and again.alias_to_cuis["cardiac arrest"] == {"C2"}


def test_checksum_is_deterministic_and_content_sensitive():
    a = KnowledgeBase.from_concepts(_concepts())
    b = KnowledgeBase.from_concepts(list(reversed(_concepts())))
    assert a.checksum == b.checksum
    changed = _concepts()
    changed[1] = Concept("C1", "Fever", ("Pyrexia",), ("T184",))
    assert KnowledgeBase.from_concepts(changed).checksum != a.checksum


def test_merge_counts_per_source():
    one = KnowledgeBase.from_concepts([Concept("A", "Alpha", ("common",)), Concept("B", "Beta")], source="one")
    two = KnowledgeBase.from_concepts([Concept("A", "alpha one"), Concept("Z", "Zeta", ("common",))], source="two")
    two.add_alias("Z", "zed")
    merged = KnowledgeBase.merge([one, two])
    assert list(merged.concept_ids) == ["A", "B", "Z"]
    assert merged.names_of_concept("A") == ("alpha", "common", "alpha one")
    assert merged.alias_to_cuis["common"] == {"A", "Z"}
    assert merged.alias_to_cuis["zed"] == {"Z"}
    assert merged.source == "one+two"
    assert [s["source"] for s in merged.sources] == ["one", "two"]
    assert merged.sources[0] == {"source": "one", "concepts": 2, "names": 3, "ambiguous_names": 0}
    assert merged.stats()["ambiguous_names"] == 1
    with pytest.raises(ConfigError, match=r"\[SB-E012\]"):
        KnowledgeBase.merge([])


def test_to_disk_refuses_existing_without_overwrite(kb, tmp_path):
    kb.to_disk(tmp_path / "kb")
    with pytest.raises(ConfigError, match=r"\[SB-E003\]"):
        kb.to_disk(tmp_path / "kb", overwrite=False)


def test_from_disk_errors(kb, tmp_path):
    with pytest.raises(MissingInputError, match=r"\[SB-E001\]"):
        KnowledgeBase.from_disk(tmp_path / "nope")
    folder = tmp_path / "kb"
    kb.to_disk(folder)
    (folder / "row_ptr.npy").unlink()
    with pytest.raises(DataFormatError, match=r"\[SB-E010\].*row_ptr.npy is missing"):
        KnowledgeBase.from_disk(folder)
    kb.to_disk(folder)
    (folder / "kb.json").write_text("{not json", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E010\].*not valid JSON"):
        KnowledgeBase.from_disk(folder)
    (folder / "kb.json").write_text(json.dumps({"format": "other", "version": 1}), encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E010\].*not format"):
        KnowledgeBase.from_disk(folder)
    (folder / "kb.json").unlink()
    with pytest.raises(DataFormatError, match=r"\[SB-E010\].*kb.json is missing"):
        KnowledgeBase.from_disk(folder)
    kb.add_alias("C1", "hot")
    kb.to_disk(folder)
    (folder / "additions.jsonl").write_text('["C1", "hot"]\nbroken\n', encoding="utf8")
    with pytest.raises(IntegrityError, match=r"\[SB-E551\].*additions.jsonl.*size"):
        KnowledgeBase.from_disk(folder)
    # a folder saved before checksums were recorded: a warning, then the line-level error
    meta = json.loads((folder / "kb.json").read_text(encoding="utf8"))
    del meta["files"]
    (folder / "kb.json").write_text(json.dumps(meta), encoding="utf8")
    with pytest.warns(UserWarning, match=r"\[SB-W550\]"), \
            pytest.raises(DataFormatError, match=r"\[SB-E011\].*additions.jsonl: line 2"):
        KnowledgeBase.from_disk(folder)


def test_strarray_slices_and_find():
    items = ["a", "bé", "", "ccc", "d"] * 3
    for sep in (False, True):
        arr = StrArray(*pack_strings(items, sep=sep), sep=sep)
        assert len(arr) == len(items) and list(arr) == items
        assert arr[2:9] == items[2:9] and arr[::4] == items[::4] and arr[-1] == "d" and arr[5:2] == []
        with pytest.raises(IndexError):
            arr[len(items)]
    sorted_arr = StrArray(*pack_strings(sorted(set(items)), sep=True), sep=True)
    assert sorted_arr.find("ccc") == sorted(set(items)).index("ccc") and sorted_arr.find("zz") == -1


def test_names_sequence_across_additions(kb):
    kb.add_alias("C1", "zz top")
    kb.add_alias("C1", "aa first")
    names = list(kb.names)
    assert names[-2:] == ["zz top", "aa first"]
    assert kb.names[4:] == names[4:] and kb.names[-1] == "aa first" and kb.names[::3] == names[::3]


def test_empty_kb_round_trip(tmp_path):
    kb = KnowledgeBase.from_concepts([])
    assert len(kb) == 0 and len(kb.names) == 0
    kb.to_disk(tmp_path / "empty")
    assert len(KnowledgeBase.from_disk(tmp_path / "empty")) == 0


def test_concept_row_csr_and_type_masks(kb):
    kb.add_alias("C3", "fits")
    ptr, rows = kb.concept_row_csr()
    for j, cid in enumerate(kb.concept_ids):
        assert tuple(int(r) for r in rows[ptr[j]:ptr[j + 1]]) == kb.rows_of_concept(cid)
    assert kb.all_types() == ("T047", "T184")
    assert kb.concept_type_mask(["T184"]).tolist() == [True, False, False]
    assert kb.types_of("C2") == ("T047",)
    mask = kb.row_type_mask(["T047"])
    assert [kb.names[i] for i in mask.nonzero()[0]] == ["heart attack", "mi", "myocardial infarction"]
    assert not kb.row_type_mask(["T999"]).any()
    assert kb.concept_definition_mask().tolist() == [False, True, False]
    both = kb.rows_of_concept_mask(kb.concept_type_mask(["T047", "T184"]) & ~kb.concept_definition_mask())
    assert [kb.names[i] for i in both.nonzero()[0]] == ["fever", "mi", "pyrexia"]


def test_pickle_reopens_memory_map_and_keeps_additions(kb, tmp_path):
    import pickle  # multiprocessing only (nlp.pipe(n_process=...)); never a file format here

    kb.add_alias("C1", "hot")
    copy = pickle.loads(pickle.dumps(kb))
    assert copy.checksum == kb.checksum and list(copy.names) == list(kb.names)
    kb.to_disk(tmp_path / "kb")
    loaded = KnowledgeBase.from_disk(tmp_path / "kb")
    loaded.add_alias("C2", "cardiac arrest")
    data = pickle.dumps(loaded)
    assert len(data) < 2000  # the path and the additions, not the arrays
    again = pickle.loads(data)
    assert isinstance(again._a["name_blob"], np.memmap)
    assert again.checksum == loaded.checksum and again.alias_to_cuis["cardiac arrest"] == {"C2"}
    KnowledgeBase.from_concepts([Concept("Q", "Other")]).to_disk(tmp_path / "kb")
    with pytest.raises(DataFormatError, match=r"\[SB-E010\].*changed"):
        pickle.loads(data)


def test_sorted_sequences_answer_membership_by_binary_search(kb):
    kb.add_alias("C1", "zz hot")
    assert "C2" in kb.concept_ids and "C9" not in kb.concept_ids and 2 not in kb.concept_ids
    assert kb.concept_ids.index("C3") == 2
    with pytest.raises(ValueError):
        kb.concept_ids.index("C9")
    names = kb.names
    assert "mi" in names and "zz hot" in names and "nope" not in names
    assert names.index("mi") == list(names).index("mi") and names.index("zz hot") == len(names) - 1
    with pytest.raises(ValueError):
        names.index("nope")
    unsorted = StrArray(*pack_strings(["b", "a"]))
    assert "a" in unsorted and unsorted.index("a") == 1


def test_verify_detects_altered_arrays(kb, tmp_path):
    kb.to_disk(tmp_path / "kb")
    KnowledgeBase.from_disk(tmp_path / "kb").verify()
    blob = np.load(tmp_path / "kb" / "name_blob.npy")
    blob[0] = ord("x")
    np.save(tmp_path / "kb" / "name_blob.npy", blob)
    with pytest.raises(IntegrityError, match=r"\[SB-E551\].*name_blob.npy.*sample_sha256"):
        KnowledgeBase.from_disk(tmp_path / "kb")  # the file records in kb.json catch it at load
    meta = json.loads((tmp_path / "kb" / "kb.json").read_text(encoding="utf8"))
    del meta["files"]  # as written by an older version
    (tmp_path / "kb" / "kb.json").write_text(json.dumps(meta), encoding="utf8")
    with pytest.warns(UserWarning, match=r"\[SB-W550\]"):
        old = KnowledgeBase.from_disk(tmp_path / "kb")
    with pytest.raises(DataFormatError, match=r"\[SB-E010\].*do not match the checksum"):
        old.verify()


def test_find_on_a_memory_mapped_array_matches_a_sorted_list(tmp_path):
    """``find`` reads the memory-mapped buffers directly: the same rows as a search of the decoded list,
    with non-ASCII names (UTF-8 byte order is code point order), prefixes, misses and unencodable keys."""
    rng = np.random.default_rng(3)
    alphabet = list("ab z-éßΩ中") + ["\U0001F600"]
    names = sorted({"".join(rng.choice(alphabet, size=int(rng.integers(0, 7)))) for _ in range(600)})
    blob, off = pack_strings(names, sep=True)
    np.save(tmp_path / "blob.npy", blob)
    np.save(tmp_path / "off.npy", off)
    mapped = StrArray(np.load(tmp_path / "blob.npy", mmap_mode="r"), np.load(tmp_path / "off.npy", mmap_mode="r"),
                      sep=True, is_sorted=True)
    assert isinstance(mapped.blob, np.memmap) and list(mapped) == names
    assert mapped[len(names) // 2] == names[len(names) // 2]
    for i, name in enumerate(names):
        assert mapped.find(name) == i
    absent = {"".join(rng.choice(alphabet, size=int(rng.integers(1, 8)))) for _ in range(300)} - set(names)
    for key in sorted(absent) + ["\ud800", "zzzzzzzz", "\x00"]:
        assert mapped.find(key) == -1 and key not in mapped
    copied = pickle.loads(pickle.dumps(mapped))  # e.g. kb.names sent to a worker process
    assert list(copied) == names and copied.find(names[7]) == 7 and copied.sep and copied.is_sorted
