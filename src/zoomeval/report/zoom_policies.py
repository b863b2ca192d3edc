"""results/table_zoom_policies.csv/.md and the per-dataset figure: accuracy against forward passes per image of the
label-free zoom policies (:mod:`zoomeval.analysis.policy_eval`'s documents), beside the 1-crop view, the 5-/10-crop
methods, MEMO where it ran, the oracle top-k cover and acc_max, with the share of the oracle gap each closes."""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from zoomeval.analysis.policies import POLICIES
from zoomeval.analysis.policy_eval import SCHEMA_VERSION, UNPAIRED, row
from zoomeval.core.io import write_csv, write_text
from zoomeval.core.layout import declare, run_layout
from zoomeval.core.left_out import LeftOut
from zoomeval.report.left_out import LEFT_OUT_COLUMNS, append_left_out, left_out_note
from zoomeval.report.tables import markdown_table


def _number(value: float) -> str:
    return f"{round(value, 2) + 0.0:.2f}"  # + 0.0: a rounding error below zero is "0.00", not "-0.00"


def _p_value(value: float) -> str:
    return f"{value:.6g}"  # p-values span orders of magnitude: significant digits, not decimals


#: Version 2 of the table: these columns, in this order, each with how its cells are written (passes and
#: percentages with 2 decimals), then the left-out columns (:mod:`zoomeval.report.left_out`).
CELLS: dict[str, Callable[[Any], str]] = {
    "model": str,
    "variant": str,
    "dataset": str,
    "protocol": str,
    "policy": str,
    "budget": str,
    "passes": _number,
    "passes_lo": _number,
    "passes_hi": _number,
    "n_images": str,
    "n_correct": str,
    "acc": _number,
    "acc_lo": _number,
    "acc_hi": _number,
    "acc_1crop": _number,
    "acc_max": _number,
    "gap_closed": _number,
    "gap_closed_lo": _number,
    "gap_closed_hi": _number,
    "n_right_to_wrong": str,
    "n_wrong_to_right": str,
    "mcnemar_p": _p_value,
}
COLUMNS = list(CELLS)
declare("table_zoom_policies", [*COLUMNS, *LEFT_OUT_COLUMNS], SCHEMA_VERSION)
#: The level below which a McNemar p-value makes a gain over the 1-crop significant (the figure's filled markers).
ALPHA = 0.05
#: The policies drawn with their 95 % bands (the others' intervals are in the table; more bands would hide the lines).
BANDS = ("max_conf", "cascade")
#: The protocol of the rows that the very images scored decide (the oracle) or that need no fit.
IN_SAMPLE = "in_sample"
MEMO_METHODS = ("memo_augmix", "memo_rrc")


def gap_closed(acc: float | None, acc_1crop: float | None, acc_max: float) -> float | None:
    """The share (%) of the oracle gap a point closes, ``(acc - acc_1crop) / (acc_max - acc_1crop)``; None where
    there is no gap (or no 1-crop view)."""
    if acc is None or acc_1crop is None or acc_max <= acc_1crop:
        return None
    return 100 * (acc - acc_1crop) / (acc_max - acc_1crop)


def table_rows(documents: Sequence[Mapping[str, Any]], memo: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The table's rows: per document its policies (by policy, then budget), then once per (model, variant,
    dataset) the in-sample references and MEMO's rows."""
    rank = {name: k for k, name in enumerate(POLICIES)}
    out, referenced = [], set()
    for document in documents:
        cell = (document["model"], document["variant"], document["dataset"])
        policies = sorted(
            (r for r in document["rows"] if r["policy"] in rank), key=lambda r: (rank[r["policy"]], r["budget"])
        )
        out += [_full(document, document["protocol"], r) for r in policies]
        out += [_not_fitted(document, policy) for policy in POLICIES if document.get("not_fitted")]
        if cell not in referenced:
            referenced.add(cell)
            extra = [m for m in memo if (m["model"], m["variant"], m["dataset"]) == cell]
            out += [_full(document, IN_SAMPLE, r) for r in document["rows"] if r["policy"] not in rank]
            out += [_full(document, IN_SAMPLE, m["row"]) for m in extra]
    return out


