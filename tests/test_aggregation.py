"""Aggregation methods (the aggregation table of Taesiri et al. 2023): view groups, running softmax sums and the
max / mean rules."""

import numpy as np
import polars as pl
import pytest
import torch
from PIL import Image

from zoomeval.analysis.aggregation_scores import aggregation_accuracy
from zoomeval.core.config import InferenceSettings as Settings
from zoomeval.core.config import ModelSpec
from zoomeval.core.io import read_metadata
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ZoomGrid, all_crops, corner_crops, transforms, zoom_crop
from zoomeval.inference.aggregation import MeanSoftmax, aggregate
from zoomeval.inference.batching import batches
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.predict import predict_to_file
from zoomeval.inference.sources import embedded


def test_membership_of_each_method():
    order = transforms([32, 224, 256, 300])  # 36 transforms, then 9 extra views
    methods, members = ZoomGrid([32, 224, 256, 300]).membership
    assert methods == ("zoom_in", "zoom_out", "zoom_224", "five_crop", "ten_crop")
    assert members.shape == (45, 5)
    assert members.sum(axis=0).tolist() == [18, 9, 9, 5, 10]
    in_views = np.flatnonzero(members[:, 0])
    assert {order[v].scale for v in in_views} == {256, 300}
    one_crop = order.index(transforms([256])[4])  # LOC:1_1_Size:256
    assert np.flatnonzero(members[:, 3]).tolist() == [one_crop, 36, 37, 38, 39]
    assert np.flatnonzero(members[:, 4]).tolist() == [one_crop, *range(36, 45)]
    # Without 256 there are neither extra views nor 5-/10-crop; without S < 224 no zoom-out.
    methods, members = ZoomGrid([224, 300]).membership
    assert methods == ("zoom_in", "zoom_224") and members.shape == (18, 2)


def test_extra_views_are_the_corner_crops_and_the_mirror_images():
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (200, 300, 3), dtype=np.uint8))  # resized to 384 x 256
    crops = all_crops(image, [256, 32], extra_views=True)
    assert crops.shape == (27, 224, 224, 3)
    resized = np.asarray(image.resize((384, 256), Image.Resampling.BICUBIC))
    corners = corner_crops(resized)
    assert np.array_equal(corners[0], resized[:224, :224]) and np.array_equal(corners[1], resized[:224, 160:])
    assert np.array_equal(corners[2], resized[32:, :224]) and np.array_equal(corners[3], resized[32:, 160:])
    assert np.array_equal(crops[18:22], corners)
    centre = np.asarray(zoom_crop(image, 256, 1, 1))
    assert np.array_equal(crops[2 * 4], centre)  # LOC:1_1_Size:256 is transform 8 of [256, 32]
    mirrored = [corners[0], corners[1], centre, corners[2], corners[3]]
    for k, view in enumerate(mirrored):
        assert np.array_equal(crops[22 + k], view[:, ::-1])
    assert np.array_equal(all_crops(image, [256, 32]), crops[:18])


def test_running_sums_and_both_rules_against_brute_force():
    rng = np.random.default_rng(7)
    methods, members = ZoomGrid([32, 224, 256]).membership
    n_images, n_views, n_classes = 3, len(members), 4
    probs = torch.from_numpy(rng.dirichlet(np.ones(n_classes), size=(n_images, n_views)).astype(np.float32))
    conf, arg = probs.max(dim=2)
    classes = torch.tensor([3, 10, 20, 999])
    pred = classes[arg].numpy().astype(np.int16)
    conf = conf.numpy()
    conf[1, :] = 0.5  # every view of image 1 ties: max takes each method's first view
    means = MeanSoftmax(n_images, torch.tensor(members, dtype=torch.float32), n_classes)
    stacks = iter([(i, probs[i]) for i in range(n_images)])
    for images, views, batch in batches(stacks, 17):  # batches that cross image boundaries
        means.add(images[0] * n_views + views[0], batch)
    mean_pred, mean_conf = (v.numpy() for v in means.predictions(classes))
    table = aggregate(["a", "b", "c"], methods, members, pred, conf, mean_pred, mean_conf)
    rows = table.to_pylist()
    assert [(r["image_id"], r["method"]) for r in rows[:6]] == [("a", m) for m in methods] + [("b", methods[0])]
    for r, row in zip([(i, m) for i in range(n_images) for m in range(len(methods))], rows, strict=True):
        i, m = r
        views = np.flatnonzero(members[:, m])
        best = max(views, key=lambda v: (conf[i, v], -v))  # highest probability, then the first view
        assert row["pred_max"] == pred[i, best] and row["conf_max"] == conf[i, best]
        mean = probs[i, views].double().mean(dim=0)
        assert row["pred_mean"] == classes[mean.argmax()].item()
        assert abs(row["conf_mean"] - mean.max().item()) < 1e-6
    assert [r["pred_max"] for r in rows if r["image_id"] == "b"] == [
        pred[1, np.flatnonzero(members[:, m])[0]] for m in range(len(methods))
    ]


