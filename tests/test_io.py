"""Atomic writes: the final file appears only on success and gets the mode of the process umask; what is not a
regular file is never replaced: a device or a FIFO is written through, a symlink followed, the rest refused."""

import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zoomeval.core.io import (
    NoMetadata,
    atomic_path,
    link_or_copy,
    output_target,
    read_metadata,
    write_csv,
    write_json,
    write_parquet,
    write_text,
)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_outputs_get_the_mode_of_the_umask(tmp_path, umask_mode):
    write_text(tmp_path / "a.md", "x")
    write_csv(tmp_path / "t" / "table.csv", ["a"], [[1]])
    write_json(tmp_path / "m.json", {"a": 1})
    write_parquet(tmp_path / "p.parquet", pa.table({"a": [1]}), {"kind": "test"})
    with atomic_path(tmp_path / "fig.png") as tmp:
        assert mode(tmp) == umask_mode  # also while it is written (matplotlib and PIL keep an existing file's mode)
        tmp.write_bytes(b"png")
    written = ["a.md", "t/table.csv", "m.json", "p.parquet", "fig.png"]
    assert {name: mode(tmp_path / name) for name in written} == dict.fromkeys(written, umask_mode)
    assert read_metadata(tmp_path / "p.parquet") == {"kind": "test"}


def test_a_failed_write_leaves_neither_the_final_nor_a_temporary_file(tmp_path):
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "out.csv") as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
    write_text(tmp_path / "out.csv", "old")
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "out.csv") as tmp:
        tmp.write_text("new")
        raise RuntimeError("killed")
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"] and (tmp_path / "out.csv").read_text() == "old"


def test_a_parquet_file_without_zoomeval_metadata_is_refused_naming_it(tmp_path):
    pq.write_table(pa.table({"a": [1]}), tmp_path / "plain.parquet")
    with pytest.raises(NoMetadata) as refused:
        read_metadata(tmp_path / "plain.parquet")
    assert (
        str(refused.value) == f"{tmp_path / 'plain.parquet'}: no zoomeval metadata; expected a file written by zoomeval"
    )
    assert isinstance(refused.value, ValueError)  # a bad input: one line, exit status 2


def write_figure(path: Path) -> None:
    with atomic_path(path) as tmp:  # as the figures, contact sheets and images are written
        tmp.write_bytes(b"png")


#: Every writer (the study's jobs and the commands' -o all write through these), writing one small output.
WRITERS: dict[str, Callable[[Path], None]] = {
    "text": lambda path: write_text(path, "a,b\n"),
    "json": lambda path: write_json(path, {"a": 1}),
    "csv": lambda path: write_csv(path, ["a"], [[1]]),
    "parquet": lambda path: write_parquet(path, pa.table({"a": [1]}), {"kind": "test"}),
    "figure": write_figure,
    "copy": lambda path: link_or_copy(__file__, path),  # a hard link where nothing is, else a copy
}


@pytest.fixture
def temporary(tmp_path, monkeypatch) -> Path:
    """The temporary folder of writes through a device or FIFO: the test's own, to see that it is left empty."""
    folder = tmp_path / "temporary"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS)
