"""The workflow refuses inputs that would otherwise give wrong numbers or exhaust memory, end to end in one run.

One imagefolder dataset holds a normal image and a 1 x 8000 PNG; two models predict it at scales [224, 256]:
the embedded model and torchvision's squeezenet1_1 whose fetched weights folder already holds random weights
under the published file name (a replaced or corrupted download). A second run builds every table over datasets
that hold a truncated JPEG, and each table says it left that image out. A NaN mean is refused before any job starts
(tests/test_workflow.py); logits that turn non-finite at run time stop predict (tests/test_inference.py, through
the real predict path).
"""

import csv
import hashlib
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torchvision
from PIL import Image

from tests.conftest import LAYOUT, run_snakemake, write_config
from tests.test_adapters import image_bytes, write_hard_shard
from zoomeval.core.manifest import read_manifest
from zoomeval.inference.sources import embedded

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("test_integrity_workflow")]

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


# ------------------------------------------------------------------ what every table leaves out, end to end

TABLES = [
    "results/table_a8.csv",
    "results/table_1.csv",
    "results/table_zoom_groups.csv",
    "results/table_aggregation.csv",
    "results/table_imagenet_hard.csv",
    "results/table_tta.csv",
    "results/hard/summary.csv",
    "results/browser/index.html",
]


def truncated_jpeg(seed: int) -> bytes:
    """The first half of a noisy 64 x 48 JPEG: it opens, but decoding it fails."""
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()[: len(buf.getvalue()) // 2]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """Every table of `all` and Table 5 over two datasets that each hold one truncated JPEG among good images: an
    imagefolder and an ImageNet-Hard Parquet shard (whose table needs the imagenet_hard adapter)."""
    workdir = tmp_path_factory.mktemp("left_out")
    root = workdir / "tiny" / WNID
    root.mkdir(parents=True)
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(root / "good.png")
    (root / "cut.jpg").write_bytes(truncated_jpeg(2))
    (workdir / "hard").mkdir()
    write_hard_shard(
        workdir / "hard" / "validation-00000-of-00001.parquet",
        [
            (image_bytes("PNG", (50, 40)), [0], "imagenet"),
            (truncated_jpeg(3), [1], "objectnet"),
            (image_bytes("JPEG", (40, 30)), [2], "imagenet_a"),
        ],
    )
    lite0 = {"source": "embedded", "architecture": embedded.ARCHITECTURE, "weights": embedded.WEIGHTS_FILE}
    write_config(
        workdir,
        scales=[224, 256],
        top_k=3,
        datasets={
            "tiny": {"adapter": "imagefolder", "root": str(workdir / "tiny"), "variants": ["original"]},
            "hard": {"adapter": "imagenet_hard", "parquet": str(workdir / "hard")},
        },
        stats={"pairs": []},
        models={"lite0": lite0},
        tta={"methods": ["none"], "datasets": ["tiny"]},
    )
    run_snakemake(workdir, *TABLES)
    return workdir


def rows_of(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def bad_note(dataset: str) -> str:
    return f"1 bad (1 unreadable, listed in {LAYOUT.path('bad_images', dataset=dataset)})"


@pytest.mark.parametrize("table", [t for t in TABLES if t.endswith(".csv")])
def test_every_table_notes_the_truncated_jpeg_in_its_csv_and_markdown(tables, table):
    rows = rows_of(tables / table)
    assert rows
    for row in rows:
        if "n_bad" in row:  # a row per dataset
            name = row["dataset"] if "dataset" in row else row["name"]
            assert (row["n_bad"], row["n_unscored"], row["left_out"]) == ("1", "0", bad_note(name)), row
        else:  # datasets as columns (Table 1, Table 5)
            datasets = [c.removeprefix("n_bad:") for c in row if c.startswith("n_bad:")]
            assert sorted(datasets) == (["tiny"] if table.endswith("tta.csv") else ["hard", "tiny"])
            assert all(row[f"n_bad:{d}"] == "1" and row[f"n_unscored:{d}"] == "0" for d in datasets)
            assert row["left_out"] == "; ".join(f"{d}: {bad_note(d)}" for d in datasets)
    note = next(
        line
        for line in (tables / table).with_suffix(".md").read_text().splitlines()
        if line.startswith("Images left out")
    )
    shown = ["hard"] if "imagenet_hard" in table else ["tiny"] if "tta" in table else ["hard", "tiny"]
    assert note.endswith("max_resized_pixels): " + "; ".join(f"{d}: {bad_note(d)}" for d in shown) + ".")
    reasons = rows_of(tables / "results/datasets/tiny/bad_images.csv")
    assert [(r["image_id"], r["reason"].split(":")[0]) for r in reasons] == [(f"{WNID}/cut", "OSError")]


def test_the_browser_counts_say_what_was_left_out(tables):
    text = (tables / "results/browser/data/tiny/index.js").read_text()
    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    assert (index["n_scored"], index["left_out"]) == (1, {"n_bad": 1, "n_unscored": 0, "why": bad_note("tiny")})
