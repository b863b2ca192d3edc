"""A sealed study: its directory (zoomeval init), its index (results/study.json), its results verified
through the index, and zoomeval.Study, which reads them from Python."""
