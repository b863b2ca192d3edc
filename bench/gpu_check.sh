#!/usr/bin/env bash
# Throughput check on a CUDA machine, in under 8 minutes (see bench/gpu_check.py): exact device crops against PIL
# (a tall and a wide image too), their device operations, enqueue and device time per image; ResNet-50 and
# ViT-B/32, random init, model alone at fp32 / bf16 / compiled / frozen / CUDA graphs with top-1 agreement; the
# predict loop end to end with the device resize over synthetic ImageNet-sized JPEGs as one shard and as 3, host
# waits inside a shard, GPU utilisation, projected ImageNet val time.
# Needs the project installed (make test did it); writes results/bench/gpu.json.
# `bench/gpu_check.sh --cpu-smoke` runs it on the CPU with tiny settings (to check the script, not the speed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
if [[ " $* " != *" --cpu-smoke "* ]]; then
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device')"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" timeout 470 "$PY" bench/gpu_check.py "$@"
