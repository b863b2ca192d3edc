"""``zoomeval export DIR --format hf|timm|eee``: a sealed study's verified results in the formats other tools read,
as a bundle that ``zoomeval leaderboard`` reads back with the same verification as the study itself.

A bundle is a folder holding the study's sealed core under its own results layout (its index, the metrics files and
the prediction, standard-evaluation, manifest, label and mask files they read, hard-linked where the file system
allows), the exported files, and ``export.json``: the format, the options, the seal digest (the index's sha256), each
result's comparability key digest and every exported file's sha256. The exported files are a function of the
verified study and those options (:func:`exported_files`), so reading a bundle back (:func:`check_bundle`) verifies
the study in it and writes the export again in memory: a number edited in an exported file is refused.

* ``hf``: Hugging Face ``.eval_results`` YAML entries for each model's repo (huggingface_hub's
  :class:`~huggingface_hub.EvalResultEntry`), one file per dataset, variant and metric, since the Hub holds one value
  per file: the dataset's Hub id and revision where it was read from the Hub (else its zoomeval name), the metric as
  the task, the value in percent, the date, the source and the key and seal digests in the notes.
* ``timm``: timm's results CSV of the standard evaluation, one per scored dataset
  (:mod:`zoomeval.publish.timm_results`; one per model where two entries share an architecture, since timm's CSVs
  join by it).
* ``eee``: Every Eval Ever records (schema 0.3.0), laid out as that project's repository lays them out: per result an
  aggregate record and its instance-level JSONL (each image's prediction and correctness under the 1-crop transform,
  any transform and the standard evaluation, its ``sample_hash`` the image's sha256), whose sha256 the aggregate
  record carries.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from datetime import date as Date
from pathlib import Path
from typing import Any

from zoomeval import __version__
from zoomeval.core.checksums import sha256_file
from zoomeval.core.io import csv_text, link_or_copy, read_json, write_json, write_text
from zoomeval.core.layout import Layout
from zoomeval.publish.eee import aggregate_record, instance_lines, samples_path
from zoomeval.publish.leaderboard import ACCURACIES, METRICS, hub_dataset, leaderboard, scored, study_rows
from zoomeval.publish.timm_results import TIMM_COLUMNS, timm_rows
from zoomeval.study.index import LAYOUT

FORMATS = ("hf", "timm", "eee")
#: Version of export.json's layout.
EXPORT_SCHEMA_VERSION = 1
BUNDLE = "export.json"


def exported_files(directory: Path, fmt: str, options: dict[str, Any], layout: Layout = LAYOUT) -> dict[str, str]:
    """The exported files (path in the bundle -> text) of a verified study, from its rows and ``options`` (``study``:
    its name, ``date``, ``source_url``)."""
    board = leaderboard(study_rows(directory, str(options["study"]), layout=layout)[0])
    seal = sha256_file(directory / layout.path("study_index"))
    if fmt == "hf":
        return _hf(board, seal, options)
    if fmt == "timm":
        return _timm(board, layout)
    if fmt == "eee":
        return _eee(directory, board, seal, options, layout)
    raise ValueError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")


def _hf(board: Sequence[dict[str, Any]], seal: str, options: dict[str, Any]) -> dict[str, str]:
    import yaml
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    files = {}
    for row in board:
        dataset_id, revision = hub_dataset(row)
        for metric in (m for m in ACCURACIES if row[m] is not None):
            notes = (
                f"zoomeval {row['zoomeval']}: {METRICS[metric]} on {row['dataset']} / {row['variant']} / "
                f"{row['label_set']}, {row['n_images']} images; key sha256 {row['key_sha256']}; seal sha256 "
                f"{seal}"
            )
            entry = EvalResultEntry(
                dataset_id=dataset_id,
                task_id=metric,
                value=round(row[metric], 4),
                dataset_revision=revision,
                date=options["date"],
                notes=notes,
                source_url=options.get("source_url"),
                source_name="zoomeval" if options.get("source_url") else None,
            )
            name = f"hf/{row['model']}/.eval_results/{scored(row)}-{row['variant']}-{metric}.yaml"
            files[name] = yaml.safe_dump(eval_result_entries_to_yaml([entry]), sort_keys=False)
    return files


def _timm(board: Sequence[dict[str, Any]], layout: Layout) -> dict[str, str]:
    standard = [r for r in board if r["variant"] == "original" and r["acc_standard"] is not None]
    if not standard:
        raise ValueError("--format timm: the study has no standard evaluation to export")
    files = {}
    for name in sorted({scored(r) for r in standard}):
        rows = [r for r in standard if scored(r) == name]
        architectures = [r["architecture"] for r in rows]
        if len(set(architectures)) == len(architectures):
            files[f"timm/results-{name}.csv"] = csv_text(TIMM_COLUMNS, timm_rows(rows, name, layout))
            continue
        for row in rows:  # one architecture under two entries (another normalisation): a CSV each, as timm joins
            files[f"timm/results-{name}.{row['model']}.csv"] = csv_text(TIMM_COLUMNS, timm_rows([row], name, layout))
    return files


def _eee(
    directory: Path, board: Sequence[dict[str, Any]], seal: str, options: dict[str, Any], layout: Layout
) -> dict[str, str]:
    files = {}
    for row in board:
        samples = samples_path(row)
        lines = instance_lines(directory, row, layout)
        text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
        files[f"eee/{samples}"] = text
        record = aggregate_record(row, seal, options, samples, text, len(lines))
        aggregate = f"eee/{samples.removesuffix('_samples.jsonl')}.json"
        files[aggregate] = json.dumps(record, indent=2, sort_keys=True) + "\n"
    return files


def core_files(directory: Path, layout: Layout = LAYOUT) -> list[Path]:
    """The study's files a bundle carries so that it verifies as the study does: its index, each result's metrics and
    inputs, the manifests, label files and mask files of its datasets (paths relative to ``directory``)."""
    from zoomeval.analysis.label_sets import LABEL_SETS
    from zoomeval.study.verified import read_study

    results, problems = read_study(directory, layout)
    if problems:
        raise ValueError(problems[0])
    found = {Path(layout.path("study_index"))}
    for result in results:
        key = result.entry.key
        found |= {Path(result.entry.path), *(p.relative_to(directory) for p in result.inputs.values())}
        found.add(Path(layout.path("manifest", dataset=key["dataset"])))
        if labels_file := LABEL_SETS[key["label_set"]].labels_file:
            found.add(Path(layout.path("labels", dataset=key["dataset"], labels_file=labels_file)))
        found |= {p.relative_to(directory) for p in directory.glob(layout.glob("masks", dataset=key["dataset"]))}
    return sorted(found)


def calendar_date(day: str) -> str:
    """``day`` if it is a calendar date written YYYY-MM-DD, else refused naming --date (date.fromisoformat also reads
    20240101 and ISO week dates, 2024-W01-1, which it writes back otherwise)."""
    with contextlib.suppress(ValueError):
        if Date.fromisoformat(day).isoformat() == day:
            return day
    raise ValueError(f"--date {day!r}: not a calendar date written YYYY-MM-DD")


def write_bundle(directory: Path, out: Path, fmt: str, options: dict[str, Any], layout: Layout = LAYOUT) -> Path:
    """Export a study into the bundle folder ``out`` (which must not exist yet); returns its export.json."""
    if os.path.lexists(out):  # a symlink too, even to nothing
        raise ValueError(f"-o {out}: exists; give a new folder for the bundle")
    day = Date.today().isoformat() if options.get("date") is None else calendar_date(options["date"])
    options = {"study": directory.resolve().name, "date": day, "source_url": options.get("source_url")}
    files = exported_files(directory, fmt, options, layout)
    for relative in core_files(directory, layout):
        link_or_copy(directory / relative, out / relative)
    for name, text in files.items():
        write_text(out / name, text)
    board = leaderboard(study_rows(directory, options["study"], layout=layout)[0])
    manifest = {
        "kind": "export",
        "schema_version": EXPORT_SCHEMA_VERSION,
        "zoomeval": __version__,
        "format": fmt,
        "options": options,
        "results_root": layout.root,
        "seal_sha256": sha256_file(directory / layout.path("study_index")),
        "keys": {row["model"] + "/" + scored(row) + "/" + row["variant"]: row["key_sha256"] for row in board},
        "files": {name: sha256_file(out / name) for name in sorted(files)},
    }
    write_json(out / BUNDLE, manifest)
    return out / BUNDLE


def check_bundle(directory: Path, layout: Layout = LAYOUT) -> None:
    """For a bundle (a folder with export.json): its exported files must be the ones the verified study in it gives
    with the recorded options, byte for byte; refused naming the first that is not. A study folder passes as it is."""
    path = directory / BUNDLE
    if not path.is_file():
        return
    manifest = read_json(path)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or manifest.get("kind") != "export":
        raise ValueError(f"{path}: expected a JSON object with kind 'export' and its files (zoomeval export)")
    expected = exported_files(directory, str(manifest.get("format")), dict(manifest.get("options") or {}), layout)
    for name in sorted(set(expected) | set(files)):
        file = directory / name
        text = file.read_text() if name in files and file.is_file() else None
        if text != expected.get(name):
            why = "missing or extra" if text is None or name not in expected else "its content differs"
            raise ValueError(f"{file}: not the export the verified study in {directory} gives ({why}); export it again")
