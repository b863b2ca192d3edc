"""Atomic writes: the final file appears only on success and gets the mode of the process umask."""

import stat

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zoomeval.core.io import NoMetadata, atomic_path, read_metadata, write_csv, write_json, write_parquet, write_text


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
