"""``zoomeval run``: the jobs' progress lines, the progress display read from Snakemake's output and the jobs' logs,
the preflight, and a limited run of a demo study (``--limit``)."""

import io
import logging
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, write_small_config
from test_study import files_and_times

from zoomeval.core.config import InferenceSettings
from zoomeval.core.layout import Layout, run_layout
from zoomeval.core.progress import Progress, ProgressLog, format_eta, parse_line
from zoomeval.datasets.build import first_images
from zoomeval.datasets.inputs import plan_all
from zoomeval.preflight import disk_needs, gpu_without_gpu, missing_weights, short_disk
from zoomeval.registries import load_config
from zoomeval.report.tables import limited
from zoomeval.run.display import Display
from zoomeval.run.launch import RunPlan, limited_target, summary
from zoomeval.run.snakemake_log import SnakemakeLog

# Snakemake 9's console output for a predict job that starts, a standard_eval job that fails and the step count.
SNAKEMAKE_OUTPUT = """\
Job stats:
job              count
-------------  -------
predict              1
standard_eval        1
table_a8             1
total                7

[Tue Dec  1 22:58:52 2026]
localrule predict:
    input: results/datasets/demo/manifest.parquet
    output: results/predictions/demo/original/m.parquet, results/predictions/demo/original/m.aggregates.parquet
    log: {log}
    jobid: 11
    reason: Missing output files: results/predictions/demo/original/m.parquet
    wildcards: dataset=demo, variant=original, model=m
    threads: 2
    resources: tmpdir=/tmp, gpu=0
Select jobs to execute...

[Tue Dec  1 22:58:53 2026]
localrule standard_eval:
    input: results/datasets/demo/manifest.parquet
    output: results/standard/demo/m.parquet
    log: logs/standard/demo/m.log
    jobid: 4
    wildcards: dataset=demo, model=m
[Tue Dec  1 22:59:17 2026]
Error in rule standard_eval:
    message: None
    jobid: 4
    input: results/datasets/demo/manifest.parquet
    output: results/standard/demo/m.parquet
    log: logs/standard/demo/m.log (check log file(s) for error details)
[Tue Dec  1 22:59:18 2026]
Finished jobid: 3 (Rule: generated_dataset)
2 of 7 steps (29%) done
"""


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_progress_line_carries_images_done_of_total_the_rate_and_the_eta(caplog) -> None:
    """500 images of 45 views; 5400 crops in 10 s: 120 images, 540 crops/s, (22500 - 5400) / 540 = 31.7 s left."""
    clock, logger = Clock(), logging.getLogger("test_progress")
    progress = ProgressLog(500, 45, logger, clock)
    with caplog.at_level(logging.INFO, logger="test_progress"):
        progress.line()
        clock.now += 9.0
        progress.advance(4000)  # 9 s: no line yet
        clock.now += 1.0
        progress.advance(1400)
        progress.line("shard 0 computed")
    assert [r.getMessage() for r in caplog.records] == [
        "progress: 0/500 images, 0.0 crops/s, 0.00 images/s, ETA ?",
        "progress: 120/500 images, 540.0 crops/s, 12.00 images/s, ETA 0:00:32",
        "progress: 120/500 images, 540.0 crops/s, 12.00 images/s, ETA 0:00:32 (shard 0 computed)",
    ]
    parsed = parse_line("2026-12-01 23:05:46,689 INFO zoomeval.inference.predict: " + caplog.records[2].getMessage())
    assert parsed == Progress(120, 500, 540.0, 32.0)
    assert parse_line("2026-12-01 INFO x: 5400/22500 crops, 540.0 crops/s") is None  # the old form
    assert format_eta(3725.2) == "1:02:06"


def test_the_snakemake_log_gives_the_running_jobs_their_logs_the_failed_and_the_step_count() -> None:
    state = SnakemakeLog()
    for line in SNAKEMAKE_OUTPUT.format(log="logs/predictions/demo/original/m.log").splitlines():
        state.feed(line)
    assert list(state.running) == [11]
    assert state.running[11].label == "predict demo/original/m"
    assert state.running[11].logs == ["logs/predictions/demo/original/m.log"]
    assert [job.label for job in state.failed] == ["standard_eval demo/m"]
    assert (state.done, state.total) == (2, 7)
    state.feed("Finished jobid: 11 (Rule: predict)")
    assert state.running == {}


