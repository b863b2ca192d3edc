"""What a table's numbers leave out of a dataset, and why: the images left out as bad when its manifest was built
(by kind; each is listed with its reason in ``results/datasets/<dataset>/bad_images.csv``) and the images its
label set does not score (no ReaL label, not annotated by Shankar et al., ...).

The analysis, the hard sets, the tta table and the browser read the bad images from ``bad_images.csv`` and count
the images their label set leaves out; every table writes the result with :mod:`zoomeval.report.left_out`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LeftOut:
    """The images of ``dataset`` (a manifest's) that a row's numbers leave out."""

    dataset: str
    #: kind -> images left out as bad (see :func:`zoomeval.core.images.bad_kind`)
    bad: Mapping[str, int] = field(default_factory=dict)
    #: reason -> images of the manifest the label set does not score; None: not known (an older metrics file)
    unscored: Mapping[str, int] | None = field(default_factory=dict)

    @property
    def n_bad(self) -> int:
        return sum(self.bad.values())

    @property
    def n_unscored(self) -> int | None:
        return None if self.unscored is None else sum(self.unscored.values())

    def document(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "bad": dict(self.bad),
            "unscored": None if self.unscored is None else dict(self.unscored),
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> LeftOut:
        return cls(document["dataset"], dict(document["bad"]), document["unscored"])


def left_out(dataset: str, bad: Mapping[str, int], n_records: int, n_scored: int, reason: str) -> LeftOut:
    """What is left out of a manifest of ``n_records`` images (``bad``: its bad images by kind,
    :func:`zoomeval.core.images.bad_kinds`) when ``n_scored`` of them are scored; ``reason``: why the label set
    leaves the others out."""
    unscored = {reason: n_records - n_scored} if n_records > n_scored else {}
    return LeftOut(dataset, dict(bad), unscored)
