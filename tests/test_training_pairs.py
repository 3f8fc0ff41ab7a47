"""Training pairs: caps, determinism, one-name concepts, task-data pairs, damaged pair sets."""
from __future__ import annotations

import itertools
import random

import pytest

from spacy_sapbert.errors import ConfigError, DataFormatError, EmptyResultError, IncompatibleError, MissingInputError
from spacy_sapbert.kb import Concept, KnowledgeBase, normalize_name
from spacy_sapbert.training.pairs import PairSet, sample_pairs, write_kb_pairs, write_task_pairs


def _kb():
    concepts = [
        Concept("C1", "Heart Attack", ("Myocardial  Infarction", "MI", "heart attack")),  # dup after normalising
        Concept("C2", "Fever"),  # one name: no pairs
        Concept("C3", "Big", tuple(f"big {i}" for i in range(14))),  # 15 names → 105 pairs
        Concept("C4", "Cold", ("common cold",), alt_ids=("OLD4",)),
    ]
    return KnowledgeBase.from_concepts(concepts, source="test")


@pytest.mark.parametrize("n", [2, 3, 7, 15])
def test_sample_pairs_enumerates_and_samples_combinations(n):
    everything = list(itertools.combinations(range(n), 2))
    assert sample_pairs(n, None, random.Random(0)) == everything
    cap = max(1, len(everything) // 2)
    got = sample_pairs(n, cap, random.Random(3))
    assert len(got) == cap and len(set(got)) == cap and set(got) <= set(everything)
    assert got == sample_pairs(n, cap, random.Random(3))


def test_kb_pairs_cap_normalisation_and_one_name_concepts(tmp_path):
    kb = _kb()
    ps = write_kb_pairs(kb, tmp_path / "pairs", max_pairs_per_concept=50, seed=1)
    triples = list(ps.iter_pairs(kb))
    by_concept = {}
    for a, b, cid in triples:
        by_concept.setdefault(cid, []).append((a, b))
        assert a == normalize_name(a) and b == normalize_name(b) and a != b
        assert a in kb.names_of_concept(cid) and b in kb.names_of_concept(cid)
    assert "C2" not in by_concept
    assert sorted(by_concept["C1"]) == sorted(itertools.combinations(kb.names_of_concept("C1"), 2))
    assert len(by_concept["C1"]) == 3  # "heart attack" deduplicated: 3 names → 3 pairs
    assert len(by_concept["C3"]) == 50 and len(set(by_concept["C3"])) == 50
    assert len(by_concept["C4"]) == 1
    assert ps.meta["n_pairs"] == len(ps) == 54 and ps.meta["n_concepts"] == 3


def test_kb_pairs_are_deterministic_and_seed_dependent(tmp_path):
    kb = _kb()
    a = write_kb_pairs(kb, tmp_path / "a", max_pairs_per_concept=10, seed=7)
    b = write_kb_pairs(kb, tmp_path / "b", max_pairs_per_concept=10, seed=7)
    c = write_kb_pairs(kb, tmp_path / "c", max_pairs_per_concept=10, seed=8)
    assert (tmp_path / "a" / "pairs.bin").read_bytes() == (tmp_path / "b" / "pairs.bin").read_bytes()
    assert (tmp_path / "a" / "pairs.bin").read_bytes() != (tmp_path / "c" / "pairs.bin").read_bytes()
    assert len(a) == len(c) == 3 + 10 + 1


def test_kb_pairs_refuse_existing_output_and_kb_without_synonyms(tmp_path):
    kb = _kb()
    write_kb_pairs(kb, tmp_path / "p")
    with pytest.raises(ConfigError, match=r"\[SB-E003\]"):
        write_kb_pairs(kb, tmp_path / "p")
    lonely = KnowledgeBase.from_concepts([Concept("X", "one"), Concept("Y", "two")])
    with pytest.raises(EmptyResultError, match=r"\[SB-E200\].*2 concepts"):
        write_kb_pairs(lonely, tmp_path / "q")
    assert not (tmp_path / "q").exists()


def test_task_pairs_pair_mentions_with_every_gold_name(tmp_path):
    kb = _kb()
    mentions = [("Heart  ATTACKS", ["C1"]), ("a cold", ["OLD4", "NOPE"]), ("unknown", ["ZZZ"]), ("mi", ("C1", "C4"))]
    ps = write_task_pairs(kb, mentions, tmp_path / "task")
    triples = list(ps.iter_pairs(kb))
    assert ("heart attacks", "myocardial infarction", "C1") in triples
    assert sorted(t for t in triples if t[0] == "heart attacks") == sorted(
        ("heart attacks", n, "C1") for n in kb.names_of_concept("C1")
    )
    assert sorted(b for a, b, c in triples if a == "a cold") == ["cold", "common cold"]
    assert {c for a, b, c in triples if a == "mi"} == {"C1", "C4"}
    assert ps.meta["unknown_ids"] == 2 and ps.meta["n_mentions"] == 3
    assert ps.texts == ["heart attacks", "a cold", "mi"]
    capped = write_task_pairs(kb, mentions, tmp_path / "capped", max_pairs_per_mention=1)
    assert len(capped) == 3


def test_task_pairs_accept_mention_objects_and_refuse_no_match(tmp_path):
    from spacy_sapbert.mentions.datasets import Mention

    kb = _kb()
    ps = write_task_pairs(kb, [Mention(text="Fever!", ids=("C2",))], tmp_path / "m")
    assert list(ps.iter_pairs(kb)) == [("fever!", "fever", "C2")]
    with pytest.raises(EmptyResultError, match=r"\[SB-E201\].*1 unknown ids"):
        write_task_pairs(kb, [("x", ["MESH:D1"])], tmp_path / "none")


def test_pair_set_errors(tmp_path):
    kb = _kb()
    with pytest.raises(MissingInputError, match=r"\[SB-E001\].*Pair set"):
        PairSet(tmp_path / "missing")
    write_kb_pairs(kb, tmp_path / "p")
    bin_path = tmp_path / "p" / "pairs.bin"
    bin_path.write_bytes(bin_path.read_bytes()[:-8])
    with pytest.raises(DataFormatError, match=r"\[SB-E202\].*pairs.bin"):
        PairSet(tmp_path / "p")
    (tmp_path / "p" / "meta.json").write_text("{not json", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E202\].*meta.json"):
        PairSet(tmp_path / "p")
    ps = write_kb_pairs(kb, tmp_path / "q")
    other = KnowledgeBase.from_concepts([Concept("Z", "a", ("b",))])
    with pytest.raises(IncompatibleError, match=r"\[SB-E203\]"):
        ps.check_kb(other)
    ps.check_kb(kb)


def test_combination_index_decoding_is_exact_for_large_concepts():
    from spacy_sapbert.training.pairs import _combination

    n = 300
    assert [_combination(t, n) for t in range(n * (n - 1) // 2)] == list(itertools.combinations(range(n), 2))


def test_pair_set_with_wrong_texts_file(tmp_path):
    kb = _kb()
    write_task_pairs(kb, [("mi", ["C1"])], tmp_path / "t")
    (tmp_path / "t" / "texts.txt").write_text("", encoding="utf8")
    with pytest.raises(DataFormatError, match=r"\[SB-E202\].*texts.txt"):
        PairSet(tmp_path / "t")


@pytest.mark.parametrize("cap,chunk", [(50, 100_000), (4, 3), (None, 2)])
def test_kb_pairs_equal_the_per_concept_reference(tmp_path, monkeypatch, cap, chunk):
    from spacy_sapbert.training import pairs as pairs_module

    rng = random.Random(5)
    concepts = [Concept(f"C{i:03d}", f"name {i}", tuple(f"alias {i} {k}" for k in range(rng.choice([0, 1, 2, 3, 6, 12]))))
                for i in range(40)]
    kb = KnowledgeBase.from_concepts(concepts, source="test")
    kb.add_alias("C001", "an added alias")  # additions count as names of the concept
    monkeypatch.setattr(pairs_module, "_CONCEPT_CHUNK", chunk)
    got = write_kb_pairs(kb, tmp_path / "p", max_pairs_per_concept=cap, seed=3).pairs
    want = []
    for label, cid in enumerate(kb.concept_ids):
        rows = kb.rows_of_concept(cid)
        if len(rows) >= 2:
            for i, j in sample_pairs(len(rows), cap, random.Random(f"3:{cid}")):
                want.append((rows[i], rows[j], label))
    assert [tuple(r) for r in got.tolist()] == want
