"""Table A8: maximum possible top-1 accuracy on original, object-only and background-only images."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from typing import Any

from zoomeval.io import write_text

TABLE_A8_COLUMNS = ["model", "variant", "dataset", "n_images", "acc_1crop", "acc_top36", "acc_max", "cover_size"]
PERCENT_COLUMNS = {"acc_1crop", "acc_top36", "acc_max"}


def _cell(column: str, value: Any) -> str:
    if column in PERCENT_COLUMNS:
        return "" if value is None else f"{value:.2f}"
    return str(value)


def table_a8_rows(metrics: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Formatted rows (percent with 2 decimals; an absent 1-crop transform gives an empty cell)."""
    return [[_cell(c, m[c]) for c in TABLE_A8_COLUMNS] for m in metrics]


def write_table_a8(metrics: Sequence[dict[str, Any]], csv_path: str | os.PathLike[str],
                   md_path: str | os.PathLike[str]) -> None:  # fmt: skip
    rows = table_a8_rows(metrics)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(TABLE_A8_COLUMNS)
    writer.writerows(rows)
    write_text(csv_path, buf.getvalue())
    lines = [
        "# Table A8: maximum possible top-1 accuracy (%) from object-only (fgset) and background-only (bgset) images",
        "",
        "| " + " | ".join(TABLE_A8_COLUMNS) + " |",
        "|" + "---|" * len(TABLE_A8_COLUMNS),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        "acc_1crop: S=256 at the centre anchor; acc_top36: union of the first top_k greedy-cover transforms; "
        "acc_max: union of all transforms; cover_size: greedy minimum set cover size.",
        "",
    ]
    write_text(md_path, "\n".join(lines))
