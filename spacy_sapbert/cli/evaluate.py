"""CLI commands: evaluate. Thin: parse arguments, call a library function, print a summary."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from ..base.outputs import check_output
from ..errors import ConfigError, Errors
from ..mentions.datasets import FORMATS
from ._app import app
from ._options import check_choice, check_pooling


def _parse_set(values: List[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(Errors.E303.format(path="--set", what=f"'{item}' is not KEY=VALUE (e.g. evaluate.ks=[1,5])"))
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


@app.command("evaluate")
def evaluate_command(
    config_or_data: Path = typer.Argument(..., help="An evaluation config (.cfg, see configs/evaluate.cfg) or a dataset file/folder (PubTator, BioSyn folder, .tsv, .jsonl, brat folder or .ann, XL-BEL .txt, CodiEsp-X .tsv)."),
    output: Path = typer.Option(..., "--output", "-o", help="Report folder: metrics.json, report.md, errors.tsv/.md, acc_at_k.png, config.cfg."),
    kb: Optional[Path] = typer.Option(None, "--kb", help="KB folder (from `spacy-sapbert build-kb`)."),
    kb_source: List[str] = typer.Option([], "--kb-source", help="Build the KB on the fly from PATH:FORMAT (repeatable; formats: medic, obo, tsv, jsonl, umls)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model under test: a model folder or a saved spaCy pipeline."),
    base_model: Optional[str] = typer.Option(None, "--base-model", help="Base encoder before self-alignment (model folder)."),
    pooling: Optional[str] = typer.Option(None, "--pooling", help="Pooling of both dense systems: cls, mean or auto (what each model folder declares, else cls; the default)."),
    model_pooling: Optional[str] = typer.Option(None, "--model-pooling", help="Pooling of --model only (cls, mean, auto); wins over --pooling."),
    base_pooling: Optional[str] = typer.Option(None, "--base-pooling", help="Pooling of --base-model only (cls, mean, auto); wins over --pooling."),
    data_format: str = typer.Option("auto", "--format", help="Dataset format: auto, pubtator, biosyn, tsv, jsonl, brat (Mantra GSC, CANTEMIST), xlbel, codiesp (CodiEsp-X), docbin (.spacy: doc.ents with kb_id_)."),
    language: Optional[str] = typer.Option(None, "--language", help="The mentions' language (ISO 639 code, e.g. es), reported with the results."),
    types: List[str] = typer.Option([], "--type", help="Keep only mentions of this type (repeatable), e.g. Disease."),
    train: List[Path] = typer.Option([], "--train", help="Training-set file (repeatable): filtered subsets and back-off."),
    backoff: bool = typer.Option(False, "--backoff", help="Add training mentions to the KB as aliases."),
    abbreviations: bool = typer.Option(False, "--abbreviations", help="Resolve abbreviations in context (scispaCy)."),
    abbreviation_table: Optional[Path] = typer.Option(None, "--abbreviation-table", help="An abbreviation table "
                                                      "(mine-abbreviations' file, or a TSV): a mention that is one of "
                                                      "its short forms, undefined in its document, is linked as its "
                                                      "long form (the linker's abbreviation_table)."),
    fold_punctuation: bool = typer.Option(False, "--fold-punctuation", help="Replace punctuation by spaces in mentions and names."),
    keep_case: bool = typer.Option(False, "--keep-case", help="Do not lowercase mentions."),
    exclude_composite: bool = typer.Option(True, "--exclude-composite/--keep-composite", help="Leave composite mentions (A|B, A+B) out (the default, as in configs/evaluate.cfg), or keep them (right if any part is predicted)."),
    ks: str = typer.Option("1,5,10,20", "--ks", help="Comma-separated k values for acc@k."),
    mode: List[str] = typer.Option([], "--mode", help="mention_only and/or end_to_end (repeatable)."),
    no_scispacy: bool = typer.Option(False, "--no-scispacy", help="Skip scispaCy's EntityLinker."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Keep name vectors here between runs."),
    set_: List[str] = typer.Option([], "--set", help="Config override KEY=VALUE (dotted, e.g. evaluate.error_sample=20); repeatable."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing report folder."),
) -> None:
    """Score linkers side by side (strict and lenient acc@k, filtered subsets) and write a report."""
    from ..evaluation.run import evaluate  # lazy: spacy
    from ..evaluation.settings import MODES, default_config, load_evaluate_config, merge_config, settings_from_config  # lazy: spacy
    for option, value in (("--pooling", pooling), ("--model-pooling", model_pooling), ("--base-pooling", base_pooling)):
        check_pooling(option, value)
    check_choice("--format", data_format, FORMATS)
    for value in mode:
        check_choice("--mode", value, MODES)
    check_output(output, overwrite=overwrite,
                 inputs=[("the config or dataset", config_or_data), ("the KB folder", kb), ("the model", model),
                         ("the base model", base_model), ("the cache folder", cache_dir)]
                 + [("the training set", path) for path in train])
    overrides = _parse_set(set_)
    for key, value in (("pooling", pooling), ("model_pooling", model_pooling), ("base_pooling", base_pooling)):
        if value is not None:
            overrides[f"evaluate.systems.{key}"] = value
    if config_or_data.suffix == ".cfg":
        config = load_evaluate_config(config_or_data, overrides)
        where: Any = config_or_data
    else:
        try:
            k_values = [int(x) for x in ks.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(Errors.E304.format(value=ks)) from None
        sources = []
        for item in kb_source:
            path, sep, fmt = item.rpartition(":")
            if not sep or not path:
                raise ConfigError(Errors.E303.format(path="--kb-source", what=f"'{item}' is not PATH:FORMAT"))
            sources.append([path, fmt])
        ev = {
            "evaluate": {
                "ks": k_values, "exclude_composite": exclude_composite,
                "modes": mode or ["mention_only"], "cache_dir": str(cache_dir) if cache_dir else None,
                "dataset": {"path": str(config_or_data), "format": data_format, "types": types or None, "language": language,
                            "train": [str(t) for t in train]},
                "kb": {"path": str(kb) if kb else None, "sources": sources},
                "input": {"lowercase": not keep_case, "fold_punctuation": fold_punctuation,
                          "resolve_abbreviations": abbreviations, "backoff": backoff,
                          "abbreviation_table": str(abbreviation_table) if abbreviation_table else None},
                "systems": {"model": model, "base_encoder": base_model, "scispacy": not no_scispacy},
            }
        }
        from thinc.api import Config

        ev["evaluate"]["name"] = config_or_data.name
        config = merge_config(default_config(), Config(ev), overrides)
        where = "<arguments>"
    settings = settings_from_config(config, where)
    result = evaluate(settings, config_text=config.to_str(), output=output, overwrite=overwrite)
    counts = result["counts"]
    typer.echo(f"{counts['evaluated']} mentions evaluated ({counts['gold_not_in_kb']} with gold not in KB); "
               f"subsets: " + ", ".join(f"{k}={v}" for k, v in counts["subsets"].items()))
    from ..evaluation.report import classes_line, recall_line  # lazy: spacy

    for mode_name, systems in result["results"].items():
        for name, subsets in systems.items():
            full = subsets["full"]
            desc = result["systems"].get(name, {})
            typer.echo(f"  [{mode_name}] {name}: strict acc@1 {100 * full['strict']['acc@1']:.1f}"
                       + (f", lenient acc@1 {100 * full['lenient']['acc@1']:.1f}" if full["lenient"] else "")
                       + (f"; linking {desc['mentions_per_s']:,.0f} mentions/s" if desc.get("mentions_per_s") else ""))
            split = result["classes"].get(mode_name, {}).get(name)
            if split is not None:
                typer.echo(f"      strict acc@1 {classes_line(split)}")
            recall = result["candidate_recall"].get(mode_name, {}).get(name)
            if recall is not None:
                typer.echo(f"      candidate recall {recall_line(recall, result['setting']['candidate_ks'])}")
    typer.echo(f"Report written to {output}")
