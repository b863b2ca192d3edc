"""What each table leaves out, written the same way by every table: per row the images of its dataset left out as
bad and those its label set does not score (``n_bad``, ``n_unscored``), and why (``left_out``), as columns
appended to the CSV and the Markdown, and a note under the Markdown table. Tables whose columns are datasets
(Table 1, Table 5) append ``n_bad:<dataset>`` and ``n_unscored:<dataset>`` per dataset and one ``left_out``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zoomeval.core.layout import Layout
from zoomeval.core.left_out import LeftOut

LEFT_OUT_COLUMNS = ["n_bad", "n_unscored", "left_out"]
#: What a row says when what it left out was not recorded (a metrics file older than schema 4).
NOT_RECORDED = "not recorded (metrics written before schema 4; re-run the analysis)"


def why(left: LeftOut | None, layout: Layout) -> str:
    """``1 bad (1 unreadable, listed in results/datasets/d/bad_images.csv) and 3 not scored (no ReaL label)``, or
    ``none``; the bad images' file is the one under ``layout``'s root (a limited run's own)."""
    if left is None:
        return NOT_RECORDED
    parts = []
    if left.n_bad:
        kinds = ", ".join(f"{n} {kind}" for kind, n in left.bad.items())
        parts.append(f"{left.n_bad} bad ({kinds}, listed in {layout.path('bad_images', dataset=left.dataset)})")
    if left.unscored is None:
        parts.append("not scored: " + NOT_RECORDED)
    elif left.n_unscored:
        parts.append(f"{left.n_unscored} not scored ({', '.join(left.unscored)})")
    return " and ".join(parts) or "none"


def _counts(left: LeftOut | None) -> list[str]:
    if left is None:
        return ["", ""]
    return [str(left.n_bad), "" if left.n_unscored is None else str(left.n_unscored)]


def append_left_out(
    header: Sequence[str], rows: Sequence[Sequence[str]], lefts: Sequence[LeftOut | None], layout: Layout
) -> tuple[list[str], list[list[str]]]:
    """The table with :data:`LEFT_OUT_COLUMNS` appended: ``lefts[i]`` is what row ``i`` leaves out."""
    return [*header, *LEFT_OUT_COLUMNS], [
        [*row, *_counts(left), why(left, layout)] for row, left in zip(rows, lefts, strict=True)
    ]


def append_left_out_by_dataset(
    header: Sequence[str], rows: Sequence[Sequence[str]], lefts: Mapping[str, LeftOut | None], layout: Layout
) -> tuple[list[str], list[list[str]]]:
    """The table with ``n_bad:<d>`` and ``n_unscored:<d>`` per dataset ``d`` of ``lefts`` and one ``left_out``
    appended, the same on every row (for tables whose columns are datasets)."""
    columns = [f"{c}:{d}" for d in lefts for c in LEFT_OUT_COLUMNS[:2]]
    cells = [cell for left in lefts.values() for cell in _counts(left)] + [_joined(lefts, layout)]
    return [*header, *columns, "left_out"], [[*row, *cells] for row in rows]


def _joined(lefts: Mapping[str, LeftOut | None], layout: Layout) -> str:
    return "; ".join(f"{d}: {why(left, layout)}" for d, left in lefts.items())


def left_out_note(lefts: Mapping[str, LeftOut | None], layout: Layout) -> str:
    """The Markdown note of a table: what it leaves out of each dataset (``lefts``: by the name its rows give; the
    bad images' files: ``layout``'s)."""
    return (
        f"Images left out (columns n_bad, n_unscored, left_out; bad images are unreadable, have no 8-bit RGB "
        f"mapping, differ in size from their annotation or exceed max_resized_pixels): "
        f"{_joined(lefts, layout)}."
    )
