"""Greedy vs exact minimum set cover on a synthetic 50,000 x 324 zoom-structured correctness matrix.

Run ``python bench/cover_bench.py``; prints the figures and writes ``results/bench/cover.json``.

Each image has a latent best anchor (a point in the 3x3 anchor grid, biased to the centre), a latent best scale
(log-normal around 256) and a latent easiness (radius). A transform is correct with high probability when its
anchor and log-scale lie within that radius, with low probability far away, and a steep logistic in between, so
nearby scales and anchors agree as on real zoom data. A fixed share of images is never correct.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import numpy as np

from zoomeval.analysis.cover import greedy_cover
from zoomeval.analysis.exact_cover import exact_cover, reduce_rows
from zoomeval.core.zoom import paper_scales, transforms

SEED = 0
N_IMAGES = 50_000
NEVER_CORRECT = 0.05  # share of images no transform gets right (the "hard" set)
P_NEAR, P_FAR = 0.97, 0.002  # correctness inside / far outside an image's neighbourhood
RADIUS = 1.6  # median radius of an image's neighbourhood, in distance units
EDGE = 0.15  # width of the logistic edge of a neighbourhood, in distance units
SCALE_WIDTH, ANCHOR_WIDTH = 0.7, 1.0  # one distance unit in log-scale and in anchor-grid steps
OUT = Path("results/bench/cover.json")

P = ParamSpec("P")
R = TypeVar("R")


def zoom_matrix(rng: np.random.Generator) -> np.ndarray:
    """The ``(324, N_IMAGES)`` boolean correctness matrix, transforms in the authors' order."""
    ts = transforms(paper_scales())
    log_scale = np.log([t.scale for t in ts])
    anchor = np.array([(t.row, t.col) for t in ts], dtype=float)
    best_anchor = np.clip(1 + 0.7 * rng.standard_normal((N_IMAGES, 2)), 0, 2)
    best_scale = np.log(256) + 0.6 * rng.standard_normal(N_IMAGES)
    radius = rng.lognormal(np.log(RADIUS), 0.5, N_IMAGES)
    anchor_d = np.linalg.norm(anchor[None, :, :] - best_anchor[:, None, :], axis=2) / ANCHOR_WIDTH
    scale_d = np.abs(log_scale[None, :] - best_scale[:, None]) / SCALE_WIDTH
    inside = 1 / (1 + np.exp((np.hypot(anchor_d, scale_d) - radius[:, None]) / EDGE))
    p = P_FAR + (P_NEAR - P_FAR) * inside
    p[rng.random(N_IMAGES) < NEVER_CORRECT] = 0
    return (rng.random(p.shape, dtype=np.float32) < p).T


def timed(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> tuple[R, float]:
    """``fn``'s result and its wall time in seconds."""
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main() -> None:
    ts = transforms(paper_scales())
    matrix, build_s = timed(zoom_matrix, np.random.default_rng(SEED))
    greedy, greedy_s = timed(greedy_cover, matrix)
    reduced, reduce_s = timed(reduce_rows, matrix)
    greedy_picks = [p.index for p in greedy]
    exact = exact_cover(matrix, greedy=greedy_picks)
    report = {
        "seed": SEED,
        "shape": list(matrix.shape),
        "density": round(float(matrix.mean()), 4),
        "never_correct": int((~matrix.any(axis=0)).sum()),
        "distinct_coverable": int(np.unique(np.packbits(matrix[:, matrix.any(axis=0)], axis=0), axis=1).shape[1]),
        "build_s": round(build_s, 3),
        "greedy_size": len(greedy),
        "greedy_s": round(greedy_s, 3),
        "reduced_rows": int(reduced.shape[1]),
        "reduce_s": round(reduce_s, 3),
        "exact_size": exact.size,
        "dual_bound": exact.dual_bound,
        "status": exact.status,
        "nodes": exact.nodes,  # of cover_node_limit's, the default
        "exact_s": round(exact.seconds, 3),  # reduction + solve + cover check
        "solve_s": round(exact.seconds - reduce_s, 3),
        "exact_picks": [ts[i].name for i in exact.picks],
        "greedy_picks": [ts[i].name for i in greedy_picks],
    }
    for key, value in report.items():
        if not key.endswith("picks"):
            print(f"{key:>20}: {value}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
