"""Stage 1: fetch inputs and turn each dataset into a manifest."""

# Registers every adapter in zoomeval.datasets.registry.ADAPTERS.
from zoomeval.datasets import adapters  # noqa: F401
