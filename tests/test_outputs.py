"""What the commands write to: `-o` of leaderboard, policy save and predict never replaces what is not a regular
file (a device or a FIFO is written through, a symlink followed, the rest refused before any work), `zoomeval run`
never follows a symlink where its lock belongs, and `export --date` takes a calendar date YYYY-MM-DD only; each
refusal one line, exit status 2 (the writer itself: tests/test_io.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.test_leaderboard import study
from zoomeval import cli
from zoomeval.run.lock import LOCK, holding


def refusal(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """The one line a command refuses ``args`` with, exit status 2."""
    assert cli.main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    return err.rstrip("\n")


#: Each command with an -o FILE, over an empty folder (the refusal comes before it is read).
COMMANDS = {
    "predict": ["predict", "--policy", "{tmp}/nosuch.json", "--resources", "{tmp}/empty", "{tmp}/nosuch.jpg"],
    "policy save": ["policy", "save", "{tmp}/empty", "--policy", "vote", "--budget", "1", "--fit", "x"],
    "leaderboard": ["leaderboard", "{tmp}/empty"],
}
#: What -o may not name, made at a path, and the refusal's words.
NOT_WRITTEN = {
    "directory": (lambda p: p.mkdir(), "is a directory, not written over"),
    "link to nothing": (lambda p: p.symlink_to(p.parent / "nothing"), "is a symlink to nothing"),
}


@pytest.mark.parametrize("target", NOT_WRITTEN)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_that_is_no_file_device_or_fifo_is_refused_before_any_work(tmp_path, capsys, command, target):
    (tmp_path / "empty").mkdir()
    make, words = NOT_WRITTEN[target]
    make(tmp_path / "out.md")
    before = os.lstat(tmp_path / "out.md")
    args = [a.format(tmp=tmp_path) for a in COMMANDS[command]]
    line = refusal(capsys, [*args, "-o", str(tmp_path / "out.md")])
    assert line.startswith(f"zoomeval {command}: -o {tmp_path / 'out.md'}: {words}"), line
    assert os.lstat(tmp_path / "out.md") == before


@pytest.fixture
def sealed(tmp_path) -> tuple[Path, bytes]:
    """A tiny sealed study and its leaderboard as Markdown, written to a new file."""
    folder = study(tmp_path / "study")
    assert cli.main(["leaderboard", str(folder), "-o", str(tmp_path / "plain.md")]) == 0
    return folder, (tmp_path / "plain.md").read_bytes()


def test_the_leaderboard_is_written_through_a_fifo(tmp_path, sealed) -> None:
    folder, board = sealed
    fifo = tmp_path / "board.md"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert cli.main(["leaderboard", str(folder), "-o", str(fifo)]) == 0
    reader.join(timeout=10)
    assert read == [board] and fifo.is_fifo()


def test_the_leaderboard_follows_a_symlink_to_a_file_elsewhere_or_to_dev_null(tmp_path, sealed) -> None:
    """The file a link points at, outside the folder of the link, is replaced; the links stay links."""
    folder, board = sealed
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "real.md").write_text("old")
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "board.md").symlink_to(tmp_path / "elsewhere" / "real.md")
    (tmp_path / "here" / "null.md").symlink_to(os.devnull)
    for name in ("board.md", "null.md"):
        assert cli.main(["leaderboard", str(folder), "-o", str(tmp_path / "here" / name)]) == 0
    assert (tmp_path / "elsewhere" / "real.md").read_bytes() == board
    assert {p.name: os.readlink(p) for p in (tmp_path / "here").iterdir()} == {
        "board.md": str(tmp_path / "elsewhere" / "real.md"),
        "null.md": os.devnull,
    }


@pytest.mark.parametrize("outside_text", ["not the lock's\n", None], ids=["to a file elsewhere", "to nothing"])
def test_run_refuses_a_symlink_where_its_lock_belongs_and_leaves_what_it_points_at(tmp_path, capsys, outside_text):
    folder, outside = tmp_path / "study", tmp_path / "outside.txt"
    (folder / "config").mkdir(parents=True)
    (folder / "config" / "config.yaml").touch()
    if outside_text is not None:
        outside.write_text(outside_text)
    (folder / LOCK).parent.mkdir()
    (folder / LOCK).symlink_to(outside)
    assert refusal(capsys, ["run", str(folder)]) == (
        f"zoomeval run: {folder / LOCK}: is a symlink, not zoomeval run's lock; remove it and run again; "
        "nothing was run"
    )
    assert (folder / LOCK).is_symlink() and (outside.read_text() if outside.exists() else None) == outside_text


def test_a_lock_path_that_is_no_regular_file_is_refused(tmp_path) -> None:
    (tmp_path / LOCK).mkdir(parents=True)
    with pytest.raises(ValueError, match=f"^{tmp_path / LOCK}: is not a regular file, not zoomeval run's lock"):
        with holding(tmp_path, "zoomeval run"):
            pass


@pytest.mark.parametrize("day", ["2024-W01-1", "20240101", "2024-02-30", "2024-1-1", "", "2024-01-01T00:00"])
def test_export_refuses_a_date_that_is_no_calendar_date_yyyy_mm_dd(tmp_path, capsys, day) -> None:
    (tmp_path / "empty").mkdir()
    args = ["export", str(tmp_path / "empty"), "--format", "hf", "-o", str(tmp_path / "bundle")]
    line = refusal(capsys, [*args, "--date", day])
    assert line == f"zoomeval export: --date {day!r}: not a calendar date written YYYY-MM-DD"
    assert "--date" not in refusal(capsys, [*args, "--date", "2024-01-01"])  # past the date: the study is unsealed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_export_refuses_a_bundle_path_that_is_a_symlink_even_to_nothing(tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "bundle").symlink_to(tmp_path / "nothing")
    line = refusal(capsys, ["export", str(tmp_path / "empty"), "--format", "hf", "-o", str(tmp_path / "bundle")])
    assert line == f"zoomeval export: -o {tmp_path / 'bundle'}: exists; give a new folder for the bundle"
    assert not (tmp_path / "nothing").exists()
