"""Every registry in one place, and the config checked and typed against them: what the Snakefile and the rules'
scripts use. It sits above the stages (it imports datasets, inference and analysis, and none of them imports it),
and imports neither torch, timm, scipy nor polars: the workflow's DAG is built with it.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from zoomeval.analysis.label_sets import LABEL_SETS
from zoomeval.core.config import Config, ConfigError, Registries, resolve
from zoomeval.core.config_schema import schema_file
from zoomeval.core.validate import check_top_k, refuse_problems, validated_config
from zoomeval.datasets.registry import ADAPTERS
from zoomeval.inference.models import MODEL_SOURCES, check_model

REGISTRIES = Registries(adapters=ADAPTERS, sources=MODEL_SOURCES, label_sets=LABEL_SETS)


def load_config(
    config: dict[str, Any], check_paths: bool = True, schema: str | Path | None = None, catalogues: Path | None = None
) -> Config:
    """Validate a config mapping in place (see :mod:`zoomeval.core.validate`) and return it typed; with
    ``catalogues`` (the folder of the cached catalogues) the workflow's own checks are made too
    (:func:`workflow_problems`), every problem listed at once."""
    more = None if catalogues is None else partial(workflow_problems, cache=catalogues)
    return refuse_problems(*validated_config(config, schema or schema_file(), REGISTRIES, check_paths, more))


def checked_config(config: dict[str, Any], catalogues: Path, check_paths: bool = True) -> tuple[Config, list[str]]:
    """What :func:`load_config` checks with ``catalogues`` (the workflow's checks when it is parsed), the typed
    config and its problems returned rather than raised: ``zoomeval run``'s preflight lists them with its own."""
    more = partial(workflow_problems, cache=catalogues)
    return validated_config(config, schema_file(), REGISTRIES, check_paths, more)


def workflow_problems(config: Config, cache: Path) -> list[str]:
    """What the workflow's main process checks beyond the config's own checks: the models' names
    (:func:`model_name_problems`), then ``top_k`` against the zoom transforms (:func:`check_top_k`)."""
    problems = model_name_problems(config, cache)
    try:
        check_top_k(config)
    except ConfigError as error:
        problems.append(str(error))
    return problems


def typed_config(config: dict[str, Any]) -> Config:
    """The typed form of a config that :func:`load_config` validated (what a job's script reads)."""
    return resolve(config, REGISTRIES)


def model_name_problems(config: Config, cache: Path) -> list[str]:
    """A line per model whose architecture, tag or output width (:func:`~zoomeval.inference.catalogue.unusable`)
    its library's catalogue (:mod:`zoomeval.inference.catalogue`) refuses, read from JSON files under ``cache`` so
    that building the DAG imports no ML library; entries whose weights are a local checkpoint or whose architecture
    a model_config defines are left to :func:`check_models`, and so are libraries that are not installed."""
    from zoomeval.inference.catalogue import cached_catalogue, check_names

    problems = []
    for spec in config.models.values():
        if MODEL_SOURCES.get(spec.source).names is None or spec.checkpoint is not None:
            continue
        if getattr(spec.options, "model_config", None) is not None:
            continue
        if (catalogue := cached_catalogue(spec.source, cache)) is not None:
            try:
                check_names(spec, catalogue, spec.source)
            except ConfigError as error:
                problems.append(str(error))
    return problems


def check_models(config: Config) -> None:
    """The checks that import torchvision or timm: every model's architecture and weights tag exist. Run when a
    workflow run starts (the Snakefile's ``onstart``), not by ``snakemake -n``."""
    for spec in config.models.values():
        check_model(spec)
