"""One table across study directories (``zoomeval leaderboard DIR...``): a row per (study, model, dataset, variant,
label set) from each study's index (``results/study.json``), each result verified first
(:mod:`zoomeval.study.verified`), with a 95 % Wilson interval on every accuracy, timm's results-CSV columns where
they apply and where each number comes from (the prediction file's metadata and the files' sha256).

Rows are ranked against each other within a group that shares the evaluation protocol (the protocol fields of the
comparability key, :data:`zoomeval.analysis.comparability.FIELD_ROLES`): one table per protocol, a row per model,
best first by the ranking metric (``acc_max`` unless another is asked for), the model's settings (architecture,
weights, input size, normalisation, precision, resizing, zoomeval version and commit) in its columns. Each group's
heading names its protocol in words; a row notes the protocol fields that keep its group apart from the nearest
groups of the same heading. The same model, evaluated alike, from two studies gives two rows, each noting whether
the other's numbers agree: rows are reported, never averaged. A study given twice is reported once, with a note.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoomeval.analysis.comparability import (
    PROTOCOL_FIELDS,
    canonical,
    digest,
    key_differences,
    model_settings,
    protocol,
    worded_differences,
)
from zoomeval.analysis.label_sets import scored_name
from zoomeval.analysis.stats import accuracy_interval
from zoomeval.core.cells import html_text, markdown_line
from zoomeval.core.io import write_csv, write_text
from zoomeval.core.layout import Layout, declare
from zoomeval.report.published import PublishedRow, PublishedTable, published_table
from zoomeval.report.tables import class_subsets, markdown_table
from zoomeval.study.index import LAYOUT
from zoomeval.study.verified import Result, read_study, verify

ACCURACIES = ("acc_standard", "acc_1crop", "acc_top_k", "acc_max")
#: What each accuracy is, in words (the exported files' descriptions).
METRICS = {
    "acc_standard": "top-1 accuracy (%) of the standard evaluation (the weights' own resize and centre crop)",
    "acc_1crop": "top-1 accuracy (%) of the 1-crop zoom transform (shorter side 256, centre crop 224)",
    "acc_top_k": "accuracy (%) when any of the greedy cover's first top_k zoom transforms is correct",
    "acc_max": "accuracy (%) when any zoom transform is correct (the upper bound)",
}
COLUMNS = (
    "group",
    "study",
    "model",
    "architecture",
    "dataset",
    "variant",
    "label_set",
    "n_images",
    *(f"{a}{end}" for a in ACCURACIES for end in ("", "_lo", "_hi")),
    "cover_size",
    "cover_size_exact",
    "param_count",
    "img_size",
    "crop_pct",
    "interpolation",
    "n_scales",
    "scales",
    "top_k",
    "zoomeval",
    "zoomeval_commit",
    "weights_sha256",
    "torch",
    "device",
    "precision",
    "resize_backend",
    "note",
    # added with the study index (metrics schema 5): the rest of the comparability key and the files' sha256
    "class_set",
    "mean",
    "std",
    "compile",
    "channels_last",
    "images_sha256",
    "metrics_sha256",
    "predictions_sha256",
    "standard_sha256",
    "key_sha256",
    # with --audit N: the rows recomputed from the result's files here, and how many differed (zoomeval.audit.study)
    "audit_rows",
    "audit_mismatches",
)
declare("leaderboard", COLUMNS)
FORMATS = (".csv", ".md", ".html")
LEFT_APART = "Left apart (--allow-stale): stale, missing, tampered or malformed"
#: What a board may be ranked by (``zoomeval leaderboard --rank-by``), the zoom tables' upper bound by default.
RANK_BY = ("acc_max", "acc_top_k", "acc_1crop", "acc_standard")
#: Groups further apart than this many protocol fields are not noted against each other (their headings differ).
NEAREST = 3
#: The key fields a group's heading names.
HEADING = ("dataset", "variant", "label_set")


def study_rows(
    directory: Path,
    study: str,
    allow_stale: bool = False,
    check: bool = False,
    layout: Layout = LAYOUT,
    auditor: Any = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of one study directory, read through its index, and what was left apart (each line names the
    file and what is wrong). Without ``allow_stale``, anything left apart is refused; ``check`` recomputes each
    result from its predictions (``--verify``); ``auditor`` (a :class:`zoomeval.audit.study.Auditor`, ``--audit N``)
    audits the study here first, and a row whose files fail is left apart. ``layout``: the run's (a limited run's own
    results root)."""
    results, problems = read_study(directory, layout)
    _refuse(problems, allow_stale)
    for result in results if check else ():
        verify(directory, result, layout)
    rows = _rows(results, directory, study)
    if auditor is not None and rows:
        from zoomeval.audit.study import audited_rows

        rows, failed = audited_rows(directory, rows, auditor)
        _refuse(failed, allow_stale)
        problems += failed
    return rows, problems


