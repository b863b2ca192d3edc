"""Each image's held-out choice under the cross-validated label-free policies: the policies job's Parquet beside its
JSON document (``results/policies/{scored}/{variant}/{model}.choices.parquet``), one row per (image, policy, budget).

The document keeps only the rows' totals; this file keeps what they are totals of, so that a later stage (where zoom
helps, by object size) can score a policy on any subset of the images without refitting it. Each image's choice is
the one made by the policy fitted on the other folds (:func:`zoomeval.analysis.policy_eval.cross_validate`), so
``correct`` summed over a (policy, budget) is the document's ``n_correct`` of that row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from zoomeval.analysis.policies import POLICIES
from zoomeval.core.io import read_metadata, write_parquet
from zoomeval.core.layout import declare
from zoomeval.core.zoom import Transform

#: 1: these columns (:data:`SCHEMA`); metadata ``kind`` ``policy_choices``.
SCHEMA_VERSION = 1
KIND = "policy_choices"
SCHEMA = pa.schema(
    [
        ("image_id", pa.string()),
        ("fold", pa.int32()),  # the fold the image was held out in (its policy was fitted on the others)
        ("policy", pa.string()),
        ("budget", pa.int32()),
        ("view", pa.string()),  # the transform whose pred answers the image (Transform.name)
        ("passes", pa.float64()),  # forward passes the policy spent on the image
        ("correct", pa.bool_()),
    ]
)
declare("policy_choices", SCHEMA, SCHEMA_VERSION)


def choices_table(
    choices: Mapping[tuple[str, int], tuple[np.ndarray, np.ndarray]],
    correct: np.ndarray,
    folds: np.ndarray,
    image_ids: Sequence[str],
    order: Sequence[Transform],
) -> pa.Table:
    """The rows of ``choices`` (``(policy, budget) -> (view, passes)`` per image, :data:`Choices`), in its order then
    the images'; ``correct`` ``(n_images, n_transforms)`` scores each chosen view."""
    names = np.array([t.name for t in order], dtype=object)
    images = np.arange(len(image_ids))
    parts = []
    for (policy, budget), (view, passes) in choices.items():
        n = len(image_ids)
        parts.append(
            pa.table(
                {
                    "image_id": pa.array(image_ids, pa.string()),
                    "fold": pa.array(folds, pa.int32()),
                    "policy": pa.array([policy] * n, pa.string()),
                    "budget": pa.array(np.full(n, budget), pa.int32()),
                    "view": pa.array(names[view], pa.string()),
                    "passes": pa.array(np.asarray(passes, dtype=float)),
                    "correct": pa.array(correct[images, view], pa.bool_()),
                },
                schema=SCHEMA,
            )
        )
    return pa.concat_tables(parts) if parts else SCHEMA.empty_table()


def write_choices(path: str | os.PathLike[str], table: pa.Table, **metadata: Any) -> None:
    """Write the table (atomically) with its kind, schema version and ``metadata`` (what was scored, the protocol)."""
    write_parquet(path, table, {"kind": KIND, "schema_version": SCHEMA_VERSION, **metadata})


def read_choices(path: str | os.PathLike[str]) -> tuple[pa.Table, dict[str, Any]]:
    """The table and its metadata; a file of another kind or schema version is refused naming it."""
    import pyarrow.parquet as pq

    meta = read_metadata(path)
    if meta.get("kind") != KIND or meta.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"{path}: not a {KIND} file of schema version {SCHEMA_VERSION} (kind {meta.get('kind')!r}, "
            f"schema_version {meta.get('schema_version')!r}); re-run its policies job"
        )
    return pq.read_table(path, schema=SCHEMA), meta


def best_policy(table: pa.Table, budget: int) -> tuple[str, np.ndarray, np.ndarray] | None:
    """The label-free policy most often right over every image at ``budget`` (ties to the earlier of
    :data:`POLICIES`), its images and their correctness; None where the table holds no policy at that budget."""
    best = None
    for name in POLICIES:
        mine = table.filter(pc.and_(pc.equal(table["policy"], name), pc.equal(table["budget"], budget)))
        if mine.num_rows == 0:
            continue
        right = mine["correct"].to_numpy(zero_copy_only=False)
        if best is None or right.sum() > best[2].sum():
            best = (name, np.asarray(mine["image_id"].to_pylist(), dtype=object), right)
    return best
