import hashlib
import io
import json
import os
import random
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import huggingface_hub.constants
import pytest

from zoomeval.core.config import InputSpec
from zoomeval.datasets.download import DownloadError, download, hf_snapshot
from zoomeval.datasets.inputs import HUB_REVISION, fetch, hub_revision, plan

PAYLOAD = random.Random(0).randbytes(300_000)
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


@dataclass
class Behaviour:
    """What the test server does, and what it saw."""

    status: int = 200
    cut_after: int | None = None  # first response only: send this many body bytes, then hang up
    ignore_range: bool = False
    payload: bytes = PAYLOAD
    send_length: bool = True  # without Content-Length only the end of the connection ends the body
    ranges: list[str | None] = field(default_factory=list)  # the Range header of each request


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        behaviour: Behaviour = self.server.behaviour  # type: ignore[attr-defined]
        payload = behaviour.payload
        rng = self.headers.get("Range")
        behaviour.ranges.append(rng)
        if behaviour.status != 200:
            self.send_error(behaviour.status)
            return
        start = 0
        if rng and not behaviour.ignore_range:
            start = int(rng.removeprefix("bytes=").removesuffix("-"))
            if start >= len(payload):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(payload)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}")
        else:
            self.send_response(200)
        body = payload[start:]
        if behaviour.send_length:
            self.send_header("Content-Length", str(len(body)))  # the full length, even when about to cut
        self.end_headers()
        if behaviour.cut_after is not None and len(behaviour.ranges) == 1:
            body = body[: behaviour.cut_after]
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, Behaviour]]:
    """A local HTTP server for ``PAYLOAD`` with Range support; the test adjusts its ``Behaviour``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.behaviour = Behaviour()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/payload.bin", httpd.behaviour  # type: ignore[attr-defined]
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """urllib honours *_proxy variables; the test server is local."""
    monkeypatch.setenv("no_proxy", "*")


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_resumes_a_cut_connection_with_a_range_request(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, behaviour = server
    behaviour.cut_after = 100_000
    sleeps: list[float] = []
    dest = download(url, tmp_path / "payload.bin", DIGEST, backoff=0.5, timeout=5, sleep=sleeps.append)
    assert behaviour.ranges == [None, "bytes=100000-"]
    assert sleeps == [0.5]
    assert dest.read_bytes() == PAYLOAD
    assert files_in(tmp_path) == ["payload.bin"]  # no .part left


def test_resumes_a_part_left_by_an_earlier_run(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, behaviour = server
    (tmp_path / "payload.bin.part").write_bytes(PAYLOAD[:1234])
    download(url, tmp_path / "payload.bin", DIGEST, timeout=5)
    assert behaviour.ranges == ["bytes=1234-"]
    assert (tmp_path / "payload.bin").read_bytes() == PAYLOAD


def test_a_complete_part_is_finished_after_416(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, behaviour = server
    (tmp_path / "payload.bin.part").write_bytes(PAYLOAD)
    download(url, tmp_path / "payload.bin", DIGEST, timeout=5)
    assert behaviour.ranges == [f"bytes={len(PAYLOAD)}-"]
    assert files_in(tmp_path) == ["payload.bin"]


def test_a_server_that_ignores_range_restarts_from_zero(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, behaviour = server
    behaviour.cut_after, behaviour.ignore_range = 100_000, True
    download(url, tmp_path / "payload.bin", DIGEST, timeout=5, sleep=lambda s: None)
    assert behaviour.ranges == [None, "bytes=100000-"]  # asked to resume, got a 200 with the whole body
    assert (tmp_path / "payload.bin").read_bytes() == PAYLOAD


def test_wrong_sha256_deletes_everything(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, _ = server
    wrong = "0" * 64
    with pytest.raises(DownloadError) as err:
        download(url, tmp_path / "payload.bin", wrong, timeout=5)
    assert wrong in str(err.value) and DIGEST in str(err.value) and url in str(err.value)
    assert files_in(tmp_path) == []


def test_404_fails_at_once(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, behaviour = server
    behaviour.status = 404
    sleeps: list[float] = []
    with pytest.raises(DownloadError, match="404") as err:
        download(url, tmp_path / "payload.bin", DIGEST, timeout=5, sleep=sleeps.append)
    assert url in str(err.value) and "by hand" in str(err.value)
    assert len(behaviour.ranges) == 1 and sleeps == []
    assert files_in(tmp_path) == []


def test_a_non_http_url_fails_at_once(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="not an http"):
        download("htp://example.org/x.bin", tmp_path / "x.bin", sleep=pytest.fail)
    assert files_in(tmp_path) == []


def test_5xx_is_retried_with_exponential_backoff_then_fails(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, behaviour = server
    behaviour.status = 503
    sleeps: list[float] = []
    with pytest.raises(DownloadError, match="gave up after 4 attempts") as err:
        download(url, tmp_path / "payload.bin", retries=3, backoff=0.25, timeout=5, sleep=sleeps.append)
    assert url in str(err.value)
    assert len(behaviour.ranges) == 4 and sleeps == [0.25, 0.5, 1.0]


def test_an_existing_download_is_reused_without_a_request(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, behaviour = server
    dest = tmp_path / "payload.bin"
    dest.write_bytes(PAYLOAD)
    assert download(url, dest, DIGEST) == dest
    assert download(url, dest) == dest
    assert behaviour.ranges == []


def test_a_stale_download_is_replaced(server: tuple[str, Behaviour], tmp_path: Path) -> None:
    url, behaviour = server
    dest = tmp_path / "payload.bin"
    dest.write_bytes(b"an older version")
    download(url, dest, DIGEST, timeout=5)
    assert behaviour.ranges == [None] and dest.read_bytes() == PAYLOAD


def small_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(3):
            info = tarfile.TarInfo(f"ds/n01498041/{i}.jpg")
            info.size = 5000
            tar.addfile(info, io.BytesIO(random.Random(i).randbytes(5000)))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("what", "settings"),
    [
        ("an HTML error page with status 200", {"payload": b"<html><body>Quota exceeded</body></html>"}),
        ("a cut body without Content-Length", {"payload": small_tar(), "cut_after": 7000, "send_length": False}),
    ],
)
def test_a_body_that_is_not_a_complete_archive_is_not_kept(
    server: tuple[str, Behaviour], tmp_path: Path, what: str, settings: dict
) -> None:
    url, behaviour = server
    url = url.replace("payload.bin", "ds.tar")
    for name, value in settings.items():
        setattr(behaviour, name, value)
    with pytest.raises(DownloadError, match="not a complete tar archive") as err:
        download(url, tmp_path / "ds.tar", timeout=5, sleep=pytest.fail)
    assert url in str(err.value) and "rerun" in str(err.value)
    assert files_in(tmp_path) == []
    behaviour.payload = small_tar()  # the server is fixed: a rerun asks again and keeps the archive
    assert download(url, tmp_path / "ds.tar", timeout=5).read_bytes() == small_tar()
    assert len(behaviour.ranges) == 2


def test_a_broken_file_left_by_an_older_version_is_fetched_again(
    server: tuple[str, Behaviour], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, behaviour = server
    behaviour.payload = small_tar()
    (tmp_path / "ds.tar").write_bytes(small_tar()[:7000])
    download(url.replace("payload.bin", "ds.tar"), tmp_path / "ds.tar", timeout=5)
    assert behaviour.ranges == [None] and (tmp_path / "ds.tar").read_bytes() == small_tar()
    assert "not a complete tar archive" in capsys.readouterr().out


# Hugging Face Hub, offline

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty, offline hub cache; hf_hub_download reads these module attributes at call time."""
    cache = tmp_path / "hub"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


