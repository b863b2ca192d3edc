"""The checks ``zoomeval run`` makes before it starts Snakemake, each problem collected so that one run lists them
all, one line each: first every check the workflow makes of the config when it is parsed (and so ``snakemake -n``:
the same functions, :func:`zoomeval.registries.checked_config`: keys, local inputs that do not exist, model
architectures and tags against the libraries' name lists with the closest names, ``top_k`` against the zoom
transforms), then what the workflow checks when a run starts (every model's source check, :func:`model_problems`:
a timm tag without Hub weights, local weights files and entry points), model weights that are neither present nor
to be had (a download that no offline route holds and whose host cannot be reached), GPU settings on a machine
without a GPU and free disk against what extraction and predictions will need.

Paths are relative to the working directory, the study's."""

from __future__ import annotations

import functools
import os
import shutil
import socket
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from urllib.parse import urlparse

from zoomeval.core.config import Config, ConfigError, ModelSpec
from zoomeval.core.devices import cuda_index, gpus_at_most
from zoomeval.core.extras import installed, missing_extra
from zoomeval.core.layout import Layout
from zoomeval.core.zoom import ZoomGrid
from zoomeval.datasets.build import most_images
from zoomeval.datasets.inputs import Input, plan_all
from zoomeval.inference.models import MODEL_SOURCES, check_model, local_checkpoint, weights_folder
from zoomeval.masks import SAM_METHODS

#: Bytes a prediction file and its shards take per (image, zoom transform) row, an upper estimate (the demo's
#: efficientnet_lite0 files take about 5; a 1000-class model on real images more): shards are kept until the
#: job's last one is written, hence twice the file.
BYTES_PER_ROW = 2 * 16
#: ... with store_top5 (five more classes and probabilities per row)
BYTES_PER_ROW_TOP5 = 2 * 48
DOCS = "docs/how-to/offline.md"
#: The sources whose weights come from the Hugging Face Hub through huggingface_hub's cache.
HUB_SOURCES = ("timm", "open_clip")


def host_answers(host: str, timeout: float = 5.0) -> bool:
    """Whether a TCP connection to ``host``:443 opens within ``timeout`` seconds."""
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def _hub_host() -> str | None:
    """The Hugging Face endpoint's host, or None in huggingface_hub's offline mode (``HF_HUB_OFFLINE``)."""
    from huggingface_hub import constants

    return None if constants.is_offline_mode() else urlparse(constants.ENDPOINT).hostname


def _hub_files(spec: ModelSpec) -> tuple[str, list[str], str | None]:
    """The Hugging Face repo, candidate file names and revision of a timm or open_clip model's weights."""
    if spec.source == "timm":
        from zoomeval.inference.sources.timm_models import HF_WEIGHTS_FILES, hub_source

        repo_id, revision = hub_source(f"{spec.architecture}.{spec.weights}")
        return repo_id, list(HF_WEIGHTS_FILES), revision
    from zoomeval.inference.sources.open_clip_models import hub_files

    return (*hub_files(spec), None)


def _offline_copy(spec: ModelSpec) -> tuple[bool, str | None]:
    """Whether an offline route already holds ``spec``'s weights (torch's hub cache, huggingface_hub's cache), and
    the host a download would ask otherwise (None: none can be asked)."""
    if spec.source == "torchvision":
        import torch

        from zoomeval.inference.sources.torchvision_models import checkpoint

        url = checkpoint(spec.architecture, spec.weights)[0]
        cached = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(url)
        return cached.is_file(), urlparse(url).hostname
    if spec.source not in HUB_SOURCES:
        return False, None  # a checkpoint named by its sha256 is placed by hand
    from huggingface_hub import try_to_load_from_cache

    repo_id, names, revision = _hub_files(spec)
    found = [try_to_load_from_cache(repo_id, name, revision=revision) for name in names]
    return any(isinstance(path, str) for path in found), _hub_host()


def missing_weights(
    config: Config, reach: Callable[[str], bool] = host_answers, found: Sequence[str] = ()
) -> Iterator[str]:
    """A line for each model whose weights are neither in its weights folder nor to be had: a download that no
    offline route holds, from a host that does not answer (a missing local checkpoint is the config's problem);
    not for a model ``found`` names (a misspelt tag names no download)."""
    for spec in config.models.values():
        if _named(spec, list(found)):
            continue
        if MODEL_SOURCES.get(spec.source).fetch is None or local_checkpoint(spec) is not None:
            continue  # the weights ship in a package, or the local file is linked into place
        folder = Path(str(weights_folder(spec, config.resources)))
        if folder.is_dir() and any(folder.iterdir()):
            continue
        cached, host = _offline_copy(spec)
        if cached or (host is not None and reach(host)):
            continue
        why = f"{host} cannot be reached" if host else "nothing may download them (HF_HUB_OFFLINE, or no download)"
        yield f"models.{spec.name}: its weights are not in {folder} nor in an offline cache, and {why}; see {DOCS}"


def _named(spec: ModelSpec, found: list[str]) -> bool:
    """Whether a line of ``found`` is about model ``spec`` (starts with its key)."""
    return any(line.startswith((f"models.{spec.name}.", f"models.{spec.name}:")) for line in found)


def _caught(check: Callable[[], None]) -> list[str]:
    try:
        check()
    except ConfigError as error:
        return [str(error)]
    return []


