"""Mention-like pairs: each variant generator on hand-written names, seeded determinism, no variant that
is another concept's name, abbreviation pairs mined from a tiny PubTator file, the ``[pairs.mention_like]``
settings (coded errors), and the pairs flowing into tiny pretraining and fine-tuning runs."""
from __future__ import annotations

import json
import random
import warnings

import pytest

from spacy_sapbert.errors import ConfigError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.training.abbreviation_pairs import abbreviation_pairs, mine_abbreviations, read_raw_texts
from spacy_sapbert.training.config import MentionLikeSettings, load_config
from spacy_sapbert.training.mention_like import finetune_mentions, pretrain_pairs
from spacy_sapbert.training.pairs import PairSet
from spacy_sapbert.training.run import finetune, pretrain
from spacy_sapbert.kb.variants import (GENERATORS, generic_head, kb_variants, name_variants, number,
                                             punctuation, typo, word_order)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RNG = random.Random(0)


@pytest.fixture(scope="module")
def abstracts(fixtures_dir):
    return fixtures_dir / "train" / "abbreviations_pubtator.txt"


@pytest.mark.parametrize("name, expected", [
    ("carcinoma of the breast", ["breast carcinoma"]),
    ("infection of ear", ["ear infection"]),
    ("carcinoma, ductal, breast", ["breast ductal carcinoma"]),
    ("diabetes mellitus, type 2", ["type 2 diabetes mellitus"]),
    ("neoplasms, cystic, mucinous, and serous", []),  # four parts and a list word: not an inverted name
    ("syndrome x, included", []),
    ("breast cancer", []),
])
def test_word_order(name, expected):
    assert word_order(name, RNG) == expected


@pytest.mark.parametrize("name, expected", [
    ("ovarian cysts", ["ovarian cyst"]),
    ("breast neoplasm", ["breast neoplasms"]),
    ("cardiomyopathies", ["cardiomyopathy"]),
    ("infection of the ear", ["infections of the ear"]),
    ("anemias, erythroblastic", ["anemia, erythroblastic"]),
    ("hepatitis", []), ("colitis", []), ("carcinoma", []), ("adenomatous polyposis coli", []),
    ("ms", []),
])
def test_number(name, expected):
    assert number(name, RNG) == expected


@pytest.mark.parametrize("name, expected", [
    ("huntington disease", ["huntington"]),
    ("deficiency of factor ix", ["factor ix"]),
    ("rett syndrome", ["rett"]),
    ("mood disorders", ["mood"]),
    ("disease", []),
    ("q disease", []),  # nothing of three letters left
    ("heart attack", []),
])
def test_generic_head(name, expected):
    assert generic_head(name, RNG) == expected


def test_generic_heads_are_a_setting():
    assert generic_head("lesch-nyhan syndrome", RNG, heads=("disease",)) == []
    assert generic_head("leber amaurosis", RNG, heads=("amaurosis",)) == ["leber"]


@pytest.mark.parametrize("name, expected", [
    ("non-hodgkin lymphoma", ["non hodgkin lymphoma", "nonhodgkin lymphoma"]),
    ("crohn's disease", ["crohn disease"]),
    ("systemic lupus erythematosus (sle)", ["systemic lupus erythematosus"]),
    ("breast cancer", []),
])
def test_punctuation(name, expected):
    assert punctuation(name, RNG) == expected


def _one_edit_apart(a: str, b: str) -> bool:
    """Deletion, insertion, substitution or transposition of adjacent characters."""
    if a == b:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    short, long_ = sorted((a, b), key=len)
    return len(long_) - len(short) == 1 and any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def test_typo_is_one_edit_inside_a_long_word_and_seeded():
    for seed in range(40):
        (variant,) = typo("carcinoma of the breast", random.Random(seed))
        assert _one_edit_apart(variant, "carcinoma of the breast"), variant
        assert variant[0] == "c" and " of the " in variant and variant.count(" ") == 3  # first letters, short words kept
        assert typo("carcinoma of the breast", random.Random(seed)) == [variant]
    assert len({typo("carcinoma of the breast", random.Random(s))[0] for s in range(40)}) > 10
    assert typo("mi of the ear", random.Random(0)) == []  # no word of five letters


