"""One evaluation run: config → dataset, KB, systems → scores → report folder.

The config (a ``.cfg`` file, see ``configs/evaluate.cfg``) is the whole description of a run: the
resolved config is written beside the results, so ``spacy-sapbert evaluate OUT/config.cfg`` repeats it.
"""
from __future__ import annotations

import time
import warnings
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import ConfigError, EmptyResultError, Errors, MissingInputError, Warnings
from ..util import PathLike, atomic_dir, ensure_path, get_logger
from .baselines import Dictionary, System
from .datasets import Document, Mention, read_dataset, select_mentions
from .context import ambiguity_mask
from .metrics import Gold, Ranking, acc_at_k, check_ks, first_hit_lenient, first_hit_strict, resolve_gold, resolve_gold_id, score, seen_mask, seen_split, subset_masks
from .pipeline import load_encoder  # noqa: F401  (public here too: evaluation.run.load_encoder)
from .preprocess import InputOptions, make_preprocessor, mention_queries
from .report import write_report
from .settings import DEFAULT_CONFIG, MODES, load_config, settings_from_config

logger = get_logger("evaluation.run")


def load_kb(settings: Dict[str, Any]):
    from ..kb import KnowledgeBase

    kb_cfg = settings["kb"]
    if kb_cfg.get("path"):
        path = ensure_path(kb_cfg["path"])
        if not path.exists():
            raise MissingInputError(Errors.E001.format(what="KB folder", path=path, hint="build one with `spacy-sapbert build-kb`."))
        return KnowledgeBase.from_disk(path), str(path)
    from ..kb.build import build_kb

    sources = [(ensure_path(p), fmt) for p, fmt in kb_cfg["sources"]]
    return build_kb(sources), " + ".join(f"{fmt}:{p.name}" for p, fmt in sources)


def read_train_mentions(settings: Dict[str, Any]) -> List[Mention]:
    ds = settings["dataset"]
    out: List[Mention] = []
    for path in ds["train"]:
        for d in read_dataset(path, format=ds["train_format"], types=ds["types"]):
            out.extend(m for m in d.mentions if m.ids)
    return out


def add_backoff(kb, train: Sequence[Mention]) -> int:
    """Add non-composite training mentions as aliases of their (resolved) gold concept."""
    added = 0
    n_before = len(kb.names)
    for m in train:
        if m.composite or len(m.ids) != 1:
            continue
        cid = resolve_gold_id(kb, m.ids[0])
        if cid is not None and m.text.strip():
            kb.add_alias(cid, m.text)
            added += 1
    logger.info("back-off: %d training mentions as aliases, %d new names", added, len(kb.names) - n_before)
    return len(kb.names) - n_before


def build_systems(settings: Dict[str, Any], kb, dictionary: Dictionary) -> List[System]:
    from .baselines import DenseEncoder, ExactMatch, ScispacyLinker, TfidfCharNgrams

    sy = settings["systems"]
    out: List[System] = []
    for key, label, pooling in (("model", sy["model_name"], sy["model_pooling"]),
                                ("base_encoder", sy["base_encoder_name"], sy["base_pooling"])):
        if sy.get(key):
            out.append(DenseEncoder(load_encoder(sy[key], sy, pooling), dictionary, name=label,
                                    batch_size=settings["batch_size"], cache_dir=settings["cache_dir"],
                                    show_progress=settings["show_progress"]))
    if sy["exact_match"]:
        out.append(ExactMatch(dictionary))
    if sy["tfidf"]:
        out.append(TfidfCharNgrams(dictionary))
    if sy["scispacy"]:
        out.append(ScispacyLinker(dictionary, kb, k=max(sy["scispacy_k"], max(settings["ks"])),
                                  threshold=sy["scispacy_threshold"]))
    if not out:
        raise ConfigError(Errors.E303.format(path=settings["config_path"], what="no system is switched on in [evaluate.systems]"))
    return out


def _score_subsets(golds: Sequence[Gold], rankings: Sequence[Ranking], masks: Dict[str, List[bool]],
                   ks: Sequence[int]) -> Dict[str, Optional[Dict[str, Any]]]:
    out: Dict[str, Optional[Dict[str, Any]]] = {}
    for name, mask in masks.items():
        idx = [i for i, keep in enumerate(mask) if keep]
        out[name] = score([golds[i] for i in idx], [rankings[i] for i in idx], ks) if idx else None
    return out


def _seen_unseen(golds: Sequence[Gold], rankings: Sequence[Ranking], seen: Sequence[bool]) -> Dict[str, Any]:
    """Strict acc@1 overall / seen / unseen with counts (see :func:`~.metrics.seen_split`)."""
    return seen_split([first_hit_strict(g, r) == 1 for g, r in zip(golds, rankings)], seen)


def _curves(golds: Sequence[Gold], rankings: Sequence[Ranking], max_k: int) -> Dict[str, Any]:
    ks = list(range(1, max_k + 1))
    strict = acc_at_k([first_hit_strict(g, r) for g, r in zip(golds, rankings)], ks)
    names = all(r.names is not None for r in rankings)
    lenient = acc_at_k([first_hit_lenient(g, r) for g, r in zip(golds, rankings)], ks) if names else None
    return {"strict": [strict[k] for k in ks], "lenient": [lenient[k] for k in ks] if lenient else None}