def test_a_fifo_is_written_through_with_what_a_file_gets_and_stays_a_fifo(tmp_path, temporary, write) -> None:
    write(tmp_path / "file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write(fifo)
    reader.join(timeout=10)
    assert read == [(tmp_path / "file").read_bytes()] and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert names(tmp_path) == ["fifo", "file", "temporary"] and names(temporary) == []


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS)
def test_dev_null_and_a_symlink_to_it_are_written_through_and_stay(tmp_path, temporary, write) -> None:
    (tmp_path / "null").symlink_to(os.devnull)
    for target in (os.devnull, tmp_path / "null"):
        write(target)
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode) and os.readlink(tmp_path / "null") == os.devnull
    assert names(tmp_path) == ["null", "temporary"] and names(temporary) == []


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS)
def test_a_symlink_to_a_file_replaces_that_file_atomically_and_stays_a_link(tmp_path, umask_mode, write) -> None:
    """The file it points at, in a folder of its own (outside the one the link is in), gets what a new file gets,
    with the mode of the umask; the link still points at it."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "real").write_text("old")
    (tmp_path / "here").mkdir()
    link = tmp_path / "here" / "out"
    link.symlink_to(tmp_path / "elsewhere" / "real")
    write(link)
    write(tmp_path / "new")
    assert os.readlink(link) == str(tmp_path / "elsewhere" / "real") and names(tmp_path / "here") == ["out"]
    assert (tmp_path / "elsewhere" / "real").read_bytes() == (tmp_path / "new").read_bytes()
    assert names(tmp_path / "elsewhere") == ["real"] and mode(tmp_path / "elsewhere" / "real") == umask_mode


def socket_file(path: Path) -> Path:
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(path))
    return path


#: What is neither replaced nor written through (made in the test's folder), and the refusal's words.
REFUSED = {
    "directory": (lambda p: p.mkdir(), "is a directory, not written over"),
    "socket": (socket_file, "is a socket, not written over"),
    "link to a directory": (lambda p: p.symlink_to(p.parent), "is a directory, not written over"),
    "link to nothing": (lambda p: p.symlink_to(p.parent / "nothing"), "is a symlink to nothing"),
}


@pytest.mark.parametrize("make", REFUSED, ids=REFUSED)
@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS)
def test_a_directory_a_socket_or_a_dangling_link_is_refused_naming_it_and_left_alone(tmp_path, make, write):
    create, words = REFUSED[make]
    create(tmp_path / "out")
    before = os.lstat(tmp_path / "out")
    with pytest.raises(ValueError) as refused:
        write(tmp_path / "out")
    assert str(refused.value).startswith(f"{tmp_path / 'out'}: {words}")
    assert os.lstat(tmp_path / "out") == before and names(tmp_path) == ["out"]


def test_a_block_device_is_refused_before_anything_is_opened() -> None:
    block = next((p for p in Path("/dev").iterdir() if stat.S_ISBLK(p.lstat().st_mode)), None)
    if block is None:
        pytest.skip("no block device in /dev")
    with pytest.raises(ValueError, match=f"^{block}: is a block device, not written over"):
        output_target(block)


#: A child process writing to /dev/stdout (so the test's own stdout stays untouched).
DEV_STDOUT = [sys.executable, "-c", "from zoomeval.core.io import write_text; write_text('/dev/stdout', 'rows\\n')"]


def test_dev_stdout_is_written_through_a_pipe_or_replaces_the_file_stdout_is(tmp_path) -> None:
    piped = subprocess.run(DEV_STDOUT, capture_output=True, text=True)
    assert (piped.returncode, piped.stdout) == (0, "rows\n"), piped.stderr
    out = tmp_path / "out.csv"
    out.write_text("an older and longer content\n")
    with open(out, "r+") as stdout:
        assert subprocess.run(DEV_STDOUT, stdout=stdout).returncode == 0
    assert out.read_text() == "rows\n" and names(tmp_path) == ["out.csv"]


def test_dev_stdout_is_refused_where_stdout_is_a_deleted_file(tmp_path) -> None:
    with tempfile.TemporaryFile(dir=tmp_path) as stdout:
        proc = subprocess.run(DEV_STDOUT, stdout=stdout, stderr=subprocess.PIPE, text=True)
        stdout.seek(0)
        assert stdout.read() == b""
    assert proc.returncode == 1 and proc.stderr.splitlines()[-1].endswith(
        "is a symlink to a file that no path names (/dev/stdout to a deleted file); name a file"
    )
    assert names(tmp_path) == []


def test_a_folder_is_written_only_where_nothing_is_not_even_a_link(tmp_path) -> None:
    (tmp_path / "kept").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "kept")
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing")
    for name in ("kept", "link", "dangling"):
        with pytest.raises(ValueError, match=f"^{tmp_path / name}: exists; a folder is written only where nothing is"):
            with atomic_path(tmp_path / name, folder=True) as tmp:
                (tmp / "x").touch()
    assert names(tmp_path) == ["dangling", "kept", "link"] and names(tmp_path / "kept") == []
    assert os.readlink(tmp_path / "link") == str(tmp_path / "kept")
    with atomic_path(tmp_path / "new", folder=True) as tmp:
        (tmp / "x").touch()
    assert names(tmp_path / "new") == ["x"]
