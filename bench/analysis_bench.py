"""Analysis at full scale: one 50,000-image x 324-transform prediction file (16.2 M rows), wall time and peak RSS
of each step.

Run ``python bench/analysis_bench.py`` (``--images N`` for a smaller run); it writes the synthetic files and
``analysis_bench.json`` under ``results/bench/analysis/`` and prints one line per step. Each step runs in a
process of its own, so its peak RSS (``ru_maxrss``) is its own: the imports, the inputs it reads and its working
memory, as in the workflow's job.

The synthetic model (calibrated to ImageNet-like figures: 1-crop about 76 %, upper bound about 98 %): each image
has a latent best scale (log-normal around 280), a best anchor (near the centre) and an easiness radius; a
transform is correct with probability ``P_NEAR`` inside that neighbourhood of scale and anchor, ``P_FAR`` far
outside it and a logistic edge in between, so correct transforms cluster by scale and anchor. A share of images
is never correct. A wrong prediction is one of three confusing classes of the image, chosen by scale band.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from zoomeval.core.config import COVER_NODE_LIMIT, COVER_TIME_LIMIT
from zoomeval.core.zoom import ONE_CROP, Transform, ZoomGrid, paper_scales, transforms

SEED = 0
N_IMAGES = 50_000
P_NEAR, P_FAR = 0.98, 0.003  # correctness inside / far outside an image's neighbourhood
RADIUS, RADIUS_SIGMA = 1.8, 0.6  # median and log-spread of the neighbourhood radius, in distance units
EDGE = 0.2  # width of the neighbourhood's logistic edge, in distance units
SCALE_WIDTH, ANCHOR_WIDTH = 0.5, 1.0  # one distance unit in log-scale and in anchor-grid steps
BEST_SCALE, BEST_SCALE_SIGMA, ANCHOR_SPREAD = 280, 0.45, 0.5
NEVER_CORRECT = 0.02  # share of images no transform gets right
CHUNK = 5_000  # images synthesized at a time
PARTS = 8  # prediction parts merged by the merge step (inference.parts on an 8-GPU node)
STEPS = (
    "synthesize",
    "merge",
    "matrix",
    "greedy",
    "exact",
    "zoom_groups",
    "analyze",
    "policies",
    "policies_table",
    "tables",
)
OUT = Path("results/bench/analysis")


def correct_block(rng: np.random.Generator, n: int, order: list[Transform]) -> np.ndarray:
    """``(n, len(order))`` correctness of ``n`` synthetic images under the model above."""
    log_scale = np.log([t.scale for t in order])
    anchor = np.array([(t.row, t.col) for t in order], dtype=float)
    best_scale = np.log(BEST_SCALE) + BEST_SCALE_SIGMA * rng.standard_normal(n)
    best_anchor = np.clip(1 + ANCHOR_SPREAD * rng.standard_normal((n, 2)), 0, 2)
    radius = rng.lognormal(np.log(RADIUS), RADIUS_SIGMA, n)
    scale_d = np.abs(log_scale[None] - best_scale[:, None]) / SCALE_WIDTH
    anchor_d = np.linalg.norm(anchor[None] - best_anchor[:, None], axis=2) / ANCHOR_WIDTH
    p = P_FAR + (P_NEAR - P_FAR) / (1 + np.exp((np.hypot(scale_d, anchor_d) - radius[:, None]) / EDGE))
    p[rng.random(n) < NEVER_CORRECT] = 0
    return rng.random(p.shape, dtype=np.float32) < p


def synthesize(folder: Path, n_images: int, seed: int = SEED) -> dict[str, Any]:
    """Write ``manifest.parquet``, ``predictions.parquet`` and ``aggregates.parquet`` of ``n_images`` images into
    ``folder``, in the workflow's formats; returns their 1-crop accuracy and upper bound."""
    from zoomeval.core.manifest import Record, write_manifest
    from zoomeval.inference.parts import part_range
    from zoomeval.inference.tables import prediction_table, write_table

    rng, order = np.random.default_rng(seed), transforms(paper_scales())
    labels = rng.integers(0, 1000, n_images).astype(np.int16)
    correct = np.concatenate([correct_block(rng, min(CHUNK, n_images - s), order) for s in range(0, n_images, CHUNK)])
    confusers = (labels[:, None] + 1 + rng.integers(0, 999, (n_images, 3))) % 1000  # never the label
    band = np.array([3 * k // len(order) for k in range(len(order))])  # scale bands: small, middle, large
    pred = np.where(correct, labels[:, None], confusers[:, band]).astype(np.int16)
    conf = np.where(correct, rng.uniform(0.3, 1, correct.shape), rng.uniform(0.05, 0.7, correct.shape))
    records = [Record(f"img{i:06d}", f"val/img{i:06d}.JPEG", [int(y)], [""], 500, 375) for i, y in enumerate(labels)]
    write_manifest(folder / "manifest.parquet", records, "synthetic")
    columns = {"pred": pred, "pred_full": pred, "conf": conf.astype(np.float32)}
    tables = prediction_table(records, ZoomGrid(paper_scales()), columns), _aggregates(rng, correct, order, records)
    views = {"kind": "aggregates", "views": dict.fromkeys(tables[1]["method"].unique().to_pylist(), 1)}  # not read
    for name, table, extra in zip(("predictions", "aggregates"), tables, ({}, views), strict=True):
        write_table(folder / f"{name}.parquet", table, _metadata(n_images) | extra)
        for k, span in enumerate(part_range(n_images, 500, k, PARTS) for k in range(PARTS)):
            rows, meta = table.num_rows // n_images, _metadata(len(span)) | extra | {"part": [k, PARTS]}
            write_table(folder / f"{name}.part{k}.parquet", table.slice(span.start * rows, len(span) * rows), meta)
    one = order.index(Transform(*ONE_CROP))
    return {
        "acc_1crop": 100 * float(correct[:, one].mean()),
        "acc_max": 100 * float(correct.any(axis=1).mean()),
        "density": float(correct.mean()),
        "rows": int(correct.size),
    }


def _metadata(n_images: int) -> dict[str, Any]:
    """The prediction file's metadata keys that the analysis reads."""
    model = {"name": "synthetic", "source": "synthetic", "architecture": "none", "weights": "none"}
    return {
        "kind": "predictions",
        "schema_version": 2,
        "model": model,
        "dataset": "synthetic",
        "variant": "original",
        "scales": paper_scales(),
        "crop_size": 224,
        "class_set": "full",
        "class_indices": None,
        "n_images": n_images,
        "device": "cpu",
        "seconds": 1.0,
        "crops_per_second": 1.0,
        "zoomeval_commit": None,
    }


def _aggregates(rng: np.random.Generator, correct: np.ndarray, order: list[Transform], records: list[Any]) -> Any:
    """An aggregates table whose method is right as often as its views are."""
    import pyarrow as pa

    from zoomeval.inference.aggregation import FIELDS

    methods, members = ZoomGrid(paper_scales()).membership  # the grid of ``order``
    views = members[: len(order)].astype(float)  # the extra views stand for the 1-crop view here
    share = (correct @ views) / views.sum(axis=0)
    label = np.array([r.labels[0] for r in records], np.int16)[:, None]
    wrong = (label + 1) % 1000
    pick = {rule: np.where(rng.random(share.shape) < share, label, wrong).ravel() for rule in ("max", "mean")}
    n, m = share.shape
    data = {
        "image_id": pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(n, dtype=np.int32), m)), pa.array([r.image_id for r in records])
        ),
        "method": pa.DictionaryArray.from_arrays(pa.array(np.tile(np.arange(m, dtype=np.int8), n)), pa.array(methods)),
        "pred_max": pick["max"].astype(np.int16),
        "conf_max": np.full(n * m, 0.5, np.float32),
        "pred_mean": pick["mean"].astype(np.int16),
        "conf_mean": np.full(n * m, 0.5, np.float32),
    }
    return pa.table(data, schema=pa.schema(FIELDS))


