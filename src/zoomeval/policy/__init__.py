"""A fitted label-free zoom policy as a file: the document (declared once), its export from a study, the
test-time wrapper ZoomTTA and ``zoomeval predict`` on image files."""
