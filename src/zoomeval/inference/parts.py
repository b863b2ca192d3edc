"""A prediction job split into part jobs (``inference.parts``), one GPU each, and their merge.

Part ``k`` of ``n`` predicts a contiguous run of whole shards of the manifest (:func:`part_range`), so every image
is computed in the same batches as by one unsplit job and the merged files hold the same numbers, rows and
metadata (the timing fields summed). A part gets no images when there are fewer shards than parts; it then
writes empty files. The merge checks that the parts were computed alike and that their images are the manifest's,
in order, before it writes anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from zoomeval.core.io import read_metadata
from zoomeval.core.provenance import SOURCE_KEYS
from zoomeval.core.zoom import ZoomGrid
from zoomeval.inference.tables import merge, write_table

#: Metadata keys in which the parts of one job may differ: where and how fast each ran, and which part it is.
PER_PART = ("part", "n_images", "device", "seconds", "crops_per_second", *SOURCE_KEYS)


def part_range(n_images: int, shard_images: int, part: int, parts: int) -> range:
    """The manifest rows of part ``part`` (0-based) of ``parts``: shards ``[part * S // parts, (part + 1) * S //
    parts)`` of the ``S`` shards of ``shard_images`` images."""
    if not 0 <= part < parts:
        raise ValueError(f"part {part} does not exist: there are {parts} (inference.parts)")
    shards = -(-n_images // shard_images)
    first, stop = part * shards // parts, (part + 1) * shards // parts
    return range(min(first * shard_images, n_images), min(stop * shard_images, n_images))


def merged_metadata(metas: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One job's metadata from its parts' (those with images): the parts' shared keys, their images and seconds
    summed, the crops per second over all of them and the devices they ran on."""
    first = metas[0]
    for meta in metas[1:]:
        if differ := sorted(k for k in first.keys() | meta.keys() if k not in PER_PART and first.get(k) != meta.get(k)):
            raise ValueError(
                f"prediction parts {first['part'][0]} and {meta['part'][0]} were computed differently ({differ}); "
                "rerun the job's parts (--forcerun predict)"
            )
    seconds = sum(m["seconds"] for m in metas)
    crops = sum((m["crops_per_second"] or 0) * m["seconds"] for m in metas)
    return {k: v for k, v in first.items() if k != "part"} | {
        "n_images": sum(m["n_images"] for m in metas),
        "device": ",".join(sorted({m["device"] for m in metas})),
        **{key: _one_or_all({m.get(key) for m in metas}) for key in SOURCE_KEYS if any(key in m for m in metas)},
        "seconds": round(seconds, 3),
        "crops_per_second": round(crops / seconds, 2) if seconds else None,
    }


def _one_or_all(values: set[Any]) -> Any:
    """The parts' common value, or all of them joined (parts run at different commits or folders of the workflow)."""
    return next(iter(values)) if len(values) == 1 else ",".join(sorted(map(str, values)))


def _check_parts(metas: Sequence[dict[str, Any]], paths: Sequence[Path]) -> None:
    """Refuse parts that are not parts 0 .. n - 1 of n, in that order."""
    for k, (meta, path) in enumerate(zip(metas, paths, strict=True)):
        if meta.get("part") != [k, len(paths)]:
            raise ValueError(f"{path} is not part {k} of {len(paths)} (its metadata says {meta.get('part')})")


def _check_images(table: pa.Table, image_ids: Sequence[str], rows_per_image: int, what: str) -> None:
    """Refuse a merged table whose images are not ``image_ids`` in order, ``rows_per_image`` rows each."""
    found = table["image_id"].combine_chunks().dictionary.to_pylist()
    if found != list(image_ids) or table.num_rows != rows_per_image * len(image_ids):
        raise ValueError(
            f"the merged {what} hold {table.num_rows} rows for {len(found)} images, not {rows_per_image} rows for "
            f"each of the manifest's {len(image_ids)} images in order; rerun the job's parts (--forcerun predict)"
        )


def merge_parts(
    parts: Sequence[tuple[Path, Path]], predictions: Path, aggregates: Path, image_ids: Sequence[str]
) -> dict[str, Any]:
    """Merge the parts' ``(predictions, aggregates)`` files, in part order, into the job's two files; returns the
    predictions' metadata. ``image_ids`` are the manifest's."""
    metas = [read_metadata(p) for p, _ in parts]
    aggregate_metas = [read_metadata(a) for _, a in parts]
    _check_parts(metas, [p for p, _ in parts])
    full = [k for k, meta in enumerate(metas) if meta["n_images"]]
    if not full:
        raise ValueError(f"all {len(parts)} prediction parts are empty; rerun them (--forcerun predict)")
    metadata = merged_metadata([metas[k] for k in full])
    table, aggregate_table = merge(p for p, _ in parts), merge(a for _, a in parts)
    _check_images(table, image_ids, ZoomGrid(metadata["scales"]).n_transforms, "predictions")
    _check_images(aggregate_table, image_ids, len(aggregate_metas[full[0]]["views"]), "aggregates")
    write_table(aggregates, aggregate_table, merged_metadata([aggregate_metas[k] for k in full]))
    write_table(predictions, table, metadata)
    return metadata
