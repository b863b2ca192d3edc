"""``resize_backend: auto`` on a CUDA device: time both exact crop paths on a predict job's first images and run the
rest of the job on the faster.

The device path (:func:`zoomeval.inference.device_resize.plan_crops`) and PIL in the DataLoader workers cut the same
crops, bit for bit, so the choice changes the job's time and never a number: the prediction files are the same either
way (``tests/test_device_path.py``). The first images are decoded in the job's process and cut on both paths; their
crops are compared (a difference stops the job, naming the image: a fault of the device path on this GPU), and the
device path's are the ones used. Per image, as one worker spends it:

* the device path: its device time (CUDA events, after a first image that pays for compiling the kernels and
  allocating; nothing else waits for them), and in the workers the decode and the size's plan;
* PIL: in the workers, the decode and the crops (timed on the host, one image at a time, as a worker does it).

A path's rate is the slower of its stages, the workers' time spread over ``num_workers`` workers; the job's log
gives both rates and the choice. What is not counted: the model's share of the GPU (the device path adds its
crops to it), and workers slowed by contention for the CPU's cores or memory.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

from zoomeval.inference.crop_dataset import DEVICE_BACKEND, ZoomCrops
from zoomeval.inference.device_resize import pass_for, plan_crops

log = logging.getLogger(__name__)

#: Images timed, after the first.
RATE_IMAGES = 8
#: The path ``auto`` takes when PIL is faster.
PIL_BACKEND = "pil"

Stream = Iterator[tuple[int, torch.Tensor]]


class Rates(NamedTuple):
    """Images per second: the device path's device time alone, its workers' (decode and plan), and PIL's workers'
    (decode and crops), with ``workers`` workers."""

    device: float
    device_workers: float
    pil: float
    workers: int

    @property
    def device_path(self) -> float:
        return min(self.device, self.device_workers)

    def choice(self) -> str:
        return DEVICE_BACKEND if self.device_path >= self.pil else PIL_BACKEND


def measured_stream(
    dataset: ZoomCrops, device: torch.device, workers: int, rest: Callable[[ZoomCrops], Stream]
) -> Stream:
    """``(index, crops)`` of each image of ``dataset``: its first images cut in this process on both paths, timed
    (:class:`Rates`), and the others from ``rest`` (the job's loader) of ``dataset`` from there on, with the faster
    path."""
    sample = min(len(dataset), RATE_IMAGES + 1)
    if not sample:
        return
    timings = Timings()
    for i in range(sample):
        yield i, timings.cut(dataset, i, device)
    rates = timings.rates(max(workers, 1))
    choice = rates.choice()
    log.info(
        "resize_backend auto: the device path %.1f images/s (%.1f of device time on %s, its %d workers decode "
        "and plan %.1f), PIL %.1f images/s in %d workers (decode and crops): the rest of the job (%d images) "
        "runs on %s",
        rates.device_path,
        rates.device,
        device,
        rates.workers,
        rates.device_workers,
        rates.pil,
        rates.workers,
        len(dataset) - sample,
        "the device path" if choice == DEVICE_BACKEND else "PIL in the workers",
    )
    if sample < len(dataset):
        yield from ((sample + i, crops) for i, crops in rest(dataset.rest(sample, choice)))


class Timings:
    """The seconds each sampled image took on each path's stages (the first image only warms up the device)."""

    def __init__(self) -> None:
        self.decode: list[float] = []
        self.plan: list[float] = []
        self.pil: list[float] = []
        self.spans: list[tuple[Any, Any]] = []

    def cut(self, dataset: ZoomCrops, i: int, device: torch.device) -> torch.Tensor:
        """Image ``i``'s crops on the device, checked against PIL's."""
        start = time.perf_counter()
        image = dataset.decoded(i)
        decoded = time.perf_counter()
        item = dataset.device_image(image)
        planned = time.perf_counter()
        reference = dataset.host_crops(image, PIL_BACKEND)
        self.decode.append(decoded - start)
        self.plan.append(planned - decoded)
        self.pil.append(time.perf_counter() - planned)
        pixels, plan = item.pixels.to(device), item.plan.to(device)
        begin = _mark(device)
        crops = plan_crops(pixels, plan, pass_for(device))
        self.spans.append((begin, _mark(device)))
        differ = int((crops.cpu() != reference).sum())  # waits for the device: these images only
        if differ:
            raise RuntimeError(
                f"resize_backend auto: the device path's crops of {dataset.records[i].path} differ "
                f"from PIL's in {differ} values on {device}: set resize_backend: pil (and report it)"
            )
        return crops

    def rates(self, workers: int) -> Rates:
        timed = slice(1, None) if len(self.spans) > 1 else slice(None)
        device = sum(_seconds(start, stop) for start, stop in self.spans[timed])
        decode, plan, pil = (sum(values[timed]) for values in (self.decode, self.plan, self.pil))
        n = len(self.spans[timed])
        return Rates(_rate(n, device), _rate(workers * n, decode + plan), _rate(workers * n, decode + pil), workers)


def _rate(images: float, seconds: float) -> float:
    return images / seconds if seconds > 0 else float("inf")


def _mark(device: torch.device) -> Any:
    """A point in ``device``'s work: a recorded CUDA event, or the time (CPU work is done when it returns)."""
    if device.type != "cuda":
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def _seconds(start: Any, stop: Any) -> float:
    if isinstance(start, torch.cuda.Event):
        stop.synchronize()
        return start.elapsed_time(stop) / 1000
    return stop - start