#: The rows that answer each image with one zoom transform's prediction, so that none is right where every transform
#: is wrong: their accuracy cannot exceed acc_max, nor their gap closed 100 %. (The 5-/10-crop views are no zoom
#: transforms, a mean rule's class need be no view's, and MEMO adapts the model: those can.)
WITHIN_ACC_MAX = (*POLICIES, "one_crop", "oracle_top_k", "oracle_max")


def _full(document: Mapping[str, Any], protocol: str, point: Mapping[str, Any]) -> dict[str, Any]:
    a1, amax = document["acc_1crop"], document["acc_max"]
    bound = amax if point["policy"] in WITHIN_ACC_MAX else 100.0  # the highest accuracy the row can have
    accs = {s: None if point[f"acc{s}"] is None else min(point[f"acc{s}"], bound) for s in ("", "_lo", "_hi")}
    gaps = {f"gap_closed{s}": gap_closed(accs[s], a1, amax) for s in ("", "_lo", "_hi")}
    left = document["left_out"] and LeftOut.from_document(document["left_out"])
    return {
        "model": document["model"],
        "variant": document["variant"],
        "dataset": document["dataset"],
        "protocol": protocol,
        **point,
        "acc_1crop": a1,
        "acc_max": amax,
        **gaps,
        "left": left,
    }


def _not_fitted(document: Mapping[str, Any], policy: str) -> dict[str, Any]:
    """The row of a policy a tiny dataset could not fit: no numbers, its images left out with the reason."""
    n = next(r["n_images"] for r in document["rows"] if r["policy"] == "one_crop")
    empty = {**dict.fromkeys(("budget", "passes", "passes_lo", "passes_hi", "acc", "acc_lo", "acc_hi")), **UNPAIRED}
    full = _full(document, document["protocol"], {**empty, "policy": policy, "n_images": 0, "n_correct": 0})
    left = full["left"] or LeftOut(document["dataset"])
    return {**full, "left": replace(left, unscored={**(left.unscored or {}), document["not_fitted"]: n})}


def memo_rows(
    tta_csv: str | os.PathLike[str], documents: Sequence[Mapping[str, Any]], passes: int
) -> list[dict[str, Any]]:
    """MEMO's points from results/table_tta.csv for the original images of each document's (model, dataset) that it
    has, at ``passes`` forward passes per image (the augmented views of every step and the final prediction; the
    backward passes are not counted), over the document's images."""
    with open(tta_csv, newline="") as fh:
        table = {(r["method"], r["model"]): r for r in csv.DictReader(fh)}
    out, cells = [], {(d["model"], d["variant"], d["dataset"]): d for d in documents}
    for document in cells.values():
        n = next(r["n_images"] for r in document["rows"] if r["policy"] == "one_crop")
        for method in MEMO_METHODS:
            value = table.get((method, document["model"]), {}).get(document["dataset"])
            if document["variant"] == "original" and value:
                point = row(method, passes, round(float(value) * n / 100), n, np.full(n, float(passes)))
                out.append(
                    {"model": document["model"], "variant": "original", "dataset": document["dataset"], "row": point}
                )
    return out


def significant_gain(point: Mapping[str, Any]) -> bool:
    """Whether a point turns significantly more images wrong -> right than right -> wrong against the 1-crop view
    (McNemar p below :data:`ALPHA`); False where it has no paired comparison."""
    p = point.get("mcnemar_p")
    return p is not None and p < ALPHA and point["n_wrong_to_right"] > point["n_right_to_wrong"]


def _text(column: str, value: Any) -> str:
    return "" if value is None else CELLS[column](value)


def _paired_cell(r: Mapping[str, Any]) -> str:
    if r.get("mcnemar_p") is None:
        return ""
    if r["n_right_to_wrong"] == r["n_wrong_to_right"] == 0:
        return "the same images right"
    return f"-{r['n_right_to_wrong']} +{r['n_wrong_to_right']} (p {_text('mcnemar_p', r['mcnemar_p'])})"


