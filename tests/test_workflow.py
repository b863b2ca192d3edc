"""The workflow end to end on the demo with two scales, in a temporary directory."""

import csv
import hashlib
import json
import subprocess
import sys

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml
from snakemake.utils import update_config

from tests.conftest import DEMO_SCALES, LAYOUT, ROOT, copy_study, stand_in_data_paths
from tests.test_cover import authors_greedy, min_cover_size
from tests.test_where_zoom_helps import brute_force
from zoomeval.core.manifest import read_manifest
from zoomeval.core.zoom import transforms

pytestmark = pytest.mark.workflow
SCALES = DEMO_SCALES


def recompute_table_a8(workdir, dataset, variant, model, top_k):
    """Table A8 cells from the prediction Parquet and the manifest, with plain polars and Python sets."""
    records = read_manifest(workdir / f"results/datasets/{dataset}/manifest.parquet")
    labels = {r.image_id: set(r.labels) for r in records}
    preds = pl.read_parquet(workdir / f"results/predictions/{dataset}/{variant}/{model}.parquet")
    names = {(t.scale, t.row, t.col): k for k, t in enumerate(transforms(SCALES))}
    correct = {}
    for image_id, scale, row, col, pred in preds.select("image_id", "scale", "row", "col", "pred").iter_rows():
        correct[(names[(scale, row, col)], image_id)] = pred in labels[image_id]
    ids = [r.image_id for r in records]
    m = np.array([[correct[(t, i)] for i in ids] for t in range(len(names))])
    cover = authors_greedy(m)
    one = names[(256, 1, 1)]
    return {
        "n_images": str(len(ids)),
        "acc_1crop": f"{100 * m[one].mean():.2f}",
        "acc_top_k": f"{100 * m[cover[:top_k]].any(axis=0).mean():.2f}" if cover else "0.00",
        "acc_max": f"{100 * m.any(axis=0).mean():.2f}",
        "cover_size": str(len(cover)),
        "cover_size_exact": str(min_cover_size(m)),
    }


def recompute_max_rule(workdir, dataset, model, member):
    """Accuracy of the max rule over the transforms whose scale satisfies ``member``, from the prediction
    file alone: per image the first most confident transform in the authors' order."""
    records = read_manifest(workdir / f"results/datasets/{dataset}/manifest.parquet")
    preds = pl.read_parquet(workdir / f"results/predictions/{dataset}/original/{model}.parquet")
    rank = {(t.scale, t.row, t.col): k for k, t in enumerate(transforms(SCALES))}
    best = {}
    columns = preds.select("image_id", "scale", "row", "col", "pred", "conf")
    for image_id, scale, row, col, pred, conf in columns.iter_rows():
        key = (-conf, rank[(scale, row, col)])
        if member(scale) and (image_id not in best or key < best[image_id][0]):
            best[image_id] = (key, pred)
    return f"{100 * np.mean([best[r.image_id][1] in r.labels for r in records]):.2f}"


def check_zoom_policies(workdir, table_a8):
    """The zoom-policy curves start at the 1-crop accuracy and end at acc_max, per Table A8 row."""
    with open(workdir / "results/table_zoom_policies.csv") as fh:
        points = list(csv.DictReader(fh))
    for row in table_a8:
        mine = [
            p
            for p in points
            if (p["model"], p["variant"], p["dataset"]) == (row["model"], row["variant"], row["dataset"])
        ]
        first = {p["acc"] for p in mine if p["budget"] == "1" and p["policy"] != "oracle_top_k"}
        assert first == {row["acc_1crop"]}, row  # every policy, cross-validated or transferred, and the 1-crop
        assert [p["acc"] for p in mine if p["policy"] == "oracle_max"] == [row["acc_max"]]
        assert [p["acc"] for p in mine if p["policy"] == "oracle_top_k"][-1] == row["acc_max"]
        assert {p["protocol"] for p in mine} == {"cv3", "in_sample"} | (
            {"transfer:demo"} if row["dataset"] == "demo_clutter" else set()
        )
    assert (workdir / "results/figures/demo/zoom_policies.png").stat().st_size > 10_000


