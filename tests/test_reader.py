"""zoomeval.Study: a study's tables, predictions, correctness matrices and provenance read from Python, on a
hand-made results tree and, through the notebook how-to's own code, on the small demo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tests.conftest import ROOT
from zoomeval.analysis.matrix import correctness_matrix, write_matrix
from zoomeval.core.io import write_csv, write_json
from zoomeval.core.manifest import Record, write_manifest
from zoomeval.core.zoom import Transform, ZoomGrid, transforms
from zoomeval.inference.tables import prediction_table, write_table

SCALES = [224, 256]
GRID = ZoomGrid(SCALES)
RECORDS = [Record("a", "a.jpg", [1], [], 300, 200), Record("b", "b.jpg", [2, 5], [], 200, 300)]
#: Image a is right only at the 1-crop (256, centre); image b only at (224, top-left), with its second label.
RIGHT = {("a", Transform(256, 1, 1)): 1, ("b", Transform(224, 0, 0)): 5}


def make_study(folder: Path) -> Path:
    results = folder / "results"
    order = transforms(SCALES)
    pred = np.array([[RIGHT.get((r.image_id, t), 0) for t in order] for r in RECORDS], dtype=np.int16)
    columns = {"pred": pred, "pred_full": pred, "conf": np.full(pred.shape, 0.5, np.float32)}
    predictions = results / "predictions/toy/original/m.parquet"
    meta = {"kind": "predictions", "scales": SCALES, "model": {"name": "m", "weights_sha256": "ab"}, "device": "cpu"}
    write_table(predictions, prediction_table(RECORDS, GRID, columns), meta)
    write_table(
        results / "predictions/toy/original/m.aggregates.parquet",
        prediction_table(RECORDS, GRID, columns),
        {**meta, "kind": "aggregates"},
    )
    write_manifest(results / "datasets/toy/manifest.parquet", RECORDS, "toy")
    matrix = correctness_matrix(predictions, RECORDS, order)
    write_matrix(results / "analysis/toy/original/m/correct.npz", matrix, order, RECORDS, 224)
    write_csv(results / "table_a8.csv", ["model", "acc_1crop", "acc_max"], [["m", "50.00", "100.00"]])
    write_json(results / "study.json", {})
    return folder


def test_a_study_reads_its_tables_runs_predictions_matrix_and_provenance(tmp_path: Path) -> None:
    import polars as pl

    from zoomeval import Study

    study = Study(make_study(tmp_path))
    assert study.tables() == ["table_a8"]  # not study.json
    assert study.table("table_a8").to_dicts() == [{"model": "m", "acc_1crop": 50.0, "acc_max": 100.0}]
    assert study.runs().to_dicts() == [{"dataset": "toy", "variant": "original", "model": "m"}]  # no aggregates
    frame = study.predictions("toy", "original", "m").collect()
    assert frame.columns[:7] == ["image_id", "scale", "row", "col", "transform", "name", "pred"]
    assert frame.height == 2 * 9 * 2 and frame.schema["image_id"] == pl.String
    # transforms in the authors' order: anchors row-major, then scales, so (256, 1, 1) is anchor 4's second scale
    one_crop = frame.filter(image_id="a", scale=256, row=1, col=1).row(0, named=True)
    assert (one_crop["transform"], one_crop["name"], one_crop["pred"]) == (4 * 2 + 1, "LOC:1_1_Size:256", 1)
    assert frame.filter(pl.col("pred") > 0).select("image_id", "transform").rows() == [("a", 9), ("b", 0)]
    correct = study.correct("toy", "original", "m")
    assert correct.image_ids == ["a", "b"] and correct.transforms == transforms(SCALES)
    assert sorted(zip(*np.nonzero(correct.matrix), strict=True)) == [(0, 1), (9, 0)]
    labels = study.labels("toy")
    assert labels.select("image_id", "labels").to_dicts() == [
        {"image_id": "a", "labels": [1]},
        {"image_id": "b", "labels": [2, 5]},
    ]
    assert study.provenance("toy", "original", "m")["model"]["weights_sha256"] == "ab"


def test_predictions_decode_each_transform_as_a_join_on_the_grid_would(tmp_path: Path) -> None:
    """The transform index is computed, not joined: the frame equals a join of the file with the grid's table of
    transforms (the way it was read before), ``name`` an Enum in the grid's order; a transform out of the grid has
    neither."""
    import polars as pl
    import pyarrow.parquet as pq

    from zoomeval import Study

    study = Study(make_study(tmp_path))
    frame = study.predictions("toy", "original", "m").collect()
    order = GRID.transforms
    table = pl.DataFrame(
        {"scale": [t.scale for t in order], "row": [t.row for t in order], "col": [t.col for t in order]},
        schema={"scale": pl.Int16, "row": pl.Int8, "col": pl.Int8},
    ).with_columns(transform=pl.int_range(len(order), dtype=pl.Int32), name=pl.Series([t.name for t in order]))
    path = tmp_path / "results/predictions/toy/original/m.parquet"
    raw = pl.read_parquet(path).with_columns(pl.col("image_id").cast(pl.String))
    joined = raw.join(table, on=["scale", "row", "col"], how="left", maintain_order="left")
    first = ["image_id", "scale", "row", "col", "transform", "name"]
    assert frame.schema["name"] == pl.Enum([t.name for t in order])
    assert frame.with_columns(pl.col("name").cast(pl.String)).equals(joined.select(*first, pl.exclude(first)))
    stray = pq.read_table(path)  # a scale out of the grid: a null transform and name, as the join gives
    stray = stray.set_column(1, "scale", pa.array([240] * stray.num_rows, stray.schema.field("scale").type))
    pq.write_table(stray.replace_schema_metadata(pq.read_table(path).schema.metadata), path)
    frame = study.predictions("toy", "original", "m").collect()
    assert frame["transform"].null_count() == frame["name"].null_count() == frame.height


def test_a_missing_study_or_file_is_refused_naming_it(tmp_path: Path) -> None:
    from zoomeval import Study

    with pytest.raises(FileNotFoundError, match=f"{re.escape(str(tmp_path / 'results'))}: no results directory"):
        Study(tmp_path)
    study = Study(make_study(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"results/predictions/toy/original/nosuch\.parquet: no such file"):
        study.predictions("toy", "original", "nosuch")
    with pytest.raises(FileNotFoundError, match=r"results/table_9\.csv: no such file"):
        study.table("table_9")


def test_importing_zoomeval_imports_no_polars_until_study_is_used() -> None:
    code = "import sys, zoomeval; a = 'polars' in sys.modules; zoomeval.Study; print(a, 'polars' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["False", "True"]


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.M | re.S)


@pytest.mark.workflow
def test_the_notebook_how_to_runs_on_the_small_demo_and_reproduces_table_a8(small_reference: Path, capsys) -> None:
    """Every python block of docs/how-to/notebook.md, in order, in the small demo's directory: its asserts compare
    acc_1crop, acc_max and acc_standard computed from the per-image files with Table A8's. The last block compares
    two sealed studies of the reader's own, which the small demo is not: tests/test_compare_studies.py runs its
    calls."""
    blocks = python_blocks(ROOT / "docs" / "how-to" / "notebook.md")
    assert len(blocks) == 8 and "acc_1crop" in blocks[1] and "assert" in blocks[1]
    assert "compare_studies(" in blocks[-1] and not any("compare_studies(" in b for b in blocks[:-1])
    blocks = blocks[:-1]
    namespace: dict[str, object] = {}
    cwd = Path.cwd()
    os.chdir(small_reference)
    try:
        for block in blocks:
            exec(compile(block, "docs/how-to/notebook.md", "exec"), namespace)  # noqa: S102 (the docs' own code)
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert re.search(r"acc_1crop (\d+\.\d\d) \(Table A8: \1\)", out)
    assert re.search(r"acc_max (\d+\.\d\d) \(Table A8: \1\)", out)
    assert re.search(r"acc_standard (\d+\.\d\d) \(Table A8: \1\)", out)
    assert namespace["acc_max"] > 0  # the small demo solves some images: the comparison is not 0 against 0
