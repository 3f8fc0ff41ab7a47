"""Scoring protocols with hand-computed values; filtered subsets against a brute-force reference."""
from __future__ import annotations

import random

import pytest

from spacy_sapbert.errors import ConfigError
from spacy_sapbert.mentions.metrics import (
    Gold,
    Ranking,
    acc_at_k,
    ambiguous_share,
    check_ks,
    levenshtein_within,
    near_duplicates,
    resolve_gold,
    score,
    subset_masks,
)
from spacy_sapbert.kb import Concept, KnowledgeBase


@pytest.fixture()
def kb():
    return KnowledgeBase.from_concepts([
        Concept("D001", "Breast Cancer"),
        Concept("D002", "Ovarian Cancer", alt_ids=("OMIM:114480",)),
        Concept("D004", "Cancer", aliases=("tumor",)),
        Concept("D005", "Tumor"),
        Concept("OMIM:600001", "Ataxia type X"),
    ])


def test_resolve_gold_alternate_ids_and_prefixes(kb):
    g = resolve_gold(kb, ("OMIM:114480",))
    assert g.ids == {"D002"} and g.missing == ()
    assert resolve_gold(kb, ("MESH:D001",)).ids == {"D001"}  # prefix stripped
    assert resolve_gold(kb, ("OMIM:600001",)).ids == {"OMIM:600001"}
    assert resolve_gold(kb, ("600001",)).ids == frozenset()  # a bare number is not guessed to be OMIM
    part = resolve_gold(kb, ("D001", "D999"))
    assert part.ids == {"D001"} and part.missing == ("D999",) and part.in_kb
    none = resolve_gold(kb, ("D999",))
    assert not none.in_kb and none.raw == ("D999",)


def _g(*ids):
    return Gold(ids=frozenset(ids), raw=tuple(ids))


def test_strict_and_lenient_by_hand():
    # mention 1: best name "tumor" is shared by D004 and D005, gold D005:
    #   lenient right at 1; strict: concepts ranked (D004, D005) by id -> right at 2
    # mention 2: composite gold {D001, D002}; second name hits D002 -> right at 2 in both
    # mention 3: gold not in the KB -> wrong everywhere
    # mention 4: no prediction at all
    rankings = [
        Ranking(concepts=[("D004", 1.0), ("D005", 1.0)], names=[("tumor", ("D004", "D005"), 1.0)]),
        Ranking(concepts=[("D004", 0.9), ("D002", 0.8)],
                names=[("cancer", ("D004",), 0.9), ("ovarian cancer", ("D002",), 0.8)]),
        Ranking(concepts=[("D001", 0.5)], names=[("breast cancer", ("D001",), 0.5)]),
        Ranking(concepts=[], names=[]),
    ]
    golds = [_g("D005"), _g("D001", "D002"), Gold(ids=frozenset(), raw=("D999",), missing=("D999",)), _g("D001")]
    s = score(golds, rankings, [1, 2, 5])
    assert s["n"] == 4
    assert s["strict"] == {"acc@1": 0.0, "acc@2": 0.5, "acc@5": 0.5}
    assert s["lenient"] == {"acc@1": 0.25, "acc@2": 0.5, "acc@5": 0.5}
    assert s["ambiguous_top1"] == 0.25
    assert s["no_prediction"] == 1


def test_concept_only_rankings_have_no_lenient():
    s = score([_g("A")], [Ranking(concepts=[("A", 0.3)])], [1])
    assert s["strict"] == {"acc@1": 1.0} and s["lenient"] is None and s["ambiguous_top1"] is None


def test_acc_at_k_and_empty():
    assert acc_at_k([1, 3, None, 2], [1, 2, 3]) == {1: 0.25, 2: 0.5, 3: 0.75}
    assert acc_at_k([], [1]) == {1: 0.0}
    assert ambiguous_share([]) is None


@pytest.mark.parametrize("bad", [[], [0], [1, -2], ["x"], [True]])
def test_check_ks_rejects(bad):
    with pytest.raises(ConfigError, match="SB-E304"):
        check_ks(bad)


def test_check_ks_sorts():
    assert check_ks([5, 1, 5]) == (1, 5)


def _lev(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_levenshtein_within_matches_full_dp():
    rng = random.Random(0)
    for _ in range(400):
        a = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 9)))
        b = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 9)))
        d = _lev(a, b)
        for bound in range(0, 5):
            got = levenshtein_within(a, b, bound)
            assert got == (d if d <= bound else None), (a, b, bound)


