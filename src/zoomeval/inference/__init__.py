"""Stage 3: every model over every zoom transform of every image."""

# Registers every model source in zoomeval.inference.models.MODEL_SOURCES (none imports torch until it loads).
from zoomeval.inference import sources  # noqa: F401
