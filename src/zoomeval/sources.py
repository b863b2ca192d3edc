"""Turn a dataset input of the config into a local path: a folder, a file, or an archive to extract.

An input is a local path (string or ``{path: ...}``), a URL (``{url: ..., sha256: ...}``, downloaded
with resume and checksum) or a Hugging Face dataset (``{hf: owner/name, pattern: "*.parquet"}``).
Archives (.tar, .tar.gz, .tgz, .zip) are extracted safely once into ``resources/<dataset>/`` and reused
by later runs; an archive holding a single top-level folder resolves to that folder.
"""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path
from typing import Any

from zoomeval.archives import extract
from zoomeval.download import download, hf_snapshot
from zoomeval.models import sha256_file


def resolve(spec: str | dict[str, Any], workdir: Path, unpack: bool = True) -> Path:
    """The local path behind one config input; downloads and extractions go under ``workdir``.

    ``unpack=False`` keeps archives as files: a torch checkpoint is itself a zip archive.
    """
    if isinstance(spec, str):
        spec = {"path": spec}
    if "hf" in spec:
        return hf_snapshot(spec["hf"], spec.get("pattern"), spec.get("revision"))
    if "url" in spec:
        path = download(spec["url"], workdir / Path(spec["url"].split("?")[0]).name, spec.get("sha256"))
    else:
        path = Path(spec["path"])
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist; download it and point the config at it")
        if spec.get("sha256") and path.is_file() and sha256_file(path) != spec["sha256"]:
            raise ValueError(f"{path}: sha256 differs from the config's {spec['sha256']}")
    if unpack and path.is_file() and (tarfile.is_tarfile(path) or zipfile.is_zipfile(path)):
        folder = extract(path, workdir / f"{path.name}.d")
        entries = list(folder.iterdir())
        return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder
    return path