def _refuse(problems: Sequence[str], allow_stale: bool) -> None:
    if problems and not allow_stale:
        more = f" (and {len(problems) - 1} more; --allow-stale lists them)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)


def _rows(results: Sequence[Result], directory: Path, study: str) -> list[dict[str, Any]]:
    # the masked variants' results read no standard evaluation: they show the model's, verified with the original's
    geometry = {(r.entry.key["dataset"], r.metrics.model): r.geometry for r in results if "standard" in r.inputs}
    return [
        _row(r, directory, study, r.geometry or geometry.get((r.entry.key["dataset"], r.metrics.model), {}))
        for r in results
    ]


def _row(result: Result, directory: Path, study: str, geometry: dict[str, Any]) -> dict[str, Any]:
    metrics, meta, key = result.metrics, result.meta, result.entry.key
    path = directory / result.entry.path
    spec = meta["model"]
    row: dict[str, Any] = {
        "study": study,
        "model": metrics.model,
        "architecture": f"{spec['architecture']}.{spec['weights']}",
        "dataset": key["dataset"],
        "variant": key["variant"],
        "label_set": key["label_set"],
        "n_images": metrics.n_images,
        "cover_size": metrics.cover_size,
        "cover_size_exact": metrics.cover_size_exact,
        "param_count": _millions(spec.get("param_count")),
        "img_size": meta["crop_size"],
        "crop_pct": geometry.get("crop_pct"),
        "interpolation": geometry.get("interpolation"),
        "n_scales": len(meta["scales"]),
        "scales": meta["scales"],
        "top_k": metrics.top_k,
        "zoomeval": meta["zoomeval"],
        "zoomeval_commit": meta.get("zoomeval_commit"),
        "weights_sha256": spec.get("weights_sha256"),
        "torch": meta["torch"],
        "device": meta.get("device"),
        "precision": meta["precision"],
        "resize_backend": meta["resize_backend"],
        **{k: canonical(key[k]) for k in ("class_set", "mean", "std", "compile", "channels_last")},
        "images_sha256": key["images"],
        "metrics_sha256": result.entry.sha256,
        **{f"{role}_sha256": _sha256(result, role) for role in ("predictions", "standard")},
        "key": key,
        "key_sha256": digest(key),
        "protocol_sha256": digest(protocol(key)),  # not a column: the group
        "source": (directory, result),  # not columns: for the timm format,
        "adapter": meta.get("dataset_adapter"),  # the published tables' matching
        "weights_id": (spec.get("source"), spec["architecture"], spec["weights"]),
        "audit_rows": None,
        "audit_mismatches": None,
    }
    for column in ACCURACIES:
        row[column] = value = getattr(metrics, column)
        interval = (None, None) if value is None else accuracy_interval(value, metrics.n_images, f"{path}: {column}")
        row[f"{column}_lo"], row[f"{column}_hi"] = interval
    return row


def _sha256(result: Result, role: str) -> str | None:
    item = (result.metrics.inputs or {}).get(role)
    return None if item is None else item["sha256"]


def _millions(count: int | None) -> float | None:
    """timm's param_count: millions, 2 decimals."""
    return None if count is None else round(count / 1e6, 2)


def _describe(key: dict[str, Any], row: dict[str, Any]) -> str:
    """A group's heading; a dataset scored over fewer than the 1000 classes says how many and the chance level
    (:func:`zoomeval.report.tables.class_subsets`)."""
    return (
        f"{key['dataset']} / {key['variant']} / {key['label_set']}: {row['n_images']} images, "
        f"{len(key['scales'])} scales, top_k {key['top_k']}{class_subsets([row['source'][1].metrics])}"
    )


