"""``zoomeval leaderboard DIR...``: study directories and the bundles ``zoomeval export`` wrote, merged into one
board (:mod:`zoomeval.publish.leaderboard`) and written as the leaderboard or as timm's results CSV
(:mod:`zoomeval.publish.timm_results`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoomeval.core.io import csv_text, write_text
from zoomeval.core.layout import Layout
from zoomeval.publish.bundle import check_bundle
from zoomeval.publish.leaderboard import (
    FORMATS,
    RANK_BY,
    check_output,
    leaderboard,
    markdown,
    study_rows,
    with_published,
    write_board,
)
from zoomeval.publish.timm_results import TIMM_COLUMNS, timm_rows
from zoomeval.study.index import LAYOUT


def studies(directories: Sequence[Path]) -> tuple[list[Path], list[str], dict[str, int]]:
    """The distinct study directories (a directory given twice counts once), their names (the folder's, or the path
    where two folders share a name) and how many times each name was given."""
    given = [d.resolve() for d in directories]
    distinct = list(dict.fromkeys(given))
    names = [d.name for d in distinct]
    named = [n if names.count(n) == 1 else str(d) for n, d in zip(names, distinct, strict=True)]
    return distinct, named, {n: given.count(d) for n, d in zip(named, distinct, strict=True)}


def merge(
    directories: Sequence[Path],
    allow_stale: bool = False,
    check: bool = False,
    layout: Layout = LAYOUT,
    auditor: Any = None,
    rank_by: str = RANK_BY[0],
) -> tuple[list[dict[str, Any]], list[str]]:
    """The leaderboard of the studies (each protocol's models ranked by ``rank_by``) and what was left apart (with
    ``allow_stale``; refused otherwise), each study read in ``layout`` (a limited run's own results root) and, with
    ``auditor``, audited here. A bundle that
    ``zoomeval export`` wrote is read as the study it holds, its exported files checked against it
    (:func:`zoomeval.publish.bundle.check_bundle`)."""
    distinct, named, repeated = studies(directories)
    rows, apart = [], []
    for directory, name in zip(distinct, named, strict=True):
        check_bundle(directory, layout)
        found, problems = study_rows(directory, name, allow_stale, check, layout, auditor)
        rows += found
        apart += problems
    if not rows:
        raise ValueError(f"{apart[0]}: no verified result left to rank" if apart else "no study given")
    return leaderboard(rows, repeated, rank_by), apart


def write_merged(
    directories: Sequence[Path],
    path: Path | None,
    board_format: str = "leaderboard",
    dataset: str | None = None,
    allow_stale: bool = False,
    check: bool = False,
    layout: Layout = LAYOUT,
    auditor: Any = None,
    rank_by: str = RANK_BY[0],
) -> tuple[str, list[str]]:
    """Merge the studies into ``path``: the leaderboard (.csv, .md or .html; each protocol's models ranked by
    ``rank_by``) or, with ``board_format`` ``timm``, the timm results CSV of the scored ``dataset``; returns the text
    printed without ``path`` (the Markdown, or the CSV) and what was left apart."""
    timm = board_format == "timm"
    if path is not None:
        check_output(path, (".csv",) if timm else FORMATS)
    board, apart = merge(directories, allow_stale, check, layout, auditor, rank_by)
    if timm:
        text = csv_text(TIMM_COLUMNS, timm_rows(board, dataset, layout))
        if path is not None:
            write_text(path, text)
        return text.rstrip("\n"), apart
    board = with_published(board)
    if path is not None:
        write_board(board, path, apart, rank_by)
    return markdown(board, apart, rank_by), apart