def _matrix(folder: Path) -> tuple[np.ndarray, list[Transform]]:
    from zoomeval.analysis.matrix import read_matrix

    matrix, order, _ = read_matrix(folder / "correct.npz")
    return matrix, order


def step(name: str, folder: Path, n_images: int, limits: tuple[int, float], seed: int = SEED) -> dict[str, Any]:
    """Run one step on the files in ``folder`` (``limits``: cover_node_limit and cover_time_limit); returns what it
    found."""
    from zoomeval.analysis.cover import greedy_cover

    if name == "synthesize":
        return synthesize(folder, n_images, seed)
    if name == "merge":
        return _merge(folder)
    if name == "matrix":
        return _correctness(folder)
    if name in ("greedy", "exact", "zoom_groups"):
        matrix, order = _matrix(folder)
        greedy = [p.index for p in greedy_cover(matrix)]
        if name == "greedy":
            return {"greedy_size": len(greedy)}
        return _exact(matrix, greedy, limits) if name == "exact" else _zoom_groups(matrix, order, greedy)
    if name == "analyze":
        return _analyze(folder, limits)
    if name == "policies":
        return _policies(folder)
    return _policies_table(folder) if name == "policies_table" else _tables(folder)


def _merge(folder: Path) -> dict[str, Any]:
    """What the merge_predictions job does with the parts of an 8-GPU run."""
    from zoomeval.core.manifest import read_manifest
    from zoomeval.inference.parts import merge_parts

    parts = [(folder / f"predictions.part{k}.parquet", folder / f"aggregates.part{k}.parquet") for k in range(PARTS)]
    ids = [r.image_id for r in read_manifest(folder / "manifest.parquet")]
    meta = merge_parts(parts, folder / "merged.parquet", folder / "merged.aggregates.parquet", ids)
    return {"parts": PARTS, "n_images": meta["n_images"]}


