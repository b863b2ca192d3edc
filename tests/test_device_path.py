"""The device data path (``resize_backend: device``) against the PIL reference, on CPU (the same code runs on a GPU):
every crop bit for bit, the device operations per image, and the predictions and tables of both paths."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import torch
import yaml
from PIL import Image
from snakemake.utils import update_config

from tests.conftest import ROOT
from tests.device_ops import DeviceOps
from zoomeval.analysis.scoring import analyze_predictions
from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.io import read_metadata
from zoomeval.core.pil_resample import taps, vertical_first
from zoomeval.core.zoom import ZoomGrid, all_crops, paper_scales, resized_size, scale_views, transforms
from zoomeval.datasets.adapters.demo import build_demo
from zoomeval.inference import auto_backend, crop_dataset, device_resize, predict
from zoomeval.inference.crop_dataset import DeviceImage, ZoomCrops, resolve_backend
from zoomeval.inference.crop_plan import TAPS, build_plan, crop_plan
from zoomeval.inference.device_resize import device_crops, on_device, plan_crops
from zoomeval.inference.predict import predict_to_file
from zoomeval.inference.sources import embedded
from zoomeval.registries import load_config
from zoomeval.report.tables import table_1_rows, table_a8_rows

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_device_path")

SPEC = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE, 224, embedded.MEAN, embedded.STD)
#: Few scales to keep the model runs short: zoom-out, 224, the 1-crop scale (for the extra views) and zoom-in.
SCALES = [64, 224, 256, 512]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The 12 demo images (640 x 480)."""
    return build_demo(tmp_path_factory.mktemp("demo"))


def _noise(width: int, height: int, seed: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8))


def _assert_device_crops_are_the_pil_crops(image: Image.Image, scales: list[int]) -> None:
    reference = all_crops(image, scales, extra_views=True)
    device = device_crops(torch.from_numpy(np.array(image)), scales, extra_views=True).numpy()
    assert device.shape == reference.shape
    assert np.array_equal(device, reference), f"{image.size}: {int((device != reference).sum())} values differ"


def test_device_crops_are_the_pil_crops_bit_for_bit_on_the_demo(demo):
    """Every crop and extra view at all 36 paper scales."""
    for record in demo[::6]:
        with Image.open(record.path) as raw:
            _assert_device_crops_are_the_pil_crops(raw.convert("RGB"), paper_scales())


@pytest.mark.parametrize(
    ("width", "height", "scales"),
    [
        (100, 260, paper_scales()),  # tall: Pillow 13 shrinks its height first, enlarges it width first
        (270, 100, paper_scales()),  # wide
        (13, 11, paper_scales()),  # tiny: every scale enlarges it
        (37, 90, [37, 256]),  # S = 37 is the image itself; its crops are mostly black border
        (2000, 1500, [10, 256, 1024]),  # large: a strong shrink (200x) and the largest scale
        (2000, 48, paper_scales()),  # large (2000 px wide) at every scale, cheap on a CPU: 42:1, S = 1024 is 42667 px
    ],
)
def test_device_crops_are_the_pil_crops_bit_for_bit(width, height, scales):
    _assert_device_crops_are_the_pil_crops(_noise(width, height, width), scales)


def test_both_of_pillows_pass_orders_occur_in_the_tall_image():
    orders = [vertical_first(100, 260, *resized_size(100, 260, s)) for s in paper_scales()]
    assert orders[paper_scales().index(64)] and not orders[paper_scales().index(512)]
    assert not any(vertical_first(270, 100, *resized_size(270, 100, s)) for s in paper_scales())


#: Device operations per image, counted: per pass order the two passes (a gather, a multiply, a sum over the taps,
#: the initial sums, the sum of the chunks, Pillow's shift and clip and the conversion to uint8: 8 each) and one
#: permutation copy (none for a single scale), then the gather of the views (and a concatenation with both
#: orders): 17 + 1 and 2 * 17 + 2.
MAX_DEVICE_OPS = 36


