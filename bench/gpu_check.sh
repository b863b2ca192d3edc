#!/usr/bin/env bash
# Throughput check on a CUDA machine, in under 6 minutes (see bench/gpu_check.py): exact device crops against PIL
# (every size class, a tall and a wide image too; the fused Triton passes and the plain ones); the device path alone
# per size class (frequent 500 px sizes, other sizes, large ones up to 2,800 px): crops/s, device operations and
# bytes moved, enqueue and device time per image, plan build time (the plain passes' last); ResNet-50 and ViT-B/32,
# random init, model alone at fp32 / bf16 / compiled and frozen (dynamo reset between settings) with top-1
# agreement; the predict loop end to end with the device resize over synthetic JPEGs of a long-tailed size
# distribution as one shard and as 3, host waits inside a shard, GPU utilisation, projected ImageNet val time. Model alone and end to end run the same shard loop (one host copy per shard, none per batch).
# Needs the project installed (make test did it); writes results/bench/gpu.json after every figure, so a run
# stopped early (GPU_CHECK_SECONDS, default 350) keeps what it measured.
# `bench/gpu_check.sh --cpu-smoke` runs it on the CPU with tiny settings (to check the script, not the speed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
if [[ " $* " != *" --cpu-smoke "* ]]; then
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device')"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" timeout ${GPU_CHECK_SECONDS:-350} "$PY" bench/gpu_check.py "$@"