def _interval(value: float | None, lo: float | None, hi: float | None) -> str:
    return "" if value is None else f"{_number(value)} [{_number(lo)}, {_number(hi)}]"


#: The Markdown view's columns.
MARKDOWN_HEADER = [
    "dataset",
    "variant",
    "model",
    "protocol",
    "policy",
    "budget",
    "passes",
    "acc [95% CI]",
    "gap_closed [95% CI]",
    "vs 1-crop: lost, gained (McNemar p)",
]


def _markdown_row(r: Mapping[str, Any]) -> list[str]:
    """A row's Markdown cells (:data:`MARKDOWN_HEADER`), with the intervals."""
    return [
        r["dataset"],
        r["variant"],
        r["model"],
        r["protocol"],
        r["policy"],
        str(r["budget"]),
        _text("passes", r["passes"]),
        _interval(r["acc"], r["acc_lo"], r["acc_hi"]),
        _interval(r["gap_closed"], r["gap_closed_lo"], r["gap_closed_hi"]),
        _paired_cell(r),
    ]


def write_table_zoom_policies(
    documents: Sequence[Mapping[str, Any]],
    memo: Sequence[Mapping[str, Any]],
    csv_path: str | os.PathLike[str],
    md_path: str | os.PathLike[str],
    limit: int | None = None,
) -> None:
    """The CSV (:data:`COLUMNS`, percentages and passes with 2 decimals) and a Markdown view with the intervals;
    ``limit``: the run's (config limit), whose results root the left-out column names files under."""
    rows = table_rows(documents, memo)
    shown = [_markdown_row(r) for r in rows]
    notes = [
        f"Schema version {SCHEMA_VERSION}. Policies never see a test image's label: cvK rows are K-fold "
        "cross-validated over images (each image scored once, by the policy fitted on the other folds); "
        "transfer:<source> rows are fitted on every image of the source and scored on every image here; in_sample "
        "rows are the references (one_crop, the 5-/10-crop max and mean rules, MEMO, and the oracles oracle_top_k "
        "and oracle_max, which the labels of these very images decide). budget: views per image (cascade: the "
        "calibration budget); passes: forward passes per image on the scored images.",
        "acc: top-1 accuracy (%) with its Wilson 95 % interval over images; passes with a normal 95 % interval of the "
        "mean; gap_closed: (acc - acc_1crop) / (acc_max - acc_1crop) in %, its interval the acc interval mapped the "
        "same way, bounded at 100 % for the rows that answer with one zoom transform's prediction (the policies, "
        "one_crop and the oracles cannot beat acc_max). n_right_to_wrong, n_wrong_to_right: the images the row "
        "answers wrong where the 1-crop view is right and the reverse, on the same images; mcnemar_p: the exact "
        "two-sided McNemar test of those discordant pairs (1 where there are none: the Markdown says 'the same "
        "images right'); empty where the row has no per-image answers (5-/10-crop rules, MEMO).",
    ]
    lefts, layout = [r["left"] for r in rows], run_layout(limit)
    write_csv(csv_path, *append_left_out(COLUMNS, [[_text(c, r[c]) for c in COLUMNS] for r in rows], lefts, layout))
    notes.append(left_out_note({r["dataset"]: r["left"] for r in rows}, layout))
    title = "# Zoom without an oracle: accuracy per forward pass of label-free zoom policies"
    write_text(md_path, "\n".join([title, "", *markdown_table(MARKDOWN_HEADER, shown), "", *(f"{n}\n" for n in notes)]))


COLOURS = {
    "max_conf": "tab:blue",
    "max_conf_cover": "tab:cyan",
    "vote": "tab:green",
    "cascade": "tab:red",
    "selector": "tab:purple",
}
MARKERS = {
    "one_crop": ("*", "black"),
    "five_crop_max": ("s", "tab:orange"),
    "five_crop_mean": ("D", "tab:orange"),
    "ten_crop_max": ("s", "tab:brown"),
    "ten_crop_mean": ("D", "tab:brown"),
    "memo_augmix": ("^", "tab:olive"),
    "memo_rrc": ("v", "tab:olive"),
}


