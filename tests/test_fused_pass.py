"""The fused Triton pass the device path runs on a GPU (:mod:`zoomeval.inference.fused_pass`), checked without one:
compiled to each GPU generation's machine code here (integers only), and run by Triton's interpreter on CPU tensors
against a brute-force oracle and against PIL's crops."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
from PIL import Image
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tests.conftest import ROOT
from tests.device_ops import DeviceOps, counted
from zoomeval.core.pil_resample import PRECISION_BITS, vertical_first
from zoomeval.core.zoom import all_crops, resized_size
from zoomeval.inference import device_resize
from zoomeval.inference.crop_plan import TAPS, PassTaps, crop_plan
from zoomeval.inference.device_resize import pass_for, plan_crops, resample_pass
from zoomeval.inference.fused_pass import _kernel, fused_pass

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_fused_pass")

SIGNATURE = {
    "x": "*u8",
    "src": "*i32",
    "kk": "*i32",
    "offsets": "*i32",
    "out": "*u8",
    "length": "i32",
    "outputs": "i32",
    "inner": "i32",
    "total": "i32",
    "TAPS": "constexpr",
    "BITS": "constexpr",
    "BLOCK": "constexpr",
}


#: NVIDIA T4; A100; RTX 30; RTX 40, L4, L40; H100, H200; B200. AMD MI300; Radeon RX 7900.
TARGETS = [
    ("cuda", 75, 32),
    ("cuda", 80, 32),
    ("cuda", 86, 32),
    ("cuda", 89, 32),
    ("cuda", 90, 32),
    ("cuda", 100, 32),
    ("hip", "gfx942", 64),
    ("hip", "gfx1100", 32),
]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t[0]}-{t[1]}")
def test_the_kernel_compiles_for_each_gpu_generation_with_integers_only(monkeypatch, tmp_path, target):
    """To machine code, with the compilers shipped in Triton's wheel, no GPU needed: no floating-point type in
    the kernel's Triton IR nor in its LLVM IR, so it runs at integer rate on any GPU (no float64 unit needed), and
    no floating-point instruction in NVIDIA's PTX (AMD's backend expands the integer divisions of the indices with
    exact float32 reciprocal steps)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    source = ASTSource(
        _kernel(interpreted=False), SIGNATURE, constexprs={"TAPS": TAPS, "BITS": PRECISION_BITS, "BLOCK": 1024}
    )
    kernel = triton.compile(source, target=GPUTarget(*target))
    assert kernel.asm["cubin" if target[0] == "cuda" else "hsaco"]
    types = set(re.findall(r"(?:x|\b)(bf16|f16|f32|f64|i1|i8|i32|i64)\b", kernel.asm["ttir"]))  # 1024xi32, i64
    assert types == {"i1", "i8", "i32", "i64"}, types
    # as Pillow's C: the uint8 pixels zero-extended, the signed sum shifted arithmetically, clipped as signed
    assert {"arith.extui", "arith.shrsi", "arith.maxsi", "arith.minsi"} <= set(
        re.findall(r"arith\.\w+", kernel.asm["ttir"])
    )
    assert not re.search(r"\b(half|bfloat|float|double)\b", kernel.asm["llir"])
    if target[0] == "cuda":
        assert not re.search(r"\.(f16|bf16|f32|f64)\b", kernel.asm["ptx"])


def _random_pass(rng: np.random.Generator, length: int, outputs: int) -> PassTaps:
    """Each output gets 0 to 3 chunks (some outputs none: they come out black) of taps anywhere in ``length``,
    with coefficients of either sign that take many sums below 0 (clipped) and keep every sum within int32 (15 taps
    x 255 x 2**19 < 2**31), as Pillow's do; output 0 doubles one input pixel (2**23 = 2.0), clipped at 255 where it
    is 128 or more."""
    counts = rng.integers(0, 4, outputs)
    counts[0] = 1
    dst = np.repeat(np.arange(outputs), counts)
    src = rng.integers(0, length, (len(dst), TAPS))
    kk = rng.integers(-(1 << 19), 1 << 19, (len(dst), TAPS))
    kk[0] = [1 << 23, 0, 0, 0, 0]
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return PassTaps(*(torch.from_numpy(np.asarray(a, dtype=np.int32)) for a in (src, kk, dst, offsets)))


def _oracle(x: np.ndarray, dim: int, taps: PassTaps, outputs: int) -> np.ndarray:
    """Pillow's pass written out: per output, 2**21 plus the sum of input times coefficient, shifted and clipped."""
    moved = np.moveaxis(x.astype(np.int64), dim, 0)
    out = np.zeros((outputs, *moved.shape[1:]), dtype=np.int64)
    for o in range(outputs):
        total = np.full(moved.shape[1:], 1 << (PRECISION_BITS - 1), dtype=np.int64)
        for c in range(int(taps.offsets[o]), int(taps.offsets[o + 1])):
            for t in range(TAPS):
                total += moved[int(taps.src[c, t])] * int(taps.kk[c, t])
        out[o] = np.clip(total >> PRECISION_BITS, 0, 255)
    return np.moveaxis(out, 0, dim).astype(np.uint8)