def model_problems(config: Config, found: list[str]) -> list[str]:
    """A line for each model that its source's check refuses (:func:`~zoomeval.inference.models.check_model`, what
    the workflow's ``onstart`` runs, every model here, not the first only): a timm tag without weights on the Hub,
    an architecture, preset or entry point that does not exist (with the closest names), a local file whose sha256
    is not the pinned one, a normalisation that is not the weights'; not for a model ``found`` already names."""
    return [
        line
        for spec in config.models.values()
        if not _named(spec, found)
        for line in _caught(partial(check_model, spec))
    ]


def _rows_per_image(config: Config) -> int:
    return ZoomGrid(config.scales).n_transforms


def _rows(manifest: Path) -> int | None:
    """A manifest's image count (its Parquet footer), or None where it is not built or not readable (its job,
    which reads it, says why)."""
    import pyarrow.parquet as pq

    try:
        return pq.read_metadata(manifest).num_rows
    except (OSError, ValueError):
        return None


def expected_images(config: Config, dataset: str, layout: Layout) -> int | None:
    """The images a dataset's jobs will predict: the count of this run's manifest where it is built; else the count
    that bounds it (the full run's manifest, of which a limited run takes the first images, or the most the adapter
    can give), cut to the limit; else unknown (a limit alone is no count: a limit above the images would be)."""
    if (n := _rows(Path(layout.path("manifest", dataset=dataset)))) is not None:
        return n
    bound = _rows(Path(Layout().path("manifest", dataset=dataset)))
    bound = most_images(config.datasets[dataset]) if bound is None else bound
    return bound if bound is None or config.limit is None else min(bound, config.limit)


def disk_needs(config: Config, inputs: dict[tuple[str, str], Input], layout: Layout) -> dict[str, int]:
    """Bytes still to be written, by folder: each archive not yet extracted (its size, about what its images take
    once extracted) under the resources folder, and the prediction files not yet written under the layout's results
    root (for datasets whose number of images is known)."""
    needs = {config.resources: 0, layout.root: 0}
    for item in inputs.values():
        archive = Path(str(item.archive)) if item.archive else None
        if item.extracted and not Path(item.extracted).is_dir() and archive is not None and archive.is_file():
            needs[config.resources] += archive.stat().st_size
    per_row = BYTES_PER_ROW_TOP5 if config.inference.store_top5 else BYTES_PER_ROW
    for name, dataset in config.datasets.items():
        for variant in dataset.variants:
            for model in config.models:
                done = Path(layout.path("predictions", dataset=name, variant=variant, model=model))
                if not done.is_file() and (n := expected_images(config, name, layout)) is not None:
                    needs[layout.root] += n * _rows_per_image(config) * per_row
    return needs


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent (where a folder still to be made will be)."""
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


def short_disk(
    needs: dict[str, int], free: Callable[[Path], int] = lambda p: shutil.disk_usage(p).free
) -> Iterator[str]:
    """A line for each file system with less free space than the folders on it need (``needs``: bytes by folder)."""
    by_device: dict[int, tuple[Path, int, list[str]]] = {}
    for folder, size in needs.items():
        where = _existing(Path(folder))
        path, total, folders = by_device.get(where.stat().st_dev, (where, 0, []))
        by_device[where.stat().st_dev] = (path, total + size, [*folders, folder])
    for path, total, folders in by_device.values():
        if total and (available := free(path)) < total:
            yield (
                f"disk: {', '.join(folders)} need about {total / 1e9:.1f} GB (extracted archives, predictions) "
                f"but {path} has {available / 1e9:.1f} GB free"
            )


def gpu_without_gpu(config: Config, gpus: int | None) -> Iterator[str]:
    """A line when the config is set up for a GPU (a CUDA device, half precision) and this machine shows none."""
    settings = config.inference
    if gpus:
        return
    if cuda_index(settings.device) is not None:
        yield f"inference.device: {settings.device!r} but this machine has no GPU (the NVIDIA driver lists none)"
    elif settings.precision != "fp32":
        yield (
            f"inference.precision: {settings.precision} is a GPU setting (a GPU preset?) but this machine has no "
            "GPU (the NVIDIA driver lists none); run it on the GPU machine, or use fp32 on the CPU"
        )


def missing_extras(config: Config, has: Callable[[str], bool] = installed) -> list[str]:
    """Each config key whose value needs an extra of zoomeval that is not installed (Segment Anything for a SAM
    mask or count method, open_clip for an open_clip model), naming the extra to install."""
    users = [
        *[
            (f"datasets.{name}.{key}", value, "sam")
            for name, dataset in config.datasets.items()
            for key, value in (("mask_method", dataset.mask_method), ("count_method", dataset.count_method))
            if value in SAM_METHODS
        ],
        *[
            (f"models.{name}.source", spec.source, "clip")
            for name, spec in config.models.items()
            if spec.source == "open_clip"
        ],
    ]
    return [missing_extra(key, value, extra) for key, value, extra in users if not has(extra)]


def problems(
    config: Config, layout: Layout, found: list[str], reach: Callable[[str], bool] = host_answers
) -> list[str]:
    """Every problem the preflight finds (empty: Snakemake may start): ``found``, the workflow's own checks of the
    config (:func:`zoomeval.registries.checked_config`: keys, local paths, model names with the closest, ``top_k``),
    then the extras of zoomeval it needs (:func:`missing_extras`), the checks the workflow makes when a run starts (the
    models, :func:`model_problems`), weights, GPU
    and disk; a model that a line already names is not checked again (its weights cannot be looked up)."""
    inputs, reach = plan_all(config), functools.cache(reach)  # each host asked once
    found = [*found, *missing_extras(config), *model_problems(config, found)]
    found += missing_weights(config, reach, found)
    return [*found, *gpu_without_gpu(config, gpus_at_most()), *short_disk(disk_needs(config, inputs, layout))]