def plot_zoom_policies(
    documents: Sequence[Mapping[str, Any]], memo: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], title: str
) -> None:
    """PNG of one dataset's curves: a panel per (model, variant), accuracy against forward passes per image (log
    axis); cross-validated policies solid, transferred ones dashed, :data:`BANDS` with their 95 % bands, open markers
    on the points without a significant gain over the 1-crop (:func:`significant_gain`); the references as markers,
    the oracle top-k cover grey and acc_max dotted."""
    from matplotlib.figure import Figure  # here: the table job, which imports this module too, draws nothing

    from zoomeval.report.figures import _save

    rows = [r for r in table_rows(documents, memo) if r["acc"] is not None]  # not the policies left out
    cells = list(dict.fromkeys((r["model"], r["variant"]) for r in rows))
    fig = Figure(figsize=(7.5, 4.8 * len(cells)), layout="constrained")
    for k, cell in enumerate(cells):
        ax = fig.add_subplot(len(cells), 1, k + 1)
        _panel(ax, [r for r in rows if (r["model"], r["variant"]) == cell])
        ax.set_title(f"{cell[0]}, {cell[1]}")
    fig.suptitle(title)
    _save(fig, path)


def _policy_line(ax: Any, rows: list[dict[str, Any]], protocol: str, policy: str) -> None:
    """One policy's accuracy against passes under one protocol, rows without a significant gain open, its band."""
    line = sorted((r for r in rows if (r["protocol"], r["policy"]) == (protocol, policy)), key=lambda r: r["passes"])
    xs, ys = [r["passes"] for r in line], [r["acc"] for r in line]
    style = "-" if protocol.startswith("cv") else "--"
    ax.plot(xs, ys, style, marker="o", markersize=3, color=COLOURS[policy], label=f"{policy} ({protocol})")
    weak = [r for r in line if not significant_gain(r)]
    ax.plot(
        [r["passes"] for r in weak],
        [r["acc"] for r in weak],
        "o",
        markersize=6,
        color=COLOURS[policy],
        markerfacecolor="white",
        linestyle="none",
    )
    if policy in BANDS:
        ax.fill_between(
            xs,
            [r["acc_lo"] for r in line],
            [r["acc_hi"] for r in line],
            color=COLOURS[policy],
            alpha=0.1,
            linewidth=0,
        )


def _panel(ax: Any, rows: list[dict[str, Any]]) -> None:
    protocols = list(dict.fromkeys(r["protocol"] for r in rows if r["protocol"] != IN_SAMPLE))
    for protocol in protocols:
        for policy in POLICIES:
            _policy_line(ax, rows, protocol, policy)
    oracle = sorted((r for r in rows if r["policy"] == "oracle_top_k"), key=lambda r: r["passes"])
    ax.plot(
        [r["passes"] for r in oracle],
        [r["acc"] for r in oracle],
        ":",
        marker=".",
        color="grey",
        label="oracle top-k cover (in-sample)",
    )
    for r in rows:
        if r["policy"] == "oracle_max":
            ax.axhline(r["acc"], color="black", linestyle=":", linewidth=1, label=f"acc_max {r['acc']:.1f}")
        elif r["policy"] in MARKERS:
            marker, colour = MARKERS[r["policy"]]
            ax.plot([r["passes"]], [r["acc"]], marker, color=colour, markersize=8, linestyle="none", label=r["policy"])
    ax.plot(
        [],
        [],
        "o",
        color="grey",
        markerfacecolor="white",
        linestyle="none",
        label=f"open: no significant gain over 1-crop (McNemar p >= {ALPHA})",
    )
    ax.set_xscale("log")
    budgets = sorted({r["budget"] for r in oracle})
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.minorticks_off()
    ax.set_xlabel("forward passes per image")
    ax.set_ylabel("top-1 accuracy (%)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
