"""Several studies in one frame from Python (``zoomeval.compare_studies``): the leaderboard's rows, each result
verified against its study's index first."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from zoomeval.core.layout import RESULTS, Layout
from zoomeval.publish.boards import merge
from zoomeval.publish.leaderboard import COLUMNS


def compare_studies(*paths: str | os.PathLike[str], results: str = RESULTS) -> pl.DataFrame:
    """Several studies in one frame: the leaderboard's rows (``zoomeval leaderboard``, each result verified against
    its study's index first, a study that does not verify refused), one per study, model, dataset, variant and
    label set. ``group`` is the heading of the row's evaluation protocol: its dataset, variant and label set, and
    where two protocols would read alike, what separates each from the nearest in words (``— scales 224–448 (not
    224–1024)``); the models of one protocol share it, best ``acc_max`` first. ``key_sha256`` is the digest of the
    row's whole key (the model's settings and commit too). Only rows of one group compare."""
    board, _ = merge([Path(p).expanduser() for p in paths], layout=Layout(results))
    return pl.DataFrame([{c: r[c] for c in COLUMNS} for r in board], infer_schema_length=None)
