"""The expensive benchmarks write results files that the docs can render, checked without running them.

``link_ncbi``, ``pretrain_public`` and ``evaluate_ncbi`` take minutes to an hour on real data; here their
results writers get figures shaped like a real run's and must produce a ``benchmarks/results`` file that
``scripts/render_benchmarks.py`` renders with every value in place. And ``benchmarks/README.md`` stays true:
every script listed once with its docstring's purpose, its results files and the pages that quote them.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def bench(bench_scripts):
    """``load`` (a benchmark script as a module), ``rendered`` (the page) and the results folder."""
    return bench_scripts.load, bench_scripts.rendered, bench_scripts.results


def _scores(strict1: float) -> dict:
    return {"strict@1": strict1, "strict@5": strict1 + 0.1, "lenient@1": strict1 + 0.01, "lenient@5": strict1 + 0.11}


def test_link_ncbi_results(bench):
    load, rendered, results = bench
    link_ncbi = load("link_ncbi")
    system = {"load_s": 2.951, "warm_load_s": 0.35, "mentions_per_s": 2808.4, "docs_per_s": 292.51, "peak_rss_mb": 1080.2,
              "acc@1": 0.7623, "acc@5": 0.854, "mentions": 960, "encoder_class": "OnnxEncoder"}
    figures = {
        "setup": {"model": "all-MiniLM-L6-v2", "note": "CPU, 2 cores"}, "kb": {"concepts": 11915, "names": 74978},
        "encode": {"names_per_s": 810.2, "seconds": 92.6},
        "index": {"M": 32, "ef_construction": 200, "build_s": 16.1, "size_mb": 135.9},
        "recall": {"by_ef_search": {"50": {"recall@5": 0.98651, "queries_per_s": 9000.0},
                                    "200": {"recall@5": 0.995, "queries_per_s": 7937.0}},
                   "exact_queries_per_s": 2141.0},
        "index_f32graph": {"M": 32, "ef_construction": 200, "build_s": 19.3, "size_mb": 135.9},
        "recall_f32graph": {"by_ef_search": {"200": {"recall@5": 0.9973, "top1_as_exact": 0.99687,
                                                     "queries_per_s": 2181.0}}, "exact_queries_per_s": 2141.0},
        "scispacy_index": {"build_s": 46.3, "size_mb": 19.4},
        "sapbert": system, "sapbert-torch": {**system, "mentions_per_s": 1684.0},
        "sapbert-f32graph": {**system, "mentions_per_s": 1512.0},
        "scispacy": {**system, "mentions_per_s": 2172.0, "acc@1": 0.705},
        "lean": {"python": "/tmp/lean/bin/python",
                 "sapbert": {**system, "load_s": 0.39, "peak_rss_one_pipeline_mb": 700.4,
                             "modules_loaded": ["onnxruntime", "torch"]},
                 "sapbert-int8": {**system, "load_s": 0.37, "peak_rss_one_pipeline_mb": 600.2, "acc@1": 0.77,
                                  "modules_loaded": ["onnxruntime"]},
                 "scispacy": {**system, "load_s": 1.09, "peak_rss_one_pipeline_mb": 500.1, "acc@1": 0.705,
                              "modules_loaded": []},
                 "ratios": {"peak RSS, one pipeline (ours/scispaCy)": 1.4006}},
        "ratios": {"throughput (ours/scispaCy)": 1.29},
    }
    link_ncbi._write_results(figures)
    doc = json.loads((results / "link_ncbi.json").read_text(encoding="utf8"))
    assert set(doc["tables"]) == {"NCBI-disease test (gold spans) -> MEDIC", "index", "loads in the lean environment"}
    page = rendered()
    assert "| sapbert_linker, defaults (runtime auto: OnnxEncoder) | 2.95 | 0.35 | 2,808 | 292.5 | 1,080 | 0.762 | 0.854 |" in page
    assert "| scispaCy EntityLinker (char-3gram tf-idf + nmslib) | 2.95 | 0.35 | 2,172 |" in page
    assert "| recall@5 vs exact, ef_search 50 (float16 graph) | 0.9865 |" in page
    # the ablation: hnswlib's float32 graph, its row, build, size and recall
    assert "| sapbert_linker, hnsw_vectors='float32' (hnswlib's graph, the default until 2026-12-01) | 2.95 | 0.35 | 1,512 |" in page
    assert "| hnsw size MB (hnswlib float32 graph) | 135.9 |" in page
    assert "| top-1 name as exact, ef_search 200 (float32 graph) | 0.9969 |" in page
    # the lean table: both peaks (one pipeline; with the warm reload held), ours int8 between ours and scispaCy's
    assert "| sapbert_linker, defaults | 0.39 | 0.35 | 2,808 | 700 | 1,080 | 0.762 | onnxruntime, torch |" in page
    assert "| sapbert_linker, precision='int8' | 0.37 | 0.35 | 2,808 | 600 | 1,080 | 0.77 | onnxruntime |" in page
    assert "| scispaCy EntityLinker | 1.09 | 0.35 | 2,808 | 500 | 1,080 | 0.705 | none |" in page
    assert page.index("precision='int8' | 0.37") < page.index("| scispaCy EntityLinker | 1.09")
    assert "- throughput (ours/scispaCy): 1.29" in page
    assert "- lean peak RSS, one pipeline (ours/scispaCy): 1.40" in page


def test_link_ncbi_worker_runs_take_turns_and_report_medians(bench, monkeypatch):
    """--worker-runs: the systems' workers take turns (order reversed every other round), each figure is the median
    over a system's runs, the first round alone is profiled."""
    load, _, _ = bench
    link_ncbi = load("link_ncbi")
    calls = []
    rates = {"sapbert": iter([900.0, 1500.0, 1200.0]), "scispacy": iter([1000.0, 800.0, 1100.0])}

    def worker(kind, work, passes, python=None, profile=True):
        calls.append((kind, profile))
        rate = next(rates[kind])
        return {"mentions_per_s": rate, "load_s": rate / 1000, "peak_rss_mb": 500.0 + len(calls),
                "time_shares": {"encoder": 0.3} if profile else {}, "acc@1": 0.8}

    monkeypatch.setattr(link_ncbi, "_run_worker", worker)
    out = link_ncbi._run_workers(["sapbert", "scispacy"], Path("."), 3, 3)
    assert calls == [("sapbert", True), ("scispacy", True), ("scispacy", False), ("sapbert", False),
                     ("sapbert", False), ("scispacy", False)]
    assert out["sapbert"]["mentions_per_s"] == 1200.0 and out["scispacy"]["mentions_per_s"] == 1000.0
    assert out["sapbert"]["load_s"] == 1.2 and out["sapbert"]["peak_rss_mb"] == 504.0  # medians of 501, 504, 505
    assert out["sapbert"]["time_shares"] == {"encoder": 0.3}
    assert [r["mentions_per_s"] for r in out["sapbert"]["runs"]] == [900.0, 1500.0, 1200.0]
    rates["sapbert"] = iter([700.0])
    single = link_ncbi._run_workers(["sapbert"], Path("."), 3, 1)
    assert "runs" not in single["sapbert"]