@pytest.mark.parametrize(("width", "height"), [(30, 80), (80, 30)])  # both pass orders, one
def test_an_image_costs_a_fixed_number_of_device_operations(width, height):
    pixels = torch.from_numpy(np.array(_noise(width, height, 0)))
    counts = []
    for scales in ([256], [10, 256, 512], paper_scales()):
        plan = crop_plan(width, height, tuple(scales), 224, True)
        with DeviceOps() as counter:
            plan_crops(pixels, plan)
        counts.append(len(counter.ops))
    assert max(counts) <= MAX_DEVICE_OPS, counter.ops
    assert counts[2] == (MAX_DEVICE_OPS if width < height else 18)  # whatever the scales and views


@pytest.mark.parametrize(("width", "height"), [(100, 260), (270, 100)])
def test_the_device_path_creates_no_float_tensor(width, height):
    """Not a float64 tensor (nor any float) on the device, the plan's copy there included."""
    pixels = torch.from_numpy(np.array(_noise(width, height, 1)))
    with DeviceOps() as counter:
        device_crops(pixels, paper_scales(), extra_views=True)
    assert counter.dtypes == {torch.uint8, torch.int32}, counter.dtypes
    assert "aten._to_copy.default" in counter.ops  # the plan's copy (and the conversions) were watched


def test_device_ops_sees_a_float64_tensor():
    with DeviceOps() as counter:
        torch.ones(3, dtype=torch.uint8).double()
    assert torch.float64 in counter.dtypes


def test_a_plan_holds_the_nonzero_taps_and_indices_only():
    """500 x 375 at the 36 paper scales: 2.5 MB (the float64 plan was 170 MB); its bytes are 4 per int32 entry of the
    taps' chunks, the outputs' offsets and the views' indices, and its coefficients are Pillow's nonzero ones of the
    used pixels."""
    scales = tuple(paper_scales())
    plan = build_plan(500, 375, scales, 224, True)
    passes = [p for g in plan.groups for p in (g.first, g.second)]
    entries = sum(p.chunks * (2 * TAPS + 1) + p.outputs + 1 for p in passes) + plan.views * (1 + 2 * 224)
    assert plan.nbytes == 4 * entries <= 16 * 2**20
    assert plan.buffer.dtype == torch.int32 and plan.views == 333
    (((_, kk1, dst1, offsets1), _),) = plan.tensors()[0]
    # each output's chunks are offsets[o]:offsets[o + 1]
    assert torch.equal(offsets1, torch.searchsorted(dst1, torch.arange(len(offsets1), dtype=torch.int32)))
    assert bool((dst1[1:] >= dst1[:-1]).all())
    # width first: every scale's horizontal taps of the used columns, brute force from pil_resample.taps
    assert int((kk1 != 0).sum()) == sum(
        int((taps(500, resized_size(500, 375, s)[0], cols)[2] != 0).sum())
        for s, cols in zip(scales, _used_columns(500, 375, scales), strict=True)
    )


def _used_columns(width: int, height: int, scales: tuple[int, ...]) -> list[np.ndarray]:
    """The resized columns some view of each scale uses, from the views' crop boxes (brute force)."""
    used = []
    for k, s in enumerate(scales):
        w, h = resized_size(width, height, s)
        lefts = [left for _, left, _, _ in scale_views(k, len(scales), s, w, h, 224, True)]
        used.append(np.unique([x for left in lefts for x in range(left, left + 224) if 0 <= x < w]))
    return used


def test_the_workers_build_the_plan_beside_the_decode(demo):
    _, item = ZoomCrops(demo[:1], SCALES, backend="device", extra_views=True)[0]
    with Image.open(demo[0].path) as raw:
        assert np.array_equal(item.pixels.numpy(), np.asarray(raw.convert("RGB")))
    assert torch.equal(item.plan.buffer, build_plan(640, 480, tuple(SCALES), 224, True).buffer)


def _images(sizes: list[tuple[int, int]]) -> list[tuple[int, DeviceImage]]:
    return [
        (i, DeviceImage(torch.from_numpy(np.array(_noise(w, h, i))), crop_plan(w, h, (64, 256), 224, True)))
        for i, (w, h) in enumerate(sizes)
    ]


