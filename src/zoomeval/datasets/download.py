"""Downloads that resume, retry and verify, and Hugging Face Hub wrappers; every failure says what to do.

:func:`download` writes to ``<dest>.part`` and renames it onto ``dest`` only once the body is complete (its
Content-Length reached, or else a clean end), its sha256 matches where one is given and it is a complete file of
the kind its name says (an archive or a JSON document; see :func:`zoomeval.datasets.archives.check_complete`), so the
final name only ever holds a checked file and a rerun resumes the part. An existing ``dest`` is checked the same
way before it is reused, and fetched again if it fails.

A host that cannot be reached at all (its name does not resolve, it refuses the connection, no route to it:
:func:`unreachable`) fails at once, since no retry within minutes fixes that; a timeout, a reset or a 5xx is retried
with backoff. The message then names the URL (or Hub repo and file), where the file goes and under which name, and
the ways to run offline (:data:`FETCH_ONCE`).
"""

from __future__ import annotations

import errno
import http.client
import logging
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from zoomeval.core.checksums import sha256_file
from zoomeval.datasets.archives import check_complete

log = logging.getLogger(__name__)
_CHUNK = 1 << 20
#: Statuses worth retrying besides every 5xx: request timeout and rate limiting.
_RETRY_STATUSES = frozenset({408, 429})
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")
_UNSATISFIABLE_RANGE = re.compile(r"bytes \*/(\d+)")


#: The offline route every download shares: the workflow's download jobs, run once where there is network.
FETCH_ONCE = (
    "run the workflow's download jobs once on a machine with network (snakemake <targets> --until fetch_url "
    "fetch_hf fetch_weights) and copy its resources folder here"
)
#: Socket errors that say a host cannot be reached (besides a name that does not resolve or a refused connection).
_NO_ROUTE = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL})


class DownloadError(Exception):
    """A download failed; the message names the URL (or Hub file) and how to get the file otherwise."""


class _Transient(Exception):
    """A failure worth retrying; the part file is kept (or deliberately removed) for the next attempt."""


