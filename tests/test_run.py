"""``zoomeval run``: the jobs' progress records, Snakemake's events and the whole run's progress, the display on a
terminal and off one, the targets (data, never options), one run per study, Ctrl-C, the preflight's disk estimate,
and the README's first study (the quick preset, from the installed wheel: tests/first_study.py) taken from
``zoomeval init`` through ``run --limit 2``, an interrupted and resumed ``run --set`` to both leaderboards."""

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SMALL_PREDICT_LOG
from test_study import files_and_times

from zoomeval.core.config import InferenceSettings
from zoomeval.core.layout import Layout, run_layout
from zoomeval.core.logs import to_file
from zoomeval.core.progress import Progress, ProgressLog, format_eta, last_record, records_path
from zoomeval.core.strict_yaml import load_config_file
from zoomeval.core.zoom import ZoomGrid
from zoomeval.datasets.build import first_images
from zoomeval.datasets.inputs import plan_all
from zoomeval.preflight import disk_needs, expected_images, gpu_without_gpu, missing_weights, short_disk
from zoomeval.registries import load_config
from zoomeval.report.tables import limited
from zoomeval.run.display import Display, crops_text
from zoomeval.run.events import EventReader, RunState
from zoomeval.run.lock import holding
from zoomeval.run.logger_plugin import LogHandler, LogHandlerSettings, record_of
from zoomeval.run.overall import Tracker
from zoomeval.run.plan import RunPlan
from zoomeval.run.summary import summary
from zoomeval.run.targets import checked_target, checked_targets, limited_target

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_run")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_job_logs_its_progress_as_a_line_and_as_a_record_beside_its_log(tmp_path: Path) -> None:
    """500 images of 45 views; 5400 crops in 10 s: 120 images, 540 crops/s, (22500 - 5400) / 540 = 31.67 s left.
    The line is for people; the record, beside the log, is what ``zoomeval run`` reads."""
    clock, log = Clock(), tmp_path / "job.log"
    Path(records_path(log)).write_text('{"done": 7}\n')  # an earlier attempt's, never read as this one's
    with to_file(log):
        assert last_record(records_path(log)) is None
        progress = ProgressLog(500, 45, logging.getLogger("test_progress"), clock)
        progress.line()
        clock.now += 9.0
        progress.advance(4000)  # 9 s: no line yet
        clock.now += 1.0
        progress.advance(1400)
        progress.line("shard 0 computed")
    lines = [line.split(": ", 1)[1] for line in log.read_text().splitlines()]
    assert lines == [
        "progress: 0/500 images, 0.0 crops/s, 0.00 images/s, ETA ?",
        "progress: 120/500 images, 540.0 crops/s, 12.00 images/s, ETA 0:00:32",
        "progress: 120/500 images, 540.0 crops/s, 12.00 images/s, ETA 0:00:32 (shard 0 computed)",
    ]
    records = [json.loads(line) for line in Path(records_path(log)).read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "time"} for r in records] == [
        {"done": 0, "total": 500, "crops_per_second": 0.0, "eta": None, "crops": 0, "views": 45},
        {"done": 120, "total": 500, "crops_per_second": 540.0, "eta": 17100 / 540, "crops": 5400, "views": 45},
        {"done": 120, "total": 500, "crops_per_second": 540.0, "eta": 17100 / 540, "crops": 5400, "views": 45},
    ]
    assert last_record(records_path(log)) == Progress(120, 500, 540.0, 17100 / 540, 5400, 45)
    with open(records_path(log), "a") as fh:
        fh.write('{"done": 121, "tot')  # a record being written is not read yet
    assert last_record(records_path(log)).done == 120
    assert format_eta(3725.2) == "1:02:06"


def event(kind: str, time: float, **fields: object) -> dict:
    return {"event": kind, "time": time, **fields}


#: A run as the logger plugin writes it: 7 jobs planned, two of them predict jobs; the dataset's job took 10 s;
#: the first predict job has run for 20 s.
EVENTS = [
    event(
        "run_info",
        0.0,
        stats={"generated_dataset": 1, "predict": 2, "standard_eval": 1, "analyze": 2, "table_a8": 1, "total": 7},
    ),
    event("job_started", 0.0, jobs=[1]),
    event(
        "job_info",
        0.0,
        jobid=1,
        rule_name="generated_dataset",
        wildcards={"dataset": "demo"},
        log=["logs/datasets/demo.log"],
    ),
    event("job_finished", 10.0, job_id=1),
    event("progress", 10.0, done=1, total=7),
    event("job_started", 10.0, jobs=[2]),
    event(
        "job_info",
        10.0,
        jobid=2,
        rule_name="predict",
        wildcards={"dataset": "demo", "variant": "original", "model": "m"},
        log=["logs/p.log"],
    ),
]
#: The plan: 12 images in each of the two prediction files still to write.
PLANNED = {("demo", "original", "m", ""): 12, ("demo", "fgset", "m", ""): 12}
#: The running predict job's last record: 4 of 12 images, 108 crops (27 views each) at 10.8 crops/s.
RECORD = Progress(4, 12, 10.8, 44.0, 108, 27)


def fed(events: list[dict]) -> RunState:
    state = RunState()
    for item in events:
        state.feed(item)
    return state


