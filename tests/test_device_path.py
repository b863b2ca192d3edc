"""The device data path (``resize_backend: device``) against the PIL reference, on CPU (the same code runs on a GPU):
every crop bit for bit, the device operations per image, and the predictions and tables of both paths."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import torch
import yaml
from PIL import Image
from snakemake.utils import update_config

from tests.conftest import ROOT
from zoomeval.analysis.scoring import analyze_predictions
from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.io import read_metadata
from zoomeval.core.pil_resample import vertical_first
from zoomeval.core.zoom import all_crops, paper_scales, resized_size, transforms
from zoomeval.datasets.adapters.demo import build_demo
from zoomeval.inference.crops import DeviceOps, ZoomCrops, device_crops, resolve_backend
from zoomeval.inference.predict import predict_to_file
from zoomeval.inference.sources import embedded
from zoomeval.registries import load_config
from zoomeval.report.tables import table_1_rows, table_a8_rows

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


#: Device operations per image: a conversion, and per pass order two products, two roundings (3 in-place operations
#: each) and a copy, then a concatenation, a conversion to uint8 and the gather; measured 12 (one order) and 21 (both).
MAX_DEVICE_OPS = 21


@pytest.mark.parametrize(("width", "height"), [(30, 80), (80, 30)])  # both pass orders, one
def test_an_image_costs_a_fixed_number_of_device_operations(width, height):
    pixels = torch.from_numpy(np.array(_noise(width, height, 0)))
    counts = []
    for scales in ([256], [10, 256, 512], paper_scales()):
        device_crops(pixels, scales, extra_views=True)  # builds the image size's plan
        with DeviceOps() as counter:
            device_crops(pixels, scales, extra_views=True)
        counts.append(len(counter.ops))
    assert max(counts) <= MAX_DEVICE_OPS, counter.ops
    assert counts[1] == counts[2]  # whatever the number of scales and views


def test_the_workers_only_decode_for_the_device_path(demo):
    _, pixels = ZoomCrops(demo[:1], SCALES, backend="device")[0]
    with Image.open(demo[0].path) as raw:
        assert np.array_equal(pixels.numpy(), np.asarray(raw.convert("RGB")))


@pytest.fixture(scope="module")
def both_paths(demo, tmp_path_factory):
    """Predictions and Table A8 / Table 1 inputs of the demo through the PIL path and the device path."""
    out, metrics = {}, {}
    for backend in ("pil", "device"):
        folder = tmp_path_factory.mktemp(backend)
        settings = InferenceSettings(batch_size=64, num_workers=0, threads=2, resize_backend=backend)
        predictions, aggregates = folder / "pred.parquet", folder / "agg.parquet"
        predict_to_file(predictions, aggregates, demo, SPEC, SCALES, settings, "demo")
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


def test_auto_takes_the_device_path_on_a_gpu_and_pil_on_a_cpu():
    assert resolve_backend("auto", torch.device("cuda")) == "device"
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
