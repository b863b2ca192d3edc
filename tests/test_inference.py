"""Inference: sharded, resumable writes and the prediction file's layout."""

import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from torch.overrides import TorchFunctionMode
from torch.utils.data import DataLoader

from zoomeval.core.config import InferenceSettings as Settings
from zoomeval.core.config import ModelSpec
from zoomeval.core.io import read_metadata
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ZoomGrid, transforms
from zoomeval.inference import classifier as classifiers
from zoomeval.inference import predict as inference
from zoomeval.inference.batching import batches
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.models import LoadedModel
from zoomeval.inference.parts import merge_parts, merged_metadata, part_range
from zoomeval.inference.predict import predict_to_file
from zoomeval.inference.shards import ShardStore
from zoomeval.inference.sources import embedded

SCALES = [32, 256]
GRID = ZoomGrid(SCALES)
SPEC = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE, 224, embedded.MEAN, embedded.STD)


@pytest.fixture
def records(tmp_path):
    rng = np.random.default_rng(3)
    out = []
    for k, (w, h) in enumerate([(90, 60), (61, 100), (300, 200), (64, 64), (120, 80)]):
        path = tmp_path / f"img{k}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        out.append(Record(f"img{k}", str(path), [k], ["x"], w, h))
    return out


def test_batches_regroup_crops_across_images_in_order():
    stacks = [(0, torch.arange(5)), (1, torch.arange(10, 13)), (2, torch.arange(20, 24))]
    out = list(batches(iter(stacks), 4))
    assert [b[2].tolist() for b in out] == [[0, 1, 2, 3], [4, 10, 11, 12], [20, 21, 22, 23]]
    assert [b[0].tolist() for b in out] == [[0, 0, 0, 0], [0, 1, 1, 1], [2, 2, 2, 2]]
    assert [b[1].tolist() for b in out] == [[0, 1, 2, 3], [4, 0, 1, 2], [0, 1, 2, 3]]


def test_a_killed_job_resumes_from_its_finished_shards(tmp_path, records, monkeypatch):
    settings = Settings(batch_size=16, num_workers=0, threads=2, shard_images=2)
    out = tmp_path / "pred.parquet"
    real_run, calls, kill = inference.infer_shard, [], [True]

    def dies_on_second_shard(classifier, images, chunk, *args):
        calls.append([r.image_id for r in chunk])
        if kill[0] and len(calls) == 2:
            raise RuntimeError("killed")
        return real_run(classifier, images, chunk, *args)

    monkeypatch.setattr(inference, "infer_shard", dies_on_second_shard)
    with pytest.raises(RuntimeError, match="killed"):
        predict_to_file(out, tmp_path / "agg.parquet", records, SPEC, GRID, settings, "toy")
    assert not out.exists() and not (tmp_path / "agg.parquet").exists()  # nothing under the final names
    shards = sorted((tmp_path / ".pred.parquet.shards").glob("*.parquet"))
    assert [p.name for p in shards] == ["00000.aggregates.parquet", "00000.parquet"]

    calls.clear()
    kill[0] = False
    meta = predict_to_file(out, tmp_path / "agg.parquet", records, SPEC, GRID, settings, "toy")
    assert calls == [["img2", "img3"], ["img4"]]  # the first shard was reused
    assert not (tmp_path / ".pred.parquet.shards").exists()

    monkeypatch.setattr(inference, "infer_shard", real_run)
    clean = tmp_path / "clean.parquet"
    fresh_settings = Settings(batch_size=7, num_workers=1, threads=2)
    predict_to_file(clean, tmp_path / "clean_agg.parquet", records, SPEC, GRID, fresh_settings, "toy")
    resumed, fresh = pq.read_table(out), pq.read_table(clean)
    assert resumed.schema == fresh.schema
    for column in ("image_id", "scale", "row", "col", "pred", "pred_full"):
        assert resumed[column].to_pylist() == fresh[column].to_pylist(), column
    assert np.allclose(resumed["conf"].to_numpy(), fresh["conf"].to_numpy(), atol=1e-5)
    resumed, fresh = pq.read_table(tmp_path / "agg.parquet"), pq.read_table(tmp_path / "clean_agg.parquet")
    assert resumed.num_rows == 5 * 4  # no zoom-224 method: scales 32 and 256 have no S = 224
    for column in ("image_id", "method", "pred_max", "pred_mean"):
        assert resumed[column].to_pylist() == fresh[column].to_pylist(), column
    assert (
        meta["n_images"] == 5
        and read_metadata(out)["model"]["weights_sha256"] == read_metadata(clean)["model"]["weights_sha256"]
    )