def test_the_run_state_follows_snakemakes_events() -> None:
    state = fed([*EVENTS, event("job_error", 12.0, jobid=3, rule_name="standard_eval", log=["logs/s.log"])])
    assert (state.done, state.total, state.running) == (1, 7, {2})
    assert state.planned["predict"] == 2 and "total" not in state.planned
    assert state.jobs[2].label == "predict demo/original/m" and state.jobs[2].started == 10.0
    assert (state.jobs[1].started, state.jobs[1].ended) == (0.0, 10.0)
    assert [(job.rule, job.logs) for job in state.failed] == [("standard_eval", ["logs/s.log"])]


def test_the_logger_plugin_writes_snakemakes_events_as_json_lines(tmp_path: Path) -> None:
    """Records as Snakemake's scheduler logs them (``extra=``); a record without an event is not written."""
    from snakemake_interface_logger_plugins.common import LogEvent

    events = tmp_path / "events.jsonl"
    handler = LogHandler(None, LogHandlerSettings(events=str(events)))  # type: ignore[arg-type]
    info = logging.makeLogRecord(
        {
            "msg": "rule",
            "event": LogEvent.JOB_INFO,
            "jobid": 2,
            "rule_name": "predict",
            "wildcards": {"dataset": "demo"},
            "log": ["logs/p.log"],
            "input": ["x"],
        }
    )
    for record in (
        info,
        logging.makeLogRecord({"msg": "Select jobs to execute..."}),
        logging.makeLogRecord({"msg": None, "event": LogEvent.PROGRESS, "done": 1, "total": 7}),
    ):
        handler.emit(record)
    handler.close()
    written = [json.loads(line) for line in events.read_text().splitlines()]
    assert [{k: v for k, v in w.items() if k != "time"} for w in written] == [
        {
            "event": "job_info",
            "jobid": 2,
            "rule_name": "predict",
            "wildcards": {"dataset": "demo"},
            "log": ["logs/p.log"],
        },
        {"event": "progress", "done": 1, "total": 7},
    ]
    assert record_of(info)["time"] == info.created
    reader = EventReader(events)
    assert len(reader.read()) == 2 and reader.read() == []  # read once


def test_the_whole_run_shows_jobs_images_crops_and_one_eta() -> None:
    """Images: the running job's 4 of 12, and the fgset file's 12 planned: 4/24; crops 108 of 24 x 27 = 648.
    ETA: 540 crops left at 10.8 crops/s = 50 s, plus 5 jobs left (7 - 1 done - 1 predict running) at the 10 s the
    finished dataset job took, one at a time (30 job-seconds in 30 s): 50 s; 100 s in all."""
    overall = Tracker(PLANNED, 27).overall(fed(EVENTS), {2: RECORD}, now=30.0)
    assert overall.text() == "1/7 jobs, 4/24 images, 108/648 crops, ETA 0:01:40"
    # two jobs at once half of the time: 5 x 10 s / 1.5
    both = fed(
        [
            *EVENTS,
            event("job_started", 15.0, jobs=[3]),
            event("job_info", 15.0, jobid=3, rule_name="x"),
            event("job_finished", 25.0, job_id=3),
        ]
    )
    assert Tracker(PLANNED, 27).overall(both, {2: RECORD}, now=30.0).eta == pytest.approx(50 + 50 / (40 / 30))
    # a target that needs one prediction file of the two planned: unknown until its predict job has started
    one = [{**EVENTS[0], "stats": {"predict": 1, "total": 3}}]
    assert Tracker(PLANNED, 27).overall(fed(one), {}, now=0.0).text() == "0/3 jobs, 0/? images, 0/? crops, ETA ?"
    assert Tracker({}, 27).overall(fed(one[:0]), {}, now=0.0).text() == "0/? jobs, ETA 0:00:00"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_run_says_what_the_crops_counted_per_image_are() -> None:
    """The paper's 36 scales: 324 zoom transforms and the 5-/10-crop methods' 9 views (333 in the counts); without
    the 1-crop scale (256) no aggregation view is cut."""
    paper = load_config_file(ROOT / "config" / "paper.yaml")["scales"]
    assert crops_text(ZoomGrid(paper)) == (
        "crops per image: 324 zoom crops + 9 aggregation views (the 5- and 10-crop methods)"
    )
    assert crops_text(ZoomGrid([64, 128])) == "crops per image: 18 zoom crops"


def test_the_display_writes_plain_lines_off_a_terminal_and_bars_on_one() -> None:
    state = fed(EVENTS)
    overall = Tracker(PLANNED, 27).overall(state, {2: RECORD}, now=30.0)
    log = io.StringIO()
    display = Display(log, progress_of=lambda job: RECORD)
    display.update(state, overall, display.records(state))
    display.update(state, overall, display.records(state))  # nothing changed: no new line
    display.close()
    assert log.getvalue().splitlines() == [
        "zoomeval run: 1/7 jobs, 4/24 images, 108/648 crops, ETA 0:01:40",
        "predict demo/original/m: 4/12 images, 10.8 crops/s, ETA 0:00:44",
    ]
    assert "\r" not in log.getvalue() and "\x1b" not in log.getvalue()
    screen = Terminal()
    bars = Display(screen, progress_of=lambda job: RECORD)
    bars.update(state, overall, bars.records(state))
    assert "\r" in screen.getvalue() and "predict demo/original/m:  33%|" in screen.getvalue()
    assert "| 4/12 images, 10.8 crops/s, ETA 0:00:44" in screen.getvalue()
    assert "zoomeval run: |" in screen.getvalue() and "1/7 jobs, 4/24 images" in screen.getvalue()
    bars.close()


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