def test_the_display_shows_a_bar_with_the_eta_for_a_running_predict_job(tmp_path: Path) -> None:
    """The bar reads the job's log, named in Snakemake's output; it goes when the job finishes."""
    log = tmp_path / "m.log"
    log.write_text("2026-12-01 23:05:36,573 INFO zoomeval.inference.predict: progress: 0/500 images, 0.0 crops/s, "
                   "0.00 images/s, ETA ?\n2026-12-01 23:05:46,689 INFO zoomeval.inference.predict: progress: 120/500 "
                   "images, 540.0 crops/s, 12.00 images/s, ETA 0:00:32\n")  # fmt: skip
    state, screen = SnakemakeLog(), io.StringIO()
    for line in SNAKEMAKE_OUTPUT.format(log=log).splitlines():
        state.feed(line)
    display = Display(screen)
    display.update(state)
    rendered = screen.getvalue()
    assert "predict demo/original/m:  24%|" in rendered
    assert "| 120/500 images, 540.0 crops/s, ETA 0:00:32" in rendered
    assert "zoomeval run: 2/7 jobs done" in rendered
    state.feed("Finished jobid: 11 (Rule: predict)")
    display.update(state)
    assert display.bars == {}
    display.close()


def test_the_limit_takes_the_first_images_and_its_own_roots_and_titles() -> None:
    assert first_images([1, 2, 3, 4], 2) == [1, 2] and first_images([1, 2, 3], None) == [1, 2, 3]
    assert (run_layout(None).root, run_layout(None).logs) == ("results", "logs")
    limited_run = run_layout(2)
    assert (limited_run.root, limited_run.logs) == ("results/limit-2", "logs/limit-2")  # not results/logs
    assert limited_run.log("table", table="table_a8") == "logs/limit-2/tables/table_a8.log"
    assert limited("Table 1", None) == "Table 1"
    assert limited("Table 1", 2).startswith("Table 1 [LIMITED RUN: the first 2 images of each dataset")
    assert limited_target("results/table_1.csv", "results/limit-2") == "results/limit-2/table_1.csv"
    assert limited_target("results/limit-2/table_1.csv", "results/limit-2") == "results/limit-2/table_1.csv"
    assert limited_target("results/table_1.csv", "results") == "results/table_1.csv"
    plan = RunPlan(("results/limit-2/table_a8.csv",), limited_run, 2, 4, 1)
    assert plan.argv()[1:] == ["-m", "snakemake", "results/limit-2/table_a8.csv", "--cores", "4", "--resources",
                               "gpu=1", "--config", "limit=2"]  # fmt: skip


def test_the_preflight_refuses_gpu_settings_without_a_gpu_and_a_short_disk(tmp_path: Path) -> None:
    class Settings:
        inference = InferenceSettings(device="auto", precision="bf16")

    assert [line.split(":")[0] for line in gpu_without_gpu(Settings, 0)] == ["inference.precision"]  # type: ignore[arg-type]
    assert list(gpu_without_gpu(Settings, 1)) == []  # type: ignore[arg-type]
    needs = {str(tmp_path / "resources"): 2_000_000_000, str(tmp_path / "results"): 500_000_000}
    [line] = short_disk(needs, free=lambda path: 1_000_000_000)
    assert line.endswith(f"need about 2.5 GB (extracted archives, predictions) but {tmp_path} has 1.0 GB free")
    assert list(short_disk(needs, free=lambda path: 3_000_000_000)) == []


