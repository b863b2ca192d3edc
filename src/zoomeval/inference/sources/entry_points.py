"""``entry_point``: a model defined in your own installed Python package, which names a function of it under the
entry-point group ``zoomeval.models`` (in its ``pyproject.toml``: ``[project.entry-points."zoomeval.models"]`` and
``my_net = "my_package.models:my_net"``). The config names the entry point only (``architecture: my_net``), never a
path or code; the weights are a local ``checkpoint`` pinned by its sha256 in ``weights``, placed, checked and read as
a ``checkpoint`` entry's (:mod:`.checkpoint`).

The function takes no argument and returns a :class:`ModelDefinition` (or its three values as a tuple):

* ``module``: the network (a ``torch.nn.Module``), into which the checkpoint is loaded strictly;
* ``transform``: its evaluation transform, a torchvision ``Compose`` of steps on a PIL image ending in
  ``ToTensor`` and ``Normalize`` (timm's ``create_transform`` gives one): the standard evaluation's, and its
  normalisation is the weights';
* ``classes``: the WordNet id of each logit in order (``"n01440764"``, ...), each an ImageNet-1k class, none twice;
  the logits are placed at those classes' indices (:mod:`zoomeval.inference.class_order`), so an output in another
  order, or over part of the classes, is scored right, and a dataset scored over a class it lacks is refused.

Anything else is refused naming the entry point. The prediction metadata records the entry point and the name and
version of the distribution that provides it.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, NamedTuple

from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.inference.catalogue import Catalogue, closest
from zoomeval.inference.models import MODEL_SOURCES, LoadedModel, hooks
from zoomeval.inference.sources import checkpoint

#: The entry-point group zoomeval reads models from.
GROUP = "zoomeval.models"


class ModelDefinition(NamedTuple):
    """What an entry point's function returns: the network, its evaluation transform and its class order."""

    module: Any
    transform: Any
    classes: Any


def _found() -> dict[str, list[EntryPoint]]:
    found: dict[str, list[EntryPoint]] = {}
    for point in entry_points(group=GROUP):
        found.setdefault(point.name, []).append(point)
    return found


def _provider(point: EntryPoint) -> str:
    dist = point.dist
    return f"{point.value} ({dist.name} {dist.version})" if dist is not None else point.value


def find(spec: ModelSpec) -> EntryPoint:
    """The entry point the entry names, refused with the closest names, or naming both providers of one name."""
    key, found = f"models.{spec.name}.architecture", _found()
    points = found.get(spec.architecture, [])
    if not points:
        near = closest(spec.architecture, list(found))
        hint = f"; closest: {', '.join(near)}" if near else f"; installed: {', '.join(sorted(found)) or 'none'}"
        raise ConfigError(
            f"{key}: {spec.architecture!r} is no entry point of group {GROUP} (zoomeval list models entry_point){hint}"
        )
    if len(points) > 1:
        raise ConfigError(
            f"{key}: entry point {spec.architecture!r} is given by {len(points)} installed packages "
            f"({', '.join(map(_provider, points))}); uninstall all but one"
        )
    return points[0]


def define(spec: ModelSpec) -> tuple[EntryPoint, Any, Any, tuple[int, ...]]:
    """Call the entry point's function and check what it returns: the entry point, the module, its evaluation
    transform (:class:`~zoomeval.inference.eval_transform.EvalTransform`) and the ImageNet-1k index of each logit."""
    import torch

    from zoomeval.inference.class_order import imagenet_indices
    from zoomeval.inference.eval_transform import split_normalize

    point = find(spec)
    where = f"models.{spec.name}: entry point {spec.architecture} = {_provider(point)}"
    try:
        value = point.load()()
    except Exception as exc:  # the user's code: whatever it raises is named, in one line
        raise ConfigError(f"{where} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(value, tuple) or len(value) != len(ModelDefinition._fields):
        raise ConfigError(
            f"{where} returned {type(value).__name__}; return ModelDefinition(module, transform, classes)"
        )
    module, transform, classes = value
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"{where} returned a {type(module).__name__} as its module, not a torch.nn.Module")
    try:
        return point, module, split_normalize(transform, where), imagenet_indices(classes, where)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def check(spec: ModelSpec) -> None:
    """The entry point must be installed once and return a module, a transform and a class order that can be
    trusted; a ``mean``/``std`` given must be the transform's; the checkpoint must have the pinned sha256."""
    _, _, transform, _ = define(spec)
    checkpoint.check_own_normalisation(
        spec, transform.mean, transform.std, f"entry point {spec.architecture}'s transform"
    )
    checkpoint.check_file(spec)


def names() -> Catalogue:
    """The installed entry points of the group, each with what provides it (in place of a weights tag)."""
    listed = {name: tuple(map(_provider, points)) for name, points in _found().items()}
    return Catalogue("entry_point", "", tuple(listed), listed)


def evaluation(spec: ModelSpec, module: Any) -> Any:
    """The transform the entry point returned with the module (:class:`~zoomeval.inference.class_order.ImageNetOrder`
    keeps it)."""
    return module.transform


@MODEL_SOURCES.register(
    "entry_point",
    **hooks(check, checkpoint.fetch, checkpoint.local, evaluation, names),
    required=("architecture", "weights", "checkpoint"),
)
def load(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    """The entry point's module with the checked checkpoint, its logits in ImageNet-1k's order."""
    from zoomeval.inference.class_order import ImageNetOrder

    point, module, transform, indices = define(spec)
    path, sha = checkpoint.fetched_checkpoint(spec, weights)
    checkpoint.fit(module, path, f"entry point {spec.architecture}'s module", f"models.{spec.name}.checkpoint")
    provenance = {
        "name": point.name,
        "value": point.value,
        "distribution": point.dist and point.dist.name,
        "version": point.dist and point.dist.version,
    }
    covered = None if sorted(indices) == list(range(1000)) else indices
    return LoadedModel(
        ImageNetOrder(module, indices, transform, spec.name),
        sha,
        transform.mean,
        transform.std,
        {"entry_point": provenance},
        covered,
    )
