"""A thin wrapper over spaCy's own trainer (``spacy train``) for the NER stage, plus per-label scores.

Nothing here re-implements training: :func:`train_ner` checks the inputs, passes the corpus paths
as config overrides (``paths.train`` / ``paths.dev``) and calls :func:`spacy.cli.train.train`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from ..errors import Errors, MissingInputError, TrainingError
from ..base.util import PathLike, atomic_write, ensure_path, get_logger

logger = get_logger("ner.train")


def _require(path: PathLike, what: str, hint: str) -> Path:
    path = ensure_path(path)
    if not path.exists():
        raise MissingInputError(Errors.E001.format(what=what, path=path, hint=hint))
    return path


def train_ner(
    config: PathLike,
    output: PathLike,
    *,
    train: PathLike,
    dev: PathLike,
    use_gpu: int = -1,
    overrides: Optional[Mapping[str, Any]] = None,
) -> Path:
    """Train a spaCy NER pipeline with ``spacy train`` and return the ``model-best`` folder.

    ``config`` is a spaCy training config (``configs/ner_tok2vec.cfg`` on CPU,
    ``configs/ner_trf.cfg`` with spacy-transformers on a GPU); ``train``/``dev`` are ``.spacy``
    files from :func:`spacy_sapbert.ner.convert_pubtator`; ``overrides`` are extra dotted config
    overrides (``{"training.max_steps": 200}``).
    """
    from spacy.cli.train import train as spacy_train

    config = _require(config, "NER training config", "see configs/ner_tok2vec.cfg.")
    train = _require(train, "NER training corpus", "run `spacy-sapbert convert-ner` first.")
    dev = _require(dev, "NER dev corpus", "run `spacy-sapbert convert-ner` first.")
    output = ensure_path(output)
    all_overrides: Dict[str, Any] = {"paths.train": str(train), "paths.dev": str(dev)}
    all_overrides.update(dict(overrides or {}))
    try:
        spacy_train(config, output, use_gpu=use_gpu, overrides=all_overrides)
    except SystemExit as err:  # spaCy's CLI helpers exit on bad configs
        raise TrainingError(Errors.E444.format(reason=f"spaCy exited with status {err.code}", config=config)) from None
    best = output / "model-best"
    if not (best / "meta.json").exists():
        raise TrainingError(Errors.E445.format(path=best))
    return best


def ner_scores(model: PathLike, data: PathLike, output: Optional[PathLike] = None) -> Dict[str, Any]:
    """Score a spaCy pipeline's entities on a ``.spacy`` corpus: overall and per-label
    precision / recall / F1 (spaCy's scorer, exact span match). Written as JSON when ``output``."""
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example

    model = _require(model, "NER pipeline", "run the train-ner step first.")
    data = _require(data, "NER evaluation corpus", "run `spacy-sapbert convert-ner` first.")
    nlp = spacy.load(model)
    gold = list(DocBin().from_disk(data).get_docs(nlp.vocab))
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in gold]
    scores = nlp.evaluate(examples)
    per_type = scores.get("ents_per_type") or {}
    result: Dict[str, Any] = {
        "data": str(data),
        "model": str(model),
        "docs": len(gold),
        "gold_entities": sum(len(doc.ents) for doc in gold),
        "ents_p": scores.get("ents_p"),
        "ents_r": scores.get("ents_r"),
        "ents_f": scores.get("ents_f"),
        "ents_per_type": {label: dict(v) for label, v in sorted(per_type.items())},
    }
    if output is not None:
        with atomic_write(output) as fh:
            json.dump(result, fh, indent=2)
            fh.write("\n")
    return result


__all__ = ["train_ner", "ner_scores"]