def test_hf_snapshot_finds_a_cached_repo_offline(hf_cache: Path) -> None:
    repo = hf_cache / "datasets--someone--labels"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT / "real.json"
    snapshot.parent.mkdir(parents=True)
    snapshot.write_text("[1, 2]")
    for revision in (None, COMMIT):
        path = hf_snapshot("someone/labels", "*.json", revision=revision)
        assert path == snapshot.parent and (path / "real.json").read_text() == "[1, 2]"


def test_hf_snapshot_offline_without_cache_says_what_to_do(hf_cache: Path, tmp_path: Path) -> None:
    dest = tmp_path / "resources" / "hard" / "parquet.hf"
    with pytest.raises(DownloadError) as err:
        hf_snapshot("someone/labels", "*.parquet", dest=dest)
    message = str(err.value)
    assert "someone/labels" in message and "*.parquet" in message and f"into {dest}, keeping their paths" in message
    assert "HF_HOME=<folder> HF_HUB_OFFLINE=1" in message and "--until fetch_url fetch_hf fetch_weights" in message


def test_a_hugging_face_input_is_placed_in_its_declared_folder_as_links_to_the_cache(hf_cache: Path, tmp_path) -> None:
    """The fetch_hf job: huggingface_hub's cache stays the download cache; the declared output links to its blobs."""
    repo = hf_cache / "datasets--someone--hard"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    blob = repo / "blobs" / ("ab" * 32)
    blob.parent.mkdir()
    blob.write_bytes(b"PAR1 shard")
    for name in ("data/validation-00000-of-00001.parquet", "README.md"):
        link = repo / "snapshots" / COMMIT / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    spec = InputSpec(hf="someone/hard", pattern="*.parquet", revision=COMMIT)
    item = plan("hard", "parquet", spec, str(tmp_path / "resources"))
    fetch(item)
    shard = tmp_path / "resources" / "hard" / "parquet.hf" / "data" / "validation-00000-of-00001.parquet"
    revision = shard.parents[1] / HUB_REVISION  # the commit the files came from, for the manifest and the key
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "resources").rglob("*") if p.is_file()) == sorted(
        [revision.relative_to(tmp_path), shard.relative_to(tmp_path)]
    )
    assert json.loads(revision.read_text()) == {"hf": "someone/hard", "revision": COMMIT}
    assert hub_revision(item) == f"someone/hard@{COMMIT}"
    assert not shard.is_symlink() and shard.read_bytes() == b"PAR1 shard"
    assert os.stat(shard).st_ino == os.stat(blob).st_ino  # a hard link: no second copy on disk
    with pytest.raises(ValueError, match=r"^datasets.hard.labels: no file of someone/hard matches '\*.json'"):
        fetch(plan("hard", "labels", InputSpec(hf="someone/hard", pattern="*.json", revision=COMMIT), "r"))


