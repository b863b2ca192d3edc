"""The Dataset of a manifest's crops (see :func:`zoomeval.core.zoom.all_crops`), one item per image, and the resize
backends it cuts them with.

With ``resize_backend: device`` the workers only decode: each image goes to the inference device as one uint8
tensor with its size's plan (a :class:`DeviceImage`), and :func:`zoomeval.inference.device_resize.on_device` resizes
it to every scale and cuts its crops there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from zoomeval.core.images import load_rgb
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import all_crops
from zoomeval.inference.crop_plan import CropPlan, crop_plan
from zoomeval.masks.boxes import apply_variant, decode_mask

#: The ``resize_backend`` that resizes and cuts on the inference device.
DEVICE_BACKEND = "device"
#: The ``resize_backend`` that, on a CUDA device, times the device path and PIL on a job's first images and runs the
#: rest on the faster (:mod:`zoomeval.inference.auto_backend`), and is ``pil`` on a CPU (where PIL's own C loops
#: are about 10 times faster than the device path's tensor operations, so measuring would only cost time).
AUTO_BACKEND = "auto"
#: The device types on which ``auto`` measures.
MEASURED_ON = frozenset({"cuda"})


def resolve_backend(backend: str, device: torch.device) -> str:
    """The resize backend a job on ``device`` uses for the setting ``backend``: ``auto`` stays ``auto`` where the job
    chooses by measurement (:data:`MEASURED_ON`), and is ``pil`` elsewhere."""
    if backend != AUTO_BACKEND or device.type in MEASURED_ON:
        return backend
    return "pil"


class DeviceImage(NamedTuple):
    """A decoded ``H x W x 3`` uint8 image and its size's :class:`CropPlan`, as a worker hands them over (a
    DataLoader pins both)."""

    pixels: torch.Tensor
    plan: CropPlan


class ZoomCrops(Dataset[tuple[int, "torch.Tensor | DeviceImage"]]):
    """Image ``i`` of a manifest as all its crops, ``(n_transforms, size, size, 3)`` uint8, followed by the
    aggregation methods' extra views with ``extra_views``; with the ``device`` backend, as the decoded
    ``H x W x 3`` uint8 image and its size's plan (a :class:`DeviceImage`), for
    :func:`zoomeval.inference.device_resize.plan_crops`."""

    def __init__(
        self,
        records: Sequence[Record],
        scales: list[int],
        variant: str = "original",
        masks: dict[str, bytes] | None = None,
        size: int = 224,
        backend: str = "pil",
        extra_views: bool = False,
    ) -> None:
        self.records, self.scales, self.variant, self.masks = records, scales, variant, masks
        self.size, self.backend, self.extra_views = size, backend, extra_views

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor | DeviceImage]:
        image = self.decoded(i)
        if self.backend == DEVICE_BACKEND:  # the plan is built here, beside the decode, not in the predict loop
            return i, self.device_image(image)
        return i, self.host_crops(image, self.backend)

    def decoded(self, i: int) -> Image.Image:
        """Image ``i`` as decoded, under its variant's mask."""
        record = self.records[i]
        image = load_rgb(record)
        mask = decode_mask(self.masks[record.image_id]) if self.variant != "original" and self.masks else None
        return apply_variant(image, mask, self.variant)

    def device_image(self, image: Image.Image) -> DeviceImage:
        """A decoded image and its size's plan, for the device path."""
        pixels = np.array(image.convert("RGB"))
        plan = crop_plan(pixels.shape[1], pixels.shape[0], tuple(self.scales), self.size, self.extra_views)
        return DeviceImage(torch.from_numpy(pixels), plan)

    def host_crops(self, image: Image.Image, backend: str) -> torch.Tensor:
        """A decoded image's crops, cut on the host by ``backend`` (``pil`` or ``torch``)."""
        return torch.from_numpy(all_crops(image, self.scales, self.size, backend, self.extra_views))

    def rest(self, start: int, backend: str) -> ZoomCrops:
        """These crops of the records from ``start`` on, with ``backend``."""
        return ZoomCrops(
            self.records[start:], self.scales, self.variant, self.masks, self.size, backend, self.extra_views
        )