def test_the_aggregates_file_matches_the_model_run_by_hand(tmp_path):
    spec = ModelSpec(
        "lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE, 224, embedded.MEAN, embedded.STD
    )
    rng = np.random.default_rng(5)
    records = []
    for k, (w, h) in enumerate([(300, 240), (250, 400)]):
        path = tmp_path / f"img{k}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        records.append(Record(f"img{k}", str(path), [k], ["x"], w, h))
    scales, subset = [160, 256], [1, 281, 285, 967]
    settings = Settings(batch_size=13, num_workers=0, threads=2)
    out, agg = tmp_path / "pred.parquet", tmp_path / "agg.parquet"
    predict_to_file(out, agg, records, spec, ZoomGrid(scales), settings, "toy", class_indices=subset)
    meta = read_metadata(agg)
    assert meta["kind"] == "aggregates" and meta["schema_version"] == 1
    assert meta["views"] == {"zoom_in": 9, "zoom_out": 9, "five_crop": 5, "ten_crop": 10}
    table = pl.read_parquet(agg).with_columns(pl.col("image_id", "method").cast(pl.String))

    classifier = Classifier(spec, settings, subset)
    methods, members = ZoomGrid(scales).membership
    preds = pl.read_parquet(out).with_columns(pl.col("image_id").cast(pl.String))
    for record in records:
        crops = torch.from_numpy(all_crops(Image.open(record.path), scales, extra_views=True))
        with torch.inference_mode():
            probs = classifier.probabilities(classifier.logits(crops)).double()
        # The file's per-transform predictions are the first 18 views of the hand run.
        mine = preds.filter(pl.col("image_id") == record.image_id)
        assert mine["pred"].to_list() == [subset[j] for j in probs[:18].argmax(dim=1).tolist()]
        for m, method in enumerate(methods):
            views = np.flatnonzero(members[:, m])
            row = table.filter((pl.col("image_id") == record.image_id) & (pl.col("method") == method)).row(
                0, named=True
            )
            group = probs[views]
            assert row["pred_mean"] == subset[group.mean(dim=0).argmax().item()], method
            best = views[group.max(dim=1).values.argmax().item()]
            assert row["pred_max"] == subset[probs[best].argmax().item()], method
            assert abs(row["conf_max"] - probs[best].max().item()) < 1e-5


def test_aggregation_accuracy_by_hand():
    records = [
        Record(i, f"{i}.png", labels, ["x"], 10, 10)
        for i, labels in [("a", [1]), ("b", [2, 3]), ("c", [4]), ("d", [5])]
    ]
    aggregates = pl.DataFrame(
        {
            "image_id": ["a", "b", "c", "d"] * 2 + ["e"],
            "method": ["zoom_in"] * 4 + ["ten_crop"] * 4 + ["zoom_in"],
            "pred_max": [1, 3, 0, 0, 1, 0, 0, 0, 7],
            "pred_mean": [1, 2, 4, 0, 0, 0, 0, 0, 7],
        },
        schema_overrides={"pred_max": pl.Int16, "pred_mean": pl.Int16},
    )
    # "e" is not among the scored records (e.g. left out under ReaL): it does not count.
    assert aggregation_accuracy(aggregates, records) == {
        "zoom_in": {"max": 50.0, "mean": 75.0},
        "ten_crop": {"max": 25.0, "mean": 0.0},
    }
    with pytest.raises(ValueError, match="3 rows for 'ten_crop', expected 4"):
        aggregation_accuracy(aggregates.filter(pl.col("image_id") != "d").vstack(aggregates[3:4]), records)
