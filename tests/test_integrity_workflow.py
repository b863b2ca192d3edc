"""The workflow refuses inputs that would otherwise give wrong numbers or exhaust memory, end to end in one run.

One imagefolder dataset holds a normal image and a 1 x 8000 PNG; two models predict it at scales [224, 256]:
the embedded model and torchvision's squeezenet1_1 whose fetched weights folder already holds random weights
under the published file name (a replaced or corrupted download). A NaN mean is refused before any job starts
(tests/test_workflow.py); logits that turn non-finite at run time stop predict (tests/test_inference.py, through
the real predict path).
"""

import csv
import hashlib

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torchvision
from PIL import Image

from tests.conftest import run_snakemake, write_config
from zoomeval.core.manifest import read_manifest
from zoomeval.inference.sources import embedded

pytestmark = pytest.mark.workflow

WNID = "n01440764"
MODELS = ("lite0", "squeeze")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("integrity")
    root = workdir / "tiny" / WNID
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(root / "good.png")
    Image.new("RGB", (1, 8000), (255, 0, 0)).save(root / "long.png", optimize=True)
    folder = workdir / "res" / "weights" / "torchvision" / "squeezenet1_1.IMAGENET1K_V1"  # fetch_weights' output
    checkpoint = folder / "squeezenet1_1-b8a52dc0.pth"
    checkpoint.parent.mkdir(parents=True)
    torch.save(torchvision.models.squeezenet1_1(weights=None).state_dict(), checkpoint)
    lite0 = {"source": "embedded", "architecture": embedded.ARCHITECTURE, "weights": embedded.WEIGHTS_FILE}
    write_config(
        workdir,
        scales=[224, 256],
        top_k=3,
        datasets={"tiny": {"adapter": "imagefolder", "root": str(workdir / "tiny"), "variants": ["original"]}},
        stats={"pairs": []},
        resources="res",
        models={
            "lite0": lite0,
            "squeeze": {"source": "torchvision", "architecture": "squeezenet1_1", "weights": "IMAGENET1K_V1"},
        },
    )
    targets = [f"results/predictions/tiny/original/{m}.parquet" for m in MODELS]
    proc = run_snakemake(workdir, "--keep-going", *targets, check=False)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    return workdir, checkpoint


def predict_log(workdir, model):
    return (workdir / f"logs/predictions/tiny/original/{model}.log").read_text()


def test_an_image_over_the_pixel_budget_is_listed_and_left_out(run):
    workdir, _ = run
    with open(workdir / "results/datasets/tiny/bad_images.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    reason = "resized to S=256 it would be 256x2048000 = 524288000 pixels, over max_resized_pixels (16777216)"
    long = str(workdir / "tiny" / WNID / "long.png")
    assert rows == [["image_id", "path", "reason", "source"], [f"{WNID}/long", long, reason, ""]]
    assert [r.image_id for r in read_manifest(workdir / "results/datasets/tiny/manifest.parquet")] == [f"{WNID}/good"]
    predictions = pq.read_table(workdir / "results/predictions/tiny/original/lite0.parquet")
    assert predictions.num_rows == 18 and set(predictions["image_id"].to_pylist()) == {f"{WNID}/good"}


def test_a_tampered_fetched_checkpoint_stops_predict_naming_the_file_and_both_hashes(run):
    workdir, checkpoint = run
    actual = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert not actual.startswith("b8a52dc0")
    log = predict_log(workdir, "squeeze")
    assert f"{checkpoint.relative_to(workdir)}: sha256 {actual} does not match b8a52dc0" in log
    assert f"delete {checkpoint.parent.relative_to(workdir)} to download it again" in log
    assert not (workdir / "results/predictions/tiny/original/squeeze.parquet").exists()