def test_link_ncbi_results_with_footprint(bench):
    """A run that measured load + first doc and memory adds their table (and the import costs)."""
    load, rendered, results = bench
    link_ncbi = load("link_ncbi")
    memory = {"after linking": {"rss": 900.0, "anon": 700.4, "file": 199.6, "peak": 1000.0}}
    system = {"load_s": 2.951, "warm_load_s": 0.35, "first_doc_s": 0.12, "warm_first_doc_s": 0.05,
              "peak_rss_one_pipeline_mb": 810.2, "memory": memory, "mentions_per_s": 2808.4, "docs_per_s": 292.51,
              "peak_rss_mb": 1080.2, "acc@1": 0.7623, "acc@5": 0.854, "mentions": 960, "encoder_class": "OnnxEncoder"}
    figures = {
        "setup": {"model": "all-MiniLM-L6-v2", "note": "CPU, 2 cores"}, "kb": {"concepts": 11915, "names": 74978},
        "encode": {"names_per_s": 810.2, "seconds": 92.6},
        "index": {"M": 32, "ef_construction": 200, "build_s": 16.1, "size_mb": 135.9},
        "recall": {"by_ef_search": {"200": {"recall@5": 0.995, "queries_per_s": 7937.0}}, "exact_queries_per_s": 2141.0},
        "scispacy_index": {"build_s": 46.3, "size_mb": 19.4},
        "sapbert": system, "scispacy": {**system, "first_doc_s": 0.02, "peak_rss_one_pipeline_mb": 640.0},
        "import_cost": {"torch, transformers": {"s": 1.234, "mb": 301.4}},
        "ratios": {"peak_rss, one pipeline (ours/scispaCy)": 1.27},
        "floor": {"load_s": 2.0, "warm_load_s": 0.1, "peak_rss_one_pipeline_mb": 500.0, "link_s": 0.2},
    }
    figures["sapbert"] = {**system, "link_s": 0.5}
    figures["scispacy"] = {**figures["scispacy"], "link_s": 0.6}
    # scispaCy's linker added to spacy.blank (the way until 2026-12-04), with that floor
    figures["scispacy-blank"] = {**figures["scispacy"], "warm_load_s": 0.25}
    figures["floor-blank"] = {**figures["floor"], "warm_load_s": 0.05}
    figures["own"] = link_ncbi._own_parts(figures)
    link_ncbi._write_results(figures)
    doc = json.loads((results / "link_ncbi.json").read_text(encoding="utf8"))
    assert set(doc["tables"]) == {"NCBI-disease test (gold spans) -> MEDIC", "index", "load, first document and memory",
                                  "the floor and each system's own part", "import cost after spacy"}
    page = rendered()
    assert "| scispaCy EntityLinker, added to spacy.blank | 2.95 | 0.02 | 0.25 | 0.05 | 640 | 700 | 200 |" in page
    assert ("| scispaCy EntityLinker added to spacy.blank: own part (minus spacy.blank + abbreviation detector) | 0.95 "
            "| 0.2 | 140.0 | 0.4 |") in page
    assert "| sapbert_linker, defaults | 2.95 | 0.12 | 0.35 | 0.05 | 810 | 700 | 200 |" in page
    assert "| scispaCy EntityLinker | 2.95 | 0.02 | 0.35 | 0.05 | 640 | 700 | 200 |" in page
    assert "| torch, transformers | 1.23 | 301 |" in page
    # own part = the system's figure minus the floor's; the last row compares the own parts
    assert "| sapbert_linker, defaults: own part (minus the floor) | 0.95 | 0.25 | 310.2 | 0.3 |" in page
    assert "| scispaCy EntityLinker: own part (minus the floor) | 0.95 | 0.25 | 140.0 | 0.4 |" in page
    assert "| own parts, ours / scispaCy's | 1.0 | 1.0 | 2.22 | 0.75 |" in page


