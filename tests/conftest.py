import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from zoomeval.core.layout import Layout
from zoomeval.inference.catalogue import CACHE as CATALOGUE_CACHE

ROOT = Path(__file__).resolve().parents[1]
#: The demo's results layout (a test's study directory has the default results root).
LAYOUT = Layout()


def snakemake_command(workdir: Path, *args: str, cores: int | None = 2) -> list[str]:
    """The command line that runs the project's workflow in ``workdir`` with ``workdir/config.yaml``; ``cores=None``
    leaves the core count to the workflow profile, as a plain ``snakemake`` call does."""
    cores_flag = ["--cores", str(cores)] if cores else []
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        *cores_flag,
        *args,
    ]


#: The model libraries' catalogues (zoomeval.inference.catalogue: a library's names, listed by a child process that
#: imports it) that the session's runs have written, by file name: each run finds them in its working directory's
#: cache, so a library is listed once per session, not once per test (the file names carry the library's version).
CATALOGUES: dict[str, bytes] = {}


def run_snakemake(
    workdir: Path, *args: str, check: bool = True, cores: int | None = 2
) -> subprocess.CompletedProcess[str]:
    """Run the project's workflow in ``workdir`` (:func:`snakemake_command`), with the session's catalogues."""
    cache = workdir / CATALOGUE_CACHE
    for name, text in CATALOGUES.items():
        if not (cache / name).exists():
            cache.mkdir(parents=True, exist_ok=True)
            (cache / name).write_bytes(text)
    cmd = snakemake_command(workdir, *args, cores=cores)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    CATALOGUES.update({path.name: path.read_bytes() for path in cache.glob("*.json")})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def write_config(workdir: Path, **overrides: object) -> dict:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config.update(overrides)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return config


def stand_in_data_paths(config: dict, folder: Path) -> None:
    """Replace the ``/data/...`` inputs of a shipped config's datasets by empty files in ``folder`` (stand-ins for
    the manually downloaded archives), so the config plans without the data."""
    for name, entry in config["datasets"].items():
        for key, spec in entry.items():
            if isinstance(spec, str) and spec.startswith("/data/"):
                entry[key] = str(folder / f"{name}-{key}.tar")
                (folder / f"{name}-{key}.tar").touch()


@pytest.fixture(params=[(0o022, 0o644), (0o077, 0o600)], ids=["umask022", "umask077"])
def umask_mode(request) -> Iterator[int]:
    """Run the test under a umask (022, then 077); yields the mode a new file must get under it."""
    mask, mode = request.param
    old = os.umask(mask)
    yield mode
    os.umask(old)


@pytest.fixture
def snakemake_run():
    return run_snakemake


@pytest.fixture
def config_writer():
    return write_config


# A small demo run (one dataset variant, three scales, shards of two images) shared by the tests that kill a run
# and resume it (tests/test_resume.py, tests/test_slurm.py) and compare it with one uninterrupted local run.
# table_aggregation reads the aggregates that predict writes beside its predictions.
SMALL_TARGETS = tuple(LAYOUT.path(table, ext="csv") for table in ("table_a8", "table_1", "table_aggregation"))
SMALL_PREDICTIONS = LAYOUT.path("predictions", dataset="demo", variant="original", model="efficientnet_lite0")
SMALL_PREDICT_LOG = LAYOUT.log("predict", dataset="demo", variant="original", model="efficientnet_lite0")
SMALL_SHARD_IMAGES = 2


def write_small_config(workdir: Path) -> dict:
    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return write_config(
        workdir,
        scales=[64, 224, 256],
        top_k=3,
        datasets={"demo": {**demo["datasets"]["demo"], "variants": ["original"]}},
        stats={"pairs": []},
        inference={**demo["inference"], "shard_images": SMALL_SHARD_IMAGES},
    )


@pytest.fixture(scope="session")
def small_reference(tmp_path_factory) -> Path:
    """The working directory of one uninterrupted local run of the small demo (to compare outputs with)."""
    workdir = tmp_path_factory.mktemp("small_reference")
    write_small_config(workdir)
    run_snakemake(workdir, *SMALL_TARGETS)
    return workdir


# The shared end-to-end study: config/config.yaml's demo (both datasets, every variant, the statistics) at two scales,
# top-3, with zoom policies cross-validated in 3 folds and transferred from demo to demo_clutter; `all` is built once
# per test session, under umask 022. Tests only read it (a dry run or a --report written elsewhere is reading); a test
# that runs jobs or changes a file works on a copy (copy_study).
DEMO_SCALES = [64, 256]


def write_demo_config(workdir: Path) -> dict:
    return write_config(
        workdir, scales=DEMO_SCALES, top_k=3, policies={"folds": 3, "transfer": [["demo", "demo_clutter"]]}
    )


@pytest.fixture(scope="session")
def demo_study(tmp_path_factory) -> Path:
    """The working directory of the shared study (above), finished: every output of `all`."""
    workdir = tmp_path_factory.mktemp("demo_study")
    write_demo_config(workdir)
    old = os.umask(0o022)  # the subprocess inherits it
    try:
        run_snakemake(workdir, "all")
    finally:
        os.umask(old)
    return workdir


@pytest.fixture(scope="session")
def first_study(tmp_path_factory) -> dict:
    """The README's first study walked from the installed wheel in an empty folder (tests/first_study.py): read by
    tests/test_run.py's README-path tests and tests/test_wheel.py, which share its group (built once)."""
    from tests.first_study import walk

    return walk(tmp_path_factory.mktemp("first_study"))


def copy_study(study: Path, folder: Path) -> Path:
    """A copy of a finished working directory that Snakemake finds up to date: the files with their modification
    times (copy2), .snakemake's records of the jobs with them (relative paths)."""
    shutil.copytree(study, folder, symlinks=True)
    return folder


# make test runs the suite in one process per core (pytest-xdist, --dist loadgroup), tests handed out one at a time
# but for groups, which stay in one process so that what they share is built once there: the tests that read a
# session study (a group for each), and a file whose tests share a module-scoped study (`pytestmark =
# pytest.mark.xdist_group(...)` in the file). The files reading a session study, then the other end-to-end files, are
# handed out first (in this order: make test turns xdist's reordering by group size off), so that the longest work
# does not start last.
SESSION_STUDIES = ("demo_study", "small_reference")


@pytest.hookimpl(tryfirst=True)  # xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shared = set()
    for item in items:
        study = next((name for name in SESSION_STUDIES if name in item.fixturenames), None)
        if study and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(study))
            shared.add(item.path)
    end_to_end = {item.path for item in items if item.get_closest_marker("workflow")}
    items.sort(key=lambda item: (item.path not in shared, item.path not in end_to_end))
