"""Downloads that resume, retry and verify, and a Hugging Face Hub wrapper; every failure says what to do.

:func:`download` writes to ``<dest>.part`` and renames it onto ``dest`` only once the body is complete (its
Content-Length reached, or else a clean end), its sha256 matches where one is given and it is a complete file of
the kind its name says (an archive or a JSON document; see :func:`zoomeval.datasets.archives.check_complete`), so the
final name only ever holds a checked file and a rerun resumes the part. An existing ``dest`` is checked the same
way before it is reused, and fetched again if it fails.
"""

from __future__ import annotations

import http.client
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from zoomeval.core.checksums import sha256_file
from zoomeval.datasets.archives import check_complete

_CHUNK = 1 << 20
#: Statuses worth retrying besides every 5xx: request timeout and rate limiting.
_RETRY_STATUSES = frozenset({408, 429})
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")
_UNSATISFIABLE_RANGE = re.compile(r"bytes \*/(\d+)")


class DownloadError(Exception):
    """A download failed; the message names the URL (or Hub file) and how to get the file otherwise."""


class _Transient(Exception):
    """A failure worth retrying; the part file is kept (or deliberately removed) for the next attempt."""


def download(
    url: str,
    dest: Path,
    sha256: str | None = None,
    retries: int = 4,
    backoff: float = 1.0,
    timeout: float = 60.0,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Download ``url`` to ``dest`` and return ``dest``.

    An existing ``dest`` is reused if it matches ``sha256`` (or no hash is given) and is a complete file of its
    kind. Transient failures (connection errors, truncated bodies, 5xx, 408, 429) are retried up to ``retries``
    times after ``backoff * 2**attempt`` seconds, resuming ``<dest>.part`` with a Range request.
    """
    dest = Path(dest)
    by_hand = f"download it by hand to {dest}"
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
    for attempt in range(retries + 1):
        try:
            _fetch(url, part, timeout, by_hand)
            break
        except _Transient as exc:
            if attempt == retries:
                raise DownloadError(
                    f"{url}: gave up after {attempt + 1} attempts ({exc}); check the network and rerun to resume, "
                    f"or {by_hand}"
                ) from exc
            sleep(backoff * 2**attempt)
    problem = _problem(part, dest.name, sha256)
    if problem is not None:
        part.unlink()  # resuming a wrong body would never fix it
        raise DownloadError(
            f"{url}: {problem}; the download was deleted. The server may have answered an error page or closed the "
            f"connection early: check the URL (and the sha256 if given), then rerun to download it again, or {by_hand}"
        )
    os.replace(part, dest)
    return dest


def _problem(path: Path, name: str, sha256: str | None) -> str | None:
    """Why ``path`` (to be named ``name``) must not be kept, or None."""
    if sha256 is not None:
        actual = sha256_file(path)
        if actual != sha256.lower():
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
    repo_id: str, pattern: str | None = None, revision: str | None = None, repo_type: str = "dataset"
) -> Path:
    """The local folder of a Hugging Face Hub repo's files matching ``pattern``, downloaded into (or found in)
    the hub cache.

    huggingface_hub honours ``HF_HUB_OFFLINE`` and ``HF_HOME``/``HF_HUB_CACHE``; its errors become
    :class:`DownloadError` with a way out. (Imported here: the workflow's DAG imports this module.)
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    what = f"{pattern or 'all files'} of the Hugging Face {repo_type} {repo_id!r}" + (
        f" at {revision!r}" if revision else ""
    )
    try:
        path = snapshot_download(repo_id, repo_type=repo_type, revision=revision, allow_patterns=pattern)
    except LocalEntryNotFoundError as exc:  # offline (or the Hub unreachable) and not cached
        raise DownloadError(
            f"{what} is not in the local cache and could not be downloaded ({exc}); set HF_HUB_OFFLINE=0 on a "
            "machine with network access, or pre-populate the cache (HF_HOME) with it"
        ) from exc
    except (EntryNotFoundError, HfHubHTTPError) as exc:
        raise DownloadError(
            f"could not download {what} ({exc}); check the repo id, pattern, revision and access token "
            "(HF_TOKEN), or pre-populate the cache (HF_HOME) with it"
        ) from exc
    return Path(path)
