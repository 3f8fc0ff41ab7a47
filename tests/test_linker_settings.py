"""The linker's config keys, held once by LinkerSettings: DEFAULT_CONFIG, the factory's signature (the schema spaCy
validates a config with) and the checks come from it; configs saved before it still load unchanged."""
from __future__ import annotations

import dataclasses
import inspect
import json
import re
import typing
from pathlib import Path

import pytest
import spacy
from spacy.util import load_config, load_config_from_str, load_model_from_config
from thinc.api import ConfigValidationError

from spacy_sapbert.base.defaults import DEFAULT_MODEL, MAX_LENGTH
from spacy_sapbert.errors import ConfigError
from spacy_sapbert.linker import DEFAULT_CONFIG, SapbertLinker, make_sapbert_linker
from spacy_sapbert.linker.settings import LinkerSettings, default_config, setting_names

BEFORE = Path(__file__).parent / "fixtures" / "linker_config_before_settings.cfg"


def test_defaults_signature_and_default_config_agree_key_for_key():
    fields = dataclasses.fields(LinkerSettings)
    names = [f.name for f in fields]
    assert names == setting_names() == list(DEFAULT_CONFIG)
    assert DEFAULT_CONFIG == LinkerSettings().to_config() == default_config()
    params = inspect.signature(make_sapbert_linker).parameters
    assert list(params) == ["nlp", "name", *names]
    hints = typing.get_type_hints(LinkerSettings)
    for name in names:  # keyword-only, typed like the field, no default (DEFAULT_CONFIG gives those, as in spaCy)
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[name].annotation == hints[name] == typing.get_type_hints(make_sapbert_linker)[name]
        assert params[name].default is inspect.Parameter.empty
    assert spacy.util.get_arg_names(make_sapbert_linker) == ["nlp", "name", *names]  # what spaCy's factory reads
    assert (DEFAULT_CONFIG["model"], DEFAULT_CONFIG["max_length"]) == (DEFAULT_MODEL, MAX_LENGTH)


def test_default_config_is_a_fresh_copy_each_time():
    made = default_config()
    made["semantic_types"].append("T047")
    made["type_priors"]["Disease"] = ["D*"]
    assert DEFAULT_CONFIG["semantic_types"] == [] and DEFAULT_CONFIG["type_priors"] == {}
    linker = SapbertLinker(spacy.blank("en").vocab)
    linker.cfg["labels"].append("Disease")
    assert DEFAULT_CONFIG["labels"] == [] and SapbertLinker(spacy.blank("en").vocab).cfg["labels"] == []


def test_a_saved_config_from_before_loads_with_the_same_keys_and_values():
    config = load_config(BEFORE)
    block = dict(config["components"]["sapbert_linker"])
    assert block.pop("factory") == "sapbert_linker"
    # keys added after the config was saved: filled with their defaults
    added_since = {"abbreviation_table", "reranker_skip_names", "reranker_window", "reranker_precision"}
    assert sorted(block) == sorted(set(setting_names()) - added_since)
    # the defaults then, bar batch_size (128 until 2026-11-28, 64 since) and reranker_k (16 until 2026-11-29, 4
    # since): a saved config keeps its own values
    changed = {"batch_size": 128, "reranker_k": 16}
    assert {key: block.pop(key) for key in changed} == changed
    assert block == {k: v for k, v in DEFAULT_CONFIG.items() if k not in changed and k not in added_since}
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    assert nlp.get_pipe("sapbert_linker").cfg == {**DEFAULT_CONFIG, **changed}
    loaded = dict(nlp.config["components"]["sapbert_linker"])
    assert {key: loaded.pop(key) for key in added_since} == {key: DEFAULT_CONFIG[key] for key in added_since}
    assert loaded == config["components"]["sapbert_linker"]


@pytest.mark.parametrize("bad, good", [({"k": "many"}, {"k": 3}), ({"threshold": "high"}, {"threshold": 0.25}),
                                       ({"languages": "en"}, {"languages": ["en"]}),
                                       ({"context_margin": "tie"}, {"context_margin": None}), ({"kk": 3}, {})])