def test_one_dataloader_serves_every_shard_of_a_job(tmp_path, records, monkeypatch):
    loaders = []

    def counted(*args, **kwargs):
        loaders.append(kwargs["num_workers"])
        return DataLoader(*args, **kwargs)

    monkeypatch.setattr(inference, "DataLoader", counted)
    settings = Settings(batch_size=5, num_workers=1, threads=1, shard_images=2)
    predict_to_file(tmp_path / "p.parquet", tmp_path / "a.parquet", records, SPEC, ZoomGrid([32]), settings, "toy")
    assert loaders == [1] and pq.read_table(tmp_path / "p.parquet")["image_id"].to_pylist() == [
        r.image_id for r in records for _ in range(9)
    ]  # 3 shards, in order


def test_prediction_layout_metadata_and_class_subset(tmp_path, records):
    out = tmp_path / "pred.parquet"
    subset = [1, 281, 967]
    settings = Settings(batch_size=32, num_workers=0, threads=2, store_top5=True)
    predict_to_file(out, tmp_path / "agg.parquet", records[:2], SPEC, GRID, settings, "toy", class_indices=subset)
    table = pq.read_table(out)
    assert table.column_names == ["image_id", "scale", "row", "col", "pred", "pred_full", "conf", "top5", "top5_logit"]
    dictionary = "dictionary<values=string, indices=int32, ordered=0>"
    assert [str(t) for t in table.schema.types[:7]] == [dictionary, "int16", "int8", "int8", "int16", "int16", "float"]
    assert table.num_rows == 2 * 18
    order = transforms(SCALES)
    assert list(
        zip(table["scale"].to_pylist()[:18], table["row"].to_pylist()[:18], table["col"].to_pylist()[:18], strict=True)
    ) == [(t.scale, t.row, t.col) for t in order]
    assert set(table["pred"].to_pylist()) <= set(subset)
    assert [top[0] for top in table["top5"].to_pylist()] == table["pred_full"].to_pylist()
    conf = table["conf"].to_numpy()
    assert ((conf > 1 / 3 - 1e-6) & (conf <= 1)).all()  # the max of a softmax over 3 classes
    meta = read_metadata(out)
    assert meta["class_set"] == "subset" and meta["class_indices"] == subset
    assert meta["scales"] == SCALES and meta["precision"] == "fp32" and meta["resize_backend"] == "pil"
    assert meta["model"]["name"] == "lite0" and len(meta["model"]["weights_sha256"]) == 64


class HostWaits(TorchFunctionMode):
    """Counts the tensor calls that make the host wait for a GPU (a copy to the host, a value read into Python), and
    the softmaxes, to show that it was watching the loop."""

    WAITS = frozenset(
        {
            "cpu",
            "item",
            "tolist",
            "numpy",
            "__array__",
            "__bool__",
            "__int__",
            "__float__",
            "__index__",
            "nonzero",
            "unique",
            "masked_select",
            "synchronize",
        }
    )

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[str] = []
        self.softmaxes = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        self.waits += [name] if name in self.WAITS else []
        self.softmaxes += name == "softmax"
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("backend", ["pil", "device"])
def test_a_shards_loop_never_waits_for_the_device_before_the_shard_ends(records, backend):
    settings = Settings(batch_size=7, num_workers=0, threads=2, store_top5=True, resize_backend=backend)
    classifier = Classifier(SPEC, settings, [1, 281, 967])
    shard = records[:2]
    images = inference.crop_stream(classifier, shard, GRID, "original", None, 224)
    with HostWaits() as spy:
        copy = inference.infer_shard(classifier, images, shard, GRID)
    assert spy.waits == [] and spy.softmaxes == 8  # a batch of 7 crops at a time, of 2 x 27 views
    predictions, aggregates = inference.shard_tables(classifier, shard, GRID, copy)
    plain = inference.crop_stream(classifier, shard, GRID, "original", None, 224)  # the same shard, unobserved
    expected = inference.shard_tables(classifier, shard, GRID, inference.infer_shard(classifier, plain, shard, GRID))
    assert predictions.equals(expected[0]) and aggregates.equals(expected[1])
    with HostWaits() as spy, torch.inference_mode():  # the spy does see the copies of the per-batch path
        classifier.columns(classifier.logits(torch.zeros((2, 224, 224, 3), dtype=torch.uint8)))
    assert spy.waits.count("cpu") == 5 and spy.waits.count("numpy") == 5


