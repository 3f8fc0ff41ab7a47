"""One evaluation run: config → dataset, KB, systems → scores → report folder.

The config (a ``.cfg`` file, see ``configs/evaluate.cfg``) is the whole description of a run: the
resolved config is written beside the results, so ``spacy-sapbert evaluate OUT/config.cfg`` repeats it.
"""
from __future__ import annotations

import time
import warnings
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..base.util import PathLike, atomic_dir, ensure_path, get_logger
from ..errors import ConfigError, EmptyResultError, Errors, MissingInputError, Warnings
from ..kb import KnowledgeBase
from ..kb.build import build_kb
from ..mentions.datasets import Document, Mention, read_dataset, select_mentions
from ..mentions.metrics import (Gold, Ranking, acc_at_k, check_ks, first_hit_lenient, first_hit_strict, resolve_gold,
                                resolve_gold_id, score, subset_masks)
from .baselines import DenseEncoder, Dictionary, ExactMatch, ScispacyLinker, System, TfidfCharNgrams
from .calibration import calibration_results
from .context import (ambiguity_mask, context_rankings, context_setup, lazy_context_vectors, mention_keys,
                      prototype_masks)
from .hybrid import HybridSystem, hybrid_systems
from .pipeline import load_encoder, run_end_to_end  # noqa: F401  (public here too: evaluation.run.load_encoder)
from .preprocess import InputOptions, make_preprocessor, mention_queries
from .protocol import (AMBIGUOUS, AMBIGUOUS_NO_REFERENCE, CANDIDATE_KS, CANDIDATE_RECALL, CLASSES, SPEED,
                       MentionClasses, candidate_recall, cold, link_speed)
from .report import write_report
from .reranking import rerank_system
from .settings import DEFAULT_CONFIG, MODES, load_evaluate_config, settings_from_config

logger = get_logger("evaluation.run")


def load_kb(settings: Dict[str, Any]):
    kb_cfg = settings["kb"]
    if kb_cfg.get("path"):
        path = ensure_path(kb_cfg["path"])
        if not path.exists():
            raise MissingInputError(Errors.E001.format(what="KB folder", path=path, hint="build one with `spacy-sapbert build-kb`."))
        return KnowledgeBase.from_disk(path), str(path)
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
    sy = settings["systems"]
    out: List[System] = []
    for key, label, pooling in (("model", sy["model_name"], sy["model_pooling"]),
                                ("base_encoder", sy["base_encoder_name"], sy["base_pooling"])):
        if sy.get(key):
            out.append(DenseEncoder(load_encoder(sy[key], sy, pooling), dictionary, name=label,
                                    batch_size=settings["batch_size"], cache_dir=settings["cache_dir"],
                                    show_progress=settings["show_progress"]))
    if sy["hybrid"]:
        dense = [s for s in out if isinstance(s, DenseEncoder)]
        if not dense:
            raise ConfigError(Errors.E305.format(system="hybrid", what="a name-only dense system to add sparse scores to",
                                                 hint="Set [evaluate.systems] model or base_encoder."))
        out += hybrid_systems(settings, kb, dense[0], read_train_mentions(settings) if sy["hybrid_tune"] else [])
    if sy["reranker"] is not None:  # the linker's re-ranker on the hybrid system's candidates, else the dense ones
        dense = [s for s in out if isinstance(s, DenseEncoder)]
        hybrid = [s for s in out if isinstance(s, HybridSystem)]
        out.append(rerank_system(settings, kb, dense[0] if dense else None, hybrid[0] if hybrid else None))
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


def _ranked(system: System, queries: Sequence[str], max_k: int, depth: int
            ) -> Tuple[List[Ranking], List[Ranking], int, Dict[str, Any]]:
    """``(rankings at max_k, candidate rankings, candidate depth, speed)`` of one name-only system: the timed
    call (encoder caches emptied first) gives the acc@k rankings as they always were; the candidate stage is
    ranked apart to ``depth`` (scispaCy's linker proposes its own ``k`` concepts at most: its list is cut; a
    re-ranker system's candidates are its ``candidate_stage``'s)."""
    cold(getattr(system, "encoder", None), getattr(system, "reranker", None))
    t = time.perf_counter()
    rankings = system.rank(queries, max_k)
    speed = link_speed(len(queries), time.perf_counter() - t)
    if isinstance(system, ScispacyLinker):
        depth = min(depth, int(system.params["k"]))
    stage = getattr(system, "candidate_stage", None)  # a re-ranker's candidates are its stage's
    candidates = (stage or system).rank(queries, depth) if depth > max_k or stage is not None else rankings
    return rankings, candidates, depth, speed


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