def unreachable(exc: BaseException | None) -> OSError | None:
    """The socket error in ``exc``'s chain (its causes, and urllib's ``reason``) saying that the host cannot be reached:
    a name that does not resolve, a refused connection or no route; None for anything else (a timeout or a reset
    may pass, so it is worth retrying)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for error in (exc, getattr(exc, "reason", None)):
            if isinstance(error, socket.gaierror | ConnectionRefusedError) or (
                isinstance(error, OSError) and error.errno in _NO_ROUTE
            ):
                return error
        exc = exc.__cause__ or exc.__context__
    return None


def cannot_reach(what: str, error: OSError, place: str) -> DownloadError:
    """The error for a host that cannot be reached: ``what`` (the URL or Hub file), the socket error, and ``place``:
    where to put the file by hand and under which name."""
    return DownloadError(
        f"{what}: cannot reach the host ({error}), so it was not retried; is this machine offline? Without network "
        f"here: {place}; or {FETCH_ONCE}"
    )


def download(
    url: str,
    dest: Path,
    sha256: str | None = None,
    retries: int = 4,
    backoff: float = 1.0,
    timeout: float = 60.0,
    *,
    sleep: Callable[[float], None] = time.sleep,
    elsewhere: str = "",
) -> Path:
    """Download ``url`` to ``dest`` and return ``dest``.

    An existing ``dest`` is reused if it matches ``sha256`` (the full hash, or a prefix of it as torch.hub's file
    names carry; None: no check) and is a complete file of its kind. Transient failures (timeouts, resets,
    truncated bodies, 5xx, 408, 429) are retried up to ``retries`` times after ``backoff * 2**attempt`` seconds,
    resuming ``<dest>.part`` with a Range request; a host that cannot be reached fails at once. ``elsewhere``: one
    more place the caller would take the file from (said in the messages).
    """
    dest = Path(dest)
    by_hand = f"download it by hand and put it at {dest} (file name {dest.name}){elsewhere}"
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):  # else a mistyped URL is retried as a network error
        raise DownloadError(f"{url}: not an http(s) URL; check the URL or {by_hand}")
    if dest.exists():
        problem = _problem(dest, dest.name, sha256)
        if problem is None:
            return dest
        print(f"{dest}: {problem}; downloading it again")
        dest.unlink()  # the final name must only ever hold a checked file
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    log.info("downloading %s to %s", url, dest)
    _fetch_with_retries(url, part, timeout, by_hand, [backoff * 2**attempt for attempt in range(retries)], sleep)
    problem = _problem(part, dest.name, sha256)
    if problem is not None:
        part.unlink()  # resuming a wrong body would never fix it
        raise DownloadError(
            f"{url}: {problem}; the download was deleted. The server may have answered an error page or closed the "
            f"connection early: check the URL (and the sha256 if given), then rerun to download it again, or {by_hand}"
        )
    os.replace(part, dest)
    return dest


def _fetch_with_retries(
    url: str, part: Path, timeout: float, by_hand: str, waits: list[float], sleep: Callable[[float], None]
) -> None:
    """:func:`_fetch`, retried after each of ``waits`` seconds while it fails in a way worth retrying."""
    for attempt in range(len(waits) + 1):
        try:
            _fetch(url, part, timeout, by_hand)
            return
        except _Transient as exc:
            if (error := unreachable(exc)) is not None:
                raise cannot_reach(url, error, by_hand) from exc
            if attempt == len(waits):
                raise DownloadError(
                    f"{url}: gave up after {attempt + 1} attempts ({exc}); check the network and rerun to resume, "
                    f"or {by_hand}; or {FETCH_ONCE}"
                ) from exc
            sleep(waits[attempt])


def _problem(path: Path, name: str, sha256: str | None) -> str | None:
    """Why ``path`` (to be named ``name``) must not be kept, or None."""
    if sha256 is not None:
        actual = sha256_file(path)
        if not actual.startswith(sha256.lower()):
            return f"sha256 mismatch, expected {sha256} but got {actual}"
    try:
        check_complete(path, name)
    except ValueError as exc:
        return str(exc)
    return None


def _fetch(url: str, part: Path, timeout: float, by_hand: str) -> None:
    """Bring ``part`` up to the whole body of ``url``, continuing from its current size where the server allows."""
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 416 and offset:
            _settle_unsatisfiable(part, offset, exc.headers.get("Content-Range"))
            return
        if exc.code >= 500 or exc.code in _RETRY_STATUSES:
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from exc
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}; check the URL or {by_hand}") from exc
    except (http.client.HTTPException, OSError) as exc:  # URLError is an OSError
        raise _Transient(f"connection failed: {exc}") from exc
    with response:
        append, total = _plan(response, part, offset)
        with open(part, "ab" if append else "wb") as fh:
            _copy(response, fh)
    size = part.stat().st_size
    # http.client returns a short body without complaint when the server closes early; the totals tell.
    if total is not None and size != total:
        raise _Transient(f"connection closed after {size} of {total} bytes")


def _settle_unsatisfiable(part: Path, offset: int, content_range: str | None) -> None:
    """Handle a 416 to ``bytes=<offset>-``: the part is complete if the server's total is its size, else stale."""
    match = _UNSATISFIABLE_RANGE.fullmatch(content_range or "")
    if match and int(match[1]) == offset:
        return
    part.unlink()
    raise _Transient(f"the partial file ({offset} bytes) does not fit the server's copy; restarting")


def _plan(response: http.client.HTTPResponse, part: Path, offset: int) -> tuple[bool, int | None]:
    """Whether to append to ``part``, and the full size the file should reach (None if the server doesn't say)."""
    if response.status != 206:  # a 200 to a Range request: the server ignored it, so start over
        return False, response.length
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
    if match is None or int(match[1]) != offset:
        part.unlink()  # restart without a Range rather than splice bytes at the wrong place
        raise _Transient(f"unexpected Content-Range {response.headers.get('Content-Range')!r}; restarting")
    return True, None if match[2] == "*" else int(match[2])


def _copy(response: http.client.HTTPResponse, fh: BinaryIO) -> None:
    """Append the body to ``fh``; bytes written before a network failure stay for the next attempt."""
    while True:
        try:
            chunk = response.read(_CHUNK)
        except (http.client.HTTPException, OSError) as exc:
            raise _Transient(f"connection lost: {exc}") from exc
        if not chunk:
            return
        fh.write(chunk)


