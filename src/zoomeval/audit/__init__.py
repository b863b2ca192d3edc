"""``zoomeval audit``: a seeded sample of a sealed study's rows recomputed and compared with what its files store."""