def demo_config(**changes: object):
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return load_config({**raw, **changes}, check_paths=False)


def test_targets_are_target_rules_or_layout_paths_and_reach_snakemake_after_the_options() -> None:
    layout = run_layout(2)
    assert checked_targets([], layout) == ("study",)
    assert checked_targets(["all", "results/table_tta.csv", "results/browser/index.html"], layout) == (
        "all",
        "results/limit-2/table_tta.csv",
        "results/limit-2/browser/index.html",
    )
    for bad in (
        "--snakefile=EVIL.smk",
        "-s",
        "EVIL.smk",
        "--configfile=EVIL.yaml",
        "results/../EVIL.smk",
        "results/datasets/..",
        "results/evil.smk",
        "results/table_1.py",
        "/etc/passwd",
        "results/table_1.csv\n",
        "logs/tables/table_1.log",
        "table_1",
    ):
        with pytest.raises(ValueError, match=re.escape(f"TARGET {bad!r} is neither a target rule")):
            checked_target(bad, layout)
    plan = RunPlan(("results/limit-2/table_a8.csv",), layout, demo_config(limit=2), 4, 1)
    assert plan.argv("ev.jsonl")[1:] == [
        "-m",
        "snakemake",
        "--cores",
        "4",
        "--resources",
        "gpu=1",
        "--config",
        "limit=2",
        "--logger",
        "zoomeval",
        "--logger-zoomeval-events",
        "ev.jsonl",
        "--",
        "results/limit-2/table_a8.csv",
    ]


def evil_files(folder: Path) -> tuple[Path, Path, Path]:
    """A Snakefile and a templated config that each create ``marker`` when Snakemake reads them."""
    marker = folder / "marker"
    (folder / "EVIL.smk").write_text(f"open({str(marker)!r}, 'w').close()\nrule x:\n    output: 'x'\n")
    (folder / "EVIL.yaml").write_text(f"__use_yte__: true\nx: ?open({str(marker)!r}, 'w').close() or 1\n")
    return marker, folder / "EVIL.smk", folder / "EVIL.yaml"