class NanWhereBright(torch.nn.Module):
    """Logits that are NaN for crops with a bright pixel (normalised value above 0.5), else zero."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(len(x), 1000)
        logits[x.amax(dim=(1, 2, 3)) > 0.5, 0] = float("nan")
        return logits


def test_non_finite_logits_stop_the_job_naming_model_precision_image_and_transform(tmp_path, monkeypatch):
    out = []
    for k in range(3):
        pixels = np.zeros((300, 300, 3), np.uint8)
        if k == 1:
            pixels[200:, 200:] = 255  # bright only in the bottom-right ninth
        Image.fromarray(pixels).save(tmp_path / f"img{k}.png")
        out.append(Record(f"img{k}", str(tmp_path / f"img{k}.png"), [0], ["x"], 300, 300))
    loaded = LoadedModel(NanWhereBright(), None, embedded.MEAN, embedded.STD)
    monkeypatch.setattr(classifiers, "load_model", lambda spec, weights, head: loaded)
    spec = ModelSpec("nan_model", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE)
    settings = Settings(batch_size=4, num_workers=0, threads=1, shard_images=1)
    with pytest.raises(FloatingPointError) as info:
        predict_to_file(tmp_path / "p.parquet", tmp_path / "a.parquet", out, spec, ZoomGrid([256]), settings, "toy")
    # found when shard 1 is written, in the background while shard 2 ran; shard 0 was written before
    assert [p.name for p in sorted((tmp_path / ".p.parquet.shards").glob("*.parquet"))] == [
        "00000.aggregates.parquet",
        "00000.parquet",
    ]
    # Resized to 256 the bright part starts at row/column 170; crops of anchor 0 end at 154, those of anchor 1
    # start at 15, so the first crop in the authors' order that contains it is LOC:1_1_Size:256.
    assert str(info.value).startswith(
        f"model 'nan_model' at precision fp32 gave non-finite logits (NaN or inf) for image img1 ({out[1].path}) "
        "under transform LOC:1_1_Size:256; with fp16 or bf16 use precision: fp32"
    )
    assert not (tmp_path / "p.parquet").exists()


@pytest.mark.parametrize(
    ("mean", "std", "message"),
    [
        ((float("nan"),) * 3, None, r"models.lite0.mean is \[nan, nan, nan\]; it must be three finite numbers"),
        ((0.5, float("inf"), 0.5), None, r"models.lite0.mean is \[0.5, inf, 0.5\]"),
        (None, (0.5, 0.0, 0.5), r"models.lite0.std is \[0.5, 0.0, 0.5\]; it must be three finite numbers > 0"),
        (None, (0.5, -0.5, 0.5), r"models.lite0.std is \[0.5, -0.5, 0.5\]"),
    ],
)
def test_a_normalisation_that_cannot_work_is_refused(tmp_path, records, mean, std, message):
    spec = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE, 224, mean, std)
    settings = Settings(batch_size=16, num_workers=0, threads=1)
    with pytest.raises(ValueError, match=message):
        predict_to_file(
            tmp_path / "p.parquet", tmp_path / "a.parquet", records[:1], spec, ZoomGrid([32]), settings, "toy"
        )


def test_an_empty_manifest_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="dataset 'toy': the manifest lists no images"):
        predict_to_file(tmp_path / "p.parquet", tmp_path / "a.parquet", [], SPEC, GRID, Settings(), "toy")


def test_an_image_over_the_pixel_budget_is_refused_before_any_work(tmp_path, monkeypatch):
    Image.new("RGB", (1, 8000)).save(tmp_path / "long.png")
    long = Record("long", str(tmp_path / "long.png"), [0], ["x"], 1, 8000)
    monkeypatch.setattr(classifiers, "load_model", lambda *_: pytest.fail("the model was loaded"))
    with pytest.raises(ValueError) as info:
        predict_to_file(
            tmp_path / "p.parquet", tmp_path / "a.parquet", [long], SPEC, ZoomGrid([224, 256]), Settings(), "toy"
        )
    assert str(info.value).startswith(
        f"dataset 'toy': image long ({long.path}) is too large: resized to S=256 it would be 256x2048000 = "
        "524288000 pixels, over max_resized_pixels (16777216)."
    )


def test_a_second_job_for_the_same_output_refuses_while_the_first_runs(tmp_path, records):
    out = tmp_path / "pred.parquet"
    settings = Settings(batch_size=16, num_workers=0, threads=1)
    with ShardStore(out, tmp_path / "agg.parquet").locked():  # what a job left running holds
        with pytest.raises(RuntimeError) as info:
            predict_to_file(out, tmp_path / "agg.parquet", records[:1], SPEC, ZoomGrid([32]), settings, "toy")
    message = str(info.value)
    assert message.startswith(f"pid {os.getpid()} on {socket.gethostname()} is still writing ")
    assert "kill the pid; under SLURM, scancel its job" in message and not out.exists()
    predict_to_file(out, tmp_path / "agg.parquet", records[:1], SPEC, ZoomGrid([32]), settings, "toy")  # free again
    assert out.exists() and not (tmp_path / ".pred.parquet.shards").exists()


def test_the_shard_lock_goes_with_its_holder_not_with_the_workers_it_forked(tmp_path):
    """A DataLoader worker, forked while its job holds the lock, outlives a killed job by up to 5 s: it must not
    keep a rerun out meanwhile."""
    store = ShardStore(tmp_path / "pred.parquet", tmp_path / "agg.parquet")
    holder = f"""