def _reference(systems: Sequence[System]) -> Optional[int]:
    """Position of the run's reference name-only encoder (the model, else the base encoder), or None."""
    return next((i for i, s in enumerate(systems) if isinstance(s, DenseEncoder)), None)


def _context_systems(settings: Dict[str, Any], kb, base: System, docs: Sequence[Document], golds: Sequence[Gold],
                     queries: Sequence[str], masks: Dict[str, List[bool]], described: Dict[str, Any]
                     ) -> List[Tuple[str, List[Ranking], List[Ranking], int]]:
    """The name-only dense system ``base`` re-ranked with context, and (when the weights use them and the store
    has them) with the example names alone beside it: ``(name, rankings, candidates, candidate depth)`` each;
    adds the seen/unseen-in-prototypes masks. Each system's speed covers the name ranking, its example-name
    vectors and (context) every mention's context vector; building the store and tuning are setup."""
    from dataclasses import replace

    options = InputOptions(**settings["input"])
    prep = make_preprocessor(lowercase=options.lowercase, fold_punctuation=options.fold_punctuation)
    t = time.perf_counter()
    store, weights, desc = context_setup(settings, kb, base, prep=prep)
    setup = round(time.perf_counter() - t, 2)
    sy = settings["systems"]
    depth = max(int(sy["context_k"]), *settings["ks"])
    keys = mention_keys(docs, queries)
    variants = [(f"{base.name} + {sy['context_name']}", weights, True)]
    if weights.example_names and store.has_names:
        variants.append((f"{base.name} + example names only", replace(weights, context=0.0, definition=0.0), False))
    out = []
    for name, w, with_context in variants:
        cold(base.encoder, getattr(store.encoder, "encoder", None))
        t = time.perf_counter()
        candidates = base.rank(list(queries), depth)
        names = base.encoder.encode(list(queries), batch_size=settings["batch_size"]) if w.example_names else None
        encode, ok, encoded = lazy_context_vectors(store.encoder, docs, batch_size=settings["batch_size"])
        if not with_context:  # no context: the example names re-sort the candidates, nothing is re-ranked
            ok = [False] * len(queries)
        rankings = context_rankings(candidates, encode, ok, store, w, name_vectors=names, keys=keys)
        speed = link_speed(len(queries), time.perf_counter() - t)
        described[name] = {**desc, "weights": w.to_dict(), "setup_seconds": setup, **speed,
                           "contexts_encoded": len(encoded),
                           "encodes": "mention names" + (", example-name vectors" if w.example_names else "")
                           + (", the contexts of the mentions re-ranked (context_margin, one sense per document)"
                              if with_context else "")}
        out.append((name, rankings, candidates, depth))
    masks.update(prototype_masks(golds, store))
    return out


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
    read = read_dataset(ds["path"], format=ds["format"], types=ds["types"], language=ds.get("language"))
    docs, counts = select_mentions(read, settings["exclude_composite"])
    if counts["no_gold_id"]:
        warnings.warn(Warnings.W301.format(n=counts["no_gold_id"]))
    mentions = [m for d in docs for m in d.mentions]
    if not mentions:
        raise EmptyResultError(Errors.E302.format(what="reading, type filter and composite exclusion", before=counts["read"]))
    kb, kb_label = load_kb(settings)
    train = read_train_mentions(settings)
    kb_names = list(kb.names)  # the KB's own names: the "dictionary name" class is taken before back-off
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
    classes = MentionClasses(queries, kb_names, [m.text for m in train], fold_punctuation=options.fold_punctuation)
    counts["classes"] = classes.counts()
    candidate_ks = check_ks(settings.get("candidate_ks", CANDIDATE_KS))
    result: Dict[str, Any] = {
        "setting": {
            "name": settings["name"], "dataset": str(ds["path"]), "format": ds["format"], "types": ds["types"],
            "language": ds.get("language"),
            "train": [str(p) for p in ds["train"]], "kb": kb_label, "kb_concepts": len(kb), "kb_names": len(kb.names),
            "kb_checksum": kb.checksum, "dictionary_names": len(dictionary), "input": options.describe(),
            "input_options": options.to_dict(), "exclude_composite": settings["exclude_composite"],
            "composite": "left out" if settings["exclude_composite"] else "kept; right if any part is predicted",
            "ks": list(ks), "candidate_ks": list(candidate_ks), "levenshtein_threshold": settings["levenshtein_threshold"],
            "modes": settings["modes"],
            "protocol": {"classes": CLASSES, "ambiguous": AMBIGUOUS_NO_REFERENCE, "candidate_recall": CANDIDATE_RECALL,
                         "speed": SPEED},
        },
        "counts": counts, "results": {}, "curves": {}, "systems": {}, "nel": {}, "classes": {},
        "candidate_recall": {},
        "gold_not_in_kb": sorted({r for g in missing for r in g.missing}),
    }
    errors: List[Dict[str, Any]] = []
    max_k = max(ks)
    if "mention_only" in settings["modes"]:
        systems = build_systems(settings, kb, dictionary)
        result["results"]["mention_only"] = {}
        result["curves"]["mention_only"] = {}
        ranked: List[Tuple[str, List[Ranking]]] = []
        recall = result["candidate_recall"]["mention_only"] = {}
        for system in systems:
            rankings, candidates, depth, speed = _ranked(system, queries, max_k, max(candidate_ks))
            ranked.append((system.name, rankings))
            recall[system.name] = candidate_recall(golds, candidates, candidate_ks, depth)
            result["systems"][system.name] = {**system.describe(), **speed}
        ref = _reference(systems)
        if ref is not None:  # the one definition: dictionary ambiguity, plus the reference encoder's ties
            masks["ambiguous"] = ambiguity_mask(queries, dictionary, ranked[ref][1])
            result["setting"]["protocol"]["ambiguous"] = AMBIGUOUS.format(reference=systems[ref].name)
        if settings["systems"]["context"]:
            if ref is None:
                raise ConfigError(Errors.E305.format(system="context", what="a name-only dense system to re-rank",
                                                     hint="Set [evaluate.systems] model or base_encoder."))
            for name, rankings, candidates, depth in _context_systems(settings, kb, systems[ref], docs, golds,
                                                                       queries, masks, result["systems"]):
                ranked.append((name, rankings))
                recall[name] = candidate_recall(golds, candidates, candidate_ks, depth)
        result["classes"]["mention_only"] = {}
        for name, rankings in ranked:
            result["results"]["mention_only"][name] = _score_subsets(golds, rankings, masks, ks)
            result["classes"]["mention_only"][name] = classes.strict_split(golds, rankings)
            result["curves"]["mention_only"][name] = _curves(golds, rankings, max_k)
            errors += _errors(name, "mention_only", mentions, queries, golds, rankings, kb)
            logger.info("%s: strict acc@1 %.3f", name, result["results"]["mention_only"][name]["full"]["strict"]["acc@1"])
    counts["subsets"] = {name: sum(mask) for name, mask in masks.items()}
    if "end_to_end" in settings["modes"]:
        e2e = run_end_to_end(settings, docs, golds, kb, dictionary, options, max_k)
        result["results"]["end_to_end"] = {}
        result["curves"]["end_to_end"] = {}
        result["classes"]["end_to_end"] = {}
        for name, (rankings, nel, desc) in e2e.items():
            result["systems"].setdefault(name, desc)
            result["classes"]["end_to_end"][name] = classes.strict_split(golds, rankings)
            result["results"]["end_to_end"][name] = _score_subsets(golds, rankings, masks, ks)
            result["curves"]["end_to_end"][name] = _curves(golds, rankings, max_k)
            result["nel"][name] = nel
            errors += _errors(name, "end_to_end", mentions, queries, golds, rankings, kb)
    if settings.get("calibration"):  # optional section: spacy_sapbert.evaluation.calibration
        # the mentions without gold id too: the no-link section scores them as "should not be linked"
        with_nil, _ = select_mentions(read, settings["exclude_composite"], keep_without_id=True)
        result["calibration"] = calibration_results(settings, with_nil, bins=settings["calibration_bins"])
    result["seconds"] = round(time.time() - started, 1)
    if out_path is not None:
        with atomic_dir(out_path, overwrite=overwrite) as tmp:
            write_report(result, errors, tmp, config_text=config_text, error_sample=settings["error_sample"],
                         seed=settings["seed"])
    return result


def evaluate_config(config_path: PathLike, output: Optional[PathLike] = None, *,
                    overrides: Optional[Dict[str, Any]] = None, overwrite: bool = False) -> Dict[str, Any]:
    """Load a ``.cfg`` (with dotted ``overrides``), run it, write the report with the resolved config."""
    config = load_evaluate_config(config_path, overrides or {})
    settings = settings_from_config(config, config_path)
    return evaluate(settings, config_text=config.to_str(), output=output, overwrite=overwrite)


__all__ = ["evaluate", "evaluate_config", "load_kb", "select_mentions", "add_backoff", "build_systems",
           "DEFAULT_CONFIG", "MODES"]