@pytest.mark.parametrize(
    "args",
    [
        ["--", "--snakefile=EVIL.smk"],
        ["--", "-s", "EVIL.smk"],
        ["--", "--configfile=EVIL.yaml"],
        ["results/../../EVIL.smk"],
    ],
    ids=["--snakefile=", "-s", "--configfile=", "path-out"],
)
def test_an_option_or_a_path_outside_the_layout_as_a_target_is_refused_and_runs_nothing(tmp_path, args) -> None:
    assert zoomeval("init", "study", "--preset", "demo", cwd=tmp_path).returncode == 0
    marker, _, _ = evil_files(tmp_path / "study")
    proc = zoomeval("run", "study", *args, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert (
        proc.stderr == f"zoomeval run: TARGET {args[-1] if args[0] != '--' else args[1]!r} is neither a target "
        "rule (`study`, `all`) nor a path of the results layout under results/ (docs/reference/outputs.md); "
        "nothing was run\n"
    )
    assert not marker.exists() and not (tmp_path / "study" / "logs").exists()


def test_a_profile_that_names_another_snakefile_or_config_is_refused(tmp_path: Path) -> None:
    assert zoomeval("init", "study", "--preset", "demo", cwd=tmp_path).returncode == 0
    study = tmp_path / "study"
    marker, _, evil = evil_files(study)
    (study / "profiles" / "default").unlink()
    (study / "profiles" / "default").mkdir()
    (study / "profiles" / "default" / "config.yaml").write_text(f"cores: 1\nconfigfile: [{evil}]\n")
    proc = zoomeval("run", "study", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        "zoomeval run: profiles/default/config.yaml: key 'configfile' makes "
        "Snakemake read a file zoomeval run does not check; remove it (a "
        "study's Snakefile and config are its own)\n",
    )
    assert not marker.exists()


@pytest.mark.parametrize("cores", ["0", "-3", "two"])
def test_cores_below_one_are_refused_in_one_line(tmp_path: Path, cores: str) -> None:
    proc = zoomeval("run", str(tmp_path), "--cores", cores, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        f"zoomeval run: argument --cores: {cores} is no number of cores; give N >= 1 (see zoomeval run --help)\n",
    )


def test_a_second_run_in_a_study_is_refused_before_it_opens_any_file_of_the_first(tmp_path: Path) -> None:
    """The first run's log is left as it was (bytes and time); the refusal names the first run's pid."""
    assert zoomeval("init", "study", "--preset", "demo", cwd=tmp_path).returncode == 0
    study = tmp_path / "study"
    first_log = study / "logs" / "zoomeval-run.20261202-120000.1.log"
    first_log.parent.mkdir(parents=True)
    first_log.write_text("the first run's output\n")
    before = files_and_times(study / "logs")
    with holding(study, "zoomeval run --limit 2"):
        proc = zoomeval("run", "study", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert re.fullmatch(
        rf"zoomeval run: study: another zoomeval run holds this study \(pid {os.getpid()} on \S+, "
        r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: zoomeval run --limit 2\); wait for it to end, or stop "
        r"it with Ctrl-C where it runs; nothing was run\n",
        proc.stderr,
    )
    assert files_and_times(study / "logs") == before
    with holding(study, "again"):  # the lock went with the block that held it
        pass


SUPERVISED = """
import signal, subprocess, sys, time
from zoomeval.run.launch import supervise
ignores = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
child = subprocess.Popen([sys.executable, "-c", ignores], start_new_session=True, stdout=subprocess.PIPE, text=True)
child.stdout.readline()
ready = iter([lambda: print("ready", flush=True)])  # once supervise watches for Ctrl-C
print(*supervise(child, lambda: next(ready, lambda: None)(), sys.stderr), flush=True)
"""


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_once_is_passed_on_and_twice_kills_at_once_without_a_traceback(first: signal.Signals) -> None:
    """A child that ignores SIGINT (a job that will not stop): the first Ctrl-C (or a SIGTERM, which Snakemake in
    its own session would not get) is passed on and the child keeps running; the second kills it at once (-9)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(first)
    time.sleep(1.5)
    assert proc.poll() is None  # still waiting for the child
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (0, "-9 2\n")
    assert err.split("\n") == [
        "",
        "zoomeval run: interrupted: Snakemake is stopping its jobs (Ctrl-C again to stop at once)",
        "",
        "zoomeval run: stopped at once",
        "",
    ]


def test_the_preflight_refuses_gpu_settings_without_a_gpu_and_a_short_disk(tmp_path: Path) -> None:
    class Settings:
        inference = InferenceSettings(device="auto", precision="bf16")

    assert [line.split(":")[0] for line in gpu_without_gpu(Settings, 0)] == ["inference.precision"]  # type: ignore[arg-type]
    assert list(gpu_without_gpu(Settings, 1)) == []  # type: ignore[arg-type]
    needs = {str(tmp_path / "resources"): 2_000_000_000, str(tmp_path / "results"): 500_000_000}
    [line] = short_disk(needs, free=lambda path: 1_000_000_000)
    assert line.endswith(f"need about 2.5 GB (extracted archives, predictions) but {tmp_path} has 1.0 GB free")
    assert list(short_disk(needs, free=lambda path: 3_000_000_000)) == []


def test_a_limit_above_the_images_is_bounded_by_what_the_manifest_or_the_adapter_knows(tmp_path, monkeypatch) -> None:
    """The demo has 12 and 8 scenes; ImageNet val 50,000 images; an image folder's count is unknown before its
    manifest; a full run's manifest bounds a limited run (it takes its first images)."""
    monkeypatch.chdir(tmp_path)
    huge = demo_config(limit=10**12)
    assert [expected_images(huge, d, run_layout(10**12)) for d in ("demo", "demo_clutter")] == [12, 8]
    assert expected_images(demo_config(limit=2), "demo", run_layout(2)) == 2
    assert expected_images(demo_config(), "demo", Layout()) == 12
    raw = yaml.safe_load((ROOT / "config" / "imagenet_val.yaml").read_text())
    raw["limit"] = 10**12
    assert expected_images(load_config(raw, check_paths=False), "imagenet", run_layout(10**12)) == 50_000
    raw = yaml.safe_load((ROOT / "config" / "imagefolder.yaml").read_text())
    assert expected_images(load_config({**raw, "limit": 10**12}, check_paths=False), "own_data", Layout()) is None
    from zoomeval.core.manifest import Record, write_manifest

    manifest = Path(Layout().path("manifest", dataset="demo"))
    manifest.parent.mkdir(parents=True)
    write_manifest(manifest, [Record(f"i{k}", f"i{k}.png", [1], ["n01"], 10, 10) for k in range(3)], "demo")
    assert expected_images(huge, "demo", run_layout(10**12)) == 3
    assert (
        disk_needs(huge, plan_all(huge), run_layout(10**12))["results/limit-1000000000000"] == (3 * 3 + 8) * 9 * 36 * 32
    )  # demo: 3 images x 3 variants, demo_clutter: 8 x 1; 9 x 36 rows of 32 bytes each


def test_weights_that_no_offline_route_holds_from_a_host_that_does_not_answer_are_named(tmp_path, monkeypatch) -> None:
    """A torchvision model: named while neither its weights folder nor torch's hub cache holds the file and the
    host does not answer; not named when the host answers (asked once) or the cache holds the file."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw.update(
        resources=str(tmp_path / "res"),
        models={"r18": {"source": "torchvision", "architecture": "resnet18", "weights": "IMAGENET1K_V1"}},
    )
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
    assert disk_needs(config, inputs, layout) == {
        str(tmp_path / "res"): (tmp_path / "bbox.tgz").stat().st_size,
        results: 0,
    }


def zoomeval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zoomeval", *args], capture_output=True, text=True, cwd=cwd)


def test_one_run_names_two_missing_data_files_and_a_missing_weight(tmp_path: Path) -> None:
    """The preflight lists all three (Snakemake would stop at the first) and runs nothing."""
    assert zoomeval("init", "study", "--preset", "imagenet-val", cwd=tmp_path).returncode == 0
    config_path = tmp_path / "study" / "config" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["datasets"]["imagenet"].update(
        images=str(tmp_path / "val.tar"), annotations=str(tmp_path / "bbox.tgz"), label_sets=["in"]
    )
    config["models"] = {
        "mine": {
            "source": "checkpoint",
            "architecture": "resnet50",
            "weights": "ab" * 32,
            "checkpoint": str(tmp_path / "mine.pth"),
        }
    }
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


TIMM_TYPO = {"r": {"source": "timm", "architecture": "resnet5", "weights": "a1_in1k"}}
TAG_TYPO = {"t": {"source": "torchvision", "architecture": "resnet18", "weights": "IMAGENET1K_V9"}}
ARCH_TYPO = {"c": {"source": "torchvision", "architecture": "convnxt_tiny", "weights": "IMAGENET1K_V1"}}
TIMM_LINE = (
    "models.r.architecture: 'resnet5' is not a timm model (zoomeval list models timm); closest: resnet50, "
    "resnet51q, resnet50s, resnet50d, resnet50c"
)
TAG_LINE = (
    "models.t.weights: 'IMAGENET1K_V9' is not a pretrained tag of resnet18 ['IMAGENET1K_V1']; closest: IMAGENET1K_V1"
)
ARCH_LINE = (
    "models.c.architecture: 'convnxt_tiny' is not a torchvision model (zoomeval list models torchvision); "
    "closest: convnext_tiny, convnext_base, convnext_small, convnext_large"
)
TOP_K_LINE = "top_k: 28 picks from 27 zoom transforms (3 scales x 9 anchors); give top_k <= 27 or more scales"
REFUSALS = {
    "timm-and-torchvision-typos": ({"models": TIMM_TYPO | TAG_TYPO}, [TIMM_LINE, TAG_LINE]),
    "tag-typo": ({"models": TAG_TYPO}, [TAG_LINE]),
    "architecture-typo": ({"models": ARCH_TYPO}, [ARCH_LINE]),
    "top_k": ({"top_k": 28}, [TOP_K_LINE]),
    "all-at-once": ({"models": TAG_TYPO | ARCH_TYPO, "top_k": 28}, [ARCH_LINE, TAG_LINE, TOP_K_LINE]),
}


@pytest.fixture(scope="module")
def typo_study(tmp_path_factory) -> Path:
    """A demo study of 3 scales (27 zoom transforms) and one dataset, shared so its model catalogues (under
    .snakemake/zoomeval) are listed once."""
    from zoomeval.study.directory import init_study

    study = tmp_path_factory.mktemp("typos") / "study"
    init_study(study)
    return study


@pytest.mark.parametrize("case", REFUSALS)
def test_the_preflight_names_every_typo_with_its_closest_and_top_k_beyond_the_transforms(typo_study, capsys, case):
    """The workflow's own checks (model names against the libraries' lists, as ``snakemake -n`` makes them), all
    at once, one line each, status 2; a misspelt tag was a KeyError traceback, a timm typo a misleading line."""
    from zoomeval.cli import main

    changes, lines = REFUSALS[case]
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw.update(scales=[128, 224, 256], top_k=9, datasets={"demo": raw["datasets"]["demo"]}, stats={"pairs": []})
    (typo_study / "config" / "config.yaml").write_text(yaml.safe_dump({**raw, **changes}))
    assert main(["run", str(typo_study), "--limit", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert err.splitlines() == [
        *(f"zoomeval run: {line}" for line in lines),
        f"zoomeval run: {len(lines)} problem(s) found before starting; nothing was run",
    ]
    assert not (typo_study / "logs").exists() and not (typo_study / "results").exists()


def test_a_bad_limit_or_directory_is_one_line_and_status_2(tmp_path: Path) -> None:
    proc = zoomeval("run", str(tmp_path), "--limit", "0", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "zoomeval run: --limit: 0 is no number of images; give N >= 1\n")
    proc = zoomeval("run", str(tmp_path / "nosuch"), cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        f"zoomeval run: {tmp_path}/nosuch is no directory: give a study directory (zoomeval init)\n",
    )


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
def test_init_prints_the_zoomeval_run_steps(first_study) -> None:
    steps = first_study["steps"]
    assert steps["init"].returncode == 0, steps["init"].stderr
    assert steps["init"].stdout.splitlines()[-3:] == [
        "  zoomeval run --limit 2   # a smoke test: the first 2 images of each dataset, in results/limit-2",
        "  zoomeval run   # the preflight, then the study: its tables, sealed in results/study.json",
        "  zoomeval leaderboard .   # its results, read through the seal",
    ]


@pytest.mark.workflow
def test_a_limited_run_builds_its_tables_seals_its_own_tree_and_leaves_the_full_results_alone(first_study) -> None:
    """Exit 0, Table A8 of two images titled as limited, every table and results/limit-2/study.json built, the
    progress in plain lines (stderr is no terminal) with the run's jobs, images and ETA, and nothing outside
    results/limit-2 and logs/limit-2 written."""
    study, steps = first_study["study"], first_study["steps"]
    proc = steps["limited"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    title = (
        "# Table A8: maximum possible top-1 accuracy (%) on original, object-only (fgset) and background-only (bgset) "
        "images [LIMITED RUN: the first 2 images of each dataset only (config limit), not a result]"
    )
    assert proc.stdout.startswith(title + "\n")
    rows = [line.split(" | ")[1:4] for line in proc.stdout.splitlines() if line.startswith("| efficientnet_lite0 ")]
    assert rows == [[variant, "demo", "2"] for variant in ("original", "fgset", "bgset")]
    built = [line for line in proc.stdout.splitlines() if line.startswith(("built: ", "not built: "))]
    assert built == [
        "built: the tables results/limit-2/table_a8.md, results/limit-2/table_1.md, results/limit-2/"
        "table_zoom_groups.md, results/limit-2/table_aggregation.md, results/limit-2/table_zoom_policies.md (each "
        "also as .csv)",
        "built: the study index results/limit-2/study.json (sealed: `zoomeval leaderboard . --limit 2` reads it)",
        "not built: browser (`zoomeval run . all --limit 2`)",
        "not built: figures, contact sheets, statistics and hard sets (`zoomeval run . all --limit 2`)",
        "not built: the report (`zoomeval run . --report --limit 2`)",
    ]
    # 2 images in each of 3 variants, of 36 transforms and 9 extra views (the 5- and 10-crop methods): 270 crops
    assert "crops per image: 36 zoom crops + 9 aggregation views (the 5- and 10-crop methods)" in proc.stderr
    assert re.search(r"^zoomeval run: 19/19 jobs, 6/6 images, 270/270 crops, ETA 0:00:00$", proc.stderr, re.M)
    assert re.search(r"^zoomeval run: \d+/19 jobs, \d/6 images, \d+/270 crops, ETA \d+:\d\d:\d\d$", proc.stderr, re.M)
    assert re.search(r"^predict demo/original/efficientnet_lite0: 2/2 images, ", proc.stderr, re.M)
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr
    assert steps["untouched"] == []
    [log] = (study / "logs" / "limit-2").glob("zoomeval-run.*.log")  # this run's own
    assert "Finished jobid" in log.read_text()
    from zoomeval import Study

    limited_study = Study(study, results="results/limit-2")
    assert limited_study.table("table_a8")["n_images"].to_list() == [2, 2, 2]
    assert sorted(limited_study.runs().rows()) == [
        ("demo", v, "efficientnet_lite0") for v in ("bgset", "fgset", "original")
    ]


@pytest.mark.workflow
def test_ctrl_c_stops_a_run_without_a_traceback_and_the_next_run_resumes_its_shard(first_study) -> None:
    study, steps = first_study["study"], first_study["steps"]
    status, screen, finished = steps["interrupted"]
    assert status == 130, screen[-3000:]
    assert "zoomeval run: interrupted: Snakemake is stopping its jobs (Ctrl-C again to stop at once)" in screen
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen
    assert len(finished) >= 1
    proc = steps["full"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (study / SMALL_PREDICT_LOG).read_text()
    assert sorted(Path(p).name for p in re.findall(r"reusing (\S+\.parquet)", log)) == finished, log
    assert "built: the study index results/study.json (sealed: `zoomeval leaderboard .` reads it)" in proc.stdout
    set_line = "zoomeval run: set inference.shard_images=2 (config/config.yaml unchanged)"
    assert set_line in proc.stderr and set_line in screen  # what --set changed, said by each run
    assert len(list((study / "logs").glob("zoomeval-run.*.log"))) == 2  # each run its own log


@pytest.mark.workflow
@pytest.mark.parametrize("step", ["leaderboard", "leaderboard_limited"])
def test_the_leaderboard_reads_the_study_right_after_zoomeval_run(first_study, step: str) -> None:
    steps = first_study["steps"]
    proc = steps[step]
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| efficientnet_lite0 ")]
    images = "2 images" if step == "leaderboard_limited" else "12 images"
    headings = [line for line in proc.stdout.splitlines() if line.startswith("## ")]
    assert headings == [f"## demo / {v} / in: {images}, 4 scales, top_k 9" for v in ("original", "fgset", "bgset")]
    assert len(rows) == 3, proc.stdout


def test_the_summary_names_a_failed_job_and_its_log_and_the_commands_for_the_rest(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("results/limit-2").mkdir(parents=True)
    Path("results/limit-2/table_a8.md").write_text("# an older run's Table A8\n")
    state = fed([*EVENTS, event("job_error", 12.0, jobid=2, rule_name="predict", log=["logs/p.log"])])
    plan = RunPlan(("study",), run_layout(2), demo_config(limit=2), 2, 0)
    log = Path("logs/limit-2/zoomeval-run.x.log")
    assert summary(plan, state, 1, log, "my study") == [
        "failed: predict demo/original/m: logs/p.log",
        "not built: tables (`zoomeval run 'my study' --limit 2`)",
        "not built: study index (`zoomeval run 'my study' --limit 2`)",
        "not built: browser (`zoomeval run 'my study' all --limit 2`)",
        "not built: figures, contact sheets, statistics and hard sets (`zoomeval run 'my study' all --limit 2`)",
        "not built: the report (`zoomeval run 'my study' --report --limit 2`)",
        "logs: logs/limit-2/ (Snakemake's own output: logs/limit-2/zoomeval-run.x.log)",
    ]
    assert summary(plan, fed([]), 0, log)[0] == "# an older run's Table A8\n"  # this run's: its target, it ended well
    other = RunPlan(("results/limit-2/table_1.csv",), run_layout(2), demo_config(limit=2), 2, 0)
    lines = summary(other, fed([]), 0, log)
    assert "an older run" not in "".join(lines) and lines[0] == "built: table_1: results/limit-2/table_1.csv"
    assert "not built: the report (`zoomeval run . results/limit-2/table_1.csv --report --limit 2`)" in lines


@pytest.mark.parametrize(
    ("item", "setting"),
    [
        ("top_k=3", ("top_k", 3)),
        ("scales=[64,256]", ("scales", [64, 256])),
        ("inference.batch_size=16", ("inference.batch_size", 16)),
        ("inference.device=cuda:0", ("inference.device", "cuda:0")),
        ("datasets.demo.variants=[original, fgset]", ("datasets.demo.variants", ["original", "fgset"])),
        ("sam.counting={min_iou: 0.9}", ("sam.counting", {"min_iou": 0.9})),
        ("cover_time_limit=null", ("cover_time_limit", None)),
        ("resources='a=b'", ("resources", "a=b")),
    ],
)
def test_a_set_item_is_a_dotted_key_and_one_yaml_value(item: str, setting: tuple) -> None:
    from zoomeval.run.settings import parse_setting

    assert parse_setting(item) == setting


FORMS = "give a scalar (3, cpu, null), a flow list [64, 256] or a flow mapping {key: value}"


MALFORMED = [
    ("noequals", "'noequals' is no KEY=VALUE (e.g. top_k=3, inference.batch_size=16)"),
    ("=3", "'=3': '' is no dotted path of config keys (e.g. top_k, inference.batch_size)"),
    ("a..b=1", "'a..b=1': 'a..b' is no dotted path of config keys (e.g. top_k, inference.batch_size)"),
    ("top_k =3", "'top_k =3': 'top_k ' is no dotted path of config keys (e.g. top_k, inference.batch_size)"),
    ("top_k=", "'top_k=' gives no VALUE after '=' (null for none)"),
    (
        "scales=[64",
        "'scales=[64': its VALUE is no YAML value (line 1, column 4: expected ',' or ']', but got "
        f"'<stream end>'); {FORMS}",
    ),
    (
        "x=!!python/object/apply:os.system [ls]",
        "'x=!!python/object/apply:os.system [ls]': its VALUE is no YAML value (line 1, column 1: could not "
        "determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system' (a config holds "
        f"plain values: no tag names Python code)); {FORMS}",
    ),
    ("scales=&a [1]", f"'scales=&a [1]': its VALUE has an anchor or alias; {FORMS}"),
    (
        "sam=a: 1",
        f"'sam=a: 1': its VALUE has a block list or mapping (write it in flow style, on one line); {FORMS}",
    ),
    (
        "x={__use_yte__: true}",
        "'x={__use_yte__: true}': its VALUE is no YAML value (line 1: __use_yte__ asks Snakemake to "
        f"run the file's ?-expressions as Python; zoomeval configs take plain values: remove it); {FORMS}",
    ),
    (
        "x=2024-01-01",
        "'x=2024-01-01': its VALUE holds what no config key takes (a date, binary, a set, a key that is not "
        "text); quote text: '2024-01-01'",
    ),
]


@pytest.mark.parametrize(("item", "refusal"), MALFORMED, ids=[item for item, _ in MALFORMED])
def test_a_malformed_set_item_is_refused_in_one_line_naming_it(item: str, refusal: str, capsys) -> None:
    from zoomeval.cli import main
    from zoomeval.core.config import ConfigError
    from zoomeval.run.settings import parse_setting

    with pytest.raises(ConfigError) as error:
        parse_setting(item)
    assert str(error.value) == refusal
    with pytest.raises(SystemExit) as exited:  # argparse's refusal, before the study is opened
        main(["run", "no such study", "--set", item])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"zoomeval run: argument --set: {refusal} (see zoomeval run --help)\n")


@pytest.fixture
def demo_copy(tmp_path: Path, monkeypatch) -> Path:
    """A study directory holding a copy of the checkout's config/config.yaml, the working directory."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_bytes((ROOT / "config" / "config.yaml").read_bytes())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def settings(*items: str) -> list[tuple]:
    from zoomeval.run.settings import parse_setting

    return [parse_setting(item) for item in items]


