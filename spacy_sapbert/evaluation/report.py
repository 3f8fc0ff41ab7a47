"""Writing a run's results: ``metrics.json``, ``report.md`` (tables naming their setting), an error
sample (``errors.tsv`` / ``errors.md``), ``acc_at_k.png`` (acc@k curves per system) and, with ``calibration = true``, the
calibration section and ``reliability.png`` (:mod:`.calibration`).

The result dictionary the runner builds is the single source: the markdown, the plot and the json
are all rendered from it, so they cannot disagree.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ..base.util import PathLike, atomic_write, ensure_path
from .calibration import plot_calibration, render_calibration
from .protocol import CLASS_LABELS

ERROR_COLUMNS = ("system", "mode", "doc_id", "mention", "query", "gold", "predicted", "predicted_name", "score")


def _pct(value: Optional[float]) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def setting_lines(result: Dict) -> List[str]:
    s = result["setting"]
    c = result["counts"]
    language = [f"- mention language: {s['language']} (as given to the reader; the dictionary's languages are the "
                "KB's)"] if s.get("language") else []
    return [
        f"- dataset: `{s['dataset']}` ({s['format']}; types: {s['types'] or 'all'})",
        *language,
        f"- dictionary: {s['kb']} — {s['dictionary_names']:,} names after preprocessing, {s['kb_concepts']:,} concepts",
        f"- input: {s['input']}",
        f"- composite mentions: {s['composite']}",
        "- protocols: strict = one concept per prediction (ties: the concept whose preferred name it is, then "
        "concept id); lenient = a predicted name is right if any concept sharing it is gold; composite gold: any part",
        f"- mentions: {c['read']} read, {c['no_gold_id']} without gold id (left out), "
        f"{c['composite']} composite ({'left out' if s['exclude_composite'] else 'kept'}), "
        f"{c['gold_not_in_kb']} with gold ids not in the KB (kept, counted wrong), {c['evaluated']} evaluated",
        "- subsets: " + ", ".join(f"{name} = {n}" for name, n in c["subsets"].items()),
        *protocol_lines(result),
    ]


def protocol_lines(result: Dict) -> List[str]:
    """The protocol's definitions the tables use (mention classes, ambiguous subset, candidate recall, speed)."""
    protocol = result["setting"].get("protocol", {})
    counts = result["counts"].get("classes")
    lines = [f"- {protocol[key]}" for key in ("classes", "ambiguous", "candidate_recall", "speed") if key in protocol]
    if counts:
        lines.append("- mention classes: " + ", ".join(f"{CLASS_LABELS[k]} = {n}" for k, n in counts.items()))
    return lines