def test_pretrain_public_results(bench):
    load, rendered, results = bench
    pretrain_public = load("pretrain_public")
    rows = {"char-3gram tf-idf": {"dev": _scores(0.727), "test": _scores(0.664), "test_abbr": _scores(0.73)},
            "MiniLM base, mean": {"dev": _scores(0.788), "test": _scores(0.686)}}
    report = {"machine": "x86_64, 2 CPUs", "finetune": {"steps": 1017, "dev": _scores(0.834)}, "peak_rss_mb": 2400}
    pretrain_public.write_report_results(report, rows, Path("benchmarks/output/pretrain_public"))
    pretrain_public.write_report_results(report, rows, Path("benchmarks/output/q_lr1e4"))
    assert sorted(p.name for p in results.iterdir()) == ["pretrain_public.json", "pretrain_public_q_lr1e4.json"]
    page = rendered()
    assert "| char-3gram tf-idf | 72.7 | 82.7 | 73.7 | 83.7 | 66.4 | 76.4 | 67.4 | 77.4 | 73.0 | 83.0 |" in page
    assert "| MiniLM base, mean | 78.8 | 88.8 | 79.8 | 89.8 | 68.6 | 78.6 | 69.6 | 79.6 | – | – |" in page
    assert "finetune = {\"steps\": 1017}" in page and "peak_rss_mb = 2,400" in page


def test_evaluate_ncbi_summary_rows(bench):
    load, rendered, results = bench
    evaluate_ncbi = load("evaluate_ncbi")
    full = {"n": 945, "strict": {"acc@1": 0.696, "acc@5": 0.786}, "lenient": {"acc@1": 0.706, "acc@5": 0.761}}
    sub = {"strict": {"acc@1": 0.424}}
    result = {"counts": {"subsets": {"filtered": 231, "filtered_lev0.2": 154}},
              "results": {"mention_only": {"base MiniLM [CLS]": {"full": full, "filtered": sub, "filtered_lev0.2": None},
                                           "scispaCy EntityLinker": {"full": {**full, "lenient": None}}}}}
    rows = evaluate_ncbi.summary_rows({"reference": result})
    assert rows[0] == ["reference", "base MiniLM [CLS]", 945, 69.6, 78.6, 70.6, 76.1, "42.4 (231)", None, "69.6 / 78.5 / –"]
    assert rows[1][5:7] == [None, None] and rows[1][-1] == ""


