"""``torchvision``: ``torchvision.models`` with a pinned weights tag (e.g. ``IMAGENET1K_V1``).

The checkpoint is downloaded from the tag's URL into the workflow's weights folder under its published file name,
whose hash prefix (torch.hub's convention, e.g. ``resnet18-f37072fd.pth``) every load checks; a copy already in
torch's own hub cache is checked against that prefix and used instead. It is read with
``torch.load(..., weights_only=True)``; the model is normalised as the tag's transforms say.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.core.io import link_or_copy
from zoomeval.inference.catalogue import Catalogue, check_names
from zoomeval.inference.models import MODEL_SOURCES, LoadedModel, fetched_file, hooks, verified_sha256

#: Shortest hash prefix accepted in a torchvision checkpoint's file name.
MIN_HASH_PREFIX = 8


def checkpoint(architecture: str, tag: str) -> tuple[str, str]:
    """The URL of a torchvision weights tag and the sha256 prefix its file name carries."""
    import torch
    import torchvision

    url = torchvision.models.get_model_weights(architecture)[tag].url
    match = torch.hub.HASH_REGEX.search(os.path.basename(url))
    prefix = match.group(1) if match else ""
    if len(prefix) < MIN_HASH_PREFIX:
        raise ValueError(f"{url}: the file name carries no hash to check the checkpoint against")
    return url, prefix


def names() -> Catalogue:
    """torchvision's classification models, the tags of their weight enums (``DEFAULT`` is an alias, not a tag) and
    how many categories each one's meta names."""
    import torchvision

    archs = tuple(torchvision.models.list_models(module=torchvision.models))
    enums = {arch: list(torchvision.models.get_model_weights(arch)) for arch in archs}
    tags = {arch: tuple(w.name for w in weights) for arch, weights in enums.items() if weights}
    # the weights' class names (None for vgg16's IMAGENET1K_FEATURES, whose classifier is untrained)
    widths = {f"{arch}.{w.name}": len(w.meta.get("categories") or ()) for arch, ws in enums.items() for w in ws}
    return Catalogue("torchvision", torchvision.__version__, archs, tags, widths=widths)


def canonical(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """torchvision's weight enum spelling (``weights: ResNet50_Weights.IMAGENET1K_V2``, as in ``get_weight``) as the
    tag; the enum must be the architecture's (torchvision names it ``<architecture>_Weights``, case aside)."""
    enum, dot, tag = str(entry.get("weights", "")).rpartition(".")
    if not dot:
        return entry
    if enum.casefold() != f"{entry['architecture']}_weights".casefold():
        raise ConfigError(
            f"models.{name}.weights: {enum} is not the weights enum of {entry['architecture']}; "
            f"give its tag alone ({tag}) or the architecture's enum"
        )
    return {**entry, "weights": tag}


def check(spec: ModelSpec) -> None:
    """The architecture must be a torchvision model and the weights one of its pinned tags (not ``DEFAULT``)."""
    check_names(spec, names(), "torchvision")


def fetch(spec: ModelSpec, folder: Path) -> None:
    """Place the checkpoint in ``folder`` under its published name, checked against the hash prefix in that name:
    from torch's hub cache (``torch.hub.get_dir()/checkpoints``, ``TORCH_HOME``) if it holds the file, else
    downloaded (resumed, retried, at once refused where the host cannot be reached)."""
    import torch

    from zoomeval.datasets.download import download

    url, prefix = checkpoint(spec.architecture, spec.weights)
    name = os.path.basename(url)
    cached = Path(torch.hub.get_dir()) / "checkpoints" / name
    if cached.is_file():
        try:
            verified_sha256(cached, prefix, f"the hash prefix of torchvision's file name {name}", "delete it")
        except ValueError as exc:
            print(f"torch's hub cache: {exc}; downloading it instead")
        else:
            print(f"using {cached} from torch's hub cache (its sha256 starts with {prefix})")
            link_or_copy(cached, folder / name)
            return
    download(url, folder / name, prefix, elsewhere=f", or in torch's hub cache as {cached}, where it is checked")


@contextmanager
def _weights_only(url: str, path: Path) -> Iterator[None]:
    # torchvision's builders read their checkpoint through torch.hub with weights_only=False. Route that
    # call (``WeightsEnum.get_state_dict``) to a weights_only load of the file we verified, and keep the
    # builders' own per-weights settings (number of classes, image size).
    import torch
    from torchvision.models._api import WeightsEnum

    def load(self: WeightsEnum, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if self.url != url:
            raise RuntimeError(f"torchvision asked for {self.url}, expected {url}")
        return torch.load(path, map_location="cpu", weights_only=True)

    original = WeightsEnum.get_state_dict
    WeightsEnum.get_state_dict = load  # type: ignore[method-assign]
    try:
        yield
    finally:
        WeightsEnum.get_state_dict = original  # type: ignore[method-assign]


def preset_transform(preset: Any) -> Any:
    """A weights' ``transforms()`` preset (``ImageClassification``) as its steps on a PIL image and normalisation."""
    from torchvision import transforms as T

    from zoomeval.inference.eval_transform import EvalTransform

    steps = [T.Resize(preset.resize_size, preset.interpolation, antialias=True), T.CenterCrop(preset.crop_size)]
    return EvalTransform(T.Compose(steps), tuple(preset.mean), tuple(preset.std), repr(preset))


def evaluation(spec: ModelSpec, module: Any) -> Any:
    """The weights' ``transforms()`` preset (e.g. Resize(256, bilinear) + CenterCrop(224) for ResNet-50 V1,
    Resize(600, bicubic) + CenterCrop(600) for EfficientNet-B7)."""
    import torchvision

    return preset_transform(torchvision.models.get_model_weights(spec.architecture)[spec.weights].transforms())


@MODEL_SOURCES.register("torchvision", **hooks(check, fetch, evaluation, names, canonical), library="torchvision")
def load(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    import torchvision

    url, prefix = checkpoint(spec.architecture, spec.weights)
    path = fetched_file(weights, re.escape(os.path.basename(url)), spec)
    source = f"the hash prefix of torchvision's file name {path.name}"
    sha = verified_sha256(path, prefix, source, f"delete {path.parent} to download it again")
    with _weights_only(url, path):
        module = torchvision.models.get_model(spec.architecture, weights=spec.weights)
    preset = torchvision.models.get_model_weights(spec.architecture)[spec.weights].transforms()
    return LoadedModel(module, sha, tuple(preset.mean), tuple(preset.std))  # type: ignore[arg-type]
