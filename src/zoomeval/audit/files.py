"""One file of a study audited (:mod:`zoomeval.audit.study`): its sampled rows' images found by content, its model
loaded from its recorded entry with the recorded weights, the rows recomputed and each compared with what is stored
(:func:`row_problems`), within the tolerance of :mod:`zoomeval.audit.sample`."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from zoomeval.audit.sample import Audited, Auditor, Finders, real_path, sample_rows, tolerance, within
from zoomeval.core.checksums import sha256_file
from zoomeval.study.verified import zoomeval_metadata


def audit_file(directory: Path, kind: str, model: str, path: Path, auditor: Auditor, finders: Finders) -> Audited:
    """Audit ``path`` (a ``predictions`` or ``standard`` file of ``model``): its sampled rows recomputed and compared;
    a file that cannot be audited at all (no per-image sha256, no masks, other weights) is ``refused``."""
    import polars as pl

    from zoomeval.core.devices import resolve_device

    name = path.relative_to(directory).as_posix()
    out = Audited(name, kind, model)
    try:
        meta, table = zoomeval_metadata(path), pl.read_parquet(path)
        out.rows = table.height
        numbers = sample_rows(table.height, auditor.sample, int(auditor.seed or 0), name).tolist()
        picked = [{**row, "index": k} for k, row in zip(numbers, table[numbers].to_dicts(), strict=True)]
        device = resolve_device(auditor.device, "--device").type
        out.tolerance = tolerance((meta["precision"], str(meta.get("device") or "cpu")), (auditor.precision, device))
        rows, missing = _sampled(meta, picked, finders)
        out.mismatches += missing
        logits = _recompute(directory, kind, meta, [r for r in rows if r["record"] is not None], auditor)
    except (ValueError, OSError, KeyError) as exc:
        out.refused = " ".join(str(exc).split())
        return out
    classes = np.arange(1000) if meta.get("class_indices") is None else np.asarray(meta["class_indices"])
    found = [r for r in rows if r["record"] is not None]
    for row, z in zip(found, logits, strict=True):
        problems, tie = row_problems(row, z, classes, out.tolerance)
        out.ties += tie
        out.mismatches += [f"{_where(row)}: {'; '.join(problems)}"] if problems else []
    out.checked = len(rows)
    return out


def _where(row: dict[str, Any]) -> str:
    transform = f" LOC:{row['row']}_{row['col']}_Size:{row['scale']}" if "scale" in row else ""
    return f"row {row['index']}, image {row['image_id']}{transform}"


def _sampled(
    meta: dict[str, Any], rows: list[dict[str, Any]], finders: Finders
) -> tuple[list[dict[str, Any]], list[str]]:
    """The sampled rows (each with its ``index`` in the file), each given its image's record (its path where the
    image was found by content; None where it was not, listed as a mismatch)."""
    finder = finders[meta["dataset"]]
    where = "in your --images folders" if finders.auditor.images else "(give your copy of the dataset with --images)"
    missing = []
    for row in rows:
        record = finder.records.get(row["image_id"])
        found = finder.find(record) if record is not None else None
        row["record"] = None if found is None else replace(record, path=str(found))
        if record is None:
            missing.append(f"{_where(row)}: the image is not in the manifest")
        elif found is None:
            missing.append(f"{_where(row)}: the image with sha256 {record.sha256[:12]} was not found {where}")
    return rows, missing


def _recompute(
    directory: Path, kind: str, meta: dict[str, Any], rows: list[dict[str, Any]], auditor: Auditor
) -> np.ndarray:
    """The recomputed logits of ``rows``, by the model the file's metadata records (refused unless its weights have
    the recorded sha256)."""
    from zoomeval.inference.classifier import Classifier
    from zoomeval.inference.recompute import audit_settings, standard_logits, zoom_logits

    spec, weights, head = _weights(directory, meta["model"], auditor)
    settings = audit_settings(meta, auditor.device, auditor.precision, auditor.threads)
    classes = meta.get("class_indices")
    if kind == "standard":  # torchvision's transforms: imported only for a standard-evaluation file
        from zoomeval.inference.standard_eval import standard_classifier

        loaded = _loaded(replace(spec, mean=None, std=None), weights, head)
        classifier, transform = standard_classifier(spec, settings, classes, weights, head, loaded)
        logits = standard_logits(classifier, transform, [r["record"] for r in rows])
    else:
        classifier = Classifier(spec, settings, classes, weights, loaded=_loaded(spec, weights, head), head=head)
        wanted = [(r["record"], r["scale"], r["row"], r["col"]) for r in rows]
        logits = zoom_logits(classifier, wanted, meta["variant"], _masks(directory, meta, auditor), meta["crop_size"])
    recorded = meta["model"].get("weights_sha256")
    if classifier.weights_sha256 != recorded:
        raise ValueError(
            f"model {spec.name!r}: its weights here have sha256 {classifier.weights_sha256}, not the "
            f"{recorded} the file records; give the study's weights (--resources)"
        )
    return logits


#: The models an audit loaded, by entry, weights and head: a study's files of one model share one load (and so do the
#: studies of one leaderboard). Each load checked the weights' sha256 as every load does.
_LOADED: dict[str, Any] = {}


def _loaded(spec: Any, weights: Path | None, head: Path | None) -> Any:
    from zoomeval.inference.models import load_model

    key = json.dumps([spec.name, spec.entry(), str(weights), str(head)], sort_keys=True, default=str)
    if key not in _LOADED:
        _LOADED[key] = load_model(spec, weights, head)
    return _LOADED[key]


def _weights(directory: Path, model: dict[str, Any], auditor: Auditor) -> tuple[Any, Path | None, Path | None]:
    """The recorded entry of ``model`` (:func:`zoomeval.inference.recorded.recorded_model`: nothing it records becomes
    a path or a download), its weights folder under the auditor's resources (a library's tag fetched there if
    missing, as the workflow's fetch_weights job would) and the study's derived head file, if its source has one."""
    from zoomeval.inference.models import head_name
    from zoomeval.inference.recorded import recorded_model

    resources = str(auditor.resources or directory / "resources")
    spec, weights = recorded_model(model, resources, fetch=True, where="its recorded model")
    head = head_name(spec, resources)
    return spec, weights, directory / auditor.layout.path("zero_shot_head", head=head) if head else None


def _masks(directory: Path, meta: dict[str, Any], auditor: Auditor) -> dict[str, bytes] | None:
    """The masks a masked variant's predictions used, found among the study's mask files by the recorded sha256."""
    from zoomeval.masks.boxes import read_masks

    if meta["variant"] == "original":
        return None
    wanted = meta.get("masks_sha256")
    if not wanted:
        raise ValueError(
            f"variant {meta['variant']}: the predictions record no masks_sha256 (an older zoomeval), so "
            "the masks they used cannot be found; re-run them"
        )
    study = real_path(directory)
    for candidate in sorted(directory.glob(auditor.layout.glob("masks", dataset=meta["dataset"]))):
        # a mask file that is a link out of the study, or no regular file (a FIFO, a device), is not read
        if within(candidate, [study]) is not None and candidate.is_file() and sha256_file(candidate) == wanted:
            return read_masks(candidate)
    raise ValueError(
        f"variant {meta['variant']}: no mask file of dataset {meta['dataset']} has the sha256 "
        f"{wanted[:12]} its predictions record"
    )


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-softmax of a vector, in float64."""
    z = logits.astype(np.float64) - float(np.max(logits))
    return z - math.log(float(np.exp(z).sum()))


