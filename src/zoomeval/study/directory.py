"""Study directories: one folder per analysis, which uses this workflow as a Snakemake module (Snakemake's own
convention for deployed workflows), so that runs with different configs never share a ``results/`` folder.

``zoomeval init DIR --preset NAME`` writes ``DIR/Snakefile`` (the module declaration), ``DIR/config/config.yaml``
(the preset, with a header saying where it came from) and ``DIR/profiles/``: ``default`` linked to the workflow's
local profile, ``slurm`` a copy to edit (partition, account). Snakemake then runs in ``DIR`` as in the checkout,
with ``DIR`` as its working directory, so the config's relative paths are relative to ``DIR``.

The workflow's files (Snakefile, rules, scripts, schema, report captions, presets, profiles) are the package data of
``zoomeval._workflow``, found through the import system (:func:`~zoomeval.core.provenance.workflow_root`): the
checkout's top level in an editable install, the package's own copy in an installed wheel. ``--workflow DIR`` names
another checkout.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from zoomeval import __version__
from zoomeval.core.layout import LOGS, RESULTS, Layout, run_layout
from zoomeval.core.provenance import workflow_root
from zoomeval.core.strict_yaml import load_config_file

#: The presets ``zoomeval init --preset`` offers: name -> config files of the checkout's ``config/`` folder, written
#: one after the other into the study's config (an overlay's keys must not repeat the file's: strict YAML refuses it).
PRESETS = {
    "quick": ("quick.yaml",),
    "demo": ("config.yaml",),
    "paper": ("paper.yaml",),
    "imagenet-hard": ("imagenet_hard.yaml",),
    "tta": ("tta.yaml",),
    "imagefolder": ("imagefolder.yaml",),
    "imagenet-val": ("imagenet_val.yaml",),
    "gpu": ("imagenet_val.yaml", "overlays/gpu.yaml"),
}

# The workflow's paths enter the generated files as Python string literals (repr) in code and in comments alike, so
# that no character of a path (a quote, a backslash, a newline, a brace) can end the string or the comment.
STUDY_SNAKEFILE = """\
# A zoomeval study (zoomeval init, zoomeval {version}): the workflow in {root} used as a Snakemake module. Run
# it here with `zoomeval run` (or e.g. `snakemake --cores 8 study`, `snakemake --cores 8 all`); {results}/ and {logs}/
# are this directory's. The config is config/config.yaml (every key: the workflow's config/README.md).
{path}from zoomeval.core.strict_yaml import check_config_file

# Read strictly first: Snakemake would render a __use_yte__ template (running its expressions) and expand aliases.
check_config_file("config/config.yaml")


configfile: "config/config.yaml"


module zoomeval:
    snakefile:
        {snakefile}
    config:
        config


use rule * from zoomeval


# The workflow's checks that import the ML stack, once when a run starts (a module's onstart is not run otherwise).
onstart:
    zoomeval.start_checks()
"""

CONFIG_HEADER = """\
# zoomeval study config, preset {preset!r} (zoomeval init, from {source}).
# Relative paths here are relative to this study directory (where snakemake runs). Every key is documented in
# the workflow's config/README.md. Commands below that name --configfile config/... run here without it.

"""


def workflow_snakefile(root: Path) -> Path:
    """The workflow's Snakefile in ``root``; refused, saying how to get one, when ``root`` holds no workflow."""
    snakefile = root / "Snakefile"
    if not (snakefile.is_file() and (root / "workflow" / "rules").is_dir()):
        raise FileNotFoundError(
            f"{root} holds no zoomeval workflow (Snakefile, workflow/rules): give --workflow a zoomeval checkout, or "
            "leave it out to use the installed one"
        )
    return snakefile