#: A device time per image that makes PIL faster (10 s) and one that makes the device path faster (1 us).
FORCED = {"pil": 10.0, "device": 1e-6}


def _forced_auto(monkeypatch, choice: str) -> None:
    """``auto`` measures on this CPU as on a GPU, with the device path's time per image set to force ``choice``."""
    monkeypatch.setattr(crop_dataset, "MEASURED_ON", frozenset({"cuda", "cpu"}))
    monkeypatch.setattr(auto_backend, "_seconds", lambda start, stop: FORCED[choice])


@pytest.mark.parametrize("choice", ["pil", "device"])
def test_auto_times_both_paths_on_the_first_images_and_runs_the_rest_on_the_faster(demo, monkeypatch, caplog, choice):
    _forced_auto(monkeypatch, choice)
    monkeypatch.setattr(auto_backend, "RATE_IMAGES", 2)  # 3 images measured (the first warms up), 2 left
    dataset = ZoomCrops(demo[:5], SCALES, backend="auto", extra_views=True)
    given = []

    def rest(later: ZoomCrops):  # the job's loader: records the dataset it gets, cuts on its path
        given.append(later)
        for i in range(len(later)):
            _, item = later[i]
            yield i, plan_crops(item.pixels, item.plan) if later.backend == "device" else item

    with caplog.at_level("INFO", logger="zoomeval.inference.auto_backend"):
        out = list(auto_backend.measured_stream(dataset, torch.device("cpu"), 3, rest))
    assert [i for i, _ in out] == list(range(5))
    for record, (_, got) in zip(demo[:5:4], out[::4], strict=True):  # a measured image's crops and one of the rest
        with Image.open(record.path) as raw:
            assert np.array_equal(got.numpy(), all_crops(raw.convert("RGB"), SCALES, extra_views=True))
    (later,) = given
    assert later.backend == choice and later.records == demo[3:5]
    (line,) = [r.getMessage() for r in caplog.records if "resize_backend auto" in r.getMessage()]
    device_rate = 1 / FORCED[choice]
    assert f"({device_rate:.1f} of device time on cpu, its 3 workers decode and plan" in line
    assert " images/s in 3 workers (decode and crops): the rest of the job (2 images) runs on " in line
    assert line.endswith("the device path" if choice == "device" else "PIL in the workers")


def test_auto_stops_the_job_where_the_device_paths_crops_differ_from_pils(demo, monkeypatch):
    """A fault of the device path on the machine (a kernel that is wrong on this GPU) is caught on the first image."""
    _forced_auto(monkeypatch, "device")
    monkeypatch.setattr(auto_backend, "plan_crops", lambda *a: plan_crops(*a[:2]) ^ 1)  # every value off by one
    with pytest.raises(RuntimeError, match=f"crops of {demo[0].path} differ from PIL's in [0-9]+ values on cpu"):
        next(
            auto_backend.measured_stream(
                ZoomCrops(demo[:3], SCALES, backend="auto"), torch.device("cpu"), 1, lambda later: iter(())
            )
        )


