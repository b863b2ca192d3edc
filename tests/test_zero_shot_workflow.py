"""The workflow end to end with a zero-shot open_clip model (the tiny random-initialised one: no pretrained
image-text model ships inside a PyPI package) beside the embedded EfficientNet-Lite0, on an ImageNet-Hard fixture in
the dataset's Parquet format (multi-label, several origins), scored over all classes and over the classes its
labels name: the head is computed once, the standard evaluation and the ImageNet-Hard table are recomputed by hand
from the Parquet."""

import csv
import hashlib
import io

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from skimage import data
from torchvision import transforms as T

from tests.test_adapters import write_hard_shard
from tests.test_open_clip import TEMPLATES, write_tiny_clip
from zoomeval.core.io import read_metadata
from zoomeval.inference.sources import embedded
from zoomeval.inference.zero_shot import class_names

pytestmark = pytest.mark.workflow
TARGETS = ("results/table_a8.csv", "results/table_1.csv", "results/table_imagenet_hard.csv")


def encoded(array: np.ndarray, fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).convert("RGB").save(buf, format=fmt)
    return buf.getvalue()


def write_hard_fixture(folder):
    """Two shards of photos (a cat, a cup, a rocket, a camera) with label lists and origins."""
    folder.mkdir()
    write_hard_shard(
        folder / "validation-00000-of-00002.parquet",
        [
            (encoded(data.chelsea(), "JPEG"), [281, 282, 285], "imagenet_sketch"),  # tabby, tiger cat, Egyptian cat
            (encoded(data.coffee(), "PNG"), [967, 968, 504], "objectnet"),  # espresso, cup, coffee mug
        ],
    )
    write_hard_shard(
        folder / "validation-00001-of-00002.parquet",
        [
            (encoded(data.rocket(), "JPEG"), [1], "imagenet_sketch"),  # goldfish: wrong for any sane model
            (encoded(data.camera()[::2, ::2], "PNG"), [759, 872], "imagenet_a"),  # reflex camera, tripod
        ],
    )


def hard_rows(folder) -> list[dict]:
    """The fixture's rows in the adapter's order (shards sorted, then rows), labels without the -1 padding."""
    rows = []
    for shard in sorted(folder.glob("*.parquet")):
        rows += pq.read_table(shard).to_pylist()
    return [{**r, "label": [x for x in r["label"] if x >= 0]} for r in rows]


def job_counts(proc) -> dict[str, int]:
    out = proc.stdout + proc.stderr
    table = out[out.index("Job stats:") :].split("\n\n")[0].splitlines()[3:]
    return {name: int(n) for name, n in (line.split() for line in table)}


