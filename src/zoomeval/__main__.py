"""``python -m zoomeval``: the ``zoomeval`` command (:mod:`zoomeval.cli`)."""

from zoomeval.cli import main

raise SystemExit(main())
