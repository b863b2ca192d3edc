"""zoomeval: how much of an image classifier's accuracy depends on framing (zoom) and background."""

__version__ = "0.1.0"
