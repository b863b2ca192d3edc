# `make demo` and `make test` do all set-up on a fresh machine with Python 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the machine's cores: each job starts as many torch threads as Snakemake gives it, and no more
CORES ?= $(shell nproc 2>/dev/null || echo 1)

.PHONY: demo test bench clean

# The package with every extra and the dev tools, at the tested versions (constraints.txt).
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) results/table_a8.csv
	cat results/table_a8.md

test: $(STAMP)
	$(BIN)/ruff check src tests workflow/scripts tools bench
	$(BIN)/ruff format --check src tests workflow/scripts tools bench
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/snakemake --lint
	$(BIN)/python -m pytest -q -n auto --dist loadgroup --no-loadscope-reorder --durations=25

clean:
	rm -rf results logs .snakemake

# Throughput of the authors' data path, this project's and the model alone (figures in README); first a short
# run with glibc's default allocator, to compare its user/system time with the model jobs' setting.
bench: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) results/datasets/demo/manifest.parquet
	$(BIN)/python bench/throughput_bench.py --manifest results/datasets/demo/manifest.parquet --out results/bench/cpu_default_allocator.json --model-images 2 --naive-images 1 --allocator default
	$(BIN)/python bench/throughput_bench.py --manifest results/datasets/demo/manifest.parquet --out results/bench/cpu.json --parity-images 12