def test_set_changes_the_checked_config_and_reaches_snakemake_as_config_entries(demo_copy: Path) -> None:
    from zoomeval.run.plan import plan_run

    before = (demo_copy / "config" / "config.yaml").read_bytes()
    given = settings("scales=[64,256]", "top_k=3", "inference.batch_size=16.0", "datasets.demo.variants=[original]")
    plan, found = plan_run([], 2, 1, settings=given)
    assert found == []
    assert (plan.config.scales, plan.config.top_k, plan.config.inference.batch_size) == ((64, 256), 3, 16)
    assert list(plan.config.datasets) == ["demo", "demo_clutter"]  # a mapping's other keys are kept
    assert list(plan.config.datasets["demo"].variants) == ["original"]
    argv = plan.argv("ev.jsonl")
    assert argv[argv.index("--config") : argv.index("--logger")] == [
        "--config",
        "limit=2",
        "scales=[64, 256]",
        "top_k=3",
        'inference={"batch_size": 16}',  # the keys set only, as checked (16.0 is the integer 16)
        'datasets={"demo": {"variants": ["original"]}}',
    ]
    assert plan.settings_line() == (
        'zoomeval run: set scales=[64, 256], top_k=3, inference.batch_size=16.0, datasets.demo.variants=["original"] '
        "(config/config.yaml unchanged)"
    )
    assert (demo_copy / "config" / "config.yaml").read_bytes() == before
    plain, _ = plan_run([], None, 1)
    assert (plain.settings, plain.overrides, plain.settings_line()) == ((), (), None)
    assert "--config" not in plain.argv("ev.jsonl")