def test_zero_shot_model_and_imagenet_hard_table_end_to_end(tmp_path, snakemake_run, config_writer):
    tiny = write_tiny_clip(tmp_path / "tiny")
    del tiny["duplicate_names"]  # the default, keep_first, is filled in and recorded
    write_hard_fixture(tmp_path / "hard_parquet")
    hard = {"adapter": "imagenet_hard", "parquet": str(tmp_path / "hard_parquet"), "class_set": "full"}
    subset = "hard_subset"  # the same images scored over the 10 classes their labels name
    lite0 = {"source": "embedded", "architecture": embedded.ARCHITECTURE, "weights": embedded.WEIGHTS_FILE}
    datasets = {"hard": hard, subset: {**hard, "class_set": "subset"}}
    config = config_writer(
        tmp_path,
        scales=[64, 256],
        top_k=3,
        datasets=datasets,
        models={"lite0": lite0, "tiny_clip": tiny},
        stats={"pairs": []},
    )

    run = snakemake_run(tmp_path, *TARGETS)

    # one head, read by both predict and both standard_eval jobs of the tiny model
    counts = job_counts(run)
    assert (counts["zero_shot_head"], counts["predict"], counts["standard_eval"]) == (1, 4, 4)
    (head,) = (tmp_path / "results/zero_shot").glob("*.safetensors")
    assert head.name.startswith("zoomeval-tiny-clip.tiny.") and counts["fetch_weights"] == 1
    for log in ("predictions/hard/original", f"predictions/{subset}/original", "standard/hard", f"standard/{subset}"):
        text = (tmp_path / f"logs/{log}/tiny_clip.log").read_text()
        assert f"loaded zero-shot head results/zero_shot/{head.name}: 1000 classes x 2 templates" in text
    for path in ("results/predictions/hard/original/tiny_clip.parquet", "results/standard/hard/tiny_clip.parquet"):
        record = read_metadata(tmp_path / path)["model"]["zero_shot"]
        assert record["template_list"] == list(TEMPLATES) and record["templates"] == tiny["templates"]
        assert record["templates_sha256"] == hashlib.sha256((tmp_path / "tiny/templates.txt").read_bytes()).hexdigest()
        assert record["class_names_sha256"] == class_names().sha256
        assert record["duplicate_names"]["policy"] == "keep_first"
        assert record["duplicate_names"]["unpredictable"] == [744, 837]

    # the embedded model's standard predictions, by hand from the Parquet's image bytes
    rows = hard_rows(tmp_path / "hard_parquet")
    standard = pl.read_parquet(tmp_path / "results/standard/hard/lite0.parquet")
    assert standard["image_id"].to_list() == ["00000", "00001", "00002", "00003"]
    # timm's evaluation of tf_efficientnet_lite0.in1k: crop_pct 0.875 at 224 px, bicubic
    timm_eval = T.Compose(
        [
            T.Resize(256, T.InterpolationMode.BICUBIC),
            T.CenterCrop(224),
            T.ToTensor(),
            T.Normalize(embedded.MEAN, embedded.STD),
        ]
    )
    model = embedded.load_efficientnet_lite0()
    with torch.inference_mode():
        images = [Image.open(io.BytesIO(r["image"]["bytes"])).convert("RGB") for r in rows]
        by_hand = model(torch.stack([timm_eval(im) for im in images])).argmax(dim=1).tolist()
    assert standard["pred"].to_list() == by_hand

    # the ImageNet-Hard table: accuracy overall and by origin from the Parquet's label lists, by hand
    with open(tmp_path / "results/table_imagenet_hard.csv") as fh:
        table = {(r["model"], r["dataset"]): r for r in csv.DictReader(fh)}
    with open(tmp_path / "results/table_a8.csv") as fh:
        a8 = {(r["model"], r["dataset"]): r for r in csv.DictReader(fh)}
    origins = sorted({r["origin"] for r in rows})
    columns = list(table[("lite0", "hard")])
    assert columns[-7:] == [*(f"acc_standard:{o}" for o in origins), "n_scales", "n_bad", "n_unscored", "left_out"]
    for key in table:
        preds = pl.read_parquet(tmp_path / f"results/standard/{key[1]}/{key[0]}.parquet")["pred"].to_list()
        correct = [p in r["label"] for p, r in zip(preds, rows, strict=True)]
        assert table[key]["acc_standard"] == f"{100 * np.mean(correct):.2f}" == a8[key]["acc_standard"]
        for origin in origins:
            hits = [c for c, r in zip(correct, rows, strict=True) if r["origin"] == origin]
            assert table[key][f"acc_standard:{origin}"] == f"{100 * np.mean(hits):.2f}"
        assert table[key]["acc_max"] == a8[key]["acc_max"]
        assert (table[key]["n_images"], table[key]["selection"], table[key]["card_model"]) == ("4", "held_out", "")
    assert len(table) == 4
    # the cat, the cup and the camera's tripod; the rocket is no goldfish
    assert table[("lite0", "hard")]["acc_standard"] == "75.00"
    # a subset class set masks the zero-shot logits as the other model's: same pred_full, pred within the labels
    labels = sorted({x for r in rows for x in r["label"]})
    for name in ("lite0", "tiny_clip"):
        full, masked = (pl.read_parquet(tmp_path / f"results/standard/{d}/{name}.parquet") for d in ("hard", subset))
        assert masked["pred_full"].to_list() == full["pred_full"].to_list() and set(masked["pred"]) <= set(labels)
        assert read_metadata(tmp_path / f"results/standard/hard_subset/{name}.parquet")["class_indices"] == labels
    # the standard accuracy beside the 1-crop in Table A8 and Table 1 (panel s)
    with open(tmp_path / "results/table_1.csv") as fh:
        panel_s = [r[:4] for r in csv.reader(fh) if r[0] == "s"]  # then the left-out columns
    assert panel_s == [
        ["s", m, a8[(m, "hard")]["acc_standard"], a8[(m, "hard_subset")]["acc_standard"]]
        for m in ("lite0", "tiny_clip")
    ]

    # the zoom grid's normalisation is not the head's: changing it re-runs the zoom grid only
    config["models"]["tiny_clip"]["mean"] = [0.5, 0.5, 0.5]
    config_writer(tmp_path, **config)
    plan = job_counts(snakemake_run(tmp_path, *TARGETS, "--dry-run"))
    assert "zero_shot_head" not in plan and "standard_eval" not in plan
    assert (plan["predict"], plan["analyze"]) == (2, 2)