def test_scale_diagnose_ground_truth_and_miss_classes(bench):
    import numpy

    from spacy_sapbert.kb import Concept, KnowledgeBase

    load, _, _ = bench
    sd = load("scale_diagnose")
    kb = KnowledgeBase.from_concepts([Concept("A", "alpha"), Concept("B", "beta"), Concept("C", "gamma")])
    a, b, c = (kb.row_of_name(n) for n in ("alpha", "beta", "gamma"))
    X = numpy.zeros((3, 3), dtype=numpy.float32)
    X[a] = [1, 0, 0]
    X[b] = [0.9995, 0.0316, 0]  # within 1e-3 of alpha for the query below: a tie
    X[c] = [0, 0, 1]
    X /= numpy.linalg.norm(X, axis=1, keepdims=True)
    Q = numpy.array([[1, 0, 0]] * 3, dtype=numpy.float32)
    rows, scores = sd.exact_rows(X, Q, 3, chunk=2)  # chunked: the merge across chunks is exercised
    assert rows[0].tolist() == [a, b, c] and scores[0, 0] == pytest.approx(1.0)
    gt = [sd.concepts_of(kb, rows[i], scores[i], 5) for i in range(3)]
    assert gt[0] == ["A", "B", "C"]

    class Fake:  # an index whose first-round rows per query are set by hand
        def __init__(self, found):
            self.kb, self.found = kb, found

        def __len__(self):
            return 3

        def search_names(self, q, depth):
            return numpy.array(self.found[: len(q)]), None

    results = [[("B", 0.99)], [("C", 0.0)], [("C", 0.0)]]
    found = [[b, c, -1], [c, b, -1], [a, c, -1]]  # the top row (alpha) found only for the last query
    out = sd.diagnose(Fake(found), kb, Q, results, rows, scores, gt, X)
    assert out == {"miss_tie": pytest.approx(1 / 3, abs=1e-4), "miss_graph": pytest.approx(1 / 3, abs=1e-4),
                   "miss_other": pytest.approx(1 / 3, abs=1e-4), "top_row_found": pytest.approx(1 / 3, abs=1e-4)}
    assert sd.recall([[("A", 1.0), ("B", 0.9)]] * 3, gt) == {"recall1": 1.0, "recall5": round(2 / 3, 4)}


def test_long_number_lists_are_shortened_on_the_page(bench):
    load, rendered, results = bench
    io = load("results_io")
    io.write_results("spectrum_demo", {"t": io.table(["a"], [[1]])}, results_dir=results,
                     figures={"spectrum": {"eigenvalues": [0.5] * 300, "dims_90": 40}, "grid": [[0.1, "x"]] * 70})
    page = rendered()
    assert '"eigenvalues": "[300 numbers]", "dims_90": 40' in page and '[0.1, "x"]' in page
    assert len(json.loads((results / "spectrum_demo.json").read_text())["figures"]["spectrum"]["eigenvalues"]) == 300


def test_umls_scale_sweep_table_from_the_log_of_a_run_cut_by_a_time_limit(bench, tmp_path):
    """A sweep stopped by ``timeout`` wrote no results; its printed points become the table, with a note."""
    load, _, results = bench
    sweep = load("umls_scale_sweep")
    point = {"index": "compact", "ef": 256, "rescore": 64, "connectivity": 48, "qps_b256": 237.7, "qps_b1": 104.1,
             "recall1": 0.992, "recall5": 0.9253, "miss_tie": 0.0, "miss_graph": 0.008, "miss_other": 0.0,
             "top_row_found": 0.991}
    log = tmp_path / "sweep.log"
    log.write_text("\n".join([
        "command: python umls_scale_sweep.py --names 1000 --dim 8",
        "prepared 1,000 x 8 (spectrum): {'n_names': 1000, 'dim': 8, 'geometry': 'spectrum'}",
        "built compact M=48 dims=4: {'build_s': 3.5, 'build_peak_mb': 90.0, 'index_mb': 1.2}",
        json.dumps(point), json.dumps(dict(point, ef=384, recall5=0.95)),
        "rc=124"]) + "\n")
    sweep.from_log(log, "cut_n1000_d8_spectrum", ["a note"])
    data = json.loads((results / "umls_scale_sweep.json").read_text())
    rows = data["tables"]["cut_n1000_d8_spectrum"]["rows"]
    assert [r[:5] + r[7:9] for r in rows] == [["compact, PCA 4-d candidates", 48, 256, 64, 3.5, 0.992, 0.9253],
                                              ["compact, PCA 4-d candidates", 48, 384, 64, 3.5, 0.992, 0.95]]
    notes = [n for n in data["notes"] if n.startswith("cut_n1000_d8_spectrum")]
    assert any("stopped by its time limit (2 points measured)" in n for n in notes)
    assert any("command: python umls_scale_sweep.py --names 1000 --dim 8" in n for n in notes)
    assert data["figures"]["cut_n1000_d8_spectrum"]["M48_pca4"]["build"]["build_s"] == 3.5
    empty = tmp_path / "empty.log"
    empty.write_text("prepared 1,000 x 8 (spectrum): {'n_names': 1000}\n")
    with pytest.raises(SystemExit, match="no measured points"):
        sweep.from_log(empty, "other_n1000_d8_spectrum", [])