def recount_best_policy(workdir, dataset, model, m, records, names, budget=4):
    """The best label-free policy at ``budget`` by hand from the policies document's rows (most n_correct, ties to
    the earlier of POLICIES), each image's correctness under it recounted from the choices file's views and the
    correctness ``m`` (never its own ``correct``); and every (policy, budget)'s choices summed is its row's."""
    from zoomeval.analysis.policies import POLICIES

    document = json.loads((workdir / f"results/policies/{dataset}/original/{model}.json").read_text())
    choices = pl.read_parquet(workdir / f"results/policies/{dataset}/original/{model}.choices.parquet")
    rows = {(r["policy"], r["budget"]): r for r in document["rows"] if r["policy"] in POLICIES}
    sums = choices.group_by("policy", "budget").agg(pl.col("correct").sum(), pl.len()).iter_rows()
    assert {(p, b): (k, n) for p, b, k, n in sums} == {key: (r["n_correct"], r["n_images"]) for key, r in rows.items()}
    best = max(POLICIES, key=lambda p: (rows[p, budget]["n_correct"], -POLICIES.index(p)))
    index = {r.image_id: i for i, r in enumerate(records)}
    right = [None] * len(records)
    for image_id, view in (
        choices.filter((pl.col("policy") == best) & (pl.col("budget") == budget)).select("image_id", "view").iter_rows()
    ):
        loc, size = view.removeprefix("LOC:").split("_Size:")
        row, col = map(int, loc.split("_"))
        right[index[image_id]] = bool(m[names[(int(size), row, col)], index[image_id]])
    assert None not in right
    return best, right


def check_where_zoom_helps(workdir):
    """The size/centre table recounted from the manifests' boxes and the prediction files alone, per dataset and
    model (tests.test_where_zoom_helps.brute_force), the best policy's from its held-out choices
    (recount_best_policy); its accuracies are those counts over the bin's images."""
    with open(workdir / "results/table_where_zoom_helps.csv") as fh:
        rows = list(csv.DictReader(fh))
    names = {(t.scale, t.row, t.col): k for k, t in enumerate(transforms(SCALES))}
    cells = list(dict.fromkeys((r["dataset"], r["model"]) for r in rows))
    assert cells == [("demo", "efficientnet_lite0"), ("demo_clutter", "efficientnet_lite0")]
    for dataset, model in cells:
        records = read_manifest(workdir / f"results/datasets/{dataset}/manifest.parquet")
        index = {r.image_id: i for i, r in enumerate(records)}
        m = np.zeros((len(names), len(records)), dtype=bool)
        preds = pl.read_parquet(workdir / f"results/predictions/{dataset}/original/{model}.parquet")
        for image_id, scale, row, col, pred in preds.select("image_id", "scale", "row", "col", "pred").iter_rows():
            m[names[(scale, row, col)], index[image_id]] = pred in records[index[image_id]].labels
        mine = [r for r in rows if (r["dataset"], r["model"]) == (dataset, model)]
        got = [
            (r["axis"], int(r["bin"]), int(r["n_images"]), int(r["n_1crop"]), int(r["n_max"]), int(r["n_policy"]))
            for r in mine
        ]
        best, right = recount_best_policy(workdir, dataset, model, m, records, names)
        assert got == brute_force(records, m, names[(256, 1, 1)], right)
        assert {(r["policy"], r["budget"]) for r in mine} == {(best, "4")}
        for r in mine:
            n = int(r["n_images"])
            for key in ("1crop", "max", "policy"):
                assert r[f"acc_{key}"] == (f"{100 * int(r[f'n_{key}']) / n:.2f}" if n else "")


