"""The browser's page: ``index.html``, its script and style (``assets/``, plain JavaScript and CSS shipped with the
package, no external resources), the ImageNet-1k class names (``assets/classes.js``) and ``catalogue.js``, the
scored datasets the page offers. Each dataset's data (:mod:`zoomeval.browser.data`) and pictures
(:mod:`zoomeval.browser.images`) lie beside it, under ``data/``, ``thumbnails/`` and ``crops/``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from zoomeval import __version__
from zoomeval.browser.data import BROWSER_SCHEMA_VERSION, script
from zoomeval.core.classes import description
from zoomeval.core.io import write_text
from zoomeval.core.layout import relative_to

ASSETS = ("browser.js", "browser.css")


def write_site(out_dir: str | os.PathLike[str], datasets: Sequence[dict[str, object]]) -> None:
    """Write the page into ``out_dir``; ``datasets`` lists each scored dataset's ``name``, ``dataset``,
    ``label_set`` and ``n_images`` (images shown) in the order the page offers them."""
    out = Path(out_dir)
    files = resources.files("zoomeval.browser") / "assets"
    # the page's own files where the layout puts them (index.html's links expect the layout's names)
    write_text(out / relative_to("browser", "browser"), (files / "index.html").read_text())
    assets = out / relative_to("browser_assets", "browser")
    for name in ASSETS:
        write_text(assets / name, (files / name).read_text())
    write_text(assets / "classes.js", script("classes", [description(i) for i in range(1000)]))
    catalogue = {"schema_version": BROWSER_SCHEMA_VERSION, "zoomeval": __version__, "datasets": list(datasets)}
    write_text(out / relative_to("browser_catalogue", "browser"), script("catalogue", catalogue))
