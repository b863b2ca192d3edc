"""``zoomeval leaderboard --format timm``: the standard evaluation of verified studies in timm's results-CSV columns
(``model`` as timm's results name it, so that the file joins timm's published ``results-imagenet.csv`` by ``model``).

timm's ``validate.py`` writes top1 and top5 in percent, their errors (100 - accuracy), ``param_count`` in millions
(2 decimals; its published tables write 1,000 M and more with a thousands separator, ``"1,014.45"``), ``img_size``,
``crop_pct`` and ``interpolation``; its published tables show accuracies with 3 decimals.
top5 is empty where the standard evaluation was stored without top5 (``inference.store_top5: false``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from zoomeval.analysis.comparability import key_differences
from zoomeval.analysis.label_sets import scored_name
from zoomeval.core.layout import Layout
from zoomeval.study.index import LAYOUT
from zoomeval.study.verified import scored_records

#: timm's results-CSV columns, in validate.py's order, then zoomeval's ``note``: how ``model`` was named, which
#: studies a row merges and what keeps two rows of one name apart.
TIMM_COLUMNS = (
    "model",
    "top1",
    "top1_err",
    "top5",
    "top5_err",
    "param_count",
    "img_size",
    "crop_pct",
    "interpolation",
    "note",
)
#: The hash that torch.hub's convention puts in a weights file's name (the first digits of its sha256).
HUB_HASH = re.compile(r"-([0-9a-f]{8,64})\.(?:pth|pt|bin|safetensors)$")


@cache
def republished() -> dict[str, str]:
    """The timm pretrained tags whose config's ``url`` names its file by torch.hub's hash (torchvision's files that
    timm republishes: ``resnet50.tv_in1k`` is ``resnet50-0676ba61.pth``), hash -> ``arch.tag``."""
    import timm
    from timm.models import get_pretrained_cfg

    found = {}
    for name in timm.list_pretrained():
        cfg = get_pretrained_cfg(name)
        if cfg is not None and (match := HUB_HASH.search(cfg.url or "")):
            found.setdefault(match.group(1), name)
    return found


def timm_name(spec: dict[str, Any]) -> tuple[str, str]:
    """The name timm's results give the model of a prediction file's ``model`` metadata, and a note where its weights
    are not timm's file of that name: a timm pretrained tag is itself; the embedded weights are named for the timm
    tag whose data config evaluates them; a weights file whose sha256 begins with the hash in a timm pretrained
    config's file name is that tag; anything else keeps the config's name."""
    from zoomeval.inference.sources.embedded import TIMM_NAME

    sha256, arch_tag = spec.get("weights_sha256") or "", f"{spec['architecture']}.{_short(spec['weights'])}"
    if spec.get("source") == "timm" and spec.get("checkpoint") is None:
        return arch_tag, ""
    if spec.get("source") == "embedded":
        return TIMM_NAME, (
            f"weights {spec['weights']} (sha256 {sha256[:12]}), not timm's file of {TIMM_NAME}; "
            "evaluated with its data config"
        )
    same = [name for digits, name in republished().items() if sha256.startswith(digits)]
    if same:
        return same[0], f"{spec.get('source')} {arch_tag}: the file timm republishes as {same[0]}"
    return spec["name"], f"{spec.get('source')} {arch_tag}: not weights timm publishes; named as in the config"


def _short(value: str) -> str:
    return value[:12] if len(value) == 64 else value  # a local file's sha256


def timm_rows(board: Sequence[dict[str, Any]], dataset: str | None, layout: Layout = LAYOUT) -> list[list[str]]:
    """The rows of the standard evaluations of one scored dataset (``dataset``, or the only one there is), best
    top1 first, ``model`` named as timm's results name it (:func:`timm_name`). Rows of one name and one
    comparability key (the same model in comparable studies) are one row, or refused where their numbers differ;
    rows of one name and other keys are kept apart, each noting the key fields that separate it. ``layout``: the one
    the studies were read in."""
    rows = [r for r in board if r["variant"] == "original" and r["acc_standard"] is not None]
    names = sorted({scored_name(r["dataset"], r["label_set"]) for r in rows})
    if dataset is None and len(names) > 1:
        raise ValueError(f"--dataset: the studies evaluate {', '.join(names)}; name one (timm's CSVs hold one each)")
    chosen = dataset if dataset is not None else (names[0] if names else None)
    rows = [r for r in rows if scored_name(r["dataset"], r["label_set"]) == chosen]
    if not rows:
        raise ValueError(f"--dataset {chosen}: no standard evaluation of it; expected one of {names}")
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], list[str]]]] = {}
    for row in rows:
        name, note = timm_name(row["source"][1].meta["model"])
        groups.setdefault((name, row["key_sha256"]), []).append((row, [name, *_numbers(row, layout), note]))
    out = [_merged(members) + [_apart(key, groups)] for key, members in groups.items()]
    out.sort(key=lambda cells: (-float(cells[1]), cells[0]))
    return [[*cells[:-2], "; ".join(n for n in cells[-2:] if n)] for cells in out]


def _merged(members: Sequence[tuple[dict[str, Any], list[str]]]) -> list[str]:
    """One row for the rows of one name and key; refused where their numbers differ."""
    (first, cells), studies = members[0], sorted({row["study"] for row, _ in members})
    for row, other in members[1:]:
        if other[1:-1] != cells[1:-1]:
            raise ValueError(
                f"model {cells[0]}: studies {first['study']} and {row['study']} share its comparability "
                f"key but give other numbers (top1 {cells[1]}, {other[1]}); give one of them"
            )
    merged = f"the same numbers in studies {', '.join(studies)}" if len(studies) > 1 else ""
    return [*cells[:-1], "; ".join(n for n in (cells[-1], merged) if n)]


def _apart(key: tuple[str, str], groups: dict[tuple[str, str], list[tuple[dict[str, Any], list[str]]]]) -> str:
    """What keeps this row apart from the other rows of its name: each one's key fields that differ."""
    mine = groups[key][0][0]
    return "; ".join(
        f"kept apart from study {other[0][0]['study']}'s row by "
        f"{', '.join(key_differences(mine['key'], other[0][0]['key']))}"
        for (name, digest), other in groups.items()
        if name == key[0] and digest != key[1]
    )


def _numbers(row: dict[str, Any], layout: Layout) -> list[str]:
    directory, result = row["source"]
    top5 = _top5(directory, result, layout)
    return [
        _pct(row["acc_standard"]),
        _pct(100 - row["acc_standard"]),
        _pct(top5),
        _pct(None if top5 is None else 100 - top5),
        _number(row["param_count"], ",.2f"),
        str(result.geometry.get("img_size", row["img_size"])),
        _number(row["crop_pct"], ".3f"),
        str(row["interpolation"] or ""),
    ]


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