def test_demo_workflow_end_to_end_then_noop_then_only_the_new_model(demo_study, tmp_path, snakemake_run, config_writer):
    """The shared demo study (tests/conftest.py), read; then a copy of it rerun and replanned."""
    study = demo_study
    with open(study / "results/table_a8.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [
        "model",
        "variant",
        "dataset",
        "n_images",
        "acc_1crop",
        "acc_top_k",
        "acc_max",
        "cover_size",
        "cover_size_exact",
        "cover_gap",
        "acc_standard",
        "architecture",
        "n_scales",
        "n_bad",
        "n_unscored",
        "left_out",
        "key_sha256",
    ]
    assert {(r["n_bad"], r["n_unscored"], r["left_out"]) for r in rows} == {("0", "0", "none")}
    for r in rows:  # the digest of the comparability key its metrics.json records
        key = json.loads(
            (study / f"results/analysis/{r['dataset']}/{r['variant']}/{r['model']}/metrics.json").read_text()
        )["key"]
        assert r["key_sha256"] == hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        assert key["scales"] == SCALES and key["variant"] == r["variant"] and key["top_k"] == 3
    assert [(r["model"], r["variant"], r["dataset"]) for r in rows] == [
        *(("efficientnet_lite0", v, "demo") for v in ("original", "fgset", "bgset")),
        ("efficientnet_lite0", "original", "demo_clutter"),
    ]
    lite0 = "tf_efficientnet_lite0.efficientnet-lite0-57934424.pth"
    assert {(r["architecture"], r["n_scales"]) for r in rows} == {(lite0, str(len(SCALES)))}
    for row in rows:
        expected = recompute_table_a8(study, row["dataset"], row["variant"], row["model"], top_k=3)
        assert {k: row[k] for k in expected} == expected, row["variant"]
    assert float(rows[0]["acc_max"]) > float(rows[0]["acc_1crop"])  # zoom helps on the demo
    with open(study / "results/table_1.csv") as fh:
        table_1 = list(csv.reader(fh))
    left_out = ["0", "0", "0", "0", "demo: none; demo_clutter: none"]  # the demo leaves no image out
    assert table_1[0] == [
        "panel",
        "model",
        "demo",
        "demo_clutter",
        "n_bad:demo",
        "n_unscored:demo",
        "n_bad:demo_clutter",
        "n_unscored:demo_clutter",
        "left_out",
    ]
    assert table_1[1] == ["a", "efficientnet_lite0", rows[0]["acc_1crop"], rows[3]["acc_1crop"], *left_out]
    assert table_1[2] == ["b", "Random", "0.30", "0.30", *left_out]  # top_k = 3 guesses among 1000 classes
    assert table_1[4] == ["c", "Random", "1.80", "1.80", *left_out]  # 18 transforms
    # the standard evaluation: one prediction per image, scored on the original images only
    for row in rows:
        standard = study / f"results/standard/{row['dataset']}/efficientnet_lite0.parquet"
        records = read_manifest(study / f"results/datasets/{row['dataset']}/manifest.parquet")
        preds = dict(pl.read_parquet(standard).select("image_id", "pred").iter_rows())
        correct = [preds[r.image_id] in r.labels for r in records]
        assert row["acc_standard"] == (f"{100 * np.mean(correct):.2f}" if row["variant"] == "original" else "")
    assert table_1[-1] == ["s", "efficientnet_lite0", rows[0]["acc_standard"], rows[3]["acc_standard"], *left_out]
    with open(study / "results/table_aggregation.csv") as fh:
        aggregation = list(csv.DictReader(fh))
    assert [(r["dataset"], r["acc_1crop"]) for r in aggregation] == [
        ("demo", rows[0]["acc_1crop"]),
        ("demo_clutter", rows[3]["acc_1crop"]),
    ]
    for row in aggregation:
        assert row["zoom_in_max"] == recompute_max_rule(study, row["dataset"], row["model"], lambda s: s > 224)
        assert row["zoom_out_max"] == recompute_max_rule(study, row["dataset"], row["model"], lambda s: s < 224)
        assert row["zoom_224_max"] == row["zoom_224_mean"] == ""  # no S = 224 among the scales
        assert all(row[f"{m}_{r}"] for m in ("zoom_in", "zoom_out", "five_crop", "ten_crop") for r in ("max", "mean"))
    check_zoom_policies(study, rows)
    check_where_zoom_helps(study)
    for variant in ("original", "fgset", "bgset"):
        path = study / f"results/predictions/demo/{variant}/efficientnet_lite0.parquet"
        meta = pq.read_metadata(path)
        data = sum(
            meta.row_group(g).column(c).total_compressed_size
            for g in range(meta.num_row_groups)
            for c in range(meta.num_columns)
        )
        assert data / meta.num_rows <= 16  # column bytes per (image, transform) row, without the footer

    # the HTML report holds the tables with their captions
    snakemake_run(study, "results/table_a8.csv", "results/table_1.csv", "--report", str(tmp_path / "report.html"))
    report = (tmp_path / "report.html").read_text()
    assert "table_a8.csv" in report and "table_1.csv" in report and "greedy and exact cover sizes" in report

    # a copy of the study (its files with their times, .snakemake with them): a second run has nothing to do
    config = yaml.safe_load((study / "config.yaml").read_text())
    copy = copy_study(study, tmp_path / "study")
    again = snakemake_run(copy, "results/table_a8.csv", "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr

    # determinism: recomputing the predictions gives identical pred columns and byte-identical tables
    first_table = (copy / "results/table_a8.csv").read_bytes()
    prediction = copy / "results/predictions/demo/original/efficientnet_lite0.parquet"
    first_preds = pq.read_table(prediction, columns=["image_id", "scale", "row", "col", "pred", "pred_full"])
    aggregates = prediction.with_name("efficientnet_lite0.aggregates.parquet")
    first_aggregates = pq.read_table(aggregates, columns=["image_id", "method", "pred_max", "pred_mean"])
    snakemake_run(copy, "results/table_a8.csv", "--forcerun", "predict")
    assert pq.read_table(prediction, columns=first_preds.column_names).equals(first_preds)
    assert pq.read_table(aggregates, columns=first_aggregates.column_names).equals(first_aggregates)
    assert (copy / "results/table_a8.csv").read_bytes() == first_table

    # a second model re-runs only its own jobs and the table
    config["models"]["lite0_copy"] = dict(config["models"]["efficientnet_lite0"])
    config_writer(copy, **config)
    plan = snakemake_run(copy, "results/table_a8.csv", "--dry-run")
    out = plan.stdout + plan.stderr
    table = out[out.index("Job stats:") :].split("\n\n")[0].splitlines()[3:]  # after the header rule
    counts = {name: int(n) for name, n in (line.split() for line in table)}
    assert counts == {"predict": 4, "standard_eval": 2, "analyze": 4, "table_a8": 1, "total": 11}
    assert "lite0_copy" in out and "wildcards: dataset=demo, variant=original, model=efficientnet_lite0" not in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(scale=[1]), "Additional properties are not allowed ('scale' was unexpected)"),
        (lambda c: c.update(top_k="many"), "top_k: 'many' is not of type 'integer'"),
        (
            lambda c: c["datasets"].update(
                mine={"adapter": "imagefolder", "root": "/nonexistent", "variants": ["original"]}
            ),
            "datasets.mine.root: '/nonexistent' does not exist",
        ),
        (
            lambda c: c["datasets"].update(
                mine={"adapter": "imagefolder", "root": ".", "variants": ["original", "fgset"]}
            ),
            "datasets.mine.variants: ['fgset'] need object boxes",
        ),
        # a model named .. wrote every variant's analysis to one metrics.json
        (lambda c: c["models"].update({"..": c["models"]["efficientnet_lite0"]}), "models: '..' is not a valid name"),
        # dataset v_real and v's ReaL scoring shared their Table A8 rows and results/analysis/v_real
        (
            lambda c: c["datasets"].update(
                v={"adapter": "imagenet_val", "images": ".", "annotations": ".", "label_sets": ["in", "real"]},
                v_real={"adapter": "imagefolder", "root": ".", "variants": ["original"]},
            ),
            "datasets.v_real (dataset 'v_real') collides with datasets.v.label_sets[1] (its real scoring, named "
            "'v_real')",
        ),
        (
            lambda c: c["models"]["efficientnet_lite0"].update(mean=[float("nan")] * 3),
            "models.efficientnet_lite0.mean[0]: nan is not a finite number",
        ),
        (
            lambda c: c["models"]["efficientnet_lite0"].update(input_size=100000),
            "models.efficientnet_lite0.input_size: 100000 is greater than the maximum of 1024",
        ),
    ],
    ids=[
        "unknown-key",
        "wrong-type",
        "missing-dataset-path",
        "variants-without-boxes",
        "model-named-dotdot",
        "dataset-named-like-a-scoring",
        "nan-mean",
        "huge-input-size",
    ],
)
def test_bad_config_fails_before_any_job_naming_the_key(tmp_path, snakemake_run, config_writer, change, message):
    config = config_writer(tmp_path)
    change(config)
    config_writer(tmp_path, **config)
    proc = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run", check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_an_unknown_architecture_is_refused_by_a_dry_run_with_the_closest_names(tmp_path, snakemake_run, config_writer):
    """Architectures and tags are checked against the libraries' name lists (cached per library version, written by
    a child process) when the DAG is built: `snakemake -n` refuses a misspelt one, naming the key and the closest."""
    config = config_writer(tmp_path)
    config["models"]["r50"] = {"source": "torchvision", "architecture": "resnet5", "weights": "IMAGENET1K_V1"}
    config_writer(tmp_path, **config)
    proc = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run", check=False)
    assert proc.returncode != 0
    message = "models.r50.architecture: 'resnet5' is not a torchvision model (zoomeval list models torchvision); "
    message += "closest: resnet50, "
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()
    config["models"]["r50"] = {"source": "timm", "architecture": "resnet50.a1_in1"}
    config_writer(tmp_path, **config)
    proc = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "models.r50.weights: 'a1_in1' is not a pretrained tag of resnet50 [" in out
    assert "closest: a1_in1k, " in out
    # timm's own arch.tag spelling and torchvision's weight enum plan the run, each with its weights' fetch job
    config["models"]["r50"] = {"source": "timm", "architecture": "resnet50.a1_in1k"}
    config["models"]["tv50"] = {
        "source": "torchvision",
        "architecture": "resnet50",
        "weights": "ResNet50_Weights.IMAGENET1K_V2",
    }
    config["models"]["clip"] = {"source": "open_clip", "architecture": "hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K"}
    config_writer(tmp_path, **config)
    plan = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run")
    assert "resources/weights/timm/resnet50.a1_in1k" in plan.stdout
    assert "resources/weights/torchvision/resnet50.IMAGENET1K_V2" in plan.stdout
    assert "resources/weights/open_clip/ViT-B-32.laion2b_s34b_b79k" in plan.stdout
    assert "results/zero_shot/ViT-B-32.laion2b_s34b_b79k." in plan.stdout
    assert "results/analysis/demo/original/r50/metrics.json" in plan.stdout