def preset_files(name: str, root: Path | None = None) -> list[Path]:
    """The config files of preset ``name``; an unknown name is refused with the known ones."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of {list(PRESETS)} (zoomeval list presets)")
    return [(root or workflow_root()) / "config" / file for file in PRESETS[name]]


#: What each preset runs, in a line (``zoomeval list presets``); the preset's config comments say more.
PRESET_SUMMARIES = {
    "quick": "A first look in about two minutes: the demo at 4 scales, every stage of Table A8, offline, on a CPU",
    "demo": "The embedded demo: generated images and one small model, offline, on a CPU",
    "paper": "The paper's setup: its classifiers and datasets (ImageNet and ObjectNet downloaded by hand), on a GPU",
    "imagenet-hard": "The ImageNet-Hard dataset card's classifier table, recomputed, on a GPU",
    "tta": "The paper's Table 5: test-time adaptation (MEMO) of three ResNet-50s, on a GPU",
    "imagefolder": "Your own image folder (a sub-folder per ImageNet class) with two ResNet-50s",
    "imagenet-val": "ImageNet val (50,000 images) with ResNet-50 at the default settings (fp32, not compiled)",
    "gpu": "ImageNet val (50,000 images) with ResNet-50 on one GPU, fast settings (bf16, compiled)",
}
#: A checkout's package folder goes first on the study's path (``--workflow`` may name another checkout than the
#: installed one); an installed wheel's workflow uses the package installed with it.
_SOURCE_PATH = "import sys\n\nsys.path.insert(0, {src})  # the package of the workflow's checkout\n"

#: The command in a preset's opening comment (the demo's has none).
_COMMAND = re.compile(r"^#\s+(snakemake .*)$", re.M)
#: Tables the ``study`` target builds (:mod:`zoomeval.run.targets`): a preset command naming one needs no target.
_STUDY_TABLES = (
    "table_a8",
    "table_1",
    "table_zoom_groups",
    "table_aggregation",
    "table_zoom_policies",
    "table_imagenet_hard",
    "table_multilabel",
)
#: Config values a user must replace: a path under /data (the manual downloads) or a placeholder sha256 of zeros.
_PLACEHOLDER = re.compile(r"^(/data/.*|0{64})$")


def preset_summary(name: str) -> str:
    """What preset ``name`` runs, in a line; an unknown name is refused with the known ones."""
    preset_files(name)
    return PRESET_SUMMARIES[name]


def init_study(directory: Path, preset: str = "quick", root: Path | None = None) -> list[Path]:
    """Write a study directory for ``preset`` (see the module docstring); returns the paths written. A directory
    that already holds a Snakefile or config is refused rather than overwritten."""
    root = root or workflow_root()
    snakefile, configs = workflow_snakefile(root), preset_files(preset, root)
    written = [directory / "Snakefile", directory / "config" / "config.yaml"]
    if existing := [str(p) for p in [*written, directory / "profiles"] if p.exists() or p.is_symlink()]:
        raise FileExistsError(f"{', '.join(existing)} already exist(s); choose a new directory for the study")
    for config in configs:  # a preset file the workflow would refuse is refused before anything is written
        load_config_file(config)
    (directory / "config").mkdir(parents=True, exist_ok=True)
    root_text, literal, src = (repr(str(p.resolve())) for p in (root, snakefile, root / "src"))
    path = _SOURCE_PATH.format(src=src) if (root / "src" / "zoomeval").is_dir() else ""
    written[0].write_text(
        STUDY_SNAKEFILE.format(
            version=__version__, root=root_text, snakefile=literal, path=path, results=RESULTS, logs=LOGS
        )
    )
    sources = " + ".join(repr(str(c.resolve())) for c in configs)
    header = CONFIG_HEADER.format(preset=preset, source=sources)
    written[1].write_text(header + "\n".join(c.read_text() for c in configs))
    profiles = directory / "profiles"
    profiles.mkdir()
    os.symlink((root / "profiles" / "default").resolve(), profiles / "default", target_is_directory=True)
    (profiles / "slurm").mkdir()
    shutil.copyfile(root / "profiles" / "slurm" / "config.yaml", profiles / "slurm" / "config.yaml")
    return [*written, profiles / "default", profiles / "slurm" / "config.yaml"]


def preset_targets(name: str, root: Path | None = None) -> list[str]:
    """The targets of the command the preset's opening config comment gives, as ``zoomeval run`` takes them: the
    words that are ``all`` or a results path, less the tables its default target (``study``) builds anyway."""
    lines = preset_files(name, root)[0].read_text().splitlines()
    found = _COMMAND.findall("\n".join(itertools.takewhile(lambda line: line.startswith("#"), lines)))
    words = shlex.split(found[0], comments=True) if found else []
    targets = [w for w in words if w == "all" or w.startswith(f"{RESULTS}/")]
    return [t for t in targets if Path(t).stem not in _STUDY_TABLES or Path(t).parent != Path(RESULTS)]


def run_steps(name: str, root: Path | None = None) -> list[str]:
    """The preset's next steps in its study directory, each a ``zoomeval`` command with a comment."""
    targets = preset_targets(name, root)
    run = shlex.join(["zoomeval", "run", *([".", *targets] if targets else [])])
    sealed = not targets or targets == ["all"]
    what = f"the study: its tables, sealed in {Layout().path('study_index')}" if sealed else " and ".join(targets)
    what += " and the rest of `all`" if targets == ["all"] else ""
    steps = [
        f"{run} --limit 2   # a smoke test: the first 2 images of each dataset, in {run_layout(2).root}",
        f"{run}   # the preflight, then {what}",
    ]
    return [*steps, "zoomeval leaderboard .   # its results, read through the seal"] if sealed else steps


def placeholders(config: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted key, value)`` of every value in ``config`` that names no real file yet (see ``_PLACEHOLDER``)."""
    if isinstance(config, dict):
        for name, value in config.items():
            yield from placeholders(value, f"{key}.{name}" if key else str(name))
    elif isinstance(config, list):
        for i, value in enumerate(config):
            yield from placeholders(value, f"{key}[{i}]")
    elif isinstance(config, str) and _PLACEHOLDER.match(config):
        yield key, config