def _correctness(folder: Path) -> dict[str, Any]:
    """The correctness matrix from the prediction file, saved as the analyze job saves it."""
    from zoomeval.analysis.matrix import correctness_matrix, write_matrix
    from zoomeval.core.manifest import read_manifest

    records, order = read_manifest(folder / "manifest.parquet"), transforms(paper_scales())
    matrix = correctness_matrix(folder / "predictions.parquet", records, order)
    write_matrix(folder / "correct.npz", matrix, order, records, 224)
    one = order.index(Transform(*ONE_CROP))
    return {"acc_1crop": 100 * float(matrix[one].mean()), "acc_max": 100 * float(matrix.any(axis=0).mean())}


def _exact(matrix: np.ndarray, greedy: list[int], limits: tuple[int, float]) -> dict[str, Any]:
    from zoomeval.analysis.exact_cover import exact_cover

    exact = exact_cover(matrix, *limits, greedy=greedy)
    bound = exact.dual_bound
    return {
        "status": exact.status,
        "exact_size": exact.size,
        "dual_bound": bound,
        "greedy_size": len(greedy),
        "gap_to_bound": None if bound is None else exact.size - int(np.ceil(bound - 1e-6)),
        "reduced_rows": exact.reduced_rows,
        "nodes": exact.nodes,
        "exact_seconds": round(exact.seconds, 2),
    }


def _zoom_groups(matrix: np.ndarray, order: list[Transform], greedy: list[int]) -> dict[str, Any]:
    from zoomeval.analysis.cover_breakdown import top_k_locations, zoom_groups

    groups = zoom_groups(matrix, order, greedy)
    return {"ub_in": round(groups["ub_in"], 2), "centre_share": top_k_locations(greedy, order, 36).centre_share}


