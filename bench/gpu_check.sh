#!/usr/bin/env bash
# Throughput check on a CUDA machine, in under 5 minutes: ResNet-50 over 256 demo images x 324 transforms.
# The network is randomly initialised (throughput does not depend on the weights, and the machine may be
# offline). Needs the project installed (make demo or make test did it); writes results/bench/gpu.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device')"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
"$PY" -m snakemake --cores 4 results/datasets/demo/manifest.parquet
timeout 280 "$PY" -m zoomeval.inference.bench --config bench/gpu.yaml --random-init \
    --manifest results/datasets/demo/manifest.parquet --images 256 --model-images 256 --naive-images 2 \
    --out results/bench/gpu.json
