"""From a config input to a local path, in the steps the workflow runs as jobs of their own.

An input is a local path (string or ``{path: ...}``), a URL (``{url: ..., sha256: ...}``) or a Hugging Face dataset
(``{hf: owner/name, pattern: "*.parquet"}``). :func:`plan` says, without reading anything but a local file's first
bytes, which jobs it takes (the workflow's rules are built from it):

* a URL is downloaded (:func:`fetch`, the ``fetch_url`` job) to ``<resources>/<owner>/<file name>``, with resume,
  retries, a completeness check and the checksum (:mod:`zoomeval.datasets.download`);
* a Hugging Face dataset is downloaded through huggingface_hub's cache and placed in
  ``<resources>/<owner>/<key>.hf/`` (:func:`fetch`, the ``fetch_hf`` job; hard links where the file system allows),
  with the commit its files came from (:func:`hub_revision`; the manifest and the comparability key record it);
* an archive (.tar, .tar.gz, .tgz, .zip; a local file by its content, a download by its name) is extracted safely
  (:func:`extract`, the ``extract_archive`` job) into ``<resources>/<owner>/<key>.extracted/``, in a folder named
  after its sha256: ``<archive name>.<sha256>.d``. The job that reads it (:func:`local_path`) hashes the archive
  again (remembered while the file is unchanged, see :mod:`zoomeval.core.checksums`) and refuses an extraction of
  other content, so a replaced archive is never read from an older extraction.

An archive holding a single top-level folder resolves to that folder, unless that folder is itself a class folder
(a wnid or a class index).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fnmatch import fnmatch
from pathlib import Path

from zoomeval.core import checksums
from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import Config, ConfigError, InputSpec
from zoomeval.core.io import link_or_copy, read_json, write_json
from zoomeval.datasets import archives
from zoomeval.datasets.download import download, hf_snapshot
from zoomeval.datasets.multilabel import uses_annotations

#: Folder names that are classes of a dataset (a wnid, or an ImageNet-V2 class index), never a wrapper folder.
CLASS_FOLDER = re.compile(r"n\d{8}|\d+")


@dataclass(frozen=True)
class Input:
    """One config input and the files the workflow makes for it (paths relative to the working directory)."""

    #: the dataset (or ``sam``) and its key, and the config key for messages (``datasets.x.root``)
    owner: str
    name: str
    key: str
    spec: InputSpec
    #: the download (a file for a URL, a folder for a Hugging Face dataset)
    fetched: str | None = None
    #: the archive to extract (the download or a local file) and the folder it is extracted into
    archive: str | None = None
    extracted: str | None = None
    password: str | None = None
    password_key: str = "password"


def plan(
    owner: str, key: str, spec: InputSpec, resources: str, password: str | None = None, unpack: bool = True
) -> Input:
    """The jobs input ``key`` of ``owner`` (a dataset, ``sam``, or ``labels`` for the top-level ``multilabel``) takes;
    ``unpack=False`` keeps archives as files (a torch checkpoint is itself a zip archive)."""
    config_key = {"sam": f"sam.{key}", "labels": key}.get(owner, f"datasets.{owner}.{key}")
    folder = f"{resources}/{owner}"
    item = Input(owner, key, config_key, spec, password=password, password_key=f"datasets.{owner}.password")
    if spec.hf:
        return replace(item, fetched=f"{folder}/{key}.hf")
    if spec.url:
        item = replace(item, fetched=f"{folder}/{spec.file_name}")
        archive = item.fetched if spec.file_name.lower().endswith(archives.ARCHIVE_SUFFIXES) else None
    else:
        path = Path(str(spec.path))
        archive = spec.path if path.is_file() and archives.is_archive(path) else None
    if unpack and archive:
        return replace(item, archive=archive, extracted=f"{folder}/{key}.extracted")
    return item


def fetch(item: Input) -> None:
    """Download a URL or Hugging Face input to ``item.fetched`` (the ``fetch_url``/``fetch_hf`` job)."""
    spec, dest = item.spec, Path(str(item.fetched))
    if spec.url:
        download(spec.url, dest, spec.sha256)
        return
    snapshot = hf_snapshot(str(spec.hf), spec.pattern, spec.revision, dest=dest)
    # offline, huggingface_hub answers the whole cached snapshot: keep the pattern's files, as it does online
    files = [p.relative_to(snapshot) for p in sorted(snapshot.rglob("*")) if p.is_file()]
    found = [f for f in files if fnmatch(f.as_posix(), spec.pattern or "*")]
    if not found:
        raise ValueError(f"{item.key}: no file of {spec.hf} matches {spec.pattern!r}; check the pattern")
    for name in found:
        link_or_copy((snapshot / name).resolve(), dest / name)
    write_json(dest / HUB_REVISION, {"hf": spec.hf, "revision": _commit(snapshot, str(spec.hf))})


#: The file in a Hugging Face input's folder that records the commit its files came from (hidden: adapters skip it).
HUB_REVISION = ".hub_revision.json"


def _commit(snapshot: Path, repo: str) -> str:
    """The commit of a huggingface_hub snapshot folder (``.../snapshots/<commit>``), whatever revision was asked."""
    if not re.fullmatch(r"[0-9a-f]{40}", snapshot.name):
        raise ValueError(
            f"{repo}: huggingface_hub gave {snapshot}, not a snapshots/<commit> folder, so the revision "
            "read cannot be recorded; use huggingface_hub's own cache (HF_HOME), not a local_dir copy"
        )
    return snapshot.name


def hub_revision(item: Input) -> str | None:
    """``owner/name@commit`` of a fetched Hugging Face input (:func:`fetch` recorded it); None for other inputs."""
    if not item.spec.hf:
        return None
    path = Path(str(item.fetched)) / HUB_REVISION
    if not path.is_file():
        raise ValueError(
            f"{item.key}: {path} is missing, so the commit its files came from is unknown (fetched by an "
            "older zoomeval); fetch it again: rerun with --forcerun fetch_hf"
        )
    recorded = read_json(path)
    return f"{recorded['hf']}@{recorded['revision']}"


def _pinned(item: Input, path: Path, digest: str) -> str:
    """``digest``, the sha256 of ``path``, after checking it against the config's where it pins one."""
    if item.spec.sha256 and digest != item.spec.sha256:
        raise ValueError(
            f"{item.key}: {path} has sha256 {digest}, not the config's {item.spec.sha256}; point the key at the "
            "right file or update its sha256"
        )
    return digest