def leaderboard(
    rows: Sequence[dict[str, Any]], repeated: dict[str, int] | None = None, rank_by: str = RANK_BY[0]
) -> list[dict[str, Any]]:
    """The rows grouped by their protocol (groups in first-seen order), ranked within a group by ``rank_by`` (best
    first; then acc_1crop, model and study), each with its group and a note: which protocol fields keep its group
    apart from the nearest others, whether another study's row of the same model evaluated alike agrees with it,
    and (``repeated``: times each study was given) that its study was given more than once."""
    if rank_by not in RANK_BY:
        raise ValueError(f"--rank-by: {rank_by!r} is no accuracy of the leaderboard; expected one of {list(RANK_BY)}")
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["protocol_sha256"], []).append(row)
    keys = {name: members[0]["key"] for name, members in groups.items()}
    labels = headings(keys, {name: members[0] for name, members in groups.items()})
    same_heading: dict[tuple[str, ...], list[str]] = {}
    for name in keys:
        same_heading.setdefault(tuple(str(keys[name][f]) for f in HEADING), []).append(name)
    out = []
    for name, members in groups.items():
        label = labels[name]
        same = same_heading[tuple(str(keys[name][f]) for f in HEADING)]
        apart = [
            ", ".join(key_differences(keys[other], keys[name], PROTOCOL_FIELDS)) for other in _nearest(name, same, keys)
        ]
        members.sort(key=lambda r: (*_best(r, rank_by), *_best(r, "acc_1crop"), r["model"], r["study"]))
        alike: dict[str, list[dict[str, Any]]] = {}
        for row in members:
            alike.setdefault(digest([row["model"], model_settings(row["key"])]), []).append(row)
        for row in members:
            same_model = alike[digest([row["model"], model_settings(row["key"])])]
            notes = [f"kept apart from the rows with {d}" for d in apart] + _agreement(row, same_model)
            times = (repeated or {}).get(row["study"], 1)
            notes += [f"study given {times} times, reported once"] if times > 1 else []
            out.append({**row, "group": label, "note": "; ".join(notes)})
    return out


def _best(row: dict[str, Any], column: str) -> tuple[bool, float]:
    """A sort key that puts the highest value of ``column`` first and a missing one last."""
    return row[column] is None, -(row[column] or 0)


def headings(keys: dict[str, dict[str, Any]], firsts: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each group's heading (by its protocol's digest; ``firsts``: a row of each group): its dataset, variant, label
    set, images, scales, top_k and class subset; where another group's reads the same, also what separates it from
    the nearest such groups, in words (``— scales 224–448 (not 224–1024)``); the protocol's digest only where words
    do not tell them apart."""
    plain = {name: _describe(key, firsts[name]) for name, key in keys.items()}
    alike: dict[str, list[str]] = {}
    for name, label in plain.items():
        alike.setdefault(label, []).append(name)
    out = {}
    for name, label in plain.items():
        distance = {o: _distance(keys[o], keys[name]) for o in alike[label] if o != name}
        nearest = [o for o, d in distance.items() if d == min(distance.values())]
        words = "; ".join(", ".join(worded_differences(keys[name], keys[o], PROTOCOL_FIELDS)) for o in nearest)
        out[name] = f"{label} — {words}" if words else label
    shown = Counter(out.values())
    return {name: f"{label} (protocol {name[:12]})" if shown[label] > 1 else label for name, label in out.items()}


def _distance(key: dict[str, Any], other: dict[str, Any]) -> int:
    """The number of protocol fields where two keys differ."""
    return sum(canonical(key.get(f)) != canonical(other.get(f)) for f in PROTOCOL_FIELDS)


def _nearest(name: str, same: Sequence[str], keys: dict[str, dict[str, Any]]) -> list[str]:
    """The other groups ``same`` of the same heading fields (dataset, variant, label set: the heading names them)
    whose protocols differ from ``name``'s in the fewest fields (at most :data:`NEAREST`)."""
    distance = {o: _distance(keys[o], keys[name]) for o in same if o != name}
    least = min(distance.values(), default=0)
    return [o for o, d in distance.items() if d == least <= NEAREST]


def _agreement(row: dict[str, Any], members: Sequence[dict[str, Any]]) -> list[str]:
    """Notes on the rows of the same model evaluated alike (``members``: the group's rows of its name and settings)
    from other studies: the same numbers, or other ones."""
    notes = []
    for other in members:
        if other["model"] == row["model"] and other["study"] != row["study"]:
            same = all(other[c] == row[c] for c in (*ACCURACIES, "cover_size", "cover_size_exact"))
            notes.append(f"{'same numbers as' if same else 'other numbers than'} study {other['study']}")
    return notes


