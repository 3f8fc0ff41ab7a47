"""The package-wide defaults (base/defaults.py) are written once: the code reads the constants, and every config text
that spells a default out (configs/*.cfg, the evaluation's built-in config) agrees with them."""
from __future__ import annotations

import re
from pathlib import Path

from thinc.api import Config

from spacy_sapbert.base.defaults import DEFAULT_MODEL, MAX_LENGTH
from spacy_sapbert.evaluation.settings import default_config as evaluation_defaults
from spacy_sapbert.linker import DEFAULT_CONFIG as LINKER_DEFAULTS
from spacy_sapbert.training import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spacy_sapbert"
# a name-encoder max_length default written as a number: `max_length: int = 25`, `typer.Option(25, "--max-length"`
_LITERAL_MAX_LENGTH = re.compile(r"(?:name_)?max_length\s*(?::\s*int\s*)?=\s*(?:typer\.Option\()?\s*(\d+)")
_CONTEXT_LENGTHS = ("Word pieces per mention in context.",)  # the context encoder's own max_length (64), not a name's


def test_config_texts_agree_with_the_constants():
    for name in ("pretrain.cfg", "finetune.cfg"):
        assert Config().from_disk(ROOT / "configs" / name, interpolate=False)["model"]["max_length"] == MAX_LENGTH
    evaluate = Config().from_disk(ROOT / "configs" / "evaluate.cfg", interpolate=False)
    assert evaluate["evaluate"]["systems"]["max_length"] == MAX_LENGTH
    assert evaluation_defaults()["evaluate"]["systems"]["max_length"] == MAX_LENGTH
    assert TrainConfig().model.max_length == MAX_LENGTH
    assert (LINKER_DEFAULTS["model"], LINKER_DEFAULTS["max_length"]) == (DEFAULT_MODEL, MAX_LENGTH)


def test_no_module_writes_the_defaults_as_literals():
    literals, hub_ids = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "defaults.py":
            continue
        text = path.read_text(encoding="utf-8")
        for line_no, line in enumerate(text.splitlines(), 1):
            found = _LITERAL_MAX_LENGTH.search(line)
            if found and not any(what in line for what in _CONTEXT_LENGTHS) and "context" not in line.split("=")[0]:
                literals.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()}")
            if f'"{DEFAULT_MODEL}"' in line and "``" not in line:  # a string value (a docstring's example is fine)
                hub_ids.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()}")
    assert literals == [], "use base.defaults.MAX_LENGTH"
    assert hub_ids == [], "use base.defaults.DEFAULT_MODEL"
