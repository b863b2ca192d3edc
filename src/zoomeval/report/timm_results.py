"""``zoomeval leaderboard --format timm``: the standard evaluation of verified studies in timm's results-CSV columns
(``model`` as arch.tag, so that the file joins timm's published ``results-imagenet.csv`` by ``model``).

timm's ``validate.py`` writes top1 and top5 in percent, their errors (100 - accuracy), ``param_count`` in millions
(2 decimals), ``img_size``, ``crop_pct`` and ``interpolation``; its published tables show accuracies with 3 decimals.
top5 is empty where the standard evaluation was stored without top5 (``inference.store_top5: false``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoomeval.analysis.label_sets import scored_name
from zoomeval.core.io import csv_text, write_text
from zoomeval.core.layout import Layout
from zoomeval.report.leaderboard import check_output, merge
from zoomeval.report.study_index import LAYOUT
from zoomeval.report.verified import scored_records

#: timm's results-CSV columns, in validate.py's order.
TIMM_COLUMNS = ("model", "top1", "top1_err", "top5", "top5_err", "param_count", "img_size", "crop_pct",
                "interpolation")  # fmt: skip


def timm_rows(board: Sequence[dict[str, Any]], dataset: str | None, layout: Layout = LAYOUT) -> list[list[str]]:
    """The rows of the standard evaluations of one scored dataset (``dataset``, or the only one there is), best
    top1 first; refuses a model given by two studies (a join by ``model`` would be ambiguous). ``layout``: the one
    the studies were read in."""
    rows = [r for r in board if r["variant"] == "original" and r["acc_standard"] is not None]
    names = sorted({scored_name(r["dataset"], r["label_set"]) for r in rows})
    if dataset is None and len(names) > 1:
        raise ValueError(f"--dataset: the studies evaluate {', '.join(names)}; name one (timm's CSVs hold one each)")
    chosen = dataset if dataset is not None else (names[0] if names else None)
    rows = [r for r in rows if scored_name(r["dataset"], r["label_set"]) == chosen]
    if not rows:
        raise ValueError(f"--dataset {chosen}: no standard evaluation of it; expected one of {names}")
    models = [r["architecture"] for r in rows]
    twice = sorted({m for m in models if models.count(m) > 1})
    if twice:
        raise ValueError(f"model {twice[0]}: given by more than one study or group; give one study per model")
    rows.sort(key=lambda r: (-r["acc_standard"], r["architecture"]))
    return [_timm_row(r, layout) for r in rows]


def _timm_row(row: dict[str, Any], layout: Layout) -> list[str]:
    directory, result = row["source"]
    top5 = _top5(directory, result, layout)
    return [row["architecture"], _pct(row["acc_standard"]), _pct(100 - row["acc_standard"]), _pct(top5),
            _pct(None if top5 is None else 100 - top5), _number(row["param_count"], ".2f"),
            str(result.geometry.get("img_size", row["img_size"])), _number(row["crop_pct"], ".3f"),
            str(row["interpolation"] or "")]  # fmt: skip


def _top5(directory: Path, result: Any, layout: Layout) -> float | None:
    """Top-5 accuracy (%) of the standard evaluation, None where it was stored without top5."""
    import polars as pl

    from zoomeval.analysis.standard_scores import standard_correct

    standard = result.inputs["standard"]
    if "top5" not in pl.read_parquet_schema(standard):
        return None
    correct = standard_correct(pl.read_parquet(standard), scored_records(directory, result.entry.key, layout), "top5")
    return 100 * float(correct.mean()) if len(correct) else None


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _number(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def write_timm(directories: Sequence[Path], path: Path | None, dataset: str | None, allow_stale: bool = False,
               check: bool = False, layout: Layout = LAYOUT, auditor: Any = None) -> tuple[str, list[str]]:  # fmt: skip
    """Write (or return, without ``path``) the timm results CSV of the studies; also returns what was left apart."""
    if path is not None:
        check_output(path, (".csv",))
    board, apart = merge(directories, allow_stale, check, layout, auditor)
    text = csv_text(TIMM_COLUMNS, timm_rows(board, dataset, layout))
    if path is not None:
        write_text(path, text)
    return text.rstrip("\n"), apart