#: (shape, dim, outputs) of the random passes.
RANDOM_PASSES = [((17, 9, 3), 0, 40), ((9, 17, 3), 1, 40), ((5, 33, 7), 1, 3)]
#: (width, height, scales) of the crops: every crop and extra view. The passes of all 36 scales are the same kernel
#: on longer tap lists; the plain passes are checked at all of them in ``tests/test_device_path.py``.
IMAGES = [
    (100, 260, [64, 512]),  # tall: height first at 64, width first at 512
    (270, 100, [10, 256]),  # wide, a 10:1 shrink
    (13, 11, [10, 37, 256]),  # tiny: enlarged
    (2000, 48, [10, 256]),  # 2000 px wide, a 200:1 shrink (41 chunks per output)
]


def interpreted_checks() -> dict[str, list]:
    """Run in a process started with ``TRITON_INTERPRET=1`` (Triton's interpreter must be chosen before
    ``triton.language`` is imported): per random pass, the distinct values of the oracle's result and whether the
    fused and plain passes equal it; per image, whether the fused crops equal PIL's."""
    passes = []
    for shape, dim, outputs in RANDOM_PASSES:
        rng = np.random.default_rng(len(shape) + dim + outputs)
        x = rng.integers(0, 256, shape, dtype=np.uint8)
        taps = _random_pass(rng, shape[dim], outputs)
        expected = _oracle(x, dim, taps, outputs)
        fused = fused_pass(torch.from_numpy(x), dim, taps, outputs).numpy()
        plain = resample_pass(torch.from_numpy(x), dim, taps, outputs).numpy()
        passes.append([np.unique(expected).tolist(), np.array_equal(fused, expected), np.array_equal(plain, expected)])
    images = []
    for width, height, scales in IMAGES:
        image = _noise(width, height)
        plan = crop_plan(width, height, tuple(scales), 224, True)
        out = plan_crops(torch.from_numpy(np.array(image)), plan, fused_pass).numpy()
        images.append(np.array_equal(out, all_crops(image, scales, extra_views=True)))
    return {"passes": passes, "images": images}


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """:func:`interpreted_checks` in Triton's interpreter (numpy on the CPU), its cache out of the home directory."""
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "TRITON_CACHE_DIR": str(tmp_path_factory.mktemp("triton")),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    code = "import json, tests.test_fused_pass as t; print(json.dumps(t.interpreted_checks()))"
    run = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", range(len(RANDOM_PASSES)))
def test_the_fused_pass_is_pillows_arithmetic(interpreted, case):
    values, fused_equal, plain_equal = interpreted["passes"][case]
    assert values[0] == 0 and values[-1] == 255 and len(values) > 2  # clipped both ways, and not only
    assert fused_equal and plain_equal


@pytest.mark.parametrize("case", range(len(IMAGES)))
def test_fused_device_crops_are_the_pil_crops_bit_for_bit(interpreted, case):
    assert interpreted["images"][case]


@pytest.mark.parametrize(("width", "height", "scales"), IMAGES)
def test_the_fused_path_launches_one_kernel_per_pass(width, height, scales):
    """Counted on the ``meta`` device: besides the kernels, the permutation copy of the width-first scales (none for
    one scale), the concatenation of both orders and the views' gather; uint8 results only."""
    pixels = torch.zeros((height, width, 3), dtype=torch.uint8, device="meta")
    plan = crop_plan(width, height, tuple(scales), 224, True).to(torch.device("meta"))
    with DeviceOps() as ops:
        plan_crops(pixels, plan, counted(ops))
    order = [vertical_first(width, height, *resized_size(width, height, s)) for s in scales]
    others = [op for op in ops.ops if op != "fused_pass"]
    assert ops.ops.count("fused_pass") == 2 * len(set(order))
    assert len(others) == (order.count(False) > 1) + (len(set(order)) > 1) + 1, others
    assert ops.dtypes == {torch.uint8}


def _noise(width: int, height: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(width).integers(0, 256, (height, width, 3), dtype=np.uint8))


def test_a_gpu_gets_the_fused_pass_and_a_cpu_the_plain_one(monkeypatch, caplog):
    assert pass_for(torch.device("cuda")) is fused_pass
    assert pass_for(torch.device("cpu")) is resample_pass
    monkeypatch.setitem(sys.modules, "zoomeval.inference.fused_pass", None)  # as where Triton is not installed
    with caplog.at_level("WARNING", logger=device_resize.__name__):
        assert pass_for(torch.device("cuda")) is resample_pass
    assert "Triton is not available" in caplog.text