def test_hybrid_unseen_tables_from_its_parts(bench, tmp_path):
    load, rendered, results = bench
    hybrid = load("hybrid_unseen")
    parts = tmp_path / "parts"
    parts.mkdir()
    for corpus, name in (("ncbi", "NCBI-disease test"), ("bc5cdr", "BC5CDR-disease dev")):
        for (lo, hi), train_acc in (((2, 3), 0.71), ((3, 3), 0.73)):
            rows = [["name-only (dense, w = 0)", 60.0, 90.0, 70.0, 40.0, 50.0, 60.0, 80.0, 90.0, 95.0],
                    [f"sparse only (char_wb {lo}-{hi})", 55.0, 95.0, 60.0, 35.0, 45.0, 55.0, 75.0, 85.0, 92.0],
                    ["hybrid (w = 0.5, tuned on train)", 66.0 + hi, 96.0, 72.0, 49.0, 58.0, 66.0, 85.0, 94.0, 97.0]]
            (parts / f"{corpus}_{lo}_{hi}.json").write_text(json.dumps({
                "corpus": name, "ngram_range": [lo, hi], "weight": 0.5, "train_acc@1": train_acc, "train_grid": [],
                "rows": rows, "mentions": 100, "train_mentions": 500, "classes": {"dictionary": 40, "train": 20,
                                                                                  "neither": 40},
                "unseen_in_train": 70, "n_features": 1000 * hi}))
    hybrid.main(["--parts-dir", str(parts), "--command", "python benchmarks/hybrid_unseen.py"])
    doc = json.loads((results / "hybrid_unseen.json").read_text())
    assert doc["figures"]["ngram_range"] == [3, 3]  # the better NCBI train accuracy picks the range
    ncbi = doc["tables"]["NCBI-disease test (MEDIC, base MiniLM, strict, %)"]
    assert ncbi["rows"][2][1] == 69.0 and ncbi["rows"][1][0] == "sparse only (char_wb 3-3)"
    assert "recall@64" in ncbi["columns"] and "neither (refined)" in ncbi["columns"]
    assert "hybrid (w = 0.5, tuned on train)" in rendered()


BENCH = ROOT / "benchmarks"
SHARED_MODULES = {"common.py", "results_io.py", "scale_data.py", "scale_diagnose.py"}
README_ROW = re.compile(r"^\| \[`(?P<script>[\w/]+\.py)`\]\((?P=script)\) \| (?P<purpose>.+?) \| (?P<results>.+?) \| "
                        r"(?P<pages>.+?) \|$")
LINK = re.compile(r"\[[^\]]*\]\(([^)]+)\)")


def readme_rows(text: str) -> dict:
    """``benchmarks/README.md``'s table rows by script: purpose, section, results names (linked files and names
    marked "no run committed") and the pages it links."""
    rows, section = {}, ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:]
        match = README_ROW.match(line)
        if match:
            results = [Path(target).stem for target in LINK.findall(match["results"])]
            results += re.findall(r"`(\w+)` \(no run committed\)", match["results"])
            rows[match["script"]] = {"purpose": match["purpose"], "section": section, "results": results,
                                     "pages": LINK.findall(match["pages"])}
    return rows


