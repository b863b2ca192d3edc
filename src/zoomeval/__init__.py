"""zoomeval: how much of an image classifier's accuracy depends on framing (zoom) and background."""

from __future__ import annotations

from typing import Any

#: The one declaration of the version (pyproject.toml reads it; CHANGELOG.md has a section for each).
__version__ = "0.2.0"
__all__ = ["Study", "ZoomTTA", "__version__", "compare_studies"]


def __getattr__(name: str) -> Any:
    # zoomeval.Study is imported on first use: importing zoomeval (every job, every DAG build) stays free of polars.
    if name == "Study":
        from zoomeval.study.reader import Study

        return Study
    if name == "compare_studies":
        from zoomeval.publish.compare import compare_studies

        return compare_studies
    if name == "ZoomTTA":
        from zoomeval.policy.tta import ZoomTTA

        return ZoomTTA
    raise AttributeError(f"module 'zoomeval' has no attribute {name!r}")
