"""How closely a re-ranker's int8 ONNX graph scores like its PyTorch model, for two quantization recipes.

ONNX Runtime's default dynamic quantization (one scale per weight tensor) and this package's
(:data:`spacy_sapbert.rerank.model.INT8_OPTIONS`: per-channel scales, 7-bit weights). Pairs: the first
``--groups`` training groups of a re-ranker run folder, each cut to its first ``--group-size`` names (the gold name and
the bi-encoder's best others: the linker scores a mention's top ``reranker_k`` as one batch; 0: whole groups).

    python benchmarks/reranker_int8.py RUN_FOLDER [--groups 150] [--group-size 4]

RUN_FOLDER holds ``examples.jsonl`` and ``model/`` (``train-reranker``'s output).
"""
from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path
from typing import Any, List

import common  # noqa: F401  (this checkout's package first on sys.path)
from results_io import table, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--groups", type=int, default=150)
    parser.add_argument("--group-size", type=int, default=0,
                        help="names per group scored (its first ones; 0: all): the linker's reranker_k")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    import numpy
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from spacy_sapbert.rerank.model import INT8_OPTIONS, CrossEncoder, group_batches, pair_inputs

    torch.set_num_threads(2)
    logging.disable(logging.WARNING)
    lines = (args.run / "examples.jsonl").read_text(encoding="utf8").splitlines()[: args.groups]
    groups = [json.loads(line) for line in lines]
    groups = [{**g, "n": g["n"][: args.group_size or None]} for g in groups]
    mentions = [g["m"] for g in groups for _ in g["n"]]
    names = [n for g in groups for n in g["n"]]
    model = CrossEncoder.from_disk(args.run / "model")
    exact = model.score(mentions, names)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, options in (("one scale per tensor (ONNX Runtime's default)", {}),
                               ("per channel, 7-bit weights (this package)", INT8_OPTIONS)):
            path = Path(tmp) / "int8.onnx"
            quantize_dynamic(str(args.run / "model" / "model.onnx"), str(path), weight_type=QuantType.QInt8, **options)
            session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

            def run(m: List[str], n: List[str]) -> Any:
                feed = pair_inputs(model.tokenizer, m, n, model.max_length, model.inputs, "np")
                return session.run(None, {k: numpy.asarray(v, dtype=numpy.int64) for k, v in feed.items()})[0]

            # one batch per mention, as the linker scores (since 2026-11-29; sorted across mentions before)
            quick = numpy.concatenate(group_batches([(g["m"], g["n"]) for g in groups], 64, run))
            at, same = 0, 0
            for g in groups:
                n = len(g["n"])
                same += int(exact[at: at + n].argmax() == quick[at: at + n].argmax())
                at += n
            rows.append([label, len(mentions), round(float(numpy.corrcoef(exact, quick)[0, 1]), 4),
                         round(float(numpy.abs(exact - quick).max()), 3), round(float(exact.std()), 3),
                         round(100 * same / len(groups), 1)])
            print(rows[-1])
    if not args.no_write:
        write_results("reranker_int8", {"int8 re-ranker against its PyTorch model": table(
            ["quantization", "pairs", "correlation", "largest logit error", "logits' spread (std)",
             "groups with the same top name %"], rows)},
            notes=[f"re-ranker {args.run.name}: its first {len(groups)} training groups (NCBI-disease train)"
                   + (f", each cut to its first {args.group_size} names" if args.group_size else "")
                   + "; the int8 graphs score each group's pairs as one batch, as the linker does (activations are "
                   "quantized per batch)"])


if __name__ == "__main__":
    main()