def docstring_purpose(path: Path) -> str:
    """The first line of a script's module docstring, which must stand alone (a blank line after it)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf8"))) or ""
    first, _, rest = doc.partition("\n")
    assert first.endswith(".") and (not rest or rest.startswith("\n")), f"{path}: no one-line purpose first"
    return first.replace("``", "`")


def test_readme_lists_every_benchmark_with_its_purpose_results_and_pages():
    rows = readme_rows((BENCH / "README.md").read_text(encoding="utf8"))
    scripts = {p.relative_to(BENCH).as_posix() for p in [*BENCH.glob("*.py"), *BENCH.glob("studies/*.py")]}
    assert set(rows) == scripts - SHARED_MODULES
    for script, row in rows.items():
        assert row["section"].startswith("Studies") == script.startswith("studies/"), script
        assert row["purpose"] == docstring_purpose(BENCH / script), script
        assert row["pages"], script
        for target in row["pages"]:
            page = (BENCH / target).resolve()
            text = page.read_text(encoding="utf8")  # the page exists ...
            stem = Path(script).stem  # ... and names the benchmark, by its results or its script
            assert any(re.search(rf"\b{name}\b", text) for name in [stem, *row["results"]]), (script, target)
        if not script.startswith("studies/"):  # a maintained benchmark feeds a page of its own, not only history
            assert any(not target.endswith("history.md") for target in row["pages"]), script
    for module in SHARED_MODULES:
        assert f"- [`{module}`]({module}): {docstring_purpose(BENCH / module)}" in (BENCH / "README.md").read_text()
    named = [name for row in rows.values() for name in row["results"]]
    assert len(named) == len(set(named)), "a results file listed twice"
    committed = {p.stem for p in (BENCH / "results").glob("*.json")}
    assert committed <= set(named), f"results files no script lists: {sorted(committed - set(named))}"


def test_readme_parser_sees_a_missing_script_and_a_stale_purpose():
    """The check above can fail: a row whose script or purpose is off is seen."""
    row = ("| [`kb_build.py`](kb_build.py) | Something else. | [`kb_build`](results/kb_build.json) | "
           "[knowledge-bases](../docs/knowledge-bases.md) |")
    rows = readme_rows("## Maintained benchmarks\n" + row + "\n| [`gone.py`](gone.py) | x. | none | [a](b.md) |\n")
    assert rows["kb_build.py"]["results"] == ["kb_build"] and rows["kb_build.py"]["pages"] == [
        "../docs/knowledge-bases.md"]
    assert rows["kb_build.py"]["purpose"] != docstring_purpose(BENCH / "kb_build.py")
    assert not (BENCH / "gone.py").exists() and "gone.py" in rows


def test_benchmark_scripts_named_in_the_docs_exist():
    """Every ``benchmarks/....py`` a page names exists (the history keeps the paths of what it records; the
    generated part of the benchmarks page, the commands recorded in the results files)."""
    pages = [ROOT / "README.md", BENCH / "README.md", *(ROOT / "docs").glob("*.md")]
    missing = []
    for page in pages:
        if page.name == "history.md":
            continue
        text = page.read_text(encoding="utf8")
        if page.name == "benchmarks.md" and page.parent.name == "docs":
            text = text.split("<!-- BEGIN GENERATED BENCHMARK TABLES")[0]
        missing += [f"{page.name}: {m}" for m in re.findall(r"benchmarks/[\w/]+\.py", text) if not (ROOT / m).is_file()]
    assert not missing, missing


def test_recorded_commands_name_no_machine_folder(bench_scripts, monkeypatch, tmp_path):
    """A results file records the command with placeholders for machine paths (WORK, CACHE, LEAN/bin/python, PATH)."""
    results_io = bench_scripts.results_io
    script = str(Path(results_io.__file__).parent / "link_ncbi.py")
    monkeypatch.setattr("sys.argv", [script, "--work", str(tmp_path / "w"), "--reuse-work", "--lean-python",
                                     "/opt/lean/bin/python", "--use", f"ncbi={tmp_path}/model", "--passes", "3"])
    path = results_io.write_results("cmd_check", {"t": results_io.table(["a"], [[1]])})
    command = json.loads(path.read_text(encoding="utf8"))["command"]
    assert command == ("python benchmarks/link_ncbi.py --work WORK --reuse-work --lean-python LEAN/bin/python "
                       "--use ncbi=PATH --passes 3")


def test_committed_results_name_no_machine_folder():
    """No results file in the repository records a machine's folder in its command."""
    for path in sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "results").glob("*.json")):
        command = json.loads(path.read_text(encoding="utf8")).get("command", "")
        assert not re.search(r"(^|[\s=])/(work|root|tmp|home)/", command), (path.name, command)


