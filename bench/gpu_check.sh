#!/usr/bin/env bash
# Throughput check on a CUDA machine, in under 5 minutes (see bench/gpu_check.py): ResNet-50 and ViT-B/32,
# random init, model alone at fp32 / bf16 / bf16 compiled, and the predict loop end to end with the device
# resize over synthetic ImageNet-sized JPEGs, GPU utilisation, projected ImageNet val time.
# Needs the project installed (make test did it); writes results/bench/gpu.json.
# `bench/gpu_check.sh --cpu-smoke` runs it on the CPU with tiny settings (to check the script, not the speed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
if [[ " $* " != *" --cpu-smoke "* ]]; then
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device')"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" timeout 290 "$PY" bench/gpu_check.py "$@"
