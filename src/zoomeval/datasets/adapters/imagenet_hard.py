"""ImageNet-Hard from its Hugging Face Parquet shards, whose images are written out."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zoomeval.core.classes import NUM_CLASSES
from zoomeval.core.io import atomic_path
from zoomeval.core.manifest import Record
from zoomeval.datasets.files import header, image_record, require_file
from zoomeval.datasets.registry import ADAPTERS, Adapted

# PIL calls some camera JPEGs "MPO"; other formats are written with their PIL name as the file extension.
JPEG_FORMATS = frozenset({"JPEG", "MPO"})
HARD_COLUMNS = ["image", "label", "origin"]
HARD_BATCH_ROWS = 64
# A Hugging Face shard name: <split>-<index>-of-<count>[-<hash>].parquet, e.g. validation-00000-of-00009-5f63....parquet
HF_SHARD = re.compile(r"(?P<split>.+?)-(?P<index>\d{5})-of-(?P<count>\d{5})(?:-[0-9a-f]+)?\.parquet")


@ADAPTERS.register("imagenet_hard", required=("parquet",), images=True)
def imagenet_hard(parquet: Path, image_dir: Path) -> Adapted:
    """ImageNet-Hard from ``parquet``: a folder of Hugging Face shards (searched recursively) or one Parquet file."""
    return from_shards(sorted(parquet.rglob("*.parquet")) if parquet.is_dir() else [parquet], image_dir)


def from_shards(parquet_files: list[Path], image_dir: Path) -> Adapted:
    """ImageNet-Hard from the Hugging Face Parquet shards (``taesiri/imagenet-hard``), read in batches.

    The files must be one complete set of Hugging Face shards (``validation-00000-of-00009-<hash>.parquet`` ..
    ``validation-00008-of-00009-<hash>.parquet``) or a single Parquet file. Shards are taken in sorted path order
    and rows numbered across them. Each image's bytes are written unchanged to ``image_dir/{index:05d}{ext}``
    (``ext`` from the bytes' format, ``.bin`` when even the header is unreadable); the record's ``source`` names
    the shard and row. Labels drop the -1 padding. A row with a missing or invalid label or origin, or a shard
    that is not readable Parquet with ImageNet-Hard's columns, is refused with the shard and row named."""
    if not parquet_files:
        raise ValueError("no ImageNet-Hard Parquet shards given")
    for path in parquet_files:
        require_file(path, "an ImageNet-Hard Parquet shard")
    _check_shard_set(parquet_files)
    image_dir.mkdir(parents=True, exist_ok=True)
    records: list[Record] = []
    for path in sorted(parquet_files):
        for k, row in enumerate(_hard_rows(path)):
            records.append(_hard_record(row, len(records), f"{path} row {k}", image_dir))
    return records, None


def _check_shard_set(paths: list[Path]) -> None:
    """Refuse anything but one Parquet file or one complete set of Hugging Face shards, naming what is wrong.

    Older revisions of ``taesiri/imagenet-hard`` hold two shard sets side by side (e.g. ``-of-00005`` and
    ``-of-00009``); taking every ``*.parquet`` of such a revision would count most images twice."""
    shards = {name: HF_SHARD.fullmatch(name) for name in sorted(p.name for p in paths)}
    unnamed = [name for name, match in shards.items() if match is None]
    if unnamed == list(shards) and len(unnamed) == 1:
        return
    fix = "keep one complete set in the folder, or pin the hf input's revision to a commit that holds one"
    if unnamed:
        raise ValueError(
            f"ImageNet-Hard: {unnamed} are not named like Hugging Face shards (<split>-00000-of-00003.parquet), so "
            f"the {len(shards)} files cannot be checked for a complete set; {fix}"
        )
    found = [(m["split"], int(m["index"]), int(m["count"])) for m in shards.values() if m]
    sets = sorted({f"{split}-*-of-{count:05d}" for split, _, count in found})
    if len(sets) > 1:
        raise ValueError(f"ImageNet-Hard: the Parquet files hold {len(sets)} shard sets, {sets}; {fix}")
    split, _, count = found[0]
    indices = [index for _, index, _ in found]
    expected = {i: f"{split}-{i:05d}-of-{count:05d}" for i in range(count)}
    problems = [
        *(f"missing {name}" for i, name in expected.items() if i not in indices),
        *(f"{name} found {indices.count(i)} times" for i, name in expected.items() if indices.count(i) > 1),
        *(f"extra {name}" for name, i in zip(shards, indices, strict=True) if i >= count),
    ]
    if problems:
        raise ValueError(f"ImageNet-Hard: the shard set {sets[0]} is not complete and unique: {problems}; {fix}")


def _hard_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of one shard, read in batches, after a check of the columns' types."""
    try:
        shard = pq.ParquetFile(path)
        _check_hard_schema(path, shard.schema_arrow)
        for batch in shard.iter_batches(batch_size=HARD_BATCH_ROWS, columns=HARD_COLUMNS):
            yield from batch.to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(
            f"{path} is not a readable Parquet file ({type(exc).__name__}: {' '.join(str(exc).split())}); delete it "
            "and download it again "
            "(for an hf input, delete the dataset from the Hugging Face cache, e.g. with `hf cache delete`)"
        ) from exc


def _is_image(t: pa.DataType) -> bool:
    """The Hugging Face ``Image`` feature: a struct whose ``bytes`` field is binary."""
    return pa.types.is_struct(t) and t.get_field_index("bytes") >= 0 and _is_binary(t.field("bytes").type)


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _is_int_list(t: pa.DataType) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


#: Each column's type as the Hugging Face ``datasets`` library writes it (plain or large variants).
HARD_TYPES: dict[str, tuple[str, Callable[[pa.DataType], bool]]] = {
    "image": ("a struct with binary 'bytes'", _is_image),
    "label": ("a list of integers", _is_int_list),
    "origin": ("a string", _is_string),
}


def _check_hard_schema(path: Path, schema: pa.Schema) -> None:
    missing = set(HARD_COLUMNS) - set(schema.names)
    if missing:
        raise ValueError(f"{path}: expected the columns {HARD_COLUMNS}, missing {sorted(missing)}")
    for name, (expected, fits) in HARD_TYPES.items():
        if not fits(schema.field(name).type):
            raise ValueError(
                f"{path}: column {name!r} is {schema.field(name).type}, expected {expected} as in "
                "taesiri/imagenet-hard; check that this is an ImageNet-Hard shard"
            )


def _hard_record(row: dict[str, Any], index: int, source: str, image_dir: Path) -> Record:
    labels, origin = _hard_labels(row["label"], source), row["origin"]
    if not isinstance(origin, str) or not origin:
        raise ValueError(f"{source}: origin is {origin!r}; expected the name of the source dataset (a string)")
    data = (row["image"] or {}).get("bytes") or b""
    found = header(io.BytesIO(data))
    fmt, width, height = found if found else ("bin", 0, 0)  # unreadable: listed as bad by the manifest step
    path = image_dir / f"{index:05d}{'.jpg' if fmt in JPEG_FORMATS else f'.{fmt.lower()}'}"
    with atomic_path(path) as tmp:  # an interrupted run leaves no partial image
        tmp.write_bytes(data)
    return image_record(f"{index:05d}", path, labels, (width, height), origin, source=source)


def _hard_labels(value: Any, source: str) -> list[int]:
    """The ImageNet-1k indices of a row's ``label`` list, without the -1 padding."""
    labels = [label for label in value if label != -1] if isinstance(value, list) else []
    if not labels or not all(isinstance(label, int) and 0 <= label < NUM_CLASSES for label in labels):
        raise ValueError(
            f"{source}: label is {value!r}; expected a list of ImageNet-1k indices 0 .. 999 (padded with -1)"
        )
    return labels