def test_snakemake_gets_the_config_that_set_made(demo_copy: Path) -> None:
    """Snakemake's --config (its own parser and merge, the Snakefile's configfile) gives a nested mapping set whole,
    into the file's mapping key by key; a value inside a mapping reaches it as text, which the workflow's checks type
    again where the schema types the key, and which is refused where it does not (SAM's generator arguments)."""
    from zoomeval.core.config import ConfigError
    from zoomeval.core.strict_yaml import load_config_file
    from zoomeval.registries import load_config
    from zoomeval.run.plan import plan_run
    from zoomeval.run.settings import snakemake_config, with_settings

    file = load_config_file("config/config.yaml")
    given = settings("datasets={demo: {variants: [original]}}", "sam.device=cpu", "browser.page_size=12")
    plan, found = plan_run([], None, 1, settings=given)
    assert found == [] and plan.overrides == (
        ("datasets", {"demo": {"variants": ["original"]}}),
        ("sam", {"device": "cpu"}),
        ("browser", {"page_size": 12}),
    )
    seen = snakemake_config(file, plan.config_items())
    assert seen["browser"]["page_size"] == "12"  # as Snakemake's --config reads it
    load_config(seen, check_paths=False)  # the workflow's checks
    expected = with_settings(load_config_file("config/config.yaml"), given)
    load_config(expected, check_paths=False)
    assert seen == expected and seen["datasets"]["demo_clutter"] == file["datasets"]["demo_clutter"]
    with pytest.raises(ConfigError) as error:
        plan_run([], None, 1, settings=settings("sam.generator.points_per_side=16"))
    assert str(error.value) == (
        "--set: sam.generator.points_per_side would reach Snakemake as '16', not 16 (its --config reads the values "
        "inside a list or mapping as text, and the config's schema does not type this key); set it in "
        "config/config.yaml"
    )


