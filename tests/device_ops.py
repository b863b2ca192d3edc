"""Probes that count the device path's work (what ``tests/test_device_path.py`` and ``tests/test_fused_pass.py``
bound and ``bench/crops_cost.py`` and ``bench/gpu_check.py`` report): :class:`DeviceOps` lists the operations torch
dispatches, :func:`counted` stands in for the fused Triton pass on the ``meta`` device, where no kernel runs."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from zoomeval.inference.crop_plan import PassTaps
from zoomeval.inference.device_resize import Resample


class DeviceOps(TorchDispatchMode):
    """While active, lists the operations that do work on a device (not the views of a tensor, nor allocations),
    the dtypes of the tensors they create and the bytes they move: what ``tests/test_device_path.py`` bounds and
    the benchmarks report for
    :func:`zoomeval.inference.device_resize.plan_crops`. A gather reads what it writes (plus its indices), any other
    operation its whole inputs. A kernel torch does not dispatch (Triton's) is added with :meth:`kernel`."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.dtypes: set[torch.dtype] = set()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if not func.is_view and func.__name__.split(".")[0] not in _NO_WORK:
            self.ops.append(str(func))
            written = _tensors(out)
            self.dtypes.update(t.dtype for t in written)
            gather = func.__name__.startswith(("index.", "index_select", "gather"))
            read = _tensors((args[1:], kwargs)) + written if gather else _tensors((args, kwargs))
            self.bytes += sum(t.numel() * t.element_size() for t in (*written, *read))
        return out

    def kernel(self, name: str, read: list[torch.Tensor], written: torch.Tensor) -> None:
        """Count a kernel launched outside torch's dispatch that reads ``read`` and writes ``written``."""
        self.ops.append(name)
        self.dtypes.add(written.dtype)
        self.bytes += sum(t.numel() * t.element_size() for t in (*read, written))


#: Operations that allocate or relabel memory without a kernel.
_NO_WORK = frozenset({"_unsafe_view", "empty", "empty_strided", "new_empty"})


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def counted(ops: DeviceOps) -> Resample:
    """Stands in for :func:`zoomeval.inference.fused_pass.fused_pass` on the ``meta`` device: allocates its result
    and adds to ``ops`` its kernel and the bytes the kernel moves at the least (its input, taps and offsets read
    once, the windows' overlap served by the caches, and its uint8 result written)."""

    def launch(x: torch.Tensor, dim: int, taps: PassTaps, outputs: int) -> torch.Tensor:
        out = torch.empty((*x.shape[:dim], outputs, *x.shape[dim + 1 :]), dtype=torch.uint8, device=x.device)
        ops.kernel("fused_pass", [x, taps.src, taps.kk, taps.offsets], out)
        return out

    return launch
