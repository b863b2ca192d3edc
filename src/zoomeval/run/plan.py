"""What a ``zoomeval run`` will start, decided before anything starts: its targets (checked,
:mod:`zoomeval.run.targets`), the run's layout, cores, GPUs and report, and Snakemake's command line, in which
nothing a user or a file gives becomes an option; and the problems the preflight finds (:mod:`zoomeval.preflight`).
The ``--set`` settings are parsed, applied to the config and checked in :mod:`zoomeval.run.settings`."""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoomeval.core.config import Config, ConfigError
from zoomeval.core.devices import gpus_at_most
from zoomeval.core.layout import Layout, run_layout
from zoomeval.core.strict_yaml import load_config_file, load_yaml, refuse_templating
from zoomeval.inference.catalogue import CACHE as CATALOGUES
from zoomeval.preflight import problems
from zoomeval.registries import checked_config
from zoomeval.run.settings import CONFIG_KEY, Setting, overrides, refuse_lost_settings, setting_text, with_settings
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
    directory), config, cores, GPUs, whether Snakemake writes its report after the run, the ``--set`` settings as
    given (``settings``: dotted key and value, in order) and what they make of the config's top-level keys as
    Snakemake's ``--config`` gets them (``overrides``: each key touched and a mapping of the set keys only, their
    checked values; ``limit`` is given by :attr:`limit`)."""

    targets: tuple[str, ...]
    layout: Layout
    config: Config
    cores: int
    gpus: int
    report: bool = False
    settings: tuple[Setting, ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def limit(self) -> int | None:
        return self.config.limit

    def config_items(self) -> list[str]:
        """The words after Snakemake's ``--config``: ``limit=N`` and ``KEY=<JSON>`` per override (JSON is YAML's flow
        style, which Snakemake reads); each one word, starting with a config key of the schema's."""
        items = [f"limit={self.limit}"] if self.limit is not None else []
        for key, value in self.overrides:
            if not CONFIG_KEY.fullmatch(key) or key == "limit":
                raise ValueError(f"{key!r} is no top-level config key that --config may set")
            items.append(f"{key}={json.dumps(value)}")
        return items

    def argv(self, events: str) -> list[str]:
        """Snakemake's command line (a list: nothing is parsed by a shell), its events written to ``events``; the
        targets after ``--``, where Snakemake reads no word as an option."""
        argv = [sys.executable, "-m", "snakemake", "--cores", str(self.cores), "--resources", f"gpu={self.gpus}"]
        argv += ["--config", *items] if (items := self.config_items()) else []
        argv += ["--report", self.layout.path("report"), "--report-after-run"] if self.report else []
        return [*argv, "--logger", "zoomeval", "--logger-zoomeval-events", events, "--", *self.targets]

    def settings_line(self) -> str | None:
        """``zoomeval run: set KEY=VALUE, ...`` for a run with ``--set`` (None without), shown and logged before the
        run: its config is not the file's."""
        if not self.settings:
            return None
        shown = ", ".join(setting_text(setting) for setting in self.settings)
        return f"zoomeval run: set {shown} ({CONFIG} unchanged)"


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
    targets: Sequence[str],
    limit: int | None,
    cores: int | None,
    report: bool = False,
    settings: Sequence[Setting] = (),
) -> tuple[RunPlan, list[str]]:
    """The run in the current directory (a study's), with ``settings`` (``--set``) applied to its config before it
    is checked, and the problems the preflight finds in it."""
    if not CONFIG.is_file():
        raise FileNotFoundError(f"{Path.cwd() / CONFIG} does not exist: give a study directory (zoomeval init)")
    refuse_unchecked_files()
    raw = load_config_file(CONFIG)
    file = copy.deepcopy(raw)
    for key, value in settings:
        if key.split(".")[0] == "limit":  # its own option: its own results tree, its targets moved there
            raise ConfigError(f"--set {setting_text((key, value))}: give the limit as --limit N")
    with_settings(raw, settings)
    if limit is not None:
        raw["limit"] = limit
    config, found = checked_config(raw, CATALOGUES)  # the workflow's own checks, every problem at once
    layout = run_layout(config.limit)
    chosen = checked_targets(targets, layout)
    plan = RunPlan(
        chosen,
        layout,
        config,
        cores or len(os.sched_getaffinity(0)),
        gpus_at_most() or 0,
        report,
        tuple(settings),
        overrides(settings, raw),
    )
    found = problems(config, layout, found)
    if settings and not found:  # a run that will start: Snakemake must get the config checked here
        refuse_lost_settings(file, raw, plan.config_items(), CONFIG)
    return plan, found