def test_name_variants_filters_caps_and_is_deterministic():
    everything = name_variants("tumor of the breast", list(GENERATORS), is_taken=lambda t: False,
                               max_per_name=10, typo_rate=1.0)
    kinds = {kind for _v, kind in everything}
    assert kinds == {"word_order", "number", "typo"}
    assert ("breast tumor", "word_order") in everything and ("tumors of the breast", "number") in everything
    assert all(v != "tumor of the breast" for v, _k in everything)
    taken = name_variants("tumor of the breast", list(GENERATORS), is_taken=lambda t: t == "breast tumor",
                          max_per_name=10, typo_rate=1.0)
    assert [v for v, _k in taken] == [v for v, _k in everything if v != "breast tumor"]
    assert name_variants("tumor of the breast", ["typo"], is_taken=lambda t: False, typo_rate=0.0) == []
    capped = name_variants("tumor of the breast", list(GENERATORS), is_taken=lambda t: False, max_per_name=1,
                           typo_rate=1.0)
    assert len(capped) == 1 and capped[0] in everything
    names = [f"disorder of the {w}s" for w in ("kidney", "liver", "heart", "brain", "spleen", "thyroid", "colon")]
    runs = [[name_variants(n, list(GENERATORS), is_taken=lambda t: False, seed=s, max_per_name=2, typo_rate=0.5)
             for n in names] for s in (1, 1, 2)]
    assert runs[0] == runs[1] != runs[2]
    assert all(len(v) <= 2 for v in runs[0])


def test_kb_variants_never_give_a_kb_name():
    kb = KnowledgeBase.from_concepts([
        Concept("C1", "Huntington Disease", ("Huntington's chorea",)),
        Concept("C2", "Huntington", ("HTT protein",)),  # the generic-head variant of C1 is this concept's name
        Concept("C3", "Breast Carcinoma", ("Carcinoma of the Breast",)),  # the word-order variant is its own name
        Concept("C4", "Mood Disorders"), Concept("C5", "Mood Disorders"),  # an ambiguous name: no variants
    ], source="t")
    found = list(kb_variants(kb, list(GENERATORS), max_per_name=10, typo_rate=0.0))
    names = set(kb.names)
    assert found and not any(v in names for v, *_ in found)
    by = {(v, kb.names[row], kb.concept_ids[label]) for v, row, label, _k in found}
    assert ("huntington chorea", "huntington's chorea", "C1") in by
    assert ("huntington diseases", "huntington disease", "C1") in by
    assert not any(v == "huntington" or n == "mood disorders" for v, n, _c in by)
    assert not any(v in ("breast carcinoma", "carcinoma of the breast") for v, _n, _c in by)


def _abbr_kb():
    return KnowledgeBase.from_concepts([
        Concept("D1", "Hereditary nonpolyposis colorectal cancer"),
        Concept("D2", "Familial adenomatous polyposis"),
        Concept("D3", "Myocardial infarction"),  # the text's long form is plural: matched through its number variant
        Concept("D4", "Fever"), Concept("D5", "Forced expiratory volume", ("FEV",)),  # "fev" is a KB name: skipped
        Concept("D6", "Huntington disease"), Concept("D7", "Huntington disease"),  # ambiguous long form: skipped
        Concept("D8", "Common cold"), Concept("D9", "Cystic fibrosis"),  # "cc" defined as two concepts: skipped
    ], source="abbr")


def test_abbreviation_pairs_from_a_pubtator_file(abstracts):
    kb = _abbr_kb()
    found = mine_abbreviations(read_raw_texts([abstracts]))
    assert found[("hnpcc", "hereditary nonpolyposis colorectal cancer")] == 2
    pairs = [(s, kb.names[row], kb.concept_ids[label], kind) for s, row, label, kind in abbreviation_pairs(kb, found)]
    assert pairs == [("fap", "familial adenomatous polyposis", "D2", "abbreviation"),
                     ("hnpcc", "hereditary nonpolyposis colorectal cancer", "D1", "abbreviation"),
                     ("mi", "myocardial infarction", "D3", "abbreviation")]


