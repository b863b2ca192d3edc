"""The dataset adapters: each turns a dataset's inputs into records (see :mod:`zoomeval.core.manifest`).

An adapter is one function in a module of :mod:`zoomeval.datasets.adapters`, registered with what it needs and
gives::

    @ADAPTERS.register("imagenet_v2", required=("root",))
    def imagenet_v2(root: Path) -> Adapted: ...

It is called with one keyword argument per input key the config gives (a local path once fetched and
extracted), one per declared option (a plain config value), and ``image_dir`` if it writes images. It returns
``(records, classes)``: the records in a deterministic order and the dataset's class set as ImageNet-1k indices
(``None``: all 1000, or the labels that occur under ``class_set: subset``). The config schema's adapter enum,
the config checks (required inputs, boxes for FGSet/BGSet, label sets), the workflow's fetch rules and the
dispatch all read these declarations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zoomeval.core.manifest import Record
from zoomeval.core.registry import Registry

Adapted = tuple[list[Record], list[int] | None]


@dataclass(frozen=True)
class Adapter:
    name: str
    build: Callable[..., Adapted]
    #: input keys (a path, url or Hugging Face input each) that must be given, and those that may be
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    #: plain config keys passed through to ``build`` when the config gives them
    options: tuple[str, ...] = ()
    #: whether its records have object boxes (needed by FGSet/BGSet with box masks and by box counts)
    boxes: bool = False
    #: whether its records have ImageNet-ReaL labels (needed by the real and in_real label sets)
    real_labels: bool = False
    #: how its class set is defined, for the docs and messages
    classes: str = "all 1000 ImageNet-1k classes"
    #: whether it writes its images, to results/datasets/<name>/images/ (``build`` gets ``image_dir``)
    images: bool = False
    #: the password its publishers give out for their encrypted zips (a dataset's ``password`` overrides it)
    password: str | None = None
    #: the most images it can give, from its options alone (called with them); None: unknown before its manifest
    most_images: Callable[..., int] | None = None

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.required + self.optional


ADAPTERS: Registry[Adapter] = Registry("dataset adapter", Adapter)