def test_models_without_an_imagenet_head_are_refused_by_a_dry_run_all_at_once(tmp_path, snakemake_run, config_writer):
    """Before: both planned their jobs. Now `snakemake -n` names each, its width and what is expected, with the
    missing data file in the same refusal."""
    config = config_writer(tmp_path)
    config["datasets"]["mine"] = {"adapter": "imagefolder", "root": str(tmp_path / "nowhere")}
    config["models"]["clip"] = {"source": "timm", "architecture": "resnet50_clip.openai"}
    config["models"]["dino"] = {"source": "timm", "architecture": "convnext_tiny.dinov3_lvd1689m"}
    config_writer(tmp_path, **config)
    proc = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "models.clip: resnet50_clip.openai has a 1024-wide output (timm's config), not ImageNet-1k's 1000" in out
    assert "models.dino: convnext_tiny.dinov3_lvd1689m has no classifier head (timm's config gives 0 outputs" in out
    assert f"datasets.mine.root: '{tmp_path / 'nowhere'}' does not exist" in out
    assert not (tmp_path / "results").exists()


def test_a_cuda_device_this_machine_does_not_have_is_refused_before_any_job(
    tmp_path, snakemake_run, config_writer, monkeypatch
):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible, whatever the machine has
    config_writer(tmp_path, inference={"device": "cuda:99"})
    proc = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run", check=False)
    assert proc.returncode != 0
    message = "inference.device: 'cuda:99' does not exist here, 0 CUDA devices visible; use auto, cpu"
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_the_own_data_recipe_plans_as_printed_with_scales_from_the_command_line(tmp_path, snakemake_run):
    """The "Your own image folder" recipe's config (docs/how-to/own-data.md: no sam section, no stats) with its folder
    in place, scales given as Snakemake passes them from --config (strings), and an upper-case checksum."""
    config = yaml.safe_load((ROOT / "config" / "imagefolder.yaml").read_text())
    (tmp_path / "imagenet-a.tar").write_bytes(b"")
    config["datasets"]["own_data"]["root"] = {"path": str(tmp_path / "imagenet-a.tar"), "sha256": "AB" * 32}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    plan = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run", "--config", "scales=[224,256]", "top_k=18")
    out = plan.stdout + plan.stderr
    table = out[out.index("Job stats:") :].split("\n\n")[0].splitlines()[3:]
    counts = {name: int(n) for name, n in (line.split() for line in table)}
    # each model's weights are fetched by a job of its own; a standard evaluation per dataset and model
    assert counts == {
        "fetch_weights": 2,
        "dataset_manifest": 1,
        "predict": 2,
        "standard_eval": 2,
        "analyze": 2,
        "table_a8": 1,
        "total": 10,
    }


