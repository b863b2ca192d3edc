"""Where zoom helps: the 1-crop accuracy and the upper bound over every transform (``acc_max``) by the size of the
object and by its distance from the image centre, from a dataset's boxes and a correctness matrix.

Each image's object is its largest box (by area after clipping to the image; the first of equal boxes). Its size is
the box's area over the image's area; its centre distance is the distance from the box's centre to the image's,
over the half-diagonal (0 at the centre, 1 at a corner). Images without a box are left out and counted.

Size bins are deciles over the n scored images with a box: edge ``k`` (0 to 10) is the sorted sizes' element at
index ``floor((n - 1) k / 10)``, computed in integers (numpy.quantile's ``method="lower"`` without its floating-point
index), so every edge is an image's own size and no rounding moves an image across one. Bin ``k`` holds the images
with ``edges[k] < size <= edges[k+1]``, the first bin also ``size == edges[0]``. Where several edges are equal (ties),
an image on them falls in the lowest bin that ends there, so the bins after it up to the next larger edge are empty
(reported with ``n_images`` 0). Centre bands are fixed, :data:`CENTRE_EDGES`, with the same rule: ``[0, 0.1]``,
``(0.1, 0.2]``, ``(0.2, 0.35]``, ``(0.35, 1]``.

Beside them, the best label-free policy at a fixed budget (:func:`zoomeval.analysis.policy_choices.best_policy`:
the most accurate over every image, chosen once per dataset and model, not per bin) scored per bin from each image's
cross-validated choice, so a bin's policy accuracy is held out as the policies table's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zoomeval.analysis.stats import wilson_interval
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ONE_CROP, Transform

#: 2: this layout (:data:`zoomeval.report.where_zoom_helps.COLUMNS`), with the best policy's columns (1: without).
SCHEMA_VERSION = 2
#: The centre-distance bands' edges (fractions of the half-diagonal).
CENTRE_EDGES = (0.0, 0.1, 0.2, 0.35, 1.0)
N_SIZE_BINS = 10
#: The unscored reason under which images without a box are counted.
NO_BOX = "no object box"


def object_geometry(record: Record) -> tuple[float, float] | None:
    """The largest box's area fraction and its centre's distance from the image centre over the half-diagonal;
    None for an image without a box (or whose boxes all lie outside it)."""
    w, h = record.width, record.height
    best, area = None, 0
    for xmin, ymin, xmax, ymax in record.boxes:
        x0, y0, x1, y1 = max(xmin, 0), max(ymin, 0), min(xmax, w), min(ymax, h)
        a = max(x1 - x0, 0) * max(y1 - y0, 0)
        if a > area:
            best, area = (x0, y0, x1, y1), a
    if best is None:
        return None
    x0, y0, x1, y1 = best
    distance = np.hypot((x0 + x1) / 2 - w / 2, (y0 + y1) / 2 - h / 2) / (np.hypot(w, h) / 2)
    return area / (w * h), float(distance)


def bin_index(values: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Each value's bin under ``edges`` (the module's rule: ``(lo, hi]``, the first bin closed)."""
    return np.searchsorted(np.asarray(edges[1:-1], dtype=float), values, side="left")


def size_edges(sizes: np.ndarray) -> np.ndarray:
    """The decile edges of the module's rule (an image's size each)."""
    index = (len(sizes) - 1) * np.arange(N_SIZE_BINS + 1) // N_SIZE_BINS
    return np.sort(sizes)[index]


def _accuracy(correct: np.ndarray | None, prefix: str) -> dict[str, Any]:
    """Correct images, accuracy and Wilson interval (%); accuracies None for an empty bin, all None without
    ``correct`` (no policy)."""
    if correct is None:
        return dict.fromkeys((f"n_{prefix}", f"acc_{prefix}", f"acc_{prefix}_lo", f"acc_{prefix}_hi"))
    n, k = correct.size, int(correct.sum())
    if n == 0:
        return {f"n_{prefix}": 0, f"acc_{prefix}": None, f"acc_{prefix}_lo": None, f"acc_{prefix}_hi": None}
    lo, hi = wilson_interval(k, n)
    return {f"n_{prefix}": k, f"acc_{prefix}": 100 * k / n, f"acc_{prefix}_lo": 100 * lo, f"acc_{prefix}_hi": 100 * hi}


def policy_correctness(best: tuple[str, np.ndarray, np.ndarray] | None, image_ids: list[str]) -> np.ndarray | None:
    """The best policy's correctness (:func:`zoomeval.analysis.policy_choices.best_policy`: its name, images and
    theirs) in the order of ``image_ids``; None without one. Refused unless it scored exactly those images."""
    if best is None:
        return None
    _, ids, right = best
    if len(ids) != len(image_ids) or set(ids) != set(image_ids):
        raise ValueError(
            f"the policy choices hold {len(ids)} image(s), not the correctness matrix's "
            f"{len(image_ids)}: a policies job of other predictions; re-run it"
        )
    index = {image_id: k for k, image_id in enumerate(ids)}
    return right[[index[i] for i in image_ids]]


def where_zoom_helps(
    records: Sequence[Record],
    matrix: np.ndarray,
    order: list[Transform],
    image_ids: list[str],
    policy: np.ndarray | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The rows (by ``axis`` ``size`` then ``centre``, by bin) of one correctness matrix over ``image_ids`` (its
    columns, each in ``records``), with ``policy``'s accuracy (each image's held-out correctness under the best
    policy, in the columns' order; :func:`policy_correctness`) where given, and the number of its images left out for
    having no box."""
    if Transform(*ONE_CROP) not in order:
        raise ValueError("the 1-crop transform is not among the matrix's transforms; where_zoom_helps needs it")
    one = order.index(Transform(*ONE_CROP))
    if matrix.shape != (len(order), len(image_ids)):
        raise ValueError(
            f"a correctness matrix of shape {matrix.shape} for {len(order)} transforms and {len(image_ids)} images"
        )
    by_id = {r.image_id: r for r in records}
    if missing := [i for i in image_ids if i not in by_id]:
        raise ValueError(f"{len(missing)} image(s) of the matrix are not in the manifest, e.g. {missing[:3]}")
    geometry = [object_geometry(by_id[i]) for i in image_ids]
    kept = np.array([g is not None for g in geometry], dtype=bool)
    sizes = np.array([g[0] for g in geometry if g is not None], dtype=float)
    distances = np.array([g[1] for g in geometry if g is not None], dtype=float)
    one_crop, any_crop = matrix[one, kept], matrix[:, kept].any(axis=0)
    by_policy = None if policy is None else np.asarray(policy, dtype=bool)[kept]
    rows = []
    # without a box there are no deciles: the size bins are kept, empty and without edges (None)
    for axis, values, edges in (
        ("size", sizes, size_edges(sizes) if sizes.size else [None] * (N_SIZE_BINS + 1)),
        ("centre", distances, CENTRE_EDGES),
    ):
        bins = bin_index(values, edges) if values.size else np.zeros(0, dtype=np.int64)
        for k in range(len(edges) - 1):
            inside = bins == k
            lo, hi = (None if e is None else float(e) for e in edges[k : k + 2])
            rows.append(
                {
                    "axis": axis,
                    "bin": k,
                    "lo": lo,
                    "hi": hi,
                    "n_images": int(inside.sum()),
                    **_accuracy(one_crop[inside], "1crop"),
                    **_accuracy(any_crop[inside], "max"),
                    **_accuracy(None if by_policy is None else by_policy[inside], "policy"),
                }
            )
    return rows, int((~kept).sum())