def _extraction(archive: Path, folder: Path, digest: str) -> Path:
    return folder / f"{archive.name[:100]}.{digest}.d"


def extract(item: Input) -> None:
    """Extract ``item.archive`` into ``item.extracted``, named after its content (the ``extract_archive`` job)."""
    archive, folder = Path(str(item.archive)), Path(str(item.extracted))
    folder.mkdir(parents=True, exist_ok=True)
    target = _extraction(archive, folder, _pinned(item, archive, checksums.sha256(archive, folder)))
    print(f"{item.key}: extracting {archive} into {target}")
    archives.extract(archive, target, item.password, item.password_key)


def local_path(item: Input) -> Path:
    """The local path the adapter reads for ``item``, once fetched and extracted."""
    if item.extracted:
        archive, folder = Path(str(item.archive)), Path(str(item.extracted))
        target = _extraction(archive, folder, _pinned(item, archive, checksums.sha256(archive, folder)))
        if not target.is_dir():
            raise ValueError(
                f"{item.key}: {archive} changed since it was extracted into {folder} (no {target.name} there); "
                "extract it again: rerun with --forcerun extract_archive"
            )
        return _dataset_root(target, archive)
    if item.fetched:
        return Path(item.fetched)
    return _local_file(item)


def _local_file(item: Input) -> Path:
    """A local path, checked against its sha256 where the config pins one."""
    path = Path(str(item.spec.path))
    if not path.exists():
        raise FileNotFoundError(f"{item.key}: {path} does not exist; download it and point the config at it")
    if item.spec.sha256 and not path.is_file():
        raise ValueError(f"{item.key}: {path} is a folder, which a sha256 cannot pin; remove the sha256 or give a file")
    if item.spec.sha256:
        _pinned(item, path, sha256_file(path))
    return path


def local_file_sha256(item: Input, resources: str) -> str | None:
    """The sha256 of a local file input (remembered under ``<resources>/<owner>`` while the file is unchanged), so
    that a file replaced at the same path reruns what reads it; None for a download or a folder."""
    path = Path(str(item.spec.path))
    if item.spec.path is None or not path.is_file():
        return None
    return checksums.sha256(path, Path(resources) / item.owner)


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


def plan_all(config: Config) -> dict[tuple[str, str], Input]:
    """Every input of ``config`` (dataset inputs, the SAM checkpoint, Shankar et al.'s annotations where a label set
    reads them) by ``(owner, key)``; two URLs that would be downloaded to one file are refused."""
    planned = {
        (name, key): plan(name, key, spec, config.resources, dataset.password)
        for name, dataset in config.datasets.items()
        for key, spec in dataset.inputs.items()
    }
    if config.sam is not None:
        planned["sam", "checkpoint"] = plan("sam", "checkpoint", config.sam.checkpoint, config.resources, unpack=False)
    if uses_annotations(config):
        annotations = config.multilabel
        planned["labels", "multilabel"] = plan("labels", "multilabel", annotations, config.resources, unpack=False)
    seen: dict[str, str] = {}
    for item in planned.values():
        if item.fetched and seen.setdefault(item.fetched, item.key) != item.key:
            raise ConfigError(
                f"{item.key}: its URL's file name is that of {seen[item.fetched]}, so both would be downloaded to "
                f"{item.fetched}; the two must be different files with different names"
            )
    return planned