# the benchmarks that built their recorded command by hand before results_io.portable_command
PORTABLE_SCRIPTS = ("calibration", "int8_name", "integrity_cost", "hpo_crosslingual", "context_finetuned")


@pytest.mark.parametrize("name", PORTABLE_SCRIPTS)
def test_benchmarks_record_their_command_through_portable_command(name):
    """No ``write_results(command=...)`` of these scripts spells ``python benchmarks/...`` itself (an f-string or a
    literal): the command is written by results_io (placeholders for machine folders, every flag as given)."""
    tree = ast.parse((ROOT / "benchmarks" / f"{name}.py").read_text(encoding="utf8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and getattr(node.func, "id", getattr(node.func, "attr", None)) == "write_results"]
    assert calls, name
    for call in calls:
        for kw in (k for k in call.keywords if k.arg == "command"):
            hand_built = [n for n in ast.walk(kw.value) if isinstance(n, ast.JoinedStr)
                          or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "python" in n.value)]
            assert not hand_built, (name, ast.unparse(kw.value))


def test_context_finetuned_command_line_is_portable(bench_scripts, monkeypatch, tmp_path):
    """Its command leaves out the --note texts, keeps an empty value pasteable and names no machine folder."""
    context_finetuned = bench_scripts.load("context_finetuned")
    script = str(ROOT / "benchmarks" / "context_finetuned.py")
    monkeypatch.setattr("sys.argv", [script, "--work", str(tmp_path / "w"), "--variants", "", "--note", "quiet run",
                                     "--name-model", f"{tmp_path}/model", "--quantize"])
    assert context_finetuned.command_line() == ("python benchmarks/context_finetuned.py --work WORK --variants '' "
                                                "--name-model PATH --quantize")


@pytest.mark.parametrize("threads", ["1", None])
def test_hpo_crosslingual_records_its_threads_and_portable_command(bench_scripts, monkeypatch, threads):
    """OMP_NUM_THREADS (the torch threads the script sets) is recorded only when the run had it."""
    hpo = bench_scripts.load("hpo_crosslingual")
    if threads is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
    argv = [str(ROOT / "benchmarks" / "hpo_crosslingual.py"), "--train-minutes", "40", "--epochs", "2"]
    prefix = f"OMP_NUM_THREADS={threads} " if threads else ""
    assert hpo.recorded_command(argv) == prefix + "python benchmarks/hpo_crosslingual.py --train-minutes 40 --epochs 2"


def test_portable_command_quotes_only_when_asked(bench_scripts):
    results_io = bench_scripts.results_io
    argv = [str(ROOT / "benchmarks" / "x.py"), "--variants", "", "--note", "a b", "--cache", "/c/d"]
    assert results_io.portable_command(argv) == "python benchmarks/x.py --variants  --note a b --cache CACHE"
    assert results_io.portable_command(argv, quote=True) == ("python benchmarks/x.py --variants '' --note 'a b' "
                                                             "--cache CACHE")


def test_results_record_the_host_cpu_and_its_matmul_speed(bench_scripts):
    """Hosts sold as one CPU name ("AMD EPYC") differ by 2x in vector throughput: every results file records the
    CPU's family / model / clock where /proc/cpuinfo gives them and a float32 matmul's GFLOP/s, and the page shows
    both beside the machine."""
    machine = bench_scripts.results_io.machine_description()
    assert machine["matmul_gflops_at_write"] > 0
    if Path("/proc/cpuinfo").exists():
        assert {"cpu family", "model"} <= set(machine["cpu_id"])
    line = bench_scripts.render.describe_machine(
        {"cpu": "AMD EPYC", "cpu_id": {"cpu family": "23", "model": "1", "stepping": "2", "cpu MHz": "1996.249"},
         "cores": 2, "matmul_gflops_at_write": 65.5, "load_avg_1min_at_write": 1.0})
    assert line == ("AMD EPYC (family 23, model 1, stepping 2, 1996 MHz), 2 cores, load average 1.0 when written, "
                    "float32 matmul 65.5 GFLOP/s when written")
    # results written before the stamp render as they did
    assert bench_scripts.render.describe_machine({"cpu": "AMD EPYC", "cores": 2}) == "AMD EPYC, 2 cores"