def _errors(system: str, mode: str, mentions: Sequence[Mention], queries: Sequence[str], golds: Sequence[Gold],
            rankings: Sequence[Ranking], kb) -> List[Dict[str, Any]]:
    out = []
    for m, q, g, r in zip(mentions, queries, golds, rankings):
        if first_hit_strict(g, r) == 1:
            continue
        pred, sc = (r.concepts[0] if r.concepts else ("", 0.0))
        pname = r.names[0][0] if r.names else (kb.cui_to_entity[pred].canonical_name if pred in kb.cui_to_entity else "")
        out.append({"system": system, "mode": mode, "doc_id": m.doc_id or "", "mention": m.text, "query": q,
                    "gold": "|".join(sorted(g.ids)) or "NOT_IN_KB:" + "|".join(g.raw),
                    "predicted": pred, "predicted_name": pname, "score": f"{sc:.4f}"})
    return out


def _context_system(settings: Dict[str, Any], kb, systems: Sequence[System], ranked: Sequence[Tuple[str, List[Ranking]]],
                    docs: Sequence[Document], golds: Sequence[Gold], queries: Sequence[str], dictionary: Dictionary,
                    masks: Dict[str, List[bool]], described: Dict[str, Any]) -> Tuple[str, List[Ranking]]:
    """The name-only dense system (the model, else the base encoder) re-ranked with context; adds the
    ambiguity (with that system's ties) and seen/unseen-in-prototypes masks."""
    from .baselines import DenseEncoder
    from .context import context_rankings, context_setup, context_vectors, mention_keys, prototype_masks

    dense = [(i, s) for i, s in enumerate(systems) if isinstance(s, DenseEncoder)]
    if not dense:
        raise ConfigError(Errors.E305.format(system="context", what="a name-only dense system to re-rank",
                                             hint="Set [evaluate.systems] model or base_encoder."))
    i, base = dense[0]
    options = InputOptions(**settings["input"])
    prep = make_preprocessor(lowercase=options.lowercase, fold_punctuation=options.fold_punctuation)
    t = time.time()
    store, weights, desc = context_setup(settings, kb, base, prep=prep)
    vectors, ok = context_vectors(store.encoder, docs, batch_size=settings["batch_size"])
    sy = settings["systems"]
    candidates = base.rank(list(queries), max(int(sy["context_k"]), *settings["ks"]))
    names = base.encoder.encode(list(queries), batch_size=settings["batch_size"]) if weights.example_names else None
    rankings = context_rankings(candidates, vectors, ok, store, weights, name_vectors=names,
                                keys=mention_keys(docs, queries))
    name = f"{base.name} + {settings['systems']['context_name']}"
    described[name] = {**desc, "seconds": round(time.time() - t, 2)}
    masks["ambiguous"] = ambiguity_mask(queries, dictionary, ranked[i][1])
    masks.update(prototype_masks(golds, store))
    return name, rankings


