"""Turn a dataset input of the config into a local path: a folder, a file, or an archive to extract.

An input is a local path (string or ``{path: ...}``), a URL (``{url: ..., sha256: ...}``, downloaded
with resume and checksum) or a Hugging Face dataset (``{hf: owner/name, pattern: "*.parquet"}``).
Archives (.tar, .tar.gz, .tgz, .zip) are extracted safely under ``resources/<dataset>/`` into a folder named
after the archive's sha256, so a changed archive is extracted afresh and an unchanged one is reused (its hash
is remembered while the file is unchanged, see :mod:`zoomeval.core.checksums`). An archive holding a single
top-level folder resolves to that folder, unless that folder is itself a class folder (a wnid or a class index).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from zoomeval.core import checksums
from zoomeval.datasets.archives import extract, is_archive
from zoomeval.datasets.download import download, hf_snapshot

#: Folder names that are classes of a dataset (a wnid, or an ImageNet-V2 class index), never a wrapper folder.
CLASS_FOLDER = re.compile(r"n\d{8}|\d+")


def resolve(
    spec: str | dict[str, Any],
    workdir: Path,
    unpack: bool = True,
    *,
    key: str = "input",
    password: str | None = None,
    password_key: str = "password",
) -> Path:
    """The local path behind one config input; downloads and extractions go under ``workdir``.

    ``unpack=False`` keeps archives as files: a torch checkpoint is itself a zip archive. ``password`` opens an
    encrypted zip. ``key`` and ``password_key`` name the config keys in messages.
    """
    if isinstance(spec, str):
        spec = {"path": spec}
    if "hf" in spec:
        return hf_snapshot(spec["hf"], spec.get("pattern"), spec.get("revision"))
    expected = spec.get("sha256")
    if "url" in spec:
        path = download(spec["url"], workdir / Path(spec["url"].split("?")[0]).name, expected, hash_dir=workdir)
    else:
        path = Path(spec["path"])
        if not path.exists():
            raise FileNotFoundError(f"{key}: {path} does not exist; download it and point the config at it")
    if not path.is_file():
        if expected:
            raise ValueError(f"{key}: {path} is a folder, which a sha256 cannot pin; remove the sha256 or give a file")
        return path
    archive = unpack and is_archive(path)
    if expected or archive:
        digest = checksums.sha256(path, workdir)
        if expected and digest != expected.lower():
            raise ValueError(
                f"{key}: {path} has sha256 {digest}, not the config's {expected}; point the key at the right file "
                "or update its sha256"
            )
    if not archive:
        return path
    # The folder is named after the content: a changed archive never reuses an older extraction.
    target = workdir / f"{path.name[:100]}.{digest}.d"
    if not target.exists():
        print(f"{key}: extracting {path} (sha256 {digest}) into {target}")
    return _dataset_root(extract(path, target, password, password_key), path)


def _dataset_root(folder: Path, archive: Path) -> Path:
    """``folder`` or, if it holds only one folder that is not a class folder, that folder."""
    entries = list(folder.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        return folder
    only = entries[0]
    if CLASS_FOLDER.fullmatch(only.name):
        print(f"{archive}: its only top-level folder {only.name!r} is a class folder, so the dataset root is {folder}")
        return folder
    print(f"{archive}: holds one top-level folder {only.name!r}, taken as the dataset root: {only}")
    return only