def row_problems(
    stored: dict[str, Any], logits: np.ndarray, classes: np.ndarray, delta: float
) -> tuple[list[str], bool]:
    """What differs beyond ``delta`` (log-probability) between one stored row and its recomputed logits (over all
    1000 classes; ``classes``: the scored class set), and whether the row is a tie: a stored top-1 other than the
    recomputed one, within ``delta`` of it."""
    problems, tie = [], False
    checks = [("top-1", classes, "pred")] + (
        [] if len(classes) == len(logits) else [("top-1 over all classes", np.arange(len(logits)), "pred_full")]
    )
    for what, scored, column in checks:
        lp, stored_class = log_softmax(logits[scored]), int(stored[column])
        at = np.flatnonzero(scored == stored_class)
        if not at.size:
            problems.append(f"{what} {stored_class} stored, which is not in the class set")
            continue
        gap, top = float(lp.max() - lp[at[0]]), int(scored[int(lp.argmax())])
        if top != stored_class and gap > delta:
            problems.append(f"{what} {stored_class} stored, {top} recomputed ({gap:.3g} above it in log-probability)")
        tie |= top != stored_class and gap <= delta
        if column == "pred":
            problems += _confidence(stored["conf"], float(lp[at[0]]), stored_class, delta)
    if stored.get("top5") is not None:
        problems += _top5(stored["top5"], stored["top5_logit"], logits, delta)
    return problems, tie and not problems


def _confidence(conf: Any, recomputed: float, stored_class: int, delta: float) -> list[str]:
    if isinstance(conf, float | int) and conf > 0 and abs(math.log(conf) - recomputed) <= delta:
        return []
    return [f"confidence {conf} stored for class {stored_class}, {math.exp(recomputed):.4g} recomputed"]


def _top5(classes: list[int], stored: list[float], logits: np.ndarray, delta: float) -> list[str]:
    """Each stored top-5 class must be among the recomputed top 5 up to ``delta`` and its logit within half of it
    (each logit of either run is within half of the tolerance of exact arithmetic)."""
    fifth = float(np.sort(logits)[-5])
    wrong = [
        c
        for c, v in zip(classes, stored, strict=True)
        if abs(v - float(logits[c])) > delta / 2 or float(logits[c]) < fifth - delta
    ]
    return (
        [f"top5 classes {wrong} stored, recomputed logits {[round(float(logits[c]), 3) for c in wrong]}"]
        if wrong
        else []
    )