def hf_snapshot(
    repo_id: str,
    pattern: str | None = None,
    revision: str | None = None,
    repo_type: str = "dataset",
    dest: Path | None = None,
) -> Path:
    """The local folder of a Hugging Face Hub repo's files matching ``pattern``, downloaded into (or found in)
    the hub cache; ``dest``: where the caller places them (said in the messages).

    huggingface_hub honours ``HF_HUB_OFFLINE`` and ``HF_HOME``/``HF_HUB_CACHE``; its errors become
    :class:`DownloadError` with a way out. (Imported here: the workflow's DAG imports this module.)
    """
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    what = f"{pattern or 'all files'} of the Hugging Face {repo_type} {repo_id!r}" + (
        f" at {revision!r}" if revision else ""
    )
    page = f"{constants.ENDPOINT}/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}/tree/{revision or 'main'}"
    by_hand = f"download them by hand ({page}) into {dest}, keeping their paths in the repo; or " if dest else ""
    offline = (
        f"{by_hand}on a machine with network, download them into a huggingface_hub cache (HF_HOME=<folder> hf "
        f"download {repo_id} --repo-type {repo_type}{f' --include {pattern!r}' if pattern else ''}), copy that "
        f"folder here and run with HF_HOME=<folder> HF_HUB_OFFLINE=1; or {FETCH_ONCE}"
    )
    try:
        path = snapshot_download(repo_id, repo_type=repo_type, revision=revision, allow_patterns=pattern)
    except LocalEntryNotFoundError as exc:  # offline (or the Hub unreachable) and not cached
        raise DownloadError(
            f"{what} is not in the local cache and could not be downloaded ({exc}). Without network here: {offline}"
        ) from exc
    except (EntryNotFoundError, HfHubHTTPError) as exc:
        raise DownloadError(
            f"could not download {what} ({exc}); check the repo id, pattern, revision and access token "
            f"(HF_TOKEN); or {offline}"
        ) from exc
    return Path(path)


def hub_file(repo_id: str, filenames: Sequence[str], revision: str | None, folder: Path) -> tuple[Path, str]:
    """The first of ``filenames`` that the Hugging Face model repo ``repo_id`` has, in huggingface_hub's cache
    (downloaded into it where needed), and its name; ``folder``: where the caller places it as ``<sha256><suffix>``
    (said in the messages).

    A cached file is used without asking the Hub; ``HF_HUB_OFFLINE`` and ``HF_HOME`` are honoured. Before a download,
    one request checks that the Hub can be reached: a host that cannot fails at once, where huggingface_hub would
    retry each file 5 times over 23 s; timeouts and resets are still retried, by huggingface_hub.
    """
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import LocalEntryNotFoundError, RemoteEntryNotFoundError

    for filename in filenames:
        try:
            return Path(hf_hub_download(repo_id, filename, revision=revision, local_files_only=True)), filename
        except LocalEntryNotFoundError:
            pass
    page = f"{constants.ENDPOINT}/{repo_id}/blob/{revision or 'main'}/{filenames[0]}"
    suffix = Path(filenames[0]).suffix
    place = (
        f"download {filenames[0]} by hand ({page}) and put it in {folder} as <sha256>{suffix}, named by the SHA256 "
        f"that page lists (every load checks the file against its name); or, on a machine with network, download it "
        f"into a huggingface_hub cache (HF_HOME=<folder> hf download {repo_id} {filenames[0]}), copy that folder "
        "here and run with HF_HOME=<folder> HF_HUB_OFFLINE=1"
    )
    what = f"the Hugging Face repo {repo_id} ({' or '.join(filenames)})"
    log.info("downloading %s into huggingface_hub's cache, for %s", what, folder)
    if not constants.is_offline_mode():
        try:
            get_hf_file_metadata(hf_hub_url(repo_id, filenames[0], revision=revision))
        except Exception as exc:  # noqa: BLE001 (anything but an unreachable host is left to the download)
            if (error := unreachable(exc)) is not None:
                raise cannot_reach(what, error, place) from exc
    *first, last = filenames
    try:
        for filename in first:
            try:
                return Path(hf_hub_download(repo_id, filename, revision=revision)), filename
            except RemoteEntryNotFoundError:  # the repo has no such file: try the next one
                pass
        return Path(hf_hub_download(repo_id, last, revision=revision)), last
    except LocalEntryNotFoundError as exc:  # offline, or the Hub unreachable, and not cached
        raise DownloadError(
            f"{what}: not in huggingface_hub's cache and not downloaded ({exc}). Without network "
            f"here: {place}; or {FETCH_ONCE}"
        ) from exc
