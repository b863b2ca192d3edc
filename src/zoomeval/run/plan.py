"""What a ``zoomeval run`` will start, decided before anything starts: its targets (checked,
:mod:`zoomeval.run.targets`), the run's layout, cores, GPUs and report, and Snakemake's command line, in which
nothing a user or a file gives becomes an option; and the problems the preflight finds (:mod:`zoomeval.preflight`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from zoomeval.core.config import Config
from zoomeval.core.devices import gpus_at_most
from zoomeval.core.layout import Layout, run_layout
from zoomeval.core.strict_yaml import load_config_file, load_yaml, refuse_templating
from zoomeval.inference.catalogue import CACHE as CATALOGUES
from zoomeval.preflight import problems
from zoomeval.registries import checked_config
from zoomeval.run.targets import checked_targets

#: The study's config, as `zoomeval init` writes it and the study's Snakefile reads it.
CONFIG = Path("config") / "config.yaml"
#: The workflow profile Snakemake reads beside the study's Snakefile.
PROFILE = Path("profiles") / "default" / "config.yaml"
#: Profile keys that would make Snakemake read a Snakefile or config that zoomeval run has not checked.
PROFILE_CODE_KEYS = ("snakefile", "configfile", "configfiles")
#: The logger plugin's package (zoomeval.run.logger_plugin), which Snakemake must find on its path.
PLUGIN = "snakemake_logger_plugin_zoomeval"


@dataclass(frozen=True)
class RunPlan:
    """What ``zoomeval run`` starts: targets, the run's layout (its results and logs roots, relative to the study
    directory), config, cores, GPUs, and whether Snakemake writes its report after the run."""

    targets: tuple[str, ...]
    layout: Layout
    config: Config
    cores: int
    gpus: int
    report: bool = False

    @property
    def limit(self) -> int | None:
        return self.config.limit

    def argv(self, events: str) -> list[str]:
        """Snakemake's command line (a list: nothing is parsed by a shell), its events written to ``events``; the
        targets after ``--``, where Snakemake reads no word as an option."""
        argv = [sys.executable, "-m", "snakemake", "--cores", str(self.cores), "--resources", f"gpu={self.gpus}"]
        argv += ["--config", f"limit={self.limit}"] if self.limit is not None else []
        argv += ["--report", self.layout.path("report"), "--report-after-run"] if self.report else []
        return [*argv, "--logger", "zoomeval", "--logger-zoomeval-events", events, "--", *self.targets]


def environment() -> dict[str, str]:
    """Snakemake's environment: this one, with the plugin's folder on the path (an install whose finder hides it
    from a path scan still has it) and no global profile (``$SNAKEMAKE_PROFILE`` could name another Snakefile or
    config; the study's own profile is read and checked)."""
    import importlib.util

    spec = importlib.util.find_spec(PLUGIN)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"{PLUGIN} is not importable: reinstall zoomeval (`pip install -e .`)")
    env = {key: value for key, value in os.environ.items() if key != "SNAKEMAKE_PROFILE"}
    folder = str(Path(spec.origin).parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, env.get("PYTHONPATH")]))
    return env


def refuse_unchecked_files() -> None:
    """Every YAML file Snakemake reads before the workflow's code runs is read strictly first (a ``__use_yte__``
    template, an alias bomb; the config, read by :func:`plan_run`, must be a mapping too), and a profile that names
    another Snakefile or config is refused."""
    if PROFILE.is_file():
        refuse_templating(PROFILE)
        profile = load_yaml(PROFILE)
        for key in PROFILE_CODE_KEYS if isinstance(profile, dict) else ():
            if key in profile:
                raise ValueError(
                    f"{PROFILE}: key {key!r} makes Snakemake read a file zoomeval run does not check; "
                    "remove it (a study's Snakefile and config are its own)"
                )


def plan_run(
    targets: Sequence[str], limit: int | None, cores: int | None, report: bool = False
) -> tuple[RunPlan, list[str]]:
    """The run in the current directory (a study's), and the problems the preflight finds in it."""
    if not CONFIG.is_file():
        raise FileNotFoundError(f"{Path.cwd() / CONFIG} does not exist: give a study directory (zoomeval init)")
    refuse_unchecked_files()
    raw = load_config_file(CONFIG)
    if limit is not None:
        raw["limit"] = limit
    config, found = checked_config(raw, CATALOGUES)  # the workflow's own checks, every problem at once
    layout = run_layout(config.limit)
    chosen = checked_targets(targets, layout)
    plan = RunPlan(chosen, layout, config, cores or len(os.sched_getaffinity(0)), gpus_at_most() or 0, report)
    return plan, problems(config, layout, found)
