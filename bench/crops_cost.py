"""What the device path's crops cost per image, on the CPU: integer multiply-adds, bytes moved, plan size and
build time, against the float64 matrix-product plan it replaced (zoomeval before issue 32).

The integer path is counted as it runs (``tests/device_ops.py``'s :class:`DeviceOps` on the ``meta`` device: every
operation's bytes read and written), both as plain torch runs it (one kernel per operation, on a CPU) and as it runs on
a GPU, one fused Triton kernel per pass (its :func:`counted`: each pass's input and taps read once, its uint8 result
written; plus the plan's copy). The float64 plan's figures follow its matrix shapes (the same used rows and columns,
padded to ``rows x cols`` per scale): its two products per pass order, the three in-place rounding operations after
each, its permutation copy, the concatenation, the conversion to uint8 and the gather, counted the same way.

Usage: ``PYTHONPATH=src python bench/crops_cost.py [--time] [--loader N]`` (``--time``: also the CPU seconds
of one 500 x 375 image through the device path and through PIL, one thread; ``--loader N``: the device backend's
rate through its DataLoader for N images of one size and N of all different sizes).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader

from zoomeval.core.zoom import all_crops, paper_scales
from zoomeval.inference.crop_dataset import ZoomCrops
from zoomeval.inference.crop_plan import TAPS, CropPlan, build_plan
from zoomeval.inference.device_resize import on_device, plan_crops

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.device_ops import DeviceOps, counted  # noqa: E402 (the tests' counting probes)

SIZES = ((500, 375), (375, 500), (2000, 1500))


def integer_cost(plan: CropPlan, width: int, height: int) -> dict[str, float]:
    """Multiply-adds, and bytes moved by the plain torch passes and by the fused kernel (each counted as it runs)."""
    pixels = torch.zeros((height, width, 3), dtype=torch.uint8, device="meta")
    on_meta = plan.to(torch.device("meta"))
    with DeviceOps() as plain:
        plan_crops(pixels, on_meta)
    with DeviceOps() as fused:
        plan_crops(pixels, on_meta, counted(fused))
    macs = 0
    for group in plan.groups:
        first_width = width if group.height_first else height  # the axis the first pass leaves as it is
        second_width = group.rows if group.height_first else group.cols
        macs += 3 * TAPS * (group.first.chunks * first_width + group.second.chunks * second_width)
    return {
        "multiply_adds": macs,
        "bytes_plain": plain.bytes,
        "device_ops": len(plain.ops),
        "bytes_fused": fused.bytes + plan.nbytes,
        "fused_ops": len(fused.ops),
    }


def float64_cost(plan: CropPlan, width: int, height: int) -> dict[str, float]:
    """The float64 plan's multiply-adds, bytes moved and plan bytes for the same image (its matrix shapes)."""
    h, w, f8 = height, width, 8
    macs, moved, plan_bytes, stacked = 0, 3 * h * w + f8 * 3 * h * w, 0, 0
    for group in plan.groups:
        n, r, c = group.n, group.rows, group.cols
        plan_bytes += f8 * (n * r * h + n * w * c)
        if group.height_first:
            first, second = 3 * n * r * w, 3 * n * r * c
            macs += first * h + second * w
            moved += f8 * (n * r * h + 3 * h * w + first) + f8 * (first + n * w * c + second)
        else:
            first, second = 3 * h * n * c, 3 * n * r * c
            macs += first * w + second * h
            moved += f8 * (3 * h * w + w * n * c + first) + 2 * f8 * first  # product, permutation copy
            moved += f8 * (n * r * h + first + second)
        moved += 6 * f8 * (first + second)  # add_, floor_, clamp_ read and write each result
        stacked += 3 * n * r * c
    if len(plan.groups) > 1:
        moved += 2 * f8 * stacked
    moved += f8 * stacked + stacked + 2 * plan.views * plan.size * plan.size * 3
    return {"multiply_adds": macs, "bytes": moved, "plan_bytes": plan_bytes}


def cpu_seconds(width: int, height: int, scales: list[int]) -> tuple[float, float]:
    """CPU seconds of one image through the device path (its plan built) and through PIL, one thread."""
    torch.set_num_threads(1)
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    plan = build_plan(width, height, tuple(scales), 224, True)
    start = time.process_time()
    plan_crops(torch.from_numpy(pixels), plan)
    device = time.process_time() - start
    start = time.process_time()
    all_crops(Image.fromarray(pixels), scales, extra_views=True)
    return device, time.process_time() - start


def loader_rates(n: int, folder: Path) -> tuple[float, float]:
    """Images per second through the device backend's loader (one worker decoding and building plans) and
    :func:`on_device` on the CPU, for ``n`` images of one size (500 x 375) and ``n`` of all different sizes
    (500 + k) x 375 (each needing a new plan; the worker keeps few)."""
    from gpu_check import synthetic_jpegs  # beside this script

    rates = []
    for sizes in ([(500, 375)] * n, [(500 + k, 375) for k in range(n)]):
        records = synthetic_jpegs(folder, sizes, prefix=f"s{len(set(sizes))}_")
        dataset = ZoomCrops(records, [64, 256], backend="device", extra_views=True)
        loader = DataLoader(dataset, batch_size=None, num_workers=1, prefetch_factor=2)
        start = time.perf_counter()
        for _ in on_device(iter(loader), torch.device("cpu")):
            pass
        rates.append(n / (time.perf_counter() - start))
    return rates[0], rates[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time", action="store_true", help="also time one 500 x 375 image on the CPU")
    parser.add_argument("--loader", type=int, default=0, help="images per run: one size against all different")
    args = parser.parse_args()
    scales = paper_scales()
    for width, height in SIZES:
        start = time.process_time()
        plan = build_plan(width, height, tuple(scales), 224, True)
        build_ms = (time.process_time() - start) * 1000
        new, old = integer_cost(plan, width, height), float64_cost(plan, width, height)
        print(
            f"{width}x{height}, {len(scales)} scales, {plan.views} views: int32 {new['multiply_adds'] / 1e9:.3f} G "
            f"multiply-adds; moved: {new['bytes_fused'] / 1e9:.3f} GB by the fused kernels ({new['fused_ops']} ops, "
            f"the GPU path), {new['bytes_plain'] / 1e9:.2f} GB as plain torch ({new['device_ops']} ops); float64 "
            f"plan {old['multiply_adds'] / 1e9:.1f} G multiply-adds, {old['bytes'] / 1e9:.2f} GB "
            f"({old['bytes'] / new['bytes_fused']:.1f}x the fused kernels', {old['bytes'] / new['bytes_plain']:.1f}x "
            f"plain); plan {plan.nbytes / 1e6:.2f} MB (float64: {old['plan_bytes'] / 1e6:.0f} MB), built in "
            f"{build_ms:.0f} ms of CPU"
        )
    if args.time:
        device, pil = cpu_seconds(500, 375, scales)
        print(f"500x375, {len(scales)} scales, one thread: device path {device:.2f} s of CPU, PIL {pil:.2f} s")
    if args.loader:
        with tempfile.TemporaryDirectory() as folder:
            one, different = loader_rates(args.loader, Path(folder))
        print(
            f"device backend through its loader, 2 scales, one worker: {one:.2f} images/s at one size, "
            f"{different:.2f} at {args.loader} different sizes"
        )


if __name__ == "__main__":
    main()