def test_the_imagenet_gpu_recipe_plans_as_printed(tmp_path, snakemake_run):
    """docs/how-to/imagenet-gpu.md's command on config/imagenet_val.yaml and the GPU overlay (its /data archives
    stood in for): one model over the original images, scored under three label sets."""
    config = yaml.safe_load((ROOT / "config" / "imagenet_val.yaml").read_text())
    update_config(config, yaml.safe_load((ROOT / "config" / "overlays" / "gpu.yaml").read_text()))
    stand_in_data_paths(config, tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))  # the whole file, as --configfile gives it
    plan = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run", "--resources", "gpu=1")
    counts = job_counts(plan.stdout + plan.stderr)
    # the stand-ins are empty files, not archives: the real tar and tgz add two extract_archive jobs
    assert counts == {
        "fetch_weights": 1,
        "dataset_manifest": 1,
        "predict": 1,
        "standard_eval": 1,
        "analyze": 3,
        "table_a8": 1,
        "total": 8,
    }


def test_the_gpu_preset_plans_the_same_jobs_in_a_study_directory(tmp_path):
    """The same recipe as docs/how-to/imagenet-gpu.md runs it first: `zoomeval init DIR --preset gpu`, then plain
    snakemake in DIR."""
    init = subprocess.run(
        [sys.executable, "-m", "zoomeval", "init", "s", "--preset", "gpu"], cwd=tmp_path, capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    path = tmp_path / "s" / "config" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    stand_in_data_paths(config, tmp_path)
    path.write_text(yaml.safe_dump(config))
    plan = subprocess.run(
        [sys.executable, "-m", "snakemake", "results/table_a8.csv", "-n", "--resources", "gpu=1"],
        cwd=tmp_path / "s",
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert job_counts(plan.stdout + plan.stderr) == {
        "fetch_weights": 1,
        "dataset_manifest": 1,
        "predict": 1,
        "standard_eval": 1,
        "analyze": 3,
        "table_a8": 1,
        "total": 8,
    }


def test_the_papers_config_plans_every_dataset_label_set_and_model(tmp_path, snakemake_run, config_writer):
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    stand_in_data_paths(config, tmp_path)
    config_writer(tmp_path, **config)
    plan = snakemake_run(tmp_path, "results/table_a8.csv", "--dry-run")
    out = plan.stdout + plan.stderr
    table = out[out.index("Job stats:") :].split("\n\n")[0].splitlines()[3:]
    counts = {name: int(n) for name, n in (line.split() for line in table)}
    # 7 datasets (ImageNet-Hard writes its images); ImageNet alone has boxes (3 variants) and ReaL (5 label sets with
    # Shankar et al.'s two), ImageNet-V2 2 label sets; 6 models, one of them zero-shot with one head; a standard
    # evaluation per dataset and model; 3 archives to download and extract, Shankar et al.'s annotations (matched to
    # ImageNet and ImageNet-V2), 1 Hugging Face dataset, 5 torchvision checkpoints and CLIP's weights to fetch
    fetches = {"fetch_url": 4, "extract_archive": 3, "fetch_hf": 1, "fetch_weights": 6}
    jobs = {
        "dataset_manifest": 6,
        "generated_dataset": 1,
        "box_masks": 1,
        "zero_shot_head": 1,
        "predict": 6 * (3 + 6),
        "standard_eval": 6 * 7,
        "analyze": 6 * (5 * 3 + 2 + 5),
        "multilabel_labels": 2,
        "table_a8": 1,
    }
    assert counts == {**jobs, **fetches, "total": 7 + 1 + 1 + 54 + 42 + 132 + 2 + 1 + 14}
    assert "results/analysis/imagenet_in_real/bgset/vit32/metrics.json" in out
    assert "results/zero_shot/ViT-L-14.openai." in out
    # `all`: the sixth model in every per-model output, so in every table and figure
    everything = snakemake_run(tmp_path, "all", "--dry-run")
    out = everything.stdout + everything.stderr
    counts = job_counts(out)
    assert (counts["model_figures"], counts["zero_shot_head"]) == (6 * (5 * 3 + 2 + 5), 1)
    assert counts["study_index"] == 1 and "results/study.json" in out  # sealed last, over every metrics file
    # where zoom helps: one table over ImageNet's boxes (every label set it is scored with), not the box-less datasets
    assert counts["table_where_zoom_helps"] == 1 and "results/table_where_zoom_helps.md" in out
    assert counts["where_zoom_helps_figure"] == 5 and "results/figures/imagenet_real/where_zoom_helps.png" in out
    # zoom policies: cross-validated per scored prediction file, and 5 transfers from ImageNet per model
    assert (counts["zoom_policies"], counts["zoom_policies_transfer"]) == (6 * (5 * 3 + 2 + 5), 5 * 6)
    assert "results/policies/transfer/imagenet/objectnet/original/vit32.json" in out
    for path in (
        "predictions/objectnet/original/clip_vit_l_14.parquet",
        "standard/imagenet_hard/clip_vit_l_14.parquet",
        "analysis/imagenet_real/fgset/clip_vit_l_14/metrics.json",
        "figures/imagenet_a/original/clip_vit_l_14/centre_bias.png",
        "table_imagenet_hard.md",
        "table_zoom_groups.csv",
        "table_aggregation.csv",
        "table_1.csv",
        "table_zoom_policies.csv",
        "figures/imagenet_real/zoom_policies.png",
    ):
        assert f"results/{path}" in out
    stats = snakemake_run(tmp_path, "results/stats/mannwhitney.csv", "--dry-run")
    out = stats.stdout + stats.stderr
    table = out[out.index("Job stats:") :].split("\n\n")[0].splitlines()[3:]
    counts = {name: int(n) for name, n in (line.split() for line in table)}
    # boxes count ImageNet's objects; SAM's automatic masks count those of ImageNet-A and ObjectNet; ImageNet-A's
    # archive and the SAM checkpoint are downloaded
    assert counts == {
        "fetch_url": 2,
        "extract_archive": 1,
        "dataset_manifest": 3,
        "sam_masks": 2,
        "object_counts": 3,
        "mann_whitney": 1,
        "total": 12,
    }


def job_counts(out: str) -> dict[str, int]:
    table = out[out.index("Job stats:") :].split("\n\n")[0].splitlines()[3:]
    return {name: int(n) for name, n in (line.split() for line in table)}


def test_the_imagenet_hard_config_plans_the_cards_table(tmp_path, snakemake_run):
    (tmp_path / "config.yaml").write_text((ROOT / "config" / "imagenet_hard.yaml").read_text())  # as shipped
    plan = snakemake_run(tmp_path, "--dry-run")  # the default target, all
    out = plan.stdout + plan.stderr
    # 13 models, four of them zero-shot with four distinct heads; the Parquet shards and 13 weights fetched
    counts = job_counts(out)
    assert {
        k: counts[k]
        for k in (
            "fetch_hf",
            "fetch_weights",
            "generated_dataset",
            "zero_shot_head",
            "predict",
            "standard_eval",
            "analyze",
            "table_imagenet_hard",
            "table_a8",
        )
    } == {
        "fetch_hf": 1,
        "fetch_weights": 13,
        "generated_dataset": 1,
        "zero_shot_head": 4,
        "predict": 13,
        "standard_eval": 13,
        "analyze": 13,
        "table_imagenet_hard": 1,
        "table_a8": 1,
    }
    assert {"table_where_zoom_helps", "where_zoom_helps_figure"}.isdisjoint(counts)  # no boxes: not requested
    for model in ("vgg16", "vgg19", "efficientnet_l2_ns", "clip_vit_l_14_336", "openclip_vit_bigg_14"):
        assert f"results/analysis/imagenet_hard/original/{model}/metrics.json" in out
    assert "results/zero_shot/ViT-bigG-14.laion2b_s39b_b160k." in out


def test_unreadable_images_are_listed_left_out_and_counted(tmp_path, snakemake_run, config_writer):
    from PIL import Image

    root = tmp_path / "folder" / "n01440764"
    root.mkdir(parents=True)
    for name in ("a.png", "b.png"):
        Image.new("RGB", (50, 40), (120, 30, 30)).save(root / name)
    (root / "empty.jpg").write_bytes(b"")
    (root / "cut.png").write_bytes((root / "a.png").read_bytes()[:60])
    dataset = {"mine": {"adapter": "imagefolder", "root": str(tmp_path / "folder")}}
    config_writer(tmp_path, scales=[256], top_k=9, datasets=dataset, stats={"pairs": []})
    snakemake_run(tmp_path, "results/table_a8.csv")
    bad = (tmp_path / "results/datasets/mine/bad_images.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in bad] == ["image_id", "n01440764/cut", "n01440764/empty"]
    with open(tmp_path / "results/table_a8.csv") as fh:
        (row,) = list(csv.DictReader(fh))
    why = f"2 bad (2 unreadable, listed in {LAYOUT.path('bad_images', dataset='mine')})"
    assert (row["n_images"], row["n_bad"], row["n_unscored"], row["left_out"]) == ("2", "2", "0", why)
    assert f"mine: {why}." in (tmp_path / "results/table_a8.md").read_text()

    config_writer(tmp_path, scales=[256], top_k=9, datasets=dataset, stats={"pairs": []}, on_bad_image="fail")
    proc = snakemake_run(tmp_path, "results/table_a8.csv", "--forcerun", "dataset_manifest", check=False)
    assert proc.returncode != 0
    log = (tmp_path / "logs/datasets/mine.log").read_text()
    # Snakemake deletes a failed job's outputs, bad_images.csv included, so the message itself names the images
    assert not (tmp_path / "results/datasets/mine/bad_images.csv").exists()
    assert f"dataset 'mine': 2 of its 4 images cannot be used: {root / 'cut.png'} (" in log
    assert f"; {root / 'empty.jpg'} (UnidentifiedImageError: " in log and "bad_images.csv" not in log
