"""inference.parts: a prediction job split into part jobs (one GPU each) and merged, end to end."""

import re

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import SMALL_PREDICTIONS, SMALL_TARGETS, run_snakemake, write_small_config
from tests.test_profiles import HAS_SLURM_PLUGIN, SLURM, filled_in, job_blocks
from zoomeval.core.io import read_metadata

pytestmark = pytest.mark.workflow

AGGREGATES = SMALL_PREDICTIONS.replace(".parquet", ".aggregates.parquet")


def parts_config(workdir, parts, **inference):
    config = write_small_config(workdir)
    config["inference"] |= {"parts": parts, **inference}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))


def predict_blocks(output: str) -> list[str]:
    return [b for b in re.split(r"\n(?=\[[^\n]*\]\n)", output) if re.search(r"^rule predict:", b, re.M)]


def test_a_dry_run_shows_one_gpu_job_per_part_and_a_merge(tmp_path):
    parts_config(tmp_path, 3, device="cuda")  # cuda: the jobs claim a GPU even on a machine without one
    proc = run_snakemake(tmp_path, "-n", SMALL_PREDICTIONS, "--resources", "gpu=3", cores=6)
    blocks = predict_blocks(proc.stdout)
    assert sorted(re.search(r"part=(\d+)", b).group(1) for b in blocks) == ["0", "1", "2"], proc.stdout
    for block in blocks:
        assert re.search(r"resources:.*\bgpu=1\b", block) and "threads: 2" in block, block  # 6 cores / 3 parts
        assert re.search(r"output: \S+efficientnet_lite0\.part\d\.parquet", block), block
    merge = job_blocks(proc.stdout)["merge_predictions"]
    assert "gpu=" not in merge and f"output: {SMALL_PREDICTIONS}," in merge, merge
    assert re.search(r"^merge_predictions\s+1$", proc.stdout, re.M) and re.search(r"^predict\s+3$", proc.stdout, re.M)
    if HAS_SLURM_PLUGIN:  # each part is a SLURM job with its own GPU
        profile = filled_in(SLURM, tmp_path / "slurm").parent  # the shipped profile's placeholders are refused
        proc = run_snakemake(tmp_path, "--workflow-profile", str(profile), "-n", SMALL_PREDICTIONS, cores=None)
        for block in predict_blocks(proc.stdout):
            assert re.search(r"resources:.*\bgpu=1\b", block), block


def test_parts_merge_into_the_files_and_tables_of_one_job(tmp_path, small_reference):
    # 12 images in shards of 2: two shards a part. The parts share the 2 cores (one thread each), but the
    # reference ran with 2 torch threads, and float sums depend on the thread count: give the parts 2 too.
    parts_config(tmp_path, 3, threads=2)
    run_snakemake(tmp_path, *SMALL_TARGETS)
    for path in (SMALL_PREDICTIONS, AGGREGATES):
        merged, single = tmp_path / path, small_reference / path
        assert pq.read_table(merged).equals(pq.read_table(single)), path
        meta, expected = read_metadata(merged), read_metadata(single)
        for timing in ("seconds", "crops_per_second"):
            assert meta.pop(timing) > 0 and expected.pop(timing) > 0
        assert meta == expected
    for target in SMALL_TARGETS:
        assert (tmp_path / target).read_bytes() == (small_reference / target).read_bytes(), target
    names = [
        sorted(p.name for p in (root / SMALL_PREDICTIONS).parent.iterdir()) for root in (tmp_path, small_reference)
    ]
    assert names[0] == names[1]  # the part files are gone
    logs = sorted(p.name for p in (tmp_path / "logs/predictions/demo/original").iterdir())
    parts = [f"efficientnet_lite0.part{k}.log" for k in range(3)]
    # each part's log and its progress records (the merge reports no progress)
    assert logs == sorted(["efficientnet_lite0.merge.log", *parts, *(f"{p}.progress.jsonl" for p in parts)])
    assert "4 images" in (tmp_path / "logs/predictions/demo/original/efficientnet_lite0.part2.log").read_text()