def test_raw_text_errors_and_warning(tmp_path, abstracts):
    bad = tmp_path / "notes.txt"
    bad.write_text("just some text\n", encoding="utf8")
    for path in (bad, tmp_path / "missing.txt"):
        with pytest.raises(ConfigError, match=r"SB-E222.*" + path.name):
            read_raw_texts([path])
    kb = KnowledgeBase.from_concepts([Concept("X1", "Unrelated thing")], source="x")
    with pytest.warns(UserWarning, match="SB-W200"):
        pairs, record = pretrain_pairs(kb, MentionLikeSettings(enabled=True, generators=[], raw_text=[str(abstracts)]), 0)
    assert pairs == [] and record["counts"] == {}


@pytest.mark.parametrize("override, match", [
    ({"pairs.mention_like.typo_rate": 1.5}, "E221.*typo_rate"),
    ({"pairs.mention_like.typo_rate": True}, "E221.*typo_rate"),
    ({"pairs.mention_like.max_per_name": 0}, "E221.*max_per_name"),
    ({"pairs.mention_like.generators": ["typo", "shuffle"]}, "E221.*generators"),
    ({"pairs.mention_like.generators": "typo"}, "E221.*generators"),
    ({"pairs.mention_like.enabled": "yes"}, "E221.*enabled"),
    ({"pairs.mention_like.generic_heads": ["disease", ""]}, "E221.*generic_heads"),
    ({"pairs.mention_like.enabled": True, "pairs.mention_like.generators": []}, "E221.*nothing to make pairs"),
    ({"pairs.mention_like.enabled": True, "pairs.mention_like.raw_text": ["/no/such/abstracts.txt"]},
     "E222.*abstracts.txt"),
])
def test_settings_are_validated(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config(None, override)


def test_settings_from_a_config_file(tmp_path, abstracts):
    cfg = tmp_path / "pretrain.cfg"
    cfg.write_text(f"""[meta]\nversion = 2\n\n[pairs]\nmax_pairs_per_concept = 5\n\n[pairs.mention_like]
enabled = true\ngenerators = ["typo", "number"]\ntypo_rate = 0.5\nraw_text = ["{abstracts}"]\n
[training]\nmax_steps = 2\n""", encoding="utf8")
    config = load_config(cfg)
    m = config.pairs.mention_like
    assert (m.enabled, m.generators, m.typo_rate, m.max_per_name, m.raw_text) == (True, ["typo", "number"], 0.5, 2,
                                                                                  [str(abstracts)])
    assert load_config(cfg, {"pairs.mention_like.max_per_name": 4}).pairs.mention_like.max_per_name == 4
    assert config.to_dict()["pairs"]["mention_like"]["generators"] == ["typo", "number"]
    cfg.write_text("[pairs]\nseed = 0\n\n[pairs.mention_like]\nrate = 0.5\n", encoding="utf8")
    with pytest.raises(ConfigError, match="E221.*rate is not a setting"):
        load_config(cfg)
    assert load_config(None).pairs.mention_like.enabled is False  # off by default


def _tiny_config(**overrides):
    base = {"training.batch_size": 8, "training.max_steps": 2, "training.lr": 1e-3, "training.device": "cpu",
            "training.checkpoint_every": 2, "training.log_every": 1, "pairs.max_pairs_per_concept": 3}
    base.update(overrides)
    return load_config(None, base)


def _train_kb():
    return KnowledgeBase.from_concepts([
        Concept("D1", "Hereditary nonpolyposis colorectal cancer", ("Lynch syndrome",)),
        Concept("D2", "Familial adenomatous polyposis", ("Adenomatous polyposis coli",)),
        Concept("D3", "Carcinoma of the breast", ("Breast neoplasms",)),
        Concept("D4", "Non-Hodgkin lymphoma", ("Lymphoma, non-Hodgkin",)),
    ], source="train")


def test_pretrain_with_mention_like_pairs(tmp_path, tiny_bert_path, abstracts):
    kb = _train_kb()
    on = {"pairs.mention_like.enabled": True, "pairs.mention_like.raw_text": [str(abstracts)],
          "pairs.mention_like.typo_rate": 1.0}
    out = tmp_path / "run"
    result = pretrain(kb, str(tiny_bert_path), out, config=_tiny_config(**on))
    assert result.steps == 2 and (out / "model" / "config.json").is_file()
    pairs = PairSet(out / "pairs")
    meta = json.loads((out / "pairs" / "meta.json").read_text(encoding="utf8"))
    counts = meta["mention_like"]["counts"]
    assert counts["abbreviation"] == 2 and counts["typo"] >= 1 and counts["word_order"] >= 1
    synonyms = 4  # one pair per concept
    assert len(pairs) == synonyms + sum(counts.values()) == meta["n_pairs"]
    triples = set(pairs.iter_pairs(kb))
    assert ("breast carcinoma", "carcinoma of the breast", "D3") in triples
    assert ("hnpcc", "hereditary nonpolyposis colorectal cancer", "D1") in triples
    assert ("fap", "familial adenomatous polyposis", "D2") in triples
    assert not set(pairs.texts) & set(kb.names)
    with pytest.raises(ConfigError, match="E208.*pairs.mention_like"):  # resumed with other settings
        pretrain(kb, str(tiny_bert_path), out, config=_tiny_config(**{**on, "training.max_steps": 3,
                                                                       "pairs.mention_like.typo_rate": 0.5}),
                 resume=True)
    off = tmp_path / "off"
    pretrain(kb, str(tiny_bert_path), off, config=_tiny_config())
    assert len(PairSet(off / "pairs")) == synonyms and PairSet(off / "pairs").texts == []


def test_finetune_with_mention_like_mentions(tmp_path, tiny_bert_path, abstracts):
    kb = _train_kb()
    mentions = [("breast carcinomas", ("D3",)), ("lynch syndrome", ("D1",)), ("NHL", ("D4",))]
    settings = MentionLikeSettings(enabled=True, generators=["number", "generic_head"], raw_text=[str(abstracts)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expanded, record = finetune_mentions(kb, mentions, settings, seed=0)
    assert expanded[:3] == mentions
    assert set(expanded[3:]) == {("breast carcinoma", ("D3",)), ("lynch", ("D1",)), ("lynch syndromes", ("D1",)),
                                 ("hnpcc", ("D1",)), ("fap", ("D2",))}  # "nhl": no variant
    assert record["counts"] == {"abbreviation": 2, "generic_head": 1, "number": 2}
    out = tmp_path / "ft"
    finetune(kb, mentions, str(tiny_bert_path), out, config=_tiny_config(**{
        "pairs.mention_like.enabled": True, "pairs.mention_like.generators": ["number", "generic_head"],
        "pairs.mention_like.raw_text": [str(abstracts)]}))
    pairs = PairSet(out / "pairs")
    assert {"breast carcinoma", "lynch", "hnpcc", "fap"} <= set(pairs.texts)
    assert ("hnpcc", "lynch syndrome", "D1") in set(pairs.iter_pairs(kb))


def test_benchmark_results_render(bench_scripts):
    """benchmarks/mention_pairs.py's results file renders on the benchmarks page with every class column."""
    bench = bench_scripts.load("mention_pairs")
    split = {"overall": {"n": 960, "acc": 0.6}, "dictionary": {"n": 500, "acc": 0.9},
             "train": {"n": 200, "acc": 0.5}, "neither": {"n": 260, "acc": 0.123}}
    systems = {"MiniLM base (mean)": {s: split for s in bench.SETS},
               "with pairs": {s: {**split, "neither": {"n": 260, "acc": None}} for s in bench.SETS}}
    path = bench.write(systems, {"candidates": "shortlist", "candidate_names": 12977}, "python benchmarks/mention_pairs.py")
    doc = json.loads(path.read_text(encoding="utf8"))
    (name, tab), = doc["tables"].items()
    assert tab["columns"][1:5] == ["NCBI-disease test overall (n=960)", "NCBI-disease test dictionary (n=500)",
                                   "NCBI-disease test train (n=200)", "NCBI-disease test neither (n=260)"]
    assert tab["rows"][0][1:5] == [60.0, 90.0, 50.0, 12.3] and tab["rows"][1][4] is None
    assert "12977 MEDIC names" in doc["notes"][0]
    page = bench_scripts.rendered()
    assert "| MiniLM base (mean) | 60.0 | 90.0 | 50.0 | 12.3 |" in page and name in page


def test_a_variant_of_two_concepts_names_is_left_out():
    kb = KnowledgeBase.from_concepts([Concept("A1", "Cardiac tumor", ("Heart tumours",)),
                                      Concept("A2", "Cardiac tumors", ("Heart neoplasm",))], source="amb")
    pairs, record = pretrain_pairs(kb, MentionLikeSettings(enabled=True, generators=["number"]), 0)
    texts = {t for t, _r, _l in pairs}
    # "cardiac tumors" / "cardiac tumor" are names already; "heart tumour" comes from A1 only, "heart neoplasms" from A2
    assert texts == {"heart tumour", "heart neoplasms"}
    kb3 = KnowledgeBase.from_concepts([Concept("E1", "Lung-cancer"), Concept("E2", "Lung cancer-")], source="amb3")
    pairs3, record3 = pretrain_pairs(kb3, MentionLikeSettings(enabled=True, generators=["punctuation"]), 0)
    assert "lung cancer" not in {t for t, _r, _l in pairs3} and record3["counts"]["dropped_ambiguous"] == 2


def test_benchmark_hybrid_rows_follow_their_encoder(bench_scripts, tmp_path, tiny_bert_path):
    """benchmarks/mention_pairs.py --hybrid: an encoder's hybrid row (weight tuned on the train split) scores the
    same mentions and classes as its dense row, follows it in the table, and is not counted as one of the three
    pretraining systems the results file waits for."""
    from types import SimpleNamespace

    bench = bench_scripts.load("mention_pairs")
    kb = KnowledgeBase.from_concepts([Concept("D1", "Breast carcinoma", ("Carcinoma of the breast",)),
                                      Concept("D2", "Lung cancer", ("Lung neoplasm",)),
                                      Concept("D3", "Ovarian cyst")], source="tiny")
    from spacy_sapbert.evaluation.hybrid import WEIGHT_GRID
    from spacy_sapbert.mentions.metrics import resolve_gold

    test = [SimpleNamespace(text="breast carcinomas", ids=("D1",)), SimpleNamespace(text="Lung cancer", ids=("D2",)),
            SimpleNamespace(text="ovarian cysts", ids=("D9",))]  # D9: not in the KB, a miss in every row
    sets = {name: (test, ["breast carcinomas"]) for name in bench.SETS}
    tuning = {name: (["lung neoplasms"], [resolve_gold(kb, ["D2"])]) for name in bench.SETS}
    found = bench.hybrid_scores(str(tiny_bert_path), kb, sets, tuning, tmp_path / "cache")
    for name in bench.SETS:
        assert {c: found[name][c]["n"] for c in bench.CLASSES} == {"overall": 3, "dictionary": 1, "train": 1,
                                                                   "neither": 1}
        assert found[name]["neither"]["acc"] == 0.0 and found["weights"][name] in WEIGHT_GRID
    split = {c: {"n": 1, "acc": 0.5} for c in bench.CLASSES}
    dense = ["MiniLM base (mean)", "self-aligned on MEDIC synonyms, 9 steps x 4",
             "self-aligned on MEDIC synonyms + mention-like pairs, 9 steps x 4",
             f"{bench.FINETUNED}, 9 steps x 4"]  # --part finetune's rows come last
    out = tmp_path / "out"
    out.mkdir()
    args = SimpleNamespace(out=out, note=[])
    reports, expected = {}, []
    for name in dense:
        system = {s: split for s in bench.SETS}
        hybrid = {**system, "weights": {s: 0.05 for s in bench.SETS}}
        reports[name] = {name: system, bench.hybrid_name(name, hybrid): hybrid}
        expected += [name, bench.hybrid_name(name, hybrid)]
    first_two = {k: v for name in dense[:2] for k, v in reports[name].items()}
    (out / "report_a.json").write_text(json.dumps({"systems": first_two}), encoding="utf8")
    assert not bench.collect(args, {}, {}, "cmd")  # two encoders (four rows): not yet
    (out / "report_b.json").write_text(json.dumps({"systems": {**reports[dense[3]], **reports[dense[2]]}}),
                                       encoding="utf8")
    assert bench.collect(args, {}, {}, "cmd")
    doc = json.loads(next(bench_scripts.results.glob("mention_pairs*.json")).read_text(encoding="utf8"))
    (tab,) = doc["tables"].values()
    names = [row[0] for row in tab["rows"]]
    assert names == expected
    assert names[1] == "MiniLM base (mean) | hybrid (w tuned on train: NCBI-disease 0.05, BC5CDR-disease 0.05)"
    assert any("'| hybrid' rows" in note for note in doc["notes"])
    assert any("'fine-tuned' rows" in note for note in doc["notes"])