def test_auto_writes_the_same_prediction_files_whichever_path_it_chooses(demo, tmp_path, monkeypatch):
    """A predict job on 3 images in shards of 2 at S = 224 (2 images measured, the third from the job's worker): the
    prediction and aggregates files of a job that chose PIL and of one that chose the device path, byte for byte
    (their clock stopped, so that the recorded timing is the same too)."""
    monkeypatch.setattr(auto_backend, "RATE_IMAGES", 1)
    monkeypatch.setattr(predict, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    files = {}
    for choice in FORCED:
        _forced_auto(monkeypatch, choice)
        settings = InferenceSettings(batch_size=64, num_workers=1, threads=2, resize_backend="auto", shard_images=2)
        files[choice] = tmp_path / f"{choice}.parquet", tmp_path / f"{choice}.aggregates.parquet"
        # 9 views per image: the model's time
        predict_to_file(*files[choice], demo[:3], SPEC, ZoomGrid([224]), settings, "demo")
    for pil, device in zip(files["pil"], files["device"], strict=True):
        assert pil.read_bytes() == device.read_bytes()
    assert read_metadata(files["pil"][0])["resize_backend"] == "auto"


@pytest.fixture(scope="module")
def both_paths(demo, tmp_path_factory):
    """Predictions and Table A8 / Table 1 inputs of the demo through the PIL path and the device path."""
    out, metrics = {}, {}
    for backend in ("pil", "device"):
        folder = tmp_path_factory.mktemp(backend)
        settings = InferenceSettings(batch_size=64, num_workers=0, threads=2, resize_backend=backend)
        predictions, aggregates = folder / "pred.parquet", folder / "agg.parquet"
        predict_to_file(predictions, aggregates, demo, SPEC, ZoomGrid(SCALES), settings, "demo")
        out[backend] = predictions, aggregates
        metrics[backend] = analyze_predictions(predictions, demo, top_k=4, aggregates_path=aggregates).metrics
    return out, metrics


def test_device_path_gives_the_pil_paths_predictions_and_tables(both_paths):
    files, metrics = both_paths
    assert read_metadata(files["device"][0])["resize_backend"] == "device"
    for k, rows in enumerate((12 * len(transforms(SCALES)), 12 * 5)):  # predictions, then aggregates
        pil, device = (pl.read_parquet(files[b][k]) for b in ("pil", "device"))
        assert len(pil) == rows and pil.equals(device)  # every column, every value
    assert table_a8_rows([metrics["pil"]]) == table_a8_rows([metrics["device"]])
    assert table_1_rows([metrics["pil"]]) == table_1_rows([metrics["device"]])


def test_auto_measures_on_a_gpu_and_is_pil_on_a_cpu():
    assert resolve_backend("auto", torch.device("cuda")) == "auto"
    assert resolve_backend("auto", torch.device("cpu")) == "pil"
    assert resolve_backend("pil", torch.device("cuda")) == "pil"
    assert InferenceSettings().resize_backend == "auto"


def test_the_gpu_recipe_overlays_the_papers_config():
    """config/overlays/gpu.yaml as Snakemake merges a second --configfile over config/paper.yaml."""
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    update_config(config, yaml.safe_load((ROOT / "config" / "overlays" / "gpu.yaml").read_text()))
    settings = load_config(config, check_paths=False).inference
    chosen = (settings.resize_backend, settings.precision, settings.compile, settings.batch_size)
    assert chosen == ("auto", "bf16", True, 333)
    assert settings.batch_size == len(transforms(paper_scales())) + 9  # one image's views
    assert len(config["models"]) == 6  # the rest of the paper's config is kept


def test_switching_between_the_exact_backends_reruns_nothing():
    params = {b: InferenceSettings(resize_backend=b).crop_pixels for b in ("auto", "pil", "device", "torch")}
    assert params == {"auto": "pil", "pil": "pil", "device": "pil", "torch": "torch"}


def test_a_pass_too_large_for_the_products_ceiling_runs_in_slices(monkeypatch):
    """With the ceiling at 64 kB a 120 x 90 image's passes run in slices (more operations), still PIL's crops."""
    image, scales = _noise(120, 90, 3), [32, 256]
    pixels, plan = torch.from_numpy(np.array(image)), crop_plan(120, 90, (32, 256), 224, True)
    with DeviceOps() as whole:
        plan_crops(pixels, plan)
    monkeypatch.setattr(device_resize, "MAX_PRODUCT_BYTES", 1 << 16)
    with DeviceOps() as sliced:
        out = plan_crops(pixels, plan)
    assert len(sliced.ops) > len(whole.ops) + 8  # each pass at least twice, and the concatenations
    assert np.array_equal(out.numpy(), all_crops(image, scales, extra_views=True))


def test_the_predict_loop_builds_no_plan(monkeypatch):
    """Images of all different sizes: every plan comes from the worker with its image, none is built on the
    device's side (so a new size costs the predict loop nothing)."""
    images = _images([(30 + k, 20 + k) for k in range(3)])
    monkeypatch.setattr(device_resize, "crop_plan", lambda *a: pytest.fail("a plan built in the predict loop"))
    out = list(on_device(iter(images), torch.device("cpu")))
    assert [len(c) for _, c in out] == [27] * 3