def test_spacy_validates_a_config_against_the_settings_types(bad, good):
    nlp = spacy.blank("en")
    with pytest.raises(ConfigValidationError, match=list(bad)[0]):  # spaCy's schema: from the generated signature
        nlp.add_pipe("sapbert_linker", config=bad)
    assert nlp.add_pipe("sapbert_linker", config=good).cfg == {**DEFAULT_CONFIG, **good}


@pytest.mark.parametrize("config, code", [({"k": 0}, "E111"), ({"ef_search": 10**9}, "E559"), ({"threshold": 2.0}, "E116"),
                                          ({"resources": "far"}, "E124"), ({"extension_name": "1x"}, "E002"),
                                          ({"runtime": "tf"}, "E002"), ({"sparse_k": -1}, "E784"),
                                          ({"candidates": "best"}, "E786"), ({"reranker_k": 1}, "E810"),
                                          ({"precision": "int8", "device": "cuda"}, "E825"),
                                          ({"confidence_attr": "kb_ents"}, "E793"), ({"context_weight": 2.0}, "E608")])
def test_a_bad_value_gets_its_coded_error(config, code):
    with pytest.raises(ConfigError, match=code):
        spacy.blank("en").add_pipe("sapbert_linker", config=config)
    with pytest.raises(ConfigError, match=code):
        SapbertLinker(spacy.blank("en").vocab, **config)


def test_an_unknown_keyword_of_the_constructor_is_E823():
    with pytest.raises(ConfigError, match="E823") as err:
        SapbertLinker(spacy.blank("en").vocab, name="linker", treshold=0.3)
    assert "'treshold'" in str(err.value) and "threshold" in str(err.value) and "linker" in str(err.value)
    with pytest.raises(ConfigError, match="E823"):
        LinkerSettings.from_config({"treshold": 0.3})


def test_values_are_normalised_once():
    settings = LinkerSettings(semantic_types=None, labels=("Disease",), languages=["EN", "es"], sparse_weight=1,
                              query_variants=["number"])
    assert settings.semantic_types == [] and settings.labels == ["Disease"] and settings.languages == ["en", "es"]
    assert isinstance(settings.sparse_weight, float) and settings.query_variants == ["number"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.k = 3  # type: ignore[misc]


def test_the_config_round_trips(tmp_path):
    given = {"k": 3, "labels": ["Disease"], "languages": ["en"], "context_margin": None, "context_fallback": "name",
             "type_priors": {"Disease": ["D*"]}, "sparse_k": 5, "threshold": -1.0}
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config=given)
    expected = {**DEFAULT_CONFIG, **given}
    assert linker.cfg == expected
    again = load_model_from_config(load_config_from_str(nlp.config.to_str()), auto_fill=True, validate=True)
    assert again.get_pipe("sapbert_linker").cfg == expected  # nlp.config -> text -> a new pipeline
    nlp.to_disk(tmp_path / "pipeline")  # an uninitialised linker: only its config is saved
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe("sapbert_linker").cfg == expected
    assert loaded.config["components"]["sapbert_linker"] == nlp.config["components"]["sapbert_linker"]
    override = spacy.load(tmp_path / "pipeline", config={"components": {"sapbert_linker": {"k": 7}}})
    assert override.get_pipe("sapbert_linker").cfg["k"] == 7


def _docs_table() -> dict:
    """``{key: default}`` of the config table in docs/linker.md (a row may list several keys and defaults)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "linker.md").read_text(encoding="utf-8")
    table = text.split("## `sapbert_linker` config", 1)[1].split("\n\n", 2)[1]
    out = {}
    for row in table.splitlines()[2:]:
        keys, defaults = (cell.strip() for cell in row.strip("|").split("|")[:2])
        names = re.findall(r"`(\w+)`", keys)
        values = [v.strip().strip("`") for v in re.split(r" / |, ", defaults)]
        assert len(names) == len(values), row
        for name, value in zip(names, values):
            try:
                out[name] = json.loads(value)
            except ValueError:
                out[name] = value
    return out


def test_the_docs_table_lists_every_key_with_its_default():
    table = _docs_table()
    assert sorted(table) == sorted(setting_names())
    assert {key: value for key, value in table.items() if value != DEFAULT_CONFIG[key]} == {}