def test_weights_that_no_offline_route_holds_from_a_host_that_does_not_answer_are_named(tmp_path, monkeypatch) -> None:
    """A torchvision model: named while neither its weights folder nor torch's hub cache holds the file and the
    host does not answer; not named when the host answers (asked once) or the cache holds the file."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw.update(resources=str(tmp_path / "res"), models={"r18": {"source": "torchvision", "architecture": "resnet18",
                                                                "weights": "IMAGENET1K_V1"}})  # fmt: skip
    config = load_config(raw, check_paths=False)
    assert list(missing_weights(config, reach=lambda host: False)) == [
        f"models.r18: its weights are not in {tmp_path}/res/weights/torchvision/resnet18.IMAGENET1K_V1 nor in an "
        "offline cache, and download.pytorch.org cannot be reached; see docs/how-to/offline.md"
    ]
    asked: list[str] = []
    assert list(missing_weights(config, reach=lambda host: asked.append(host) or True)) == []
    assert asked == ["download.pytorch.org"]
    cached = tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    cached.parent.mkdir(parents=True)
    cached.touch()
    assert list(missing_weights(config, reach=lambda host: False)) == []


def test_the_disk_needed_is_the_archives_not_yet_extracted_and_the_predictions_not_yet_written(tmp_path) -> None:
    """Two archives (their sizes) under resources; 2 images x 9 anchors x 3 scales x 32 bytes for the one
    prediction file under the results root; nothing for an extracted archive or a written prediction file."""
    for name in ("val.tar", "bbox.tgz"):
        (tmp_path / "member").write_bytes(b"x" * 3000)
        with tarfile.open(tmp_path / name, "w:gz" if name.endswith("gz") else "w") as tar:
            tar.add(tmp_path / "member", arcname="member")
    raw = yaml.safe_load((ROOT / "config" / "imagenet_val.yaml").read_text())
    raw["datasets"]["imagenet"].update(images=str(tmp_path / "val.tar"), annotations=str(tmp_path / "bbox.tgz"))
    raw.update(scales=[64, 224, 256], limit=2, resources=str(tmp_path / "res"))
    config = load_config(raw, check_paths=False)
    inputs, results = plan_all(config), str(tmp_path / "results")
    archives = (tmp_path / "val.tar").stat().st_size + (tmp_path / "bbox.tgz").stat().st_size
    layout = Layout(results)
    assert disk_needs(config, inputs, layout) == {str(tmp_path / "res"): archives, results: 2 * 9 * 3 * 32}
    Path(str(inputs["imagenet", "images"].extracted)).mkdir(parents=True)
    (tmp_path / "results" / "predictions" / "imagenet" / "original").mkdir(parents=True)
    (tmp_path / "results" / "predictions" / "imagenet" / "original" / "resnet50.parquet").touch()
    assert disk_needs(config, inputs, layout) == {str(tmp_path / "res"): (tmp_path / "bbox.tgz").stat().st_size,
                                                  results: 0}  # fmt: skip


def zoomeval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zoomeval", *args], capture_output=True, text=True, cwd=cwd)


def test_one_run_names_two_missing_data_files_and_a_missing_weight(tmp_path: Path) -> None:
    """The preflight lists all three (Snakemake would stop at the first) and runs nothing."""
    assert zoomeval("init", "study", "--preset", "imagenet-val", cwd=tmp_path).returncode == 0
    config_path = tmp_path / "study" / "config" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["datasets"]["imagenet"].update(images=str(tmp_path / "val.tar"), annotations=str(tmp_path / "bbox.tgz"),
                                          label_sets=["in"])  # fmt: skip
    config["models"] = {"mine": {"source": "checkpoint", "architecture": "resnet50", "weights": "ab" * 32,
                                 "checkpoint": str(tmp_path / "mine.pth")}}  # fmt: skip
    config_path.write_text(yaml.safe_dump(config))
    proc = zoomeval("run", "study", "--limit", "2", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"zoomeval run: datasets.imagenet.images: '{tmp_path}/val.tar' does not exist; download it and point the key "
        "at it, or give a url",
        f"zoomeval run: datasets.imagenet.annotations: '{tmp_path}/bbox.tgz' does not exist; download it and point "
        "the key at it, or give a url",
        f"zoomeval run: models.mine.checkpoint: '{tmp_path}/mine.pth' does not exist; download it and point the key "
        "at it, or give a url",
        "zoomeval run: 3 problem(s) found before starting; nothing was run",
    ]
    assert not (tmp_path / "study" / "logs").exists()


def test_a_bad_limit_or_directory_is_one_line_and_status_2(tmp_path: Path) -> None:
    proc = zoomeval("run", str(tmp_path), "--limit", "0", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "zoomeval run: --limit: 0 is no number of images; give N >= 1\n")
    proc = zoomeval("run", str(tmp_path / "nosuch"), cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, f"zoomeval run: {tmp_path}/nosuch is no directory: give a study "
                                                 "directory (zoomeval init)\n")  # fmt: skip


@pytest.mark.parametrize("where", ["config/config.yaml", "profiles/default/config.yaml"])
def test_a_templated_config_or_profile_is_refused_before_snakemake_renders_it(tmp_path: Path, where: str) -> None:
    """Snakemake runs a ``__use_yte__`` file's ?-expressions (here: one that creates a marker file) when it loads
    it, the workflow profile before any workflow code: ``zoomeval run`` refuses the file first and starts nothing."""
    assert zoomeval("init", "study", "--preset", "demo", cwd=tmp_path).returncode == 0
    study, marker = tmp_path / "study", tmp_path / "marker"
    expression = f"?open({str(marker)!r}, 'w').close() or 1"
    if where == "config/config.yaml":
        (study / where).write_text((study / where).read_text() + f"__use_yte__: true\nmarker: {expression}\n")
    else:  # the study's own profile in place of the link to the checkout's
        (study / "profiles" / "default").unlink()
        (study / "profiles" / "default").mkdir()
        (study / where).write_text(f"__use_yte__: true\ncores: {expression}\n")
    proc = zoomeval("run", "study", "--limit", "2", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"zoomeval run: {where}: line ") and "__use_yte__ asks Snakemake" in proc.stderr
    assert not marker.exists() and not (study / "logs").exists()


@pytest.mark.workflow
def test_a_limited_run_of_a_demo_study_prints_its_table_a8_and_leaves_the_full_results_alone(tmp_path: Path) -> None:
    """``zoomeval run --limit 2`` in a demo study (the small demo: three scales) with a full results tree already
    there: exit 0, Table A8 of two images titled as limited, and nothing outside results/limit-2 and logs/limit-2
    written."""
    assert zoomeval("init", "study", "--preset", "demo", cwd=tmp_path).returncode == 0
    study = tmp_path / "study"
    (study / "config" / "config.yaml").write_text(yaml.safe_dump(write_small_config(tmp_path / "small")))
    for path in ("results/table_a8.csv", "results/datasets/demo/manifest.parquet", "logs/tables/table_a8.log"):
        (study / path).parent.mkdir(parents=True, exist_ok=True)
        (study / path).write_text(f"the full run's {path}\n")
    before = {name: files_and_times(study / name) for name in ("results", "logs")}
    proc = zoomeval("run", "--limit", "2", cwd=study)
    assert proc.returncode == 0, proc.stderr[-3000:]
    title = ("# Table A8: maximum possible top-1 accuracy (%) on original images [LIMITED RUN: the first 2 images of "
             "each dataset only (config limit), not a result]")  # fmt: skip
    assert proc.stdout.startswith(title + "\n")
    [row] = [line for line in proc.stdout.splitlines() if line.startswith("| efficientnet_lite0 ")]
    assert row.split(" | ")[1:4] == ["original", "demo", "2"]
    assert "Table A8: results/limit-2/table_a8.md and results/limit-2/table_a8.csv" in proc.stdout
    assert "jobs done" in proc.stderr
    for name, files in before.items():
        after = {k: v for k, v in files_and_times(study / name).items() if not k.startswith("limit-2/")}
        assert after == files, name
    assert (study / "results" / "limit-2" / "table_a8.csv").is_file()
    assert (study / "logs" / "limit-2" / "tables" / "table_a8.log").is_file()
    # the notebook reader takes the limited tree as its results root, and the full run's tree does not list it
    from zoomeval import Study

    limited_study = Study(study, results="results/limit-2")
    assert limited_study.tables() == ["table_a8"]
    assert limited_study.table("table_a8")["n_images"].to_list() == [2]
    assert limited_study.runs().rows() == [("demo", "original", "efficientnet_lite0")]
    assert Study(study).runs().is_empty()


def test_the_summary_names_a_failed_job_and_its_log_and_prints_no_older_table(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("results/limit-2").mkdir(parents=True)
    Path("results/limit-2/table_a8.md").write_text("# an older run's Table A8\n")
    state = SnakemakeLog()
    for line in SNAKEMAKE_OUTPUT.format(log="logs/predictions/demo/original/m.log").splitlines():
        state.feed(line)
    plan = RunPlan(("results/limit-2/table_a8.csv",), run_layout(2), 2, 2, 0)
    assert summary(plan, state, 1) == [
        "failed: standard_eval demo/m: logs/standard/demo/m.log",
        "browser: not built (target `all` builds it)",
        "report: snakemake --report results/limit-2/report.html --config limit=2 (once `all` is built)",
        "logs: logs/limit-2/ (Snakemake's own output: logs/limit-2/zoomeval-run.log)",
    ]
    assert summary(plan, state, 0)[0] == "# an older run's Table A8\n"  # this run's: its target, and it ended well
    other = RunPlan(("results/limit-2/table_1.csv",), run_layout(2), 2, 2, 0)
    assert "an older run" not in "".join(summary(other, state, 0))