@pytest.mark.parametrize(
    ("item", "in_file", "refusal"),
    [
        ("scalez=[1]", {"scalez": [1]}, "the config: Additional properties are not allowed ('scalez' was unexpected)"),
        ("top_k=three", {"top_k": "three"}, "top_k: 'three' is not of type 'integer'"),
        ("inference.batch_size=0", {"inference": {"batch_size": 0}}, "inference.batch_size: 0 is less than"),
        (
            "datasets.demo.variant=[original]",
            {"datasets": {"demo": {"variant": ["original"]}}},
            "datasets.demo: Additional properties are not allowed ('variant' was unexpected)",
        ),
    ],
    ids=["unknown-key", "wrong-type", "nested-bound", "nested-unknown-key"],
)
def test_a_bad_set_is_refused_as_the_same_key_in_the_config_file(demo_copy, capsys, item, in_file, refusal) -> None:
    from zoomeval.cli import main
    from zoomeval.core.strict_yaml import load_config_file
    from zoomeval.run.settings import with_settings

    assert main(["run", str(demo_copy), "--set", item]) == 2
    by_set = capsys.readouterr()
    raw = load_config_file(demo_copy / "config" / "config.yaml")
    for key, value in in_file.items():
        with_settings(raw, [(key, value)])
    (demo_copy / "config" / "config.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", str(demo_copy)]) == 2
    by_file = capsys.readouterr()
    assert by_set == by_file and by_set.out == "" and len(by_set.err.splitlines()) == 1, by_set
    assert by_set.err.startswith(f"zoomeval run: {refusal}")
    assert not (demo_copy / "logs").exists()


