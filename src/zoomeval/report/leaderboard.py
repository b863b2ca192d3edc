"""One table across study directories (``zoomeval leaderboard DIR...``): a row per (study, model, dataset, variant,
label set) from each study's ``results/analysis/*/*/*/metrics.json``, with a 95 % Wilson interval on every accuracy,
timm's results-CSV columns where they apply and where each number comes from (the prediction file's metadata).

Rows are compared only within a group that shares the dataset, variant, label set, image count, scales, crop size
and top_k; groups of one dataset that differ in any of these are kept apart, each saying what differs. The same
model on the same group from two studies gives two rows, each noting whether the other's numbers agree: rows are
reported, never averaged.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoomeval.analysis.label_sets import LABEL_SETS
from zoomeval.analysis.metrics import read_metrics
from zoomeval.analysis.stats import accuracy_interval
from zoomeval.core.io import read_metadata, write_csv, write_text
from zoomeval.core.layout import RESULTS, Layout
from zoomeval.report.tables import markdown_table

ACCURACIES = ("acc_standard", "acc_1crop", "acc_top_k", "acc_max")
#: What makes rows comparable, besides the dataset, variant and label set.
COMPARED = ("n_images", "scales", "img_size", "top_k")
COLUMNS = (
    "group", "study", "model", "architecture", "dataset", "variant", "label_set", "n_images",
    *(f"{a}{end}" for a in ACCURACIES for end in ("", "_lo", "_hi")), "cover_size", "cover_size_exact",
    "param_count", "img_size", "crop_pct", "interpolation", "n_scales", "scales", "top_k", "zoomeval",
    "zoomeval_commit", "weights_sha256", "torch", "device", "precision", "resize_backend", "note",
)  # fmt: skip
FORMATS = (".csv", ".md", ".html")


def split_scored(results: Path, scored: str) -> tuple[str, str]:
    """``(dataset, label set)`` of a scored name (``imagenet_real``: imagenet scored with ReaL), from the datasets
    the study built (``results/datasets/<name>``)."""
    layout = Layout(str(results))
    if Path(layout.path("dataset", dataset=scored)).is_dir():
        return scored, "in"
    for label_set in LABEL_SETS:
        dataset = scored.removesuffix(f"_{label_set}")
        if dataset != scored and Path(layout.path("dataset", dataset=dataset)).is_dir():
            return dataset, label_set
    raise ValueError(f"{results}/analysis/{scored}: no dataset {scored!r} nor one it scores under {results}/datasets/")


def study_rows(directory: Path, study: str, paths: Sequence[Path] | None = None, results: str = RESULTS
               ) -> list[dict[str, Any]]:  # fmt: skip
    """The rows of one study directory, in path order: of its metrics files ``paths`` (default: all there are under
    its results root ``results``, e.g. a limited run's ``results/limit-2``)."""
    pattern = Layout(results).glob("metrics")
    paths = sorted(directory.glob(pattern)) if paths is None else list(paths)
    if not paths:
        raise ValueError(f"{directory}: no {pattern}; run the study's workflow first")
    root = directory / results
    return [_row(path, root, study) for path in paths]


def _row(path: Path, results: Path, study: str) -> dict[str, Any]:
    scored, variant, model = path.parts[-4:-1]
    metrics = read_metrics(path)
    dataset, label_set = split_scored(results, scored)
    layout = Layout(str(results))
    predictions = Path(layout.path("predictions", dataset=dataset, variant=variant, model=model))
    if not predictions.is_file():
        raise ValueError(f"{path}: its prediction file {predictions} is missing, so its provenance is unknown")
    meta = read_metadata(predictions)
    standard = Path(layout.path("standard", dataset=dataset, model=model))
    geometry = (read_metadata(standard).get("geometry") if standard.is_file() else None) or {}
    spec = meta["model"]
    row: dict[str, Any] = {
        "study": study, "model": model, "architecture": f"{spec['architecture']}.{spec['weights']}",
        "dataset": dataset, "variant": variant, "label_set": label_set, "n_images": metrics.n_images,
        "cover_size": metrics.cover_size, "cover_size_exact": metrics.cover_size_exact,
        "param_count": _millions(spec.get("param_count")), "img_size": meta["crop_size"],
        "crop_pct": geometry.get("crop_pct"), "interpolation": geometry.get("interpolation"),
        "n_scales": len(meta["scales"]), "scales": meta["scales"],
        "top_k": metrics.top_k, "zoomeval": meta["zoomeval"], "zoomeval_commit": meta.get("zoomeval_commit"),
        "weights_sha256": spec.get("weights_sha256"), "torch": meta["torch"], "device": meta.get("device"),
        "precision": meta["precision"], "resize_backend": meta["resize_backend"],
    }  # fmt: skip
    for column in ACCURACIES:
        row[column] = value = getattr(metrics, column)
        interval = (None, None) if value is None else accuracy_interval(value, metrics.n_images, f"{path}: {column}")
        row[f"{column}_lo"], row[f"{column}_hi"] = interval
    return row


def _millions(count: int | None) -> float | None:
    """timm's param_count: millions, 2 decimals."""
    return None if count is None else round(count / 1e6, 2)


def _compared(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(json.dumps(row[k]) for k in COMPARED)


def _describe(key: tuple[str, ...], values: tuple[Any, ...]) -> str:
    dataset, variant, label_set = key
    n, scales, size, top_k = (json.loads(v) for v in values)
    return f"{dataset} / {variant} / {label_set}: {n} images, {len(scales)} scales, crop {size}, top_k {top_k}"


def leaderboard(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows grouped (group, then best acc_1crop first), each with its group and a note: why its group is kept
    apart from the others of its dataset, and whether another study's row of the same model agrees with it."""
    groups: dict[tuple[str, ...], dict[tuple[Any, ...], list[dict[str, Any]]]] = {}
    for row in rows:
        key = (row["dataset"], row["variant"], row["label_set"])
        groups.setdefault(key, {}).setdefault(_compared(row), []).append(row)
    out = []
    for key, by_values in groups.items():
        for values, members in by_values.items():
            apart = [_difference(values, other) for other in by_values if other != values]
            members.sort(key=lambda r: (r["acc_1crop"] is None, -(r["acc_1crop"] or 0), r["model"], r["study"]))
            for row in members:
                notes = [f"kept apart from the rows with {d}" for d in apart] + _agreement(row, members)
                out.append({**row, "group": _describe(key, values), "note": "; ".join(notes)})
    return out


def _difference(values: tuple[Any, ...], other: tuple[Any, ...]) -> str:
    """What differs between two groups of one dataset, e.g. ``scales [64, 256] (not [64, 224, 256])``."""
    return ", ".join(f"{name} {b} (not {a})" for name, a, b in zip(COMPARED, values, other, strict=True) if a != b)


def _agreement(row: dict[str, Any], members: Sequence[dict[str, Any]]) -> list[str]:
    """Notes on the rows of the same model from other studies in the group: the same numbers, or other ones."""
    notes = []
    for other in members:
        if other["model"] == row["model"] and other["study"] != row["study"]:
            same = all(other[c] == row[c] for c in (*ACCURACIES, "cover_size", "cover_size_exact"))
            notes.append(f"{'same numbers as' if same else 'other numbers than'} study {other['study']}")
    return notes


def _text(value: Any, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}" if column.startswith("acc_") else f"{value:g}"
    return json.dumps(value) if isinstance(value, list) else str(value)


def markdown(board: Sequence[dict[str, Any]]) -> str:
    """A table per group under its heading, each accuracy with its 95 % interval."""
    header = ["model", "study", *ACCURACIES, "cover_size", "cover_size_exact", "param_count (M)", "img_size",
              "crop_pct", "interpolation", "note"]
    lines = ["# Leaderboard", "", "Accuracies in percent with their 95 % Wilson interval [low, high].", ""]
    for group in dict.fromkeys(r["group"] for r in board):
        members = [r for r in board if r["group"] == group]
        rows = [[r["model"], r["study"], *(_interval(r, a) for a in ACCURACIES), str(r["cover_size"]),
                 str(r["cover_size_exact"]), _text(r["param_count"], ""),
                 _text(r["img_size"], ""), _text(r["crop_pct"], ""), _text(r["interpolation"], ""), r["note"]]
                for r in members]  # fmt: skip
        lines += [f"## {group}", "", *markdown_table(header, rows), ""]
    return "\n".join(lines)


def _interval(row: dict[str, Any], column: str) -> str:
    if row[column] is None:
        return ""
    return f"{row[column]:.2f} [{row[f'{column}_lo']:.2f}, {row[f'{column}_hi']:.2f}]"


def write_leaderboard(directories: Sequence[Path], path: Path | None) -> str:
    """Merge the studies into ``path`` (.csv, .md or .html); returns the Markdown (printed without ``path``)."""
    names = [d.resolve().name for d in directories]
    studies = [n if names.count(n) == 1 else str(d) for n, d in zip(names, directories, strict=True)]
    board = leaderboard([row for d, s in zip(directories, studies, strict=True) for row in study_rows(d, s)])
    if path is not None:
        write_board(board, path)
    return markdown(board)


def write_board(board: Sequence[dict[str, Any]], path: Path) -> None:
    """The leaderboard as ``path``'s suffix says: .csv, .md or .html."""
    if path.suffix not in FORMATS:
        raise ValueError(f"{path}: the leaderboard is written as {', '.join(FORMATS)}; name the file so")
    if path.suffix == ".csv":
        write_csv(path, COLUMNS, [[_text(r[c], c) for c in COLUMNS] for r in board])
    elif path.suffix == ".md":
        write_text(path, markdown(board) + "\n")
    else:
        write_text(path, page(board))


PAGE_SCRIPT = """
for (const table of document.querySelectorAll("table")) {
  table.querySelectorAll("th").forEach((th, column) => th.addEventListener("click", () => {
    const body = table.tBodies[0], down = th.dataset.order !== "descending";
    table.querySelectorAll("th").forEach(h => delete h.dataset.order);
    th.dataset.order = down ? "descending" : "ascending";
    const key = tr => tr.cells[column].dataset.value ?? tr.cells[column].textContent;
    const rows = [...body.rows].sort((a, b) => {
      const x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
      const order = !isNaN(nx) && !isNaN(ny) ? nx - ny : x === "" ? 1 : y === "" ? -1 : x.localeCompare(y);
      return down ? -order : order;
    });
    body.append(...rows);
  }));
}
document.body.dataset.ready = "1";
"""


def page(board: Sequence[dict[str, Any]]) -> str:
    """A self-contained HTML page (no network): a sortable table per group (click a column's header)."""
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>zoomeval leaderboard</title><style>",
             "body{font:14px sans-serif}table{border-collapse:collapse;margin-bottom:2em}td,th{border:1px solid #ccc;"
             "padding:2px 6px}th{cursor:pointer;background:#eee}th[data-order]{background:#cde}</style></head><body>",
             "<h1>zoomeval leaderboard</h1><p>Accuracies in percent; _lo and _hi: the 95 % Wilson interval. Click a "
             "header to sort.</p>"]  # fmt: skip
    shown = [c for c in COLUMNS if c != "group"]
    for group in dict.fromkeys(r["group"] for r in board):
        parts.append(f"<h2>{html.escape(group)}</h2><table><thead><tr>")
        parts += [f"<th>{html.escape(c)}</th>" for c in shown] + ["</tr></thead><tbody>"]
        for row in (r for r in board if r["group"] == group):
            cells = "".join(f"<td data-value='{html.escape(_text(row[c], c), quote=True)}'>"
                            f"{html.escape(_text(row[c], c))}</td>" for c in shown)  # fmt: skip
            parts.append(f"<tr>{cells}</tr>")
        parts.append("</tbody></table>")
    parts.append(f"<script>{PAGE_SCRIPT}</script></body></html>")
    return "".join(parts) + os.linesep
