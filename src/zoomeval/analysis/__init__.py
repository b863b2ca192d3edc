"""Stage 4: scoring prediction files (correctness matrix, covers, metrics) and the object-count statistics."""

# common.smk builds the scored names from this import path; it stays light (no polars, scipy or torch).
from zoomeval.analysis.label_sets import scored_name

__all__ = ["scored_name"]