import os, sys, time
from pathlib import Path
from zoomeval.inference.shards import ShardStore
with ShardStore(Path({str(store.predictions)!r}), Path({str(store.aggregates)!r})).locked():
    child = os.fork()
    if child == 0:  # like a DataLoader worker
        time.sleep(60)
        os._exit(0)
    print(child, flush=True)
    time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    worker = int(proc.stdout.readline())
    try:
        with pytest.raises(RuntimeError, match=rf"^pid {proc.pid} on \S+ is still writing "):
            with store.locked():
                pass
        proc.kill()
        proc.wait()
        os.kill(worker, 0)  # the worker still runs ...
        with store.locked():  # ... and holds no lock
            with pytest.raises(RuntimeError, match=rf"^pid {os.getpid()} on \S+ is still writing "):
                with store.locked():  # nor does a second job in this process get it
                    pass
    finally:
        proc.kill()
        os.kill(worker, signal.SIGKILL)


def test_parts_are_runs_of_whole_shards_covering_the_manifest_once():
    assert [part_range(5, 2, k, 2) for k in range(2)] == [range(0, 2), range(2, 5)]  # shards [0], [1, 2]
    assert [part_range(5, 2, k, 4) for k in range(4)] == [range(0, 0), range(0, 2), range(2, 4), range(4, 5)]
    assert [part_range(1000, 500, k, 3) for k in range(3)] == [range(0, 0), range(0, 500), range(500, 1000)]
    assert [part_range(12, 2, k, 3) for k in range(3)] == [range(0, 4), range(4, 8), range(8, 12)]
    with pytest.raises(ValueError, match="part 3 does not exist"):
        part_range(5, 2, 3, 3)


def test_a_job_split_into_parts_and_merged_equals_the_unsplit_job(tmp_path, records):
    settings = Settings(batch_size=16, num_workers=0, threads=2, shard_images=2, store_top5=True)
    job = {"dataset": "toy", "class_indices": [1, 281, 967]}
    one = (tmp_path / "one.parquet", tmp_path / "one.aggregates.parquet")
    predict_to_file(*one, records, SPEC, GRID, settings, **job)
    parts = [(tmp_path / f"p{k}.parquet", tmp_path / f"p{k}.aggregates.parquet") for k in range(4)]
    for k, (path, aggregates) in enumerate(parts):  # 3 shards in 4 parts: part 0 is empty
        predict_to_file(path, aggregates, records, SPEC, GRID, settings, part=(k, 4), **job)
    assert [read_metadata(p)["n_images"] for p, _ in parts] == [0, 2, 2, 1]
    merged = (tmp_path / "merged.parquet", tmp_path / "merged.aggregates.parquet")
    merge_parts(parts, *merged, [r.image_id for r in records])
    for single, joined in zip(one, merged, strict=True):
        assert pq.read_table(joined).equals(pq.read_table(single))  # same rows, order, values and types
        meta, expected = read_metadata(joined), read_metadata(single)
        for timing in ("seconds", "crops_per_second"):
            assert meta.pop(timing) > 0 and expected.pop(timing) > 0
        assert meta == expected
    assert read_metadata(merged[0])["n_images"] == 5

    with pytest.raises(ValueError, match="not 18 rows for each of the manifest's 5 images in order"):
        merge_parts(parts, tmp_path / "x.parquet", tmp_path / "y.parquet", [r.image_id for r in reversed(records)])
    with pytest.raises(ValueError, match=r"p1.parquet is not part 0 of 3"):
        merge_parts(parts[1:], tmp_path / "x.parquet", tmp_path / "y.parquet", [r.image_id for r in records])


