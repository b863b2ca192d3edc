"""The hard set: the images of a scored dataset that no configured model classifies correctly under any zoom
transform on the original images (the most likely reading of how ImageNet-Hard was selected, Taesiri et al.
2023), written in ImageNet-Hard's Hugging Face layout so that the ``imagenet_hard`` adapter, and the Hugging Face
``datasets`` library, read it back; and a summary of its composition by origin.

Layout (``taesiri/imagenet-hard``): ``image`` struct of ``bytes`` (the image file unchanged) and ``path``
(``<image_id><suffix>``), ``label`` list<int64> (the ImageNet-1k indices the label set scores by), ``origin``
string (the manifest's), ``english_label`` list<string> (timm's description of each label).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zoomeval import __version__
from zoomeval.analysis.label_sets import left_out_of, relabel
from zoomeval.browser.data import ScoredMatrices
from zoomeval.core.classes import description
from zoomeval.core.io import read_metadata, write_parquet
from zoomeval.core.layout import declare, run_layout
from zoomeval.core.left_out import LeftOut
from zoomeval.core.manifest import Record
from zoomeval.report.left_out import LEFT_OUT_COLUMNS, append_left_out, left_out_note
from zoomeval.report.tables import write_table

#: 2: the metadata records what the set leaves out of the dataset (``left_out``); version 1 files are still read.
HARD_SCHEMA_VERSION = 2
HARD_SCHEMA = pa.schema(
    [
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("label", pa.list_(pa.int64())),
        ("origin", pa.string()),
        ("english_label", pa.list_(pa.string())),
    ]
)
#: The features as the Hugging Face ``datasets`` library records them, so that it decodes ``image`` as an image.
HF_FEATURES = {
    "image": {"_type": "Image"},
    "label": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "Sequence"},
    "origin": {"dtype": "string", "_type": "Value"},
    "english_label": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
}
SUMMARY_COLUMNS = ["name", "origin", "n_images", "n_hard", "percent_hard", "share_of_hard"]
declare("hard", HARD_SCHEMA, HARD_SCHEMA_VERSION)
declare("hard_summary", [*SUMMARY_COLUMNS, *LEFT_OUT_COLUMNS])


def unsolved(correctness: ScoredMatrices, variant: str = "original") -> np.ndarray:
    """Per image, True where no model's transform on ``variant`` classifies it correctly."""
    return ~np.any([correctness.matrices[m, variant].any(axis=0) for m in correctness.models], axis=0)


def write_hard_set(
    path: str | os.PathLike[str],
    records: list[Record],
    label_set: str,
    correctness: ScoredMatrices,
    *,
    name: str,
    dataset: str,
    labels_path: str | None = None,
    bad: Mapping[str, int] | None = None,
) -> int:
    """Write the hard set of the scored dataset ``name`` (``dataset`` under ``label_set``; ``records`` its
    manifest, ``correctness`` the original variant's matrix of every configured model, ``labels_path`` the label
    set's labels file if it has one, ``bad`` the manifest's bad images by kind); returns its size. The metadata
    records the models, the images scored per origin and what was left out, from which :func:`write_summary`
    works."""
    scored = relabel(records, label_set, labels_path)
    left_out = left_out_of(dataset, bad or {}, records, scored, label_set)
    if [r.image_id for r in scored] != correctness.image_ids:
        raise ValueError(f"{name}: the correctness matrices do not belong to the manifest; re-run the analysis")
    hard = [r for r, h in zip(scored, unsolved(correctness), strict=True) if h]
    table = pa.table(
        {
            "image": [{"bytes": Path(r.path).read_bytes(), "path": r.image_id + Path(r.path).suffix} for r in hard],
            "label": [list(r.labels) for r in hard],
            "origin": [r.origin for r in hard],
            "english_label": [[description(i) for i in r.labels] for r in hard],
        },
        schema=HARD_SCHEMA.with_metadata({"huggingface": json.dumps({"info": {"features": HF_FEATURES}})}),
    )
    meta = {
        "kind": "hard_set",
        "schema_version": HARD_SCHEMA_VERSION,
        "zoomeval": __version__,
        "name": name,
        "dataset": dataset,
        "label_set": label_set,
        "variant": "original",
        "models": correctness.models,
        "n_images": dict(sorted(Counter(r.origin for r in scored).items())),
        "left_out": left_out.document(),
    }
    write_parquet(path, table, meta, use_dictionary=["origin"], row_group_size=256)
    return len(hard)


def summary_rows(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[list[str]], dict[str, LeftOut | None]]:
    """Per hard set and origin (then ``all``): images scored, hard images, their percentage, and the origin's
    share of the hard set (the composition the paper gives for ImageNet-Hard); and what each set left out of its
    dataset (None: a version 1 file, which did not record it)."""
    rows, lefts = [], {}
    for path in paths:
        meta = read_metadata(path)
        if meta.get("kind") != "hard_set" or meta.get("schema_version") not in (1, HARD_SCHEMA_VERSION):
            raise ValueError(f"{path} is not a hard set of schema version 1 to {HARD_SCHEMA_VERSION}; re-run hard_set")
        lefts[meta["name"]] = LeftOut.from_document(meta["left_out"]) if "left_out" in meta else None
        hard = Counter(pq.read_table(path, columns=["origin"])["origin"].to_pylist())
        scored: dict[str, int] = meta["n_images"]
        total = sum(hard.values())
        for origin, n in [*scored.items(), ("all", sum(scored.values()))]:
            k = total if origin == "all" else hard[origin]
            rows.append(
                [
                    meta["name"],
                    origin,
                    str(n),
                    str(k),
                    f"{100 * k / n:.2f}" if n else "",
                    f"{100 * k / total:.2f}" if total else "",
                ]
            )
    return rows, lefts


def write_summary(
    paths: Sequence[str | os.PathLike[str]],
    csv_path: str | os.PathLike[str],
    md_path: str | os.PathLike[str],
    limit: int | None = None,
) -> None:
    """The hard sets' composition table; ``limit``: the run's (config limit), whose results root it names."""
    title = "Hard sets: images no configured model solves under any zoom transform (original images)"
    layout = run_layout(limit)
    note = (
        f"n_images: images scored; n_hard: of them, images in {layout.path('hard', scored='<name>')}; "
        "percent_hard: n_hard / n_images; share_of_hard: the origin's share of the hard set (its composition)."
    )
    rows, lefts = summary_rows(paths)
    header, rows = append_left_out(SUMMARY_COLUMNS, rows, [lefts[row[0]] for row in rows], layout)
    write_table(csv_path, md_path, title, header, rows, [note, left_out_note(lefts, layout)])