def results_table(result: Dict, mode: str, subset: str) -> List[str]:
    ks = result["setting"]["ks"]
    show = [k for k in ks if k in (1, 5)] or ks[:2]
    cols = [f"strict acc@{k}" for k in show] + [f"lenient acc@{k}" for k in show] + ["ambiguous top-1"]
    nel = mode == "end_to_end"
    if nel:
        cols.append("nel_micro_f")
    lines = ["| system | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for system, subsets in result["results"][mode].items():
        sc = subsets.get(subset)
        if sc is None:
            continue
        cells = [_pct(sc["strict"][f"acc@{k}"]) for k in show]
        cells += [_pct(sc["lenient"][f"acc@{k}"]) if sc["lenient"] else "–" for k in show]
        cells.append(_pct(sc["ambiguous_top1"]))
        if nel:  # computed on the full set only
            f = result.get("nel", {}).get(system, {}).get("nel_micro_f") if subset == "full" else None
            cells.append(_pct(f))
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return lines


def classes_table(result: Dict, mode: str) -> List[str]:
    """Strict acc@1 overall, per mention class (a dictionary name / a train mention / neither = refined) and
    unseen in train, with counts (see :mod:`.protocol`)."""
    rows = result.get("classes", {}).get(mode, {})
    if not rows:
        return []
    first = next(iter(rows.values()))
    parts = list(CLASS_LABELS)
    head = [f"{CLASS_LABELS[p]} (n = {first[p]['n']})" for p in parts]
    lines = ["| system | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for system, split in rows.items():
        lines.append(f"| {system} | " + " | ".join(_pct(split[p]["acc"]) for p in parts) + " |")
    return lines


def classes_line(split: Dict) -> str:
    """``overall 61.2, a dictionary name 90.1 (n = 500), ...``: one system's strict acc@1 per class."""
    return ", ".join([f"overall {_pct(split['overall']['acc'])}"] + [
        f"{CLASS_LABELS[p]} {_pct(split[p]['acc'])} (n = {split[p]['n']})" for p in list(CLASS_LABELS)[1:]])


def candidate_recall_table(result: Dict, mode: str = "mention_only") -> List[str]:
    """Candidate recall@k of each system's candidate stage (see :mod:`.protocol`), with its depth."""
    rows = result.get("candidate_recall", {}).get(mode, {})
    if not rows:
        return []
    ks = result["setting"].get("candidate_ks", [])
    lines = ["| system | candidates (depth) | " + " | ".join(f"recall@{k}" for k in ks) + " | recall, all candidates |",
             "|---|---:|" + "---:|" * (len(ks) + 1)]
    for system, r in rows.items():
        lines.append(f"| {system} | {r['depth']} | " + " | ".join(_pct(r[f"recall@{k}"]) for k in ks)
                     + f" | {_pct(r['recall@depth'])} |")
    return lines


def recall_line(recall: Dict, ks: Sequence[int]) -> str:
    """``@1 80.1, @5 90.2, @16 93.0, @64 – (depth 30)``: one system's candidate recall."""
    return ", ".join(f"@{k} {_pct(recall[f'recall@{k}'])}" for k in ks) + f" (depth {recall['depth']})"


def speed_table(result: Dict) -> List[str]:
    """Linking speed of the systems that report one (see :mod:`.protocol`); others get none."""
    rows = [(name, d) for name, d in result["systems"].items() if d.get("mentions_per_s") is not None]
    if not rows:
        return []
    lines = ["| system | mentions | linking s | mentions/s | setup s (not counted) |", "|---|---:|---:|---:|---:|"]
    n = result["counts"]["evaluated"]
    for name, d in rows:
        setup = d.get("setup_seconds")
        lines.append(f"| {name} | {n} | {d['link_seconds']:.3f} | {d['mentions_per_s']:,.0f} | "
                     f"{'–' if setup is None else f'{setup:.1f}'} |")
    return lines


def seen_unseen_table(result: Dict, mode: str) -> List[str]:
    """Legacy (results without mention classes): strict acc@1 overall, on seen mentions (the normalised mention is a dictionary name or a
    training mention) and on unseen ones (neither), with counts."""
    rows = result.get("seen_unseen", {}).get(mode, {})
    if not rows:
        return []
    first = next(iter(rows.values()))
    head = [f"overall (n = {first['overall']['n']})", f"seen (n = {first['seen']['n']})",
            f"unseen (n = {first['unseen']['n']})"]
    lines = ["| system | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for system, split in rows.items():
        lines.append(f"| {system} | " + " | ".join(_pct(split[p]["acc"]) for p in ("overall", "seen", "unseen")) + " |")
    return lines


def seen_unseen_line(split: Dict) -> str:
    """``overall 61.2, seen 80.1 (n = 500), unseen 40.3 (n = 287)``: one system's strict acc@1 split."""
    return (f"overall {_pct(split['overall']['acc'])}, seen {_pct(split['seen']['acc'])} (n = {split['seen']['n']}), "
            f"unseen {_pct(split['unseen']['acc'])} (n = {split['unseen']['n']})")


def render_markdown(result: Dict) -> str:
    out = [f"# Evaluation: {result['setting']['name']}", "", *setting_lines(result), ""]
    for mode in result.get("classes", {}):
        out += [f"## {mode.replace('_', ' ')} — strict acc@1 by mention class", "",
                "_a dictionary name / a train mention (not a dictionary name) / neither (the refined subset: what "
                "fine-tuning must generalise to); unseen in train = not a train mention; acc in %_", ""]
        out += classes_table(result, mode) + [""]
    for mode in result.get("candidate_recall", {}):
        out += [f"## {mode.replace('_', ' ')} — candidate recall@k (strict)", "",
                "_gold concept among the first k concepts of the system's candidate stage: the ceiling of a "
                "re-ranker; '–': k beyond the depth the stage proposes; in %_", ""]
        out += candidate_recall_table(result, mode) + [""]
    for mode in result.get("seen_unseen", {}):
        out += [f"## {mode.replace('_', ' ')} — strict acc@1, seen / unseen", "",
                "_seen: the normalised mention is a dictionary name or a training mention; unseen: neither "
                "(what fine-tuning must generalise to); acc in %_", ""]
        out += seen_unseen_table(result, mode) + [""]
    for mode in result["results"]:
        for subset, n in result["counts"]["subsets"].items():
            where = result["setting"]["input"] if mode == "mention_only" else (
                "gold spans in the documents, text as written (each pipeline normalises it its own way); "
                + result["setting"]["input"].split(", ", 2)[2])
            out += [f"## {mode.replace('_', ' ')} — {subset} (n = {n})", "",
                    f"_{where}; composite: {result['setting']['composite']}; acc in %_", ""]
            out += results_table(result, mode, subset) + [""]
    out += render_calibration(result)
    if result.get("nel"):
        out += ["spaCy `Scorer.score_links` on the full set (gold spans; predicted kb_id = best concept; "
                "NIL = empty kb_id or gold not in the KB): `nel_micro_f` in the end-to-end tables.", ""]
    speed = speed_table(result)
    if speed:
        out += ["## Linking speed", "", f"_{result['setting'].get('protocol', {}).get('speed', '')}_", "", *speed, ""]
    out += ["Systems:", ""]
    for name, desc in result["systems"].items():
        extra = ", ".join(f"{k}={v}" for k, v in desc.items() if k not in ("name", "class", "link_seconds", "mentions_per_s", "setup_seconds"))
        out.append(f"- **{name}** ({desc.get('class', '')}){': ' + extra if extra else ''}")
    return "\n".join(out) + "\n"


def sample_errors(errors: Sequence[Dict], size: int, seed: int) -> List[Dict]:
    """Up to ``size`` errors per (system, mode), drawn with a seeded RNG, in input order."""
    groups: Dict[tuple, List[int]] = {}
    for i, e in enumerate(errors):
        groups.setdefault((e["system"], e["mode"]), []).append(i)
    rng = random.Random(seed)
    keep: List[int] = []
    for key in sorted(groups):
        idx = groups[key]
        keep.extend(sorted(rng.sample(idx, size)) if len(idx) > size else idx)
    return [errors[i] for i in sorted(keep)]


def _cell(value: object) -> str:
    return str(value).replace("\t", " ").replace("\n", " ")


def write_errors(errors: Sequence[Dict], folder: Path) -> None:
    with atomic_write(folder / "errors.tsv") as fh:
        fh.write("\t".join(ERROR_COLUMNS) + "\n")
        for e in errors:
            fh.write("\t".join(_cell(e.get(c, "")) for c in ERROR_COLUMNS) + "\n")
    with atomic_write(folder / "errors.md") as fh:
        fh.write("# Error sample (strict acc@1 misses)\n\n| " + " | ".join(ERROR_COLUMNS) + " |\n")
        fh.write("|" + "---|" * len(ERROR_COLUMNS) + "\n")
        for e in errors:
            fh.write("| " + " | ".join(_cell(e.get(c, "")).replace("|", "\\|") for c in ERROR_COLUMNS) + " |\n")


def plot_curves(result: Dict, path: Path, subset: str = "full") -> None:
    """acc@k for k = 1..max(ks), strict (solid) and lenient (dashed), one colour per system."""
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib
    from matplotlib.ticker import MaxNLocator  # lazy: matplotlib

    curves = result["curves"]
    modes = list(curves)
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for i, (system, data) in enumerate(curves[mode].items()):
            colour = f"C{i % 10}"
            ks = list(range(1, len(data["strict"]) + 1))
            ax.plot(ks, [100 * v for v in data["strict"]], "-o", color=colour, ms=3, label=f"{system} strict")
            if data.get("lenient") is not None:
                ax.plot(ks, [100 * v for v in data["lenient"]], "--", color=colour, label=f"{system} lenient")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("k")
        ax.set_ylabel("acc@k (%)")
        ax.set_title(f"{mode.replace('_', ' ')}, {subset}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(result["setting"]["name"] + " — " + result["setting"]["input"], fontsize=8)
    fig.tight_layout()
    with atomic_write(path, "wb", encoding=None) as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


def write_report(result: Dict, errors: Sequence[Dict], output: PathLike, *, config_text: Optional[str] = None,
                 error_sample: int = 50, seed: int = 0) -> Path:
    """Write every report file into ``output`` (created if needed); return the folder."""
    folder = ensure_path(output)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_write(folder / "metrics.json") as fh:
        json.dump(result, fh, indent=2, sort_keys=False)
    with atomic_write(folder / "report.md") as fh:
        fh.write(render_markdown(result))
    write_errors(sample_errors(errors, error_sample, seed), folder)
    plot_curves(result, folder / "acc_at_k.png")
    plot_calibration(result, folder / "reliability.png")
    if config_text is not None:
        with atomic_write(folder / "config.cfg") as fh:
            fh.write(config_text)
    return folder


__all__ = ["write_report", "render_markdown", "results_table", "classes_table", "classes_line", "candidate_recall_table",
           "recall_line", "speed_table", "protocol_lines", "seen_unseen_table", "seen_unseen_line", "sample_errors", "plot_curves",
           "ERROR_COLUMNS"]