def _analyze(folder: Path, limits: tuple[int, float]) -> dict[str, Any]:
    """The whole analyze job: read, score, cover, write metrics.json, cover.json and correct.npz."""
    from zoomeval.analysis.exact_cover import CoverLimits
    from zoomeval.analysis.scoring import analyze_predictions, write_analysis
    from zoomeval.core.manifest import read_manifest

    records = read_manifest(folder / "manifest.parquet")
    analysis = analyze_predictions(
        folder / "predictions.parquet",
        records,
        limits=CoverLimits(*limits),
        aggregates_path=folder / "aggregates.parquet",
    )
    write_analysis(analysis, folder / "metrics.json", folder / "cover.json", folder / "correct.npz")
    m = analysis.metrics
    return {
        "acc_1crop": m.acc_1crop,
        "acc_top_k": m.acc_top_k,
        "acc_max": m.acc_max,
        "cover_size": m.cover_size,
        "cover_size_exact": m.cover_size_exact,
        "status": analysis.cover["exact"]["status"],
    }


def _policies(folder: Path) -> dict[str, Any]:
    """The zoom_policies job with the default settings (5-fold cross-validation) on the analyze step's outputs,
    keeping freed memory as the job does."""
    from zoomeval.analysis.metrics import read_metrics
    from zoomeval.analysis.policy_eval import cv_document
    from zoomeval.core.allocator import keep_freed_memory
    from zoomeval.core.config import PoliciesConfig
    from zoomeval.core.io import write_json

    keep_freed_memory()
    document = cv_document(
        folder / "correct.npz", folder / "predictions.parquet", read_metrics(folder / "metrics.json"), PoliciesConfig()
    )
    write_json(folder / "policies.json", document)
    acc = {f"{r['policy']}@{r['budget']}": round(r["acc"], 2) for r in document["rows"]}
    cascade = next(r for r in document["rows"] if (r["policy"], r["budget"]) == ("cascade", 9))
    keys = ("one_crop@1", "max_conf@9", "vote@9", "selector@9", "cascade@9", "oracle_top_k@9", "max_conf@324")
    return {**{k: acc[k] for k in keys}, "cascade_passes@9": round(cascade["passes"], 2)}


def _policies_table(folder: Path) -> dict[str, Any]:
    """table_zoom_policies of the policies step's document (to compare before and after a change, byte for byte)."""
    from zoomeval.core.io import read_json
    from zoomeval.report.zoom_policies import write_table_zoom_policies

    documents = [read_json(folder / "policies.json")]
    write_table_zoom_policies(documents, [], folder / "table_zoom_policies.csv", folder / "table_zoom_policies.md")
    return {"rows": len(documents[0]["rows"])}


def _tables(folder: Path) -> dict[str, Any]:
    """The four tables over the paper's 6 models x 7 datasets (the same metrics file 42 times)."""
    from zoomeval.analysis.metrics import read_metrics
    from zoomeval.report import tables

    metrics = [read_metrics(folder / "metrics.json") for _ in range(42)]
    for name in ("table_a8", "table_1", "table_zoom_groups", "table_aggregation"):
        getattr(tables, f"write_{name}")(metrics, folder / f"{name}.csv", folder / f"{name}.md")
    return {"rows": len(metrics)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=N_IMAGES)
    parser.add_argument("--node-limit", type=int, default=COVER_NODE_LIMIT, help="cover_node_limit")
    parser.add_argument("--time-limit", type=float, default=COVER_TIME_LIMIT, help="cover_time_limit, seconds")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # run one step (in a child process)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.step:
        start = time.perf_counter()
        found = step(args.step, args.out, args.images, (args.node_limit, args.time_limit), args.seed)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(
            json.dumps(
                {
                    "step": args.step,
                    "seconds": round(time.perf_counter() - start, 2),
                    "peak_rss_mb": round(peak),
                    **found,
                }
            )
        )
        return
    report = []
    for name in STEPS:
        cmd = [
            sys.executable,
            __file__,
            "--step",
            name,
            "--images",
            str(args.images),
            "--node-limit",
            str(args.node_limit),
            "--time-limit",
            str(args.time_limit),
            "--out",
            str(args.out),
            "--seed",
            str(args.seed),
        ]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"step {name} failed:\n{proc.stderr[-3000:]}")
        report.append(
            {**json.loads(proc.stdout.splitlines()[-1]), "process_seconds": round(time.perf_counter() - start, 2)}
        )
        print(json.dumps(report[-1]), flush=True)
    (args.out / "analysis_bench.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