@pytest.mark.parametrize(
    ("item", "refusal"),
    [
        (
            "scales.x=1",
            "--set scales.x=1: scales is a list, not a mapping of keys; set scales itself (--set scales=...)",
        ),
        (
            "top_k.x=1",
            "--set top_k.x=1: top_k is the value 36, not a mapping of keys; set top_k itself (--set top_k=...)",
        ),
        ("limit=2", "--set limit=2: give the limit as --limit N"),
    ],
)
def test_a_set_that_steps_into_a_value_or_sets_the_limit_is_one_line(demo_copy: Path, capsys, item, refusal) -> None:
    from zoomeval.cli import main

    assert main(["run", str(demo_copy), "--set", item]) == 2
    assert capsys.readouterr() == ("", f"zoomeval run: {refusal}\n")


def test_a_run_with_set_says_so_on_screen_and_first_in_its_log_and_its_commands_repeat_it(
    demo_copy: Path, monkeypatch
) -> None:
    from zoomeval.run import launch
    from zoomeval.run.plan import plan_run

    plan, _ = plan_run([], 2, 1, settings=settings("scales=[64,256]", "top_k=3"))
    started, popen = [], subprocess.Popen

    def snakemake(argv, **kwargs):  # stands in for Snakemake: one line of output into the run's log
        started.append(argv)
        return popen([sys.executable, "-c", "print('snakemake output')"], **kwargs)

    monkeypatch.setattr(launch.subprocess, "Popen", snakemake)
    screen = io.StringIO()
    status, state, log = launch.run(plan, screen)
    line = "zoomeval run: set scales=[64, 256], top_k=3 (config/config.yaml unchanged)"
    assert status == 0 and screen.getvalue().splitlines()[0] == line
    assert log.read_text() == f"{line}\nsnakemake output\n"
    assert started[0][started[0].index("--config") + 1 :][:3] == ["limit=2", "scales=[64, 256]", "top_k=3"]
    assert "not built: browser (`zoomeval run . all --limit 2 --set 'scales=[64, 256]' --set top_k=3`)" in summary(
        plan, fed([]), 1, log
    )
