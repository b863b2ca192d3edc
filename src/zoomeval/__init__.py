"""zoomeval: how much of an image classifier's accuracy depends on framing (zoom) and background."""

from __future__ import annotations

import importlib
from typing import Any

#: The one declaration of the version (pyproject.toml reads it; CHANGELOG.md has a section for each).
__version__ = "0.2.0"
__all__ = ["Answer", "Study", "ZoomTTA", "__version__", "compare_studies", "load_policy"]
#: Each public name's module and its name there, imported on first use: importing zoomeval (every job, every DAG
#: build) stays free of torch and polars.
_PUBLIC = {
    "Answer": ("zoomeval.policy.tta", "Answer"),
    "Study": ("zoomeval.study.reader", "Study"),
    "ZoomTTA": ("zoomeval.policy.tta", "ZoomTTA"),
    "compare_studies": ("zoomeval.publish.compare", "compare_studies"),
    "load_policy": ("zoomeval.policy.document", "read_policy"),
}


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'zoomeval' has no attribute {name!r}")
    module, attribute = _PUBLIC[name]
    return getattr(importlib.import_module(module), attribute)