def evaluate(settings: Dict[str, Any], *, config_text: Optional[str] = None,
             output: Optional[PathLike] = None, overwrite: bool = False) -> Dict[str, Any]:
    """Run the evaluation ``settings`` describe; with ``output``, write the report folder there."""
    started = time.time()
    out_path = ensure_path(output) if output is not None else None
    if out_path is not None and out_path.exists() and not overwrite:
        raise ConfigError(Errors.E003.format(path=out_path))
    ks = check_ks(settings["ks"])
    options = InputOptions(**settings["input"])
    ds = settings["dataset"]
    docs, counts = select_mentions(read_dataset(ds["path"], format=ds["format"], types=ds["types"],
                                                language=ds.get("language")), settings["exclude_composite"])
    if counts["no_gold_id"]:
        warnings.warn(Warnings.W301.format(n=counts["no_gold_id"]))
    mentions = [m for d in docs for m in d.mentions]
    if not mentions:
        raise EmptyResultError(Errors.E302.format(what="reading, type filter and composite exclusion", before=counts["read"]))
    kb, kb_label = load_kb(settings)
    train = read_train_mentions(settings)
    counts["backoff_names"] = add_backoff(kb, train) if options.backoff else 0
    golds = [resolve_gold(kb, m.ids) for m in mentions]
    missing = [g for g in golds if not g.in_kb]
    counts["gold_not_in_kb"] = len(missing)
    if len(missing) == len(golds):
        raise EmptyResultError(Errors.E306.format(n=len(golds), examples=", ".join(sorted({r for g in missing[:5] for r in g.raw}))))
    if missing:
        warnings.warn(Warnings.W300.format(n=len(missing), total=len(golds), examples=", ".join(sorted({r for g in missing[:3] for r in g.raw}))))
    counts["partly_not_in_kb"] = sum(1 for g in golds if g.in_kb and g.missing)
    counts["evaluated"] = len(mentions)
    counts["languages"] = dict(sorted(Counter(m.language for m in mentions if m.language).items()))
    queries = [q for q, _ in mention_queries(docs, options)]
    name_prep = make_preprocessor(lowercase=True, fold_punctuation=options.fold_punctuation)
    dictionary = Dictionary.from_kb(kb, name_prep if options.fold_punctuation else None)
    train_queries = [make_preprocessor(lowercase=options.lowercase, fold_punctuation=options.fold_punctuation)(m.text) for m in train]
    masks = subset_masks(queries, dictionary.names, train_queries, settings["levenshtein_threshold"])
    masks["ambiguous"] = ambiguity_mask(queries, dictionary)
    counts["subsets"] = {name: sum(mask) for name, mask in masks.items()}
    seen = seen_mask(queries, dictionary.names, train_queries)
    counts["seen"], counts["unseen"] = sum(seen), len(seen) - sum(seen)
    result: Dict[str, Any] = {
        "setting": {
            "name": settings["name"], "dataset": str(ds["path"]), "format": ds["format"], "types": ds["types"],
            "language": ds.get("language"),
            "train": [str(p) for p in ds["train"]], "kb": kb_label, "kb_concepts": len(kb), "kb_names": len(kb.names),
            "kb_checksum": kb.checksum, "dictionary_names": len(dictionary), "input": options.describe(),
            "input_options": options.to_dict(), "exclude_composite": settings["exclude_composite"],
            "composite": "left out" if settings["exclude_composite"] else "kept; right if any part is predicted",
            "ks": list(ks), "levenshtein_threshold": settings["levenshtein_threshold"], "modes": settings["modes"],
        },
        "counts": counts, "results": {}, "curves": {}, "systems": {}, "nel": {}, "seen_unseen": {},
        "gold_not_in_kb": sorted({r for g in missing for r in g.missing}),
    }
    errors: List[Dict[str, Any]] = []
    max_k = max(ks)
    if "mention_only" in settings["modes"]:
        systems = build_systems(settings, kb, dictionary)
        result["results"]["mention_only"] = {}
        result["curves"]["mention_only"] = {}
        ranked: List[Tuple[str, List[Ranking]]] = []
        for system in systems:
            t = time.time()
            ranked.append((system.name, system.rank(queries, max_k)))
            result["systems"][system.name] = {**system.describe(), "seconds": round(time.time() - t, 2)}
        if settings["systems"]["context"]:
            ranked.append(_context_system(settings, kb, systems, ranked, docs, golds, queries, dictionary, masks,
                                          result["systems"]))
            counts["subsets"] = {name: sum(mask) for name, mask in masks.items()}
        result["seen_unseen"]["mention_only"] = {}
        for name, rankings in ranked:
            result["results"]["mention_only"][name] = _score_subsets(golds, rankings, masks, ks)
            result["seen_unseen"]["mention_only"][name] = _seen_unseen(golds, rankings, seen)
            result["curves"]["mention_only"][name] = _curves(golds, rankings, max_k)
            errors += _errors(name, "mention_only", mentions, queries, golds, rankings, kb)
            logger.info("%s: strict acc@1 %.3f", name, result["results"]["mention_only"][name]["full"]["strict"]["acc@1"])
    if "end_to_end" in settings["modes"]:
        from .pipeline import run_end_to_end

        e2e = run_end_to_end(settings, docs, golds, kb, dictionary, options, max_k)
        result["results"]["end_to_end"] = {}
        result["curves"]["end_to_end"] = {}
        result["seen_unseen"]["end_to_end"] = {}
        for name, (rankings, nel, desc) in e2e.items():
            result["systems"].setdefault(name, desc)
            result["seen_unseen"]["end_to_end"][name] = _seen_unseen(golds, rankings, seen)
            result["results"]["end_to_end"][name] = _score_subsets(golds, rankings, masks, ks)
            result["curves"]["end_to_end"][name] = _curves(golds, rankings, max_k)
            result["nel"][name] = nel
            errors += _errors(name, "end_to_end", mentions, queries, golds, rankings, kb)
    if settings.get("calibration"):  # optional section: spacy_sapbert.evaluation.calibration
        from .calibration import calibration_results

        result["calibration"] = calibration_results(settings, docs, bins=settings["calibration_bins"])
    result["seconds"] = round(time.time() - started, 1)
    if out_path is not None:
        with atomic_dir(out_path, overwrite=overwrite) as tmp:
            write_report(result, errors, tmp, config_text=config_text, error_sample=settings["error_sample"],
                         seed=settings["seed"])
    return result


def evaluate_config(config_path: PathLike, output: Optional[PathLike] = None, *,
                    overrides: Optional[Dict[str, Any]] = None, overwrite: bool = False) -> Dict[str, Any]:
    """Load a ``.cfg`` (with dotted ``overrides``), run it, write the report with the resolved config."""
    config = load_config(config_path, overrides or {})
    settings = settings_from_config(config, config_path)
    return evaluate(settings, config_text=config.to_str(), output=output, overwrite=overwrite)


__all__ = ["evaluate", "evaluate_config", "load_kb", "select_mentions", "add_backoff", "build_systems",
           "DEFAULT_CONFIG", "MODES"]