def test_a_hub_datasets_revision_goes_from_the_cache_into_the_manifest_and_the_comparability_key(
    hf_cache: Path, tmp_path: Path
) -> None:
    """ImageNet-Hard in the hub cache's layout (refs/main names the commit): fetched without asking for a revision,
    its manifest records the commit that main resolved to, and so does the key of a result computed from it; another
    commit is another key, which the leaderboard groups apart (tests/test_leaderboard.py names the field)."""
    from tests.test_adapters import image_bytes, write_hard_shard
    from zoomeval.analysis.comparability import comparability_key, key_differences
    from zoomeval.core.images import screen
    from zoomeval.core.manifest import read_revisions, write_manifest
    from zoomeval.datasets.adapters.imagenet_hard import imagenet_hard

    snapshot = hf_cache / "datasets--taesiri--imagenet-hard" / "snapshots" / COMMIT / "data"
    snapshot.mkdir(parents=True)
    (snapshot.parents[2] / "refs").mkdir()
    (snapshot.parents[2] / "refs" / "main").write_text(COMMIT)
    write_hard_shard(snapshot / "validation-00000-of-00001.parquet", [(image_bytes("PNG", (40, 30)), [7], "imagenet")])
    item = plan("hard", "parquet", InputSpec(hf="taesiri/imagenet-hard", pattern="*.parquet"), str(tmp_path / "r"))
    fetch(item)
    records, _ = imagenet_hard(Path(str(item.fetched)), tmp_path / "images")  # the adapter skips the hidden record
    kept, _ = screen(records, "fail", tmp_path / "bad.csv", dataset="hard", max_scale=64)
    write_manifest(tmp_path / "manifest.parquet", kept, "hard", revisions={"parquet": hub_revision(item)})
    revisions = read_revisions(tmp_path / "manifest.parquet")
    assert revisions == {"parquet": f"taesiri/imagenet-hard@{COMMIT}"}
    key = comparability_key({"dataset": "hard", "dataset_revisions": revisions}, "i", "in", 3, 1000)
    assert key["revisions"] == revisions
    moved = {"parquet": "taesiri/imagenet-hard@" + "f" * 40}
    other = comparability_key({"dataset": "hard", "dataset_revisions": moved}, "i", "in", 3, 1000)
    assert key_differences(other, key) == [f"revisions {json.dumps(other['revisions'])} (not {json.dumps(revisions)})"]
