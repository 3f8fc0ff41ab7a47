"""Pooling read from the model folder (sentence-transformers' pooling config, sapbert_encoder.json),
else the default; an explicit setting wins; for the Encoder, build-index, the linker and evaluate."""
from __future__ import annotations

import json
import shutil

import pytest
import spacy
from thinc.api import Config

from spacy_sapbert.encoding.pooling import declared_pooling, resolve_pooling
from spacy_sapbert.encoding.torch_encoder import Encoder
from spacy_sapbert.errors import ConfigError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.commands.pipeline import build_index_dir

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _st_folder(src, dst, *, modes=None, pooling_dir="1_Pooling", modules=False):
    """A copy of ``src`` with a sentence-transformers pooling config (mean unless ``modes`` says otherwise)."""
    shutil.copytree(src, dst)
    config = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
              "pooling_mode_max_tokens": False}
    config.update(modes or {})
    (dst / pooling_dir).mkdir()
    (dst / pooling_dir / "config.json").write_text(json.dumps(config))
    if modules:
        (dst / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": pooling_dir, "type": "sentence_transformers.models.Pooling"}]))
    return dst


@pytest.fixture(scope="module")
def mean_model(tiny_bert_path, tmp_path_factory):
    return _st_folder(tiny_bert_path, tmp_path_factory.mktemp("st") / "model")


def test_sentence_transformers_folder_gives_mean_and_explicit_wins(mean_model, tiny_bert_path):
    enc = Encoder.load(mean_model, device="cpu")
    assert enc.pooling == "mean" and enc.pooling_source == str(mean_model / "1_Pooling" / "config.json")
    explicit = Encoder.load(mean_model, pooling="cls", device="cpu")
    assert explicit.pooling == "cls" and explicit.pooling_source == "explicit"
    plain = Encoder.load(tiny_bert_path, device="cpu")  # declares nothing: the documented default
    assert plain.pooling == "cls" and plain.pooling_source == "default"
    assert resolve_pooling(None, "some-org/hub-model") == ("cls", "default")


def test_modules_json_names_the_pooling_folder_and_unknown_modes_warn(tiny_bert_path, tmp_path):
    custom = _st_folder(tiny_bert_path, tmp_path / "custom", pooling_dir="pool", modules=True)
    assert declared_pooling(custom) == ("mean", str(custom / "pool" / "config.json"))
    cls_folder = _st_folder(tiny_bert_path, tmp_path / "cls", modes={"pooling_mode_cls_token": True,
                                                                     "pooling_mode_mean_tokens": False})
    assert declared_pooling(cls_folder)[0] == "cls"
    max_folder = _st_folder(tiny_bert_path, tmp_path / "max", modes={"pooling_mode_max_tokens": True,
                                                                     "pooling_mode_mean_tokens": False})
    with pytest.warns(UserWarning, match=r"SB-W760.*pooling_mode_max_tokens"):
        assert resolve_pooling("auto", max_folder) == ("cls", "default")
    with pytest.raises(ConfigError, match=r"SB-E002.*pooling"):
        resolve_pooling("max", tiny_bert_path)


def test_saved_encoder_settings_declare_the_pooling(tiny_bert_path, tmp_path):
    Encoder.load(tiny_bert_path, pooling="mean", device="cpu").to_disk(tmp_path / "saved")
    assert declared_pooling(tmp_path / "saved") == ("mean", str(tmp_path / "saved" / "sapbert_encoder.json"))
    assert Encoder.load(tmp_path / "saved", device="cpu").pooling == "mean"
    assert Encoder.from_disk(tmp_path / "saved", device="cpu").pooling_source.endswith("sapbert_encoder.json")


def test_build_index_and_linker_read_the_folder(mean_model, tmp_path):
    kb_dir = tmp_path / "kb"
    KnowledgeBase.from_concepts([Concept("D1", "fever", ("pyrexia",)), Concept("D2", "cold")]).to_disk(kb_dir)
    index = build_index_dir(kb_dir, str(mean_model), tmp_path / "index", device="cpu", show_progress=False)
    assert index.meta["pooling"] == "mean"
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(mean_model), "device": "cpu"})
    linker.initialize(kb_path=str(kb_dir), show_progress=False)
    assert linker.encoder.pooling == "mean"
    nlp2 = spacy.blank("en")
    linker2 = nlp2.add_pipe("sapbert_linker", config={"model": str(mean_model), "device": "cpu", "pooling": "cls"})
    linker2.initialize(kb_path=str(kb_dir), show_progress=False)
    assert linker2.encoder.pooling == "cls"


def test_evaluate_pools_each_system_its_own_way_and_reports_it(fixtures_dir, mean_model, tiny_bert_path):
    from spacy_sapbert.evaluation.report import render_markdown
    from spacy_sapbert.evaluation.run import evaluate
    from spacy_sapbert.evaluation.settings import default_config, merge_config, settings_from_config

    f = fixtures_dir / "eval"
    block = {"dataset": {"path": str(f / "test.pubtator")}, "kb": {"sources": [[str(f / "kb_medic.txt"), "medic"]]},
             "systems": {"model": str(mean_model), "base_encoder": str(tiny_bert_path), "tfidf": False,
                         "scispacy": False, "exact_match": False, "device": "cpu"}, "show_progress": False}

    def run(overrides):
        config = merge_config(default_config(), Config({"evaluate": block}), overrides)
        with pytest.warns(UserWarning, match="SB-W30"):
            return evaluate(settings_from_config(config))

    auto = run({})["systems"]
    assert (auto["model"]["pooling"], auto["base encoder"]["pooling"]) == ("mean", "cls")
    assert auto["model"]["pooling_source"].endswith("config.json") and auto["base encoder"]["pooling_source"] == "default"
    mixed = run({"evaluate.systems.model_pooling": "cls", "evaluate.systems.base_pooling": "mean"})
    assert (mixed["systems"]["model"]["pooling"], mixed["systems"]["base encoder"]["pooling"]) == ("cls", "mean")
    assert "pooling=cls, pooling_source=explicit" in render_markdown(mixed)
    both = run({"evaluate.systems.pooling": "mean"})["systems"]
    assert both["model"]["pooling"] == both["base encoder"]["pooling"] == "mean"
