"""Read a finished study from Python (``zoomeval.Study``): its tables as polars DataFrames, each prediction file as
a LazyFrame with the transform decoded (and, :meth:`Study.class_predictions`, each class's wnid and English name),
the standard evaluation per image, the correctness matrices and the provenance of the predictions (several studies
in one frame: :func:`zoomeval.publish.compare.compare_studies`).

Every path comes from :mod:`zoomeval.core.layout`; nothing is computed again, the files are read as the workflow
wrote them. A missing file or directory is refused naming it. A sealed study (one with ``results/study.json``) is read
through the leaderboard's checks (:mod:`zoomeval.study.verified`): a prediction file, standard evaluation, metrics
file or correctness matrix of a result that the leaderboard would refuse is refused with the same line
(``allow_stale=True``: a warning with it, as ``--allow-stale`` lists it apart). An unsealed study is read as it is.
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path
from typing import Any

import polars as pl

from zoomeval.analysis.matrix import Correctness, read_matrix
from zoomeval.core import classes
from zoomeval.core.io import read_metadata
from zoomeval.core.layout import OUTPUTS, RESULTS, Layout, cases_of
from zoomeval.core.zoom import ZoomGrid


class Study:
    """A study directory (``zoomeval init``) or the checkout, after a run: ``Study("path/to/study")``."""

    def __init__(self, path: str | os.PathLike[str] = ".", results: str = RESULTS, allow_stale: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.layout = Layout(results)
        self.allow_stale = allow_stale
        if not (self.path / results).is_dir():
            raise FileNotFoundError(f"{self.path / results}: no results directory (has the study been run?)")

    @functools.cached_property
    def problems(self) -> list[str]:
        """What the leaderboard would refuse in this study (one line each; none for an unsealed study)."""
        from zoomeval.study.verified import read_study

        if not (self.path / self.layout.path("study_index")).is_file():
            return []
        return read_study(self.path, self.layout)[1]

    def _file(self, name: str, *also: str, **wildcards: object) -> Path:
        """Output ``name``'s file, refused (or warned of) where a problem names it or the outputs ``also`` beside it."""
        path = self.path / self.layout.path(name, **wildcards)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file in the study")
        named = [str(self.path / self.layout.path(n, **wildcards)) for n in also]
        for line in self.problems:
            if line.startswith(tuple(f"{p}:" for p in (str(path), *named))):
                if not self.allow_stale:
                    raise ValueError(line)
                warnings.warn(line, stacklevel=3)
        return path

    def _found(self, name: str) -> list[dict[str, str]]:
        """The wildcards of every existing file of output ``name``, sorted; a file that is also another output (an
        aggregates file beside the predictions) is not one, but one of its cases is (Table A8 is a ``table``)."""
        pattern = self.layout.path(name, **{w: "*" for w in OUTPUTS[name].wildcards})
        found = []
        for path in self.path.glob(pattern):
            relative = str(path.relative_to(self.path))
            others = [other for other in OUTPUTS if other not in (name, *cases_of(name))]
            if any(self.layout.parse(other, relative) is not None for other in others):
                continue
            if (wildcards := self.layout.parse(name, relative)) is not None:
                found.append(wildcards)
        return sorted(found, key=lambda f: tuple(f.values()))

    def tables(self) -> list[str]:
        """The names of the tables written so far (``table_a8``, ``table_1``, ...)."""
        return sorted(f["table"] for f in self._found("table") if f["ext"] == "csv")

    def table(self, name: str) -> pl.DataFrame:
        """A table (``table_a8``, ``table_1``, ``leaderboard``, ...) as the CSV holds it."""
        return pl.read_csv(self._file("table", table=name, ext="csv"), infer_schema_length=None)

    def runs(self) -> pl.DataFrame:
        """One row per prediction file: ``dataset``, ``variant``, ``model``."""
        rows = self._found("predictions")
        return pl.DataFrame(rows, schema={"dataset": pl.String, "variant": pl.String, "model": pl.String})

    def labels(self, dataset: str) -> pl.DataFrame:
        """The dataset's images from its manifest: ``image_id`` and ``labels`` (class indices, as scored by the
        dataset's own label set ``in``), with the image ``path``, ``width`` and ``height``."""
        columns = ["image_id", "labels", "path", "width", "height"]
        return pl.read_parquet(self._file("manifest", dataset=dataset), columns=columns)

    def predictions(self, dataset: str, variant: str, model: str) -> pl.LazyFrame:
        """The prediction file, one row per image and zoom transform, lazily: ``image_id`` (a string), ``scale``,
        ``row`` (0 = top), ``col`` (0 = left), ``transform`` (the transform's row in :meth:`correct`'s matrix,
        :func:`zoomeval.core.zoom.transforms` order) and ``name`` (``LOC:row_col_Size:scale``, an Enum of the
        transforms in that order), then the file's
        columns (``pred``, ``conf``, ...)."""
        path = self._file("predictions", dataset=dataset, variant=variant, model=model)
        grid = ZoomGrid(read_metadata(path)["scales"])
        # each transform's index looked up by one gather on scale * 9 + anchor (null for a transform out of the grid,
        # as a join would give), not a join on three columns: that costs several times the read, in time and memory
        table = [None] * ((max(grid.scales) + 1) * 9)
        for k, t in enumerate(grid.transforms):
            table[9 * t.scale + 3 * t.row + t.col] = k
        key = 9 * pl.col("scale").cast(pl.Int32) + 3 * pl.col("row") + pl.col("col")
        names = pl.Series([t.name for t in grid.transforms], dtype=pl.Enum([t.name for t in grid.transforms]))
        frame = pl.scan_parquet(path).with_columns(
            pl.col("image_id").cast(pl.String), pl.lit(pl.Series(table, dtype=pl.Int32)).gather(key).alias("transform")
        )
        decoded = frame.with_columns(pl.lit(names).gather(pl.col("transform")).alias("name"))
        first = ["image_id", "scale", "row", "col", "transform", "name"]
        return decoded.select(*first, pl.exclude(first))

    def correct(self, scored: str, variant: str, model: str) -> Correctness:
        """The correctness matrix of a scored dataset (the dataset's name, suffixed ``_<label set>`` for its other
        label sets), variant and model."""
        return read_matrix(self._file("correct", "metrics", scored=scored, variant=variant, model=model))

    def provenance(self, dataset: str, variant: str, model: str) -> dict[str, Any]:
        """Where a prediction file came from: the model and its weights (with their sha256), the scales, device,
        precision, torch and zoomeval versions and the workflow's git commit (the file's metadata)."""
        return read_metadata(self._file("predictions", dataset=dataset, variant=variant, model=model))

    def classes(self) -> pl.DataFrame:
        """ImageNet-1k's classes, the space every ``pred``, ``top5`` and label index is in: ``class`` (the index),
        ``wnid`` and ``name`` (its English WordNet lemmas, as timm's ImageNet class info gives them)."""
        return class_frame()

    def class_predictions(self, dataset: str, variant: str, model: str) -> pl.LazyFrame:
        """:meth:`predictions` with each predicted class's wnid and name: ``pred_wnid``, ``pred_name``,
        ``pred_full_wnid`` and ``pred_full_name``."""
        return with_names(with_names(self.predictions(dataset, variant, model), "pred"), "pred_full")

    def standard(self, dataset: str, model: str) -> pl.DataFrame:
        """The standard evaluation (the weights' own resize and centre crop), one row per image: ``image_id``,
        ``pred`` with ``pred_wnid`` and ``pred_name``, ``top5`` where it was stored, the image's ``labels`` (the
        dataset's own label set, from its manifest) and ``correct`` (``pred`` is one of them), as the analysis
        scores ``acc_standard``."""
        frame = pl.read_parquet(self._file("standard", dataset=dataset, model=model))
        frame = frame.with_columns(pl.col("image_id").cast(pl.String))
        labels = self.labels(dataset).select("image_id", "labels")
        scored = frame.join(labels, on="image_id", how="left", maintain_order="left")
        scored = scored.with_columns(correct=pl.col("labels").list.contains(pl.col("pred")).fill_null(False))
        return with_names(scored, "pred")


def class_frame() -> pl.DataFrame:
    """ImageNet-1k's ``class`` index, ``wnid`` and English ``name`` (:mod:`zoomeval.core.classes`)."""
    return pl.DataFrame(
        {
            "class": range(classes.NUM_CLASSES),
            "wnid": classes.wnids(),
            "name": [classes.description(i) for i in range(classes.NUM_CLASSES)],
        },
        schema={"class": pl.Int16, "wnid": pl.String, "name": pl.String},
    )


def with_names(frame: Any, column: str) -> Any:
    """``frame`` (a DataFrame or LazyFrame) with ``<column>_wnid`` and ``<column>_name`` of its class index column
    ``column`` (null for an index outside ImageNet-1k)."""
    names = class_frame().rename({"class": column, "wnid": f"{column}_wnid", "name": f"{column}_name"})
    names = names.lazy() if isinstance(frame, pl.LazyFrame) else names
    return frame.with_columns(pl.col(column).cast(pl.Int16)).join(names, on=column, how="left", maintain_order="left")