def test_near_duplicates_matches_brute_force():
    rng = random.Random(1)
    refs = ["".join(rng.choice("abcde") for _ in range(rng.randint(1, 12))) for _ in range(300)]
    queries = ["".join(rng.choice("abcdef") for _ in range(rng.randint(1, 12))) for _ in range(80)] + refs[:5]
    want = [any(_lev(q, r) / max(len(q), len(r)) <= 0.2 for r in refs) for q in queries]
    assert near_duplicates(queries, refs, 0.2) == want
    assert near_duplicates(queries, [], 0.2) == [False] * len(queries)


def test_subset_masks_by_hand():
    names = ["breast cancer", "mammary cancer", "ovarian cancer"]
    train = ["wd"]
    queries = ["breast cancer", "wd", "mammary cancers", "colon polyp", "ovarian tumour"]
    masks = subset_masks(queries, names, train, 0.2)
    assert masks["full"] == [True] * 5
    assert masks["filtered"] == [False, False, True, True, True]
    # "mammary cancers" is 1 edit from "mammary cancer" (1/15 <= 0.2); "ovarian tumour" is 6 from
    # "ovarian cancer" (6/14 > 0.2)
    assert masks["filtered_lev0.2"] == [False, False, False, True, True]


def test_mention_classes_and_split():
    from spacy_sapbert.mentions.metrics import class_split, mention_classes

    classes = mention_classes(["a", "b", "c", "d"], ["a", "x"], ["b", "a"])
    assert classes == ["dictionary", "train", "neither", "neither"]
    split = class_split([True, False, True, False], classes)
    assert split["overall"] == {"n": 4, "acc": 0.5}
    assert split["dictionary"] == {"n": 1, "acc": 1.0}
    assert split["train"] == {"n": 1, "acc": 0.0}
    assert split["neither"] == {"n": 2, "acc": 0.5}
    with pytest.raises(ValueError):
        class_split([True], classes)


# ---------------------------------------------------------------- the protocol (evaluation.protocol)
def test_mention_classes_on_the_protocol_normalisation():
    from spacy_sapbert.evaluation.protocol import MentionClasses

    queries = ["Breast  Cancer", "mammary-cancer", "WD", "colon polyp", "breast cancer"]
    names = ["breast cancer", "mammary cancer"]
    train = ["wd", "Breast cancer"]
    plain = MentionClasses(queries, names, train)
    # case and spaces folded for all three; punctuation kept: "mammary-cancer" is no name
    assert plain.classes == ["dictionary", "neither", "train", "neither", "dictionary"]
    assert plain.unseen_in_train == [False, True, False, True, False]
    folded = MentionClasses(queries, names, train, fold_punctuation=True)
    assert folded.classes[1] == "dictionary"
    assert plain.counts() == {"dictionary": 2, "train": 1, "neither": 2, "unseen_in_train": 2}
    split = plain.split([True, False, True, False, False])
    assert split["overall"] == {"n": 5, "acc": pytest.approx(2 / 5)}
    assert split["dictionary"] == {"n": 2, "acc": 0.5} and split["train"] == {"n": 1, "acc": 1.0}
    assert split["neither"] == {"n": 2, "acc": 0.0} and split["unseen_in_train"] == {"n": 2, "acc": 0.0}
    assert MentionClasses([], names, train).split([])["neither"] == {"n": 0, "acc": None}


def test_candidate_recall_cuts_at_the_depth():
    from spacy_sapbert.evaluation.protocol import candidate_recall

    golds = [Gold(frozenset({"A"}), ("A",)), Gold(frozenset({"B"}), ("B",)), Gold(frozenset({"C"}), ("C",)),
             Gold(frozenset(), ("X",))]
    ranked = [Ranking(concepts=[("A", 1.0)]), Ranking(concepts=[("Z", 1.0), ("Y", 0.9), ("B", 0.8)]),
              Ranking(concepts=[(c, 1.0 - i / 10) for i, c in enumerate("ZYXWVC")]), Ranking(concepts=[("A", 1.0)])]
    out = candidate_recall(golds, ranked, (1, 3, 16), depth=5)
    # C is 6th: beyond the depth of 5, never counted; a gold not in the KB is a miss
    assert out == {"depth": 5, "n": 4, "recall@1": 0.25, "recall@3": 0.5, "recall@16": None, "recall@depth": 0.5}
    assert candidate_recall(golds, ranked, (16,), depth=16)["recall@16"] == 0.75