def with_published(board: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``board`` (ranked, :func:`leaderboard`) with the paper's published values where a group's protocol is a
    published table's (:mod:`zoomeval.report.published`): each reproduced row of a published model notes the
    published values and its own difference from them, and the published rows follow the group's ranked rows, marked
    ``reported (<source>)``, never ranked, sealed or audited (the exports and ``--format timm`` never see them)."""
    out: list[dict[str, Any]] = []
    for members in _by_group(board).values():
        first = members[0]
        table = published_table(first["key"], first["n_images"], first["adapter"])
        if table is None:
            out += members
            continue
        for row in members:
            match = table.row_of(row["weights_id"])
            out.append(row if match is None else {**row, "note": _joined(row["note"], _versus(table, match, row))})
        out += [_published_row(table, published, first) for published in table.rows]
    return out


def _versus(table: PublishedTable, published: PublishedRow, row: dict[str, Any]) -> str:
    """``reported (paper, Table 1, IN) ResNet-50: acc_1crop 75.75 (this row +0.12), ...``."""
    values = [
        f"{metric} {value:.2f} (this row {row[metric] - value:+.2f})"
        if row[metric] is not None
        else f"{metric} {value:.2f}"
        for metric, value in published.values.items()
    ]
    return f"reported ({table.source}, {table.column}) {published.name}: {', '.join(values)}"


def _published_row(table: PublishedTable, published: PublishedRow, first: dict[str, Any]) -> dict[str, Any]:
    """A published row in a group's table: its name, values and where they come from; no other number."""
    _, architecture, weights = sorted(published.models)[0]
    note = f"{table.source}, column {table.column}: published, not recomputed, not ranked"
    return {
        **dict.fromkeys(COLUMNS),
        **{k: first[k] for k in ("group", "dataset", "variant", "label_set", "n_images")},
        "study": f"reported ({table.source})",
        "model": published.name,
        "architecture": f"{architecture}.{weights}",
        **published.values,
        "note": _joined(note, published.note),
    }


def _joined(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _text(value: Any, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}" if column.startswith("acc_") else f"{value:g}"
    return json.dumps(value) if isinstance(value, list) else str(value)


def markdown(board: Sequence[dict[str, Any]], apart: Sequence[str] = (), rank_by: str = RANK_BY[0]) -> str:
    """A table per group (protocol) under its heading, its models best first by ``rank_by``, each accuracy with its
    95 % interval and the model's settings beside them; then what was left apart."""
    audited = any(r["audit_rows"] is not None for r in board)
    header = [
        "model",
        "study",
        *ACCURACIES,
        "cover_size",
        "cover_size_exact",
        "architecture",
        "param_count (M)",
        "img_size",
        "crop_pct",
        "interpolation",
        "precision",
        "zoomeval",
        *(["audit_rows", "audit_mismatches"] if audited else []),
        "note",
    ]
    ranked = f"A table per evaluation protocol, its models best first by {rank_by}."
    lines = ["# Leaderboard", "", f"{ranked} Accuracies in percent with their 95 % Wilson interval [low, high].", ""]
    for group, members in _by_group(board).items():
        rows = [
            [
                r["model"],
                r["study"],
                *(_interval(r, a) for a in ACCURACIES),
                _text(r["cover_size"], ""),
                _text(r["cover_size_exact"], ""),
                readable_architecture(r["architecture"]),
                _text(r["param_count"], ""),
                _text(r["img_size"], ""),
                _text(r["crop_pct"], ""),
                _text(r["interpolation"], ""),
                _text(r["precision"], ""),
                _text(r["zoomeval"], ""),
                *([_text(r["audit_rows"], ""), _text(r["audit_mismatches"], "")] if audited else []),
                r["note"],
            ]
            for r in members
        ]
        lines += [f"## {markdown_line(group)}", "", *markdown_table(header, rows), ""]
    if apart:
        lines += [f"## {LEFT_APART}", "", *(f"- {markdown_line(a)}" for a in apart), ""]
    return "\n".join(lines)


def _by_group(board: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows by group, in order (one pass: a board of 20,000 rows in 20,000 groups)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in board:
        groups.setdefault(row["group"], []).append(row)
    return groups


#: What a weights file's name ends in that says its format, not which weights: dropped from the tag a table shows.
WEIGHTS_SUFFIXES = (".pth.tar", ".pth", ".pt", ".safetensors", ".bin", ".ckpt")


def readable_architecture(architecture: str) -> str:
    """A row's ``arch.tag`` as the Markdown shows it: a weights file's name without its format's suffix
    (``tf_efficientnet_lite0.efficientnet-lite0-57934424``), a weights sha256 as its first 12 digits
    (``resnet18.0cb05c73a6b9``); the full tag stays in the CSV's ``architecture`` (with ``weights_sha256``)."""
    arch, _, tag = architecture.partition(".")
    if len(tag) == 64 and all(c in "0123456789abcdef" for c in tag):
        return f"{arch}.{tag[:12]}"
    for suffix in WEIGHTS_SUFFIXES:
        if tag.endswith(suffix) and len(tag) > len(suffix):
            return f"{arch}.{tag.removesuffix(suffix)}"
    return architecture


def _interval(row: dict[str, Any], column: str) -> str:
    if row[column] is None:
        return ""
    if row[f"{column}_lo"] is None:  # a published value: no interval of ours
        return f"{row[column]:.2f}"
    return f"{row[column]:.2f} [{row[f'{column}_lo']:.2f}, {row[f'{column}_hi']:.2f}]"


def hub_dataset(row: dict[str, Any]) -> tuple[str, str | None]:
    """The dataset's Hub id and commit where it was read from the Hub (its only hub input), else its own name."""
    revisions = sorted((row["key"].get("revisions") or {}).values())
    if len(revisions) == 1:
        repo, commit = revisions[0].rsplit("@", 1)
        return repo, commit
    return row["dataset"], None


def scored(row: dict[str, Any]) -> str:
    """A leaderboard row's scored dataset (its name, suffixed by a label set other than ``in``)."""
    return scored_name(row["dataset"], row["label_set"])


def check_output(path: Path, formats: Sequence[str]) -> None:
    """Refuse an output path that names a folder or another format, before any work."""
    if path.is_dir():
        raise ValueError(f"-o {path}: is a directory; expected a file name ending in {', '.join(formats)}")
    if path.suffix not in formats:
        raise ValueError(f"{path}: the leaderboard is written as {', '.join(formats)}; name the file so")


def write_board(
    board: Sequence[dict[str, Any]], path: Path, apart: Sequence[str] = (), rank_by: str = RANK_BY[0]
) -> None:
    """The leaderboard (each protocol's models ranked by ``rank_by``) as ``path``'s suffix says: .csv, .md or .html
    (the last two list what was left apart)."""
    check_output(path, FORMATS)
    if path.suffix == ".csv":
        write_csv(path, COLUMNS, [[_text(r[c], c) for c in COLUMNS] for r in board])
    elif path.suffix == ".md":
        write_text(path, markdown(board, apart, rank_by) + "\n")
    else:
        write_text(path, page(board, apart))


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


def page(board: Sequence[dict[str, Any]], apart: Sequence[str] = ()) -> str:
    """A self-contained HTML page (no network): a sortable table per group (click a column's header), then what was
    left apart."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>zoomeval leaderboard</title><style>",
        "body{font:14px sans-serif}table{border-collapse:collapse;margin-bottom:2em}td,th{border:1px solid #ccc;"
        "padding:2px 6px}th{cursor:pointer;background:#eee}th[data-order]{background:#cde}</style></head><body>",
        "<h1>zoomeval leaderboard</h1><p>Accuracies in percent; _lo and _hi: the 95 % Wilson interval. Click a "
        "header to sort.</p>",
    ]
    shown = [c for c in COLUMNS if c != "group"]
    for group, members in _by_group(board).items():
        parts.append(f"<h2>{html_text(group)}</h2><table><thead><tr>")
        parts += [f"<th>{html_text(c)}</th>" for c in shown] + ["</tr></thead><tbody>"]
        for row in members:
            cells = "".join(
                f"<td data-value='{html_text(_text(row[c], c))}'>{html_text(_text(row[c], c))}</td>" for c in shown
            )
            parts.append(f"<tr>{cells}</tr>")
        parts.append("</tbody></table>")
    if apart:
        parts += [f"<h2>{html_text(LEFT_APART)}</h2><ul>", *(f"<li>{html_text(a)}</li>" for a in apart), "</ul>"]
    parts.append(f"<script>{PAGE_SCRIPT}</script></body></html>")
    return "".join(parts) + os.linesep