def test_merged_metadata_sums_the_timings_and_refuses_parts_computed_differently():
    shared = {"kind": "predictions", "precision": "fp32", "scales": [256]}
    metas = [
        {
            **shared,
            "part": [1, 3],
            "n_images": 4,
            "device": "cuda",
            "seconds": 2.0,
            "crops_per_second": 100.0,
            "zoomeval_commit": "abc",
        },
        {
            **shared,
            "part": [2, 3],
            "n_images": 2,
            "device": "cpu",
            "seconds": 6.0,
            "crops_per_second": 10.0,
            "zoomeval_commit": "abc",
        },
    ]
    merged = merged_metadata(metas)
    assert merged == {
        **shared,
        "n_images": 6,
        "device": "cpu,cuda",
        "seconds": 8.0,
        "crops_per_second": 32.5,
        "zoomeval_commit": "abc",
    }
    metas[1]["zoomeval_commit"] = "abc-dirty"  # parts run at two commits: both recorded
    assert merged_metadata(metas)["zoomeval_commit"] == "abc,abc-dirty"
    metas[1]["precision"] = "bf16"
    with pytest.raises(ValueError, match=r"prediction parts 1 and 2 were computed differently \(\['precision'\]\)"):
        merged_metadata(metas)


def test_the_gpu_presets_settings_fit_a_cpu_job_saying_so(caplog) -> None:
    """compile off where the device resolves to a CPU (it segfaulted a standard_eval job there), and no more
    DataLoader workers than the job's cores (12 on 2 cores warned in every job)."""
    gpu = Settings(device="auto", compile=True, num_workers=12, precision="bf16", batch_size=333)
    with caplog.at_level("WARNING"):
        job = gpu.for_job(2).for_device("cpu")
    assert (job.num_workers, job.threads, job.compile) == (2, 2, False)
    assert (job.precision, job.batch_size) == ("bf16", 333)  # the rest as given
    assert [r.getMessage() for r in caplog.records] == [
        "inference.num_workers: 12 capped at this job's 2 cores",
        "inference.compile: turned off: inference.device 'auto' resolved to the cpu here, and torch.compile is used "
        "on CUDA only",
    ]
    assert gpu.for_device("cuda") is gpu and Settings(num_workers=0).for_job(2).num_workers == 0


def test_a_job_runs_on_its_snakemake_threads_unless_inference_threads_says_otherwise() -> None:
    """threads 0 (the default): the job's Snakemake threads, at most the machine's cores; a number: that."""
    cores = os.cpu_count() or 1
    assert Settings(threads=0).for_job(1).threads == 1
    assert Settings(threads=0).for_job(cores + 3).threads == cores
    assert Settings(threads=3).for_job(1).threads == 3


def test_a_compiled_model_runs_uncompiled_on_a_cpu_and_a_compiler_failure_names_the_setting(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(torch, "compile", lambda fn, options=None: calls.append(fn) or fn)
    loaded = LoadedModel(
        torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 1000)),
        None,
        embedded.MEAN,
        embedded.STD,
    )
    spec = ModelSpec("m", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE)
    classifier = Classifier(spec, Settings(device="cpu", compile=True), None, loaded=loaded)
    assert calls == [] and classifier.settings.compile is False
    assert classifier.logits(torch.zeros((2, 8, 8, 3), dtype=torch.uint8)).shape == (2, 1000)

    def broken(fn, options=None):
        def run(crops):
            raise OSError("No CUDA runtime is found")

        return run

    monkeypatch.setattr(torch, "compile", broken)
    with pytest.raises(
        RuntimeError,
        match=r"^model 'm' failed under torch.compile \(inference.compile: true\): No "
        r"CUDA runtime is found; set inference.compile: false$",
    ):
        classifier._compiled(None)(torch.zeros((1, 8, 8, 3), dtype=torch.uint8))
