"""The real-dataset adapters, on tiny fixtures written in each source's own format."""

import csv
import io
import json
import re
import struct
import zlib
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from zoomeval.core.classes import description
from zoomeval.core.images import screen
from zoomeval.datasets.adapters.imagefolder import imagenet_a, imagenet_r, imagenet_sketch, wnid_folders
from zoomeval.datasets.adapters.imagenet_hard import from_shards as imagenet_hard
from zoomeval.datasets.adapters.imagenet_v2 import imagenet_v2
from zoomeval.datasets.adapters.imagenet_val import imagenet_val
from zoomeval.datasets.adapters.objectnet import objectnet

TENCH, GOLDFISH, TOILET_TISSUE = "n01440764", "n01443537", "n15075141"  # indices 0, 1, 999
STINGRAY, GOLDFINCH = "n01498041", "n01531178"  # indices 6 and 11, both in ImageNet-A

# Three validation images: (file number, size, objects as wnid + VOC box as the source writes it).
VAL = [
    (1, (20, 10), [(TENCH, (1, 1, 10, 5)), (TENCH, (5, 3, 20, 10))]),
    (2, (30, 16), [(GOLDFISH, (2, 4, 30, 16))]),
    (3, (12, 12), [(TOILET_TISSUE, (0, 0, 13, 12))]),  # reaches past the image: clipped
]


def save_image(path: Path, size: tuple[int, int], fmt: str = "JPEG") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (200, 40, 40)).save(path, format=fmt)


def voc_xml(stem: str, size: tuple[int, int], objects: list) -> str:
    """An annotation as in ILSVRC2012_bbox_val_v3.tgz."""
    parts = [
        f"<annotation><folder>val</folder><filename>{stem}</filename>",
        "<source><database>ILSVRC_2012</database></source>",
        f"<size><width>{size[0]}</width><height>{size[1]}</height><depth>3</depth></size><segmented>0</segmented>",
    ]
    for wnid, (x0, y0, x1, y1) in objects:
        parts.append(
            f"<object><name>{wnid}</name><pose>Unspecified</pose><truncated>0</truncated><difficult>0</difficult>"
            f"<bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
        )
    return "\n".join([*parts, "</annotation>"])


@pytest.fixture
def val_tree(tmp_path):
    """Flat val images, the XML folder, the Kaggle CSV (rows out of order, trailing spaces) and a real.json."""
    images, xml_dir = tmp_path / "val", tmp_path / "bbox" / "val"
    xml_dir.mkdir(parents=True)
    rows = []
    for number, size, objects in VAL:
        stem = f"ILSVRC2012_val_{number:08d}"
        save_image(images / f"{stem}.JPEG", size)
        (xml_dir / f"{stem}.xml").write_text(voc_xml(stem, size, objects))
        rows.append(f"{stem},{' '.join(f'{w} {x0} {y0} {x1} {y1}' for w, (x0, y0, x1, y1) in objects)} ")
    csv_path = tmp_path / "LOC_val_solution.csv"
    csv_path.write_text("\n".join(["ImageId,PredictionString", *reversed(rows)]) + "\n")
    real = [[], [1, 2], [999]] + [[0]] * (50_000 - 3)
    (tmp_path / "real.json").write_text(json.dumps(real))
    return tmp_path


def test_imagenet_val_from_xml_and_csv_agree(val_tree):
    images, real = val_tree / "val", val_tree / "real.json"
    from_xml, classes = imagenet_val(images, val_tree / "bbox", real)
    from_csv, _ = imagenet_val(images, val_tree / "LOC_val_solution.csv", real)
    assert from_xml == from_csv
    assert classes is None
    assert [r.image_id for r in from_xml] == [f"ILSVRC2012_val_0000000{n}" for n in (1, 2, 3)]
    assert [r.labels for r in from_xml] == [[0], [1], [999]]
    assert [r.wnids for r in from_xml] == [[TENCH], [GOLDFISH], [TOILET_TISSUE]]
    assert [(r.width, r.height) for r in from_xml] == [(20, 10), (30, 16), (12, 12)]
    assert from_xml[0].path == str((images / "ILSVRC2012_val_00000001.JPEG").resolve())
    assert {r.origin for r in from_xml} == {"imagenet"} and {r.border for r in from_xml} == {0}


def test_imagenet_val_boxes_become_zero_based_half_open(val_tree):
    records, _ = imagenet_val(val_tree / "val", val_tree / "bbox", val_tree / "real.json")
    # VOC 1-based inclusive [xmin, ymin, xmax, ymax] -> [xmin - 1, ymin - 1, xmax, ymax], clipped to the image.
    assert records[0].boxes == [(0, 0, 10, 5), (4, 2, 20, 10)]
    assert records[1].boxes == [(1, 3, 30, 16)]
    assert records[2].boxes == [(0, 0, 12, 12)]


def test_imagenet_val_real_labels_keep_empty_lists(val_tree):
    records, _ = imagenet_val(val_tree / "val", val_tree / "bbox", val_tree / "real.json")
    assert [r.real_labels for r in records] == [[], [1, 2], [999]]


def test_imagenet_val_defaults_to_timms_real_labels(val_tree):
    records, _ = imagenet_val(val_tree / "val", val_tree / "LOC_val_solution.csv")
    shipped = json.loads((resources.files("timm.data") / "_info" / "imagenet_real_labels.json").read_text())
    assert len(shipped) == 50_000
    assert [r.real_labels for r in records] == shipped[:3] == [[], [970, 795], [230, 231]]


def test_imagenet_val_accepts_wnid_subfolders(val_tree):
    flat, _ = imagenet_val(val_tree / "val", val_tree / "bbox", val_tree / "real.json")
    nested = val_tree / "nested"
    for record, (_, size, objects) in zip(flat, VAL, strict=True):
        save_image(nested / objects[0][0] / f"{record.image_id}.JPEG", size)
    records, _ = imagenet_val(nested, val_tree / "bbox", val_tree / "real.json")
    assert [(r.image_id, r.labels, r.boxes) for r in records] == [(r.image_id, r.labels, r.boxes) for r in flat]
    save_image(nested / GOLDFISH / "ILSVRC2012_val_00000001.JPEG", (20, 10))
    (nested / TENCH / "ILSVRC2012_val_00000001.JPEG").unlink()
    with pytest.raises(ValueError, match=f"lies in folder {GOLDFISH} but is annotated as {TENCH}"):
        imagenet_val(nested, val_tree / "bbox", val_tree / "real.json")


def test_imagenet_val_errors_name_the_problem(val_tree):
    images, real = val_tree / "val", val_tree / "real.json"
    with pytest.raises(FileNotFoundError, match="missing is not a folder"):
        imagenet_val(val_tree / "missing", val_tree / "bbox", real)
    with pytest.raises(FileNotFoundError, match="LOC_val.csv does not exist"):
        imagenet_val(images, val_tree / "LOC_val.csv", real)
    with pytest.raises(ValueError, match="expected a list of 50000 lists"):
        (val_tree / "short.json").write_text("[[1], [2]]")
        imagenet_val(images, val_tree / "bbox", val_tree / "short.json")
    stem = "ILSVRC2012_val_00000002"
    (val_tree / "bbox" / "val" / f"{stem}.xml").write_text(voc_xml(stem, (30, 16), []))
    with pytest.raises(ValueError, match=f"{stem}.xml has no <object>"):
        imagenet_val(images, val_tree / "bbox", real)
    mixed = [(TENCH, (1, 1, 2, 2)), (GOLDFISH, (1, 1, 2, 2))]
    (val_tree / "bbox" / "val" / f"{stem}.xml").write_text(voc_xml(stem, (30, 16), mixed))
    with pytest.raises(ValueError, match="expected the objects of one class"):
        imagenet_val(images, val_tree / "bbox", real)
    (val_tree / "bbox" / "val" / f"{stem}.xml").write_text(voc_xml(stem, (30, 16), [("n99999999", (1, 1, 2, 2))]))
    with pytest.raises(ValueError, match="'n99999999' is not an ImageNet-1k wnid"):
        imagenet_val(images, val_tree / "bbox", real)
    (val_tree / "bbox" / "val" / f"{stem}.xml").unlink()
    with pytest.raises(ValueError, match=f"has no annotation for {stem}"):
        imagenet_val(images, val_tree / "bbox", real)


def make_wnid_tree(root: Path, files: dict[str, list[str]]) -> None:
    for wnid, names in files.items():
        for k, name in enumerate(names):
            save_image(root / wnid / name, (16 + k, 8), "PNG" if name.endswith(".png") else "JPEG")
    (root / "README.txt").write_text("ImageNet-A ships a README next to its class folders")


def test_imagenet_a_uses_timms_200_classes(tmp_path):
    make_wnid_tree(tmp_path, {GOLDFINCH: ["b.jpg", "a.png"], STINGRAY: ["x.JPEG"]})
    records, classes = imagenet_a(tmp_path)
    assert len(classes) == 200 and classes == sorted(classes) and {6, 11} <= set(classes)
    assert [r.image_id for r in records] == [f"{STINGRAY}/x", f"{GOLDFINCH}/a", f"{GOLDFINCH}/b"]
    assert [r.labels for r in records] == [[6], [11], [11]]
    assert [r.wnids for r in records] == [[STINGRAY], [GOLDFINCH], [GOLDFINCH]]
    assert [(r.width, r.height) for r in records] == [(16, 8), (17, 8), (16, 8)]
    assert {r.origin for r in records} == {"imagenet_a"}
    (tmp_path / TENCH).mkdir()
    with pytest.raises(ValueError, match=f"'{TENCH}' is not one of the dataset's 200 wnids"):
        imagenet_a(tmp_path)


def test_imagenet_r_and_sketch_class_sets(tmp_path):
    make_wnid_tree(tmp_path, {GOLDFISH: ["a.jpg"]})
    records, classes = imagenet_r(tmp_path)
    assert len(classes) == 200 and classes[0] == 1 and records[0].labels == [1]
    records, classes = imagenet_sketch(tmp_path)
    assert classes is None and records[0].origin == "imagenet_sketch"


def test_wnid_folders_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere is not a folder"):
        wnid_folders(tmp_path / "nowhere", None, "x")
    (tmp_path / "cats").mkdir()
    with pytest.raises(ValueError, match="cats: 'cats' is not an ImageNet-1k wnid"):
        wnid_folders(tmp_path, None, "x")
    (tmp_path / "cats").rmdir()
    (tmp_path / TENCH).mkdir()
    with pytest.raises(ValueError, match="no images under"):
        wnid_folders(tmp_path, None, "x")


def test_imagenet_v2_labels_are_folder_indices(tmp_path):
    root = tmp_path / "imagenetv2-matched-frequency-format-val"
    for folder, name in [("999", "c.jpeg"), ("10", "b.jpeg"), ("0", "a.jpeg"), ("0", "d.jpeg")]:
        save_image(root / folder / name, (9, 7))
    records, classes = imagenet_v2(root)
    assert classes is None
    assert [r.image_id for r in records] == ["0/a", "0/d", "10/b", "999/c"]
    assert [r.labels for r in records] == [[0], [0], [10], [999]]
    assert records[3].wnids == [TOILET_TISSUE] and records[0].origin == "imagenet_v2"
    (root / "1000").mkdir()
    with pytest.raises(ValueError, match=r"named by class index 0 \.\. 999, found \['1000'\]"):
        imagenet_v2(root)


def write_objectnet_mappings(mappings: Path, shift: int = 0) -> None:
    """The four mapping files in ObjectNet 1.0's formats, with a scrambled pytorch <-> 2012 id permutation so that
    the indirection matters; ``shift`` misaligns the names file (as a 1-based reading would)."""
    mappings.mkdir(parents=True)
    pytorch_to_id = {index: (index * 7 + 3) % 1000 for index in range(1000)}
    id_to_pytorch = {id_: index for index, id_ in pytorch_to_id.items()}
    names = [description(id_to_pytorch[(id_ + shift) % 1000]) for id_ in range(1000)]
    (mappings / "imagenet_to_label_2012_v2").write_text("\n".join(names) + "\n")
    (mappings / "pytorch_to_imagenet_2012_id.json").write_text(
        json.dumps({str(k): v for k, v in pytorch_to_id.items()})
    )
    folders = {"alarm_clock": "Alarm clock", "squeegee": "Squeegee"}
    (mappings / "folder_to_objectnet_label.json").write_text(json.dumps(folders))
    (mappings / "objectnet_to_imagenet_1k.json").write_text(json.dumps({"Alarm clock": "analog clock; digital clock"}))


def test_objectnet_maps_classes_through_the_mapping_files(tmp_path):
    write_objectnet_mappings(tmp_path / "mappings")
    save_image(tmp_path / "images" / "alarm_clock" / "b1.png", (30, 20), "PNG")
    save_image(tmp_path / "images" / "alarm_clock" / "a0.png", (25, 40), "PNG")
    save_image(tmp_path / "images" / "squeegee" / "c2.png", (30, 20), "PNG")
    records, classes = objectnet(tmp_path)
    assert classes == [409, 530]  # analog clock, digital clock
    assert [r.image_id for r in records] == ["alarm_clock/a0", "alarm_clock/b1"]  # squeegee has no ImageNet class
    assert [r.labels for r in records] == [[409, 530], [409, 530]]
    assert records[0].wnids == ["n02708093", "n03196217"]
    assert [(r.width, r.height, r.border) for r in records] == [(21, 36, 2), (26, 16, 2)]
    assert records[0].origin == "objectnet" and records[0].path.endswith("images/alarm_clock/a0.png")


def test_objectnet_errors_name_the_problem(tmp_path):
    write_objectnet_mappings(tmp_path / "shifted" / "mappings", shift=1)
    save_image(tmp_path / "shifted" / "images" / "alarm_clock" / "a.png", (30, 20), "PNG")
    with pytest.raises(ValueError, match="line 1 .* expected 0-based ImageNet 2012 ids"):
        objectnet(tmp_path / "shifted")
    root = tmp_path / "on"
    write_objectnet_mappings(root / "mappings")
    save_image(root / "images" / "desk" / "a.png", (30, 20), "PNG")
    with pytest.raises(ValueError, match="'desk' is not in .*folder_to_objectnet_label.json"):
        objectnet(root)
    (root / "images" / "desk" / "a.png").rename(root / "a.png")
    (root / "images" / "desk").rename(root / "images" / "alarm_clock")
    (root / "mappings" / "objectnet_to_imagenet_1k.json").write_text(json.dumps({"Alarm clock": "alarm clock"}))
    with pytest.raises(ValueError, match=r"'Alarm clock' maps to names that name no single ImageNet class: \['alarm"):
        objectnet(root)
    (root / "mappings" / "objectnet_to_imagenet_1k.json").unlink()
    with pytest.raises(FileNotFoundError, match="objectnet_to_imagenet_1k.json does not exist"):
        objectnet(root)


def image_bytes(fmt: str, size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 120, 30)).save(buf, format=fmt)
    return buf.getvalue()


HARD_SCHEMA = pa.schema(
    [
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("label", pa.list_(pa.int64())),
        ("origin", pa.string()),
        ("english_label", pa.list_(pa.string())),
    ]
)


def write_hard_shard(path: Path, rows: list[tuple[bytes | None, list[int] | None, str | None]]) -> Path:
    columns = {
        "image": [{"bytes": data, "path": f"{k}.img"} for k, (data, _, _) in enumerate(rows)],
        "label": [labels for _, labels, _ in rows],
        "origin": [origin for _, _, origin in rows],
        "english_label": [[description(i) for i in labels or [] if i in range(1000)] for _, labels, _ in rows],
    }
    pq.write_table(pa.table(columns, schema=HARD_SCHEMA), path)
    return path


def test_imagenet_hard_writes_the_source_bytes(tmp_path):
    jpeg, png, webp = image_bytes("JPEG", (33, 21)), image_bytes("PNG", (8, 5)), image_bytes("WEBP", (6, 6))
    # Shards are passed out of order; rows are numbered in sorted shard order.
    write_hard_shard(tmp_path / "validation-00001-of-00002.parquet", [(webp, [999], "imagenet_v2")])
    write_hard_shard(
        tmp_path / "validation-00000-of-00002.parquet",
        [(jpeg, [409, 530, -1, -1], "objectnet"), (png, [1], "imagenet_sketch")],
    )
    shards = sorted(tmp_path.glob("*.parquet"), reverse=True)
    records, classes = imagenet_hard(shards, tmp_path / "images")
    assert classes is None
    assert [r.image_id for r in records] == ["00000", "00001", "00002"]
    assert [Path(r.path).name for r in records] == ["00000.jpg", "00001.png", "00002.webp"]
    assert [Path(r.path).read_bytes() for r in records] == [jpeg, png, webp]
    assert [r.labels for r in records] == [[409, 530], [1], [999]]
    assert records[0].wnids == ["n02708093", "n03196217"]
    assert [r.origin for r in records] == ["objectnet", "imagenet_sketch", "imagenet_v2"]
    assert [(r.width, r.height) for r in records] == [(33, 21), (8, 5), (6, 6)]
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == ["00000.jpg", "00001.png", "00002.webp"]
    again, _ = imagenet_hard(shards, tmp_path / "images")
    assert again == records


def test_imagenet_hard_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.parquet does not exist"):
        imagenet_hard([tmp_path / "missing.parquet"], tmp_path / "images")
    pq.write_table(pa.table({"image": [b"x"]}), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad.parquet: expected the columns .* missing \['label', 'origin'\]"):
        imagenet_hard([tmp_path / "bad.parquet"], tmp_path / "images")

    # a single file need not be named like a Hugging Face shard
    write_hard_shard(tmp_path / "nolabel.parquet", [(image_bytes("PNG", (4, 4)), [-1, -1], "x")])
    with pytest.raises(ValueError, match=r"nolabel.parquet row 0: label is \[-1, -1\]; expected a list of ImageNet"):
        imagenet_hard([tmp_path / "nolabel.parquet"], tmp_path / "images")


def bomb_png() -> bytes:
    """A PNG header claiming 20000 x 20000 pixels (400 megapixels): PIL refuses to even open it."""
    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))  # noqa: E731
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def test_imagenet_hard_rows_with_bad_images_follow_on_bad_image_with_shard_and_row(tmp_path):
    noise = np.random.default_rng(0).integers(0, 256, (64, 80, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, "JPEG")  # noise: most bytes are pixel data, so a cut leaves the header intact
    jpeg, png = buf.getvalue(), image_bytes("PNG", (8, 5))
    first = write_hard_shard(
        tmp_path / "validation-00000-of-00002-5f636587730321d1.parquet",
        [
            (jpeg, [1], "imagenet"),
            (jpeg[: len(jpeg) // 2], [2], "objectnet"),
            (b"<html>", [3], "imagenet_a"),
            (bomb_png(), [4], "imagenet_r"),
        ],
    )
    second = write_hard_shard(
        tmp_path / "validation-00001-of-00002-dec01916d28bddd0.parquet",
        [(None, [5], "imagenet_v2"), (png, [6], "imagenet_sketch")],
    )
    records, _ = imagenet_hard([first, second], tmp_path / "images")
    assert [Path(r.path).name for r in records] == [
        "00000.jpg",
        "00001.jpg",
        "00002.bin",
        "00003.bin",
        "00004.bin",
        "00005.png",
    ]
    assert [(r.width, r.height) for r in records] == [(80, 64), (80, 64), (0, 0), (0, 0), (0, 0), (8, 5)]
    kept, excluded = screen(records, "skip", tmp_path / "bad_images.csv", dataset="h", max_scale=256)
    assert [r.image_id for r in kept] == ["00000", "00005"] and excluded == 4
    with open(tmp_path / "bad_images.csv", newline="") as fh:
        bad = list(csv.DictReader(fh))
    assert [b["image_id"] for b in bad] == ["00001", "00002", "00003", "00004"]
    assert [b["source"] for b in bad] == [f"{first} row 1", f"{first} row 2", f"{first} row 3", f"{second} row 0"]
    reasons = [b["reason"] for b in bad]
    assert "truncated" in reasons[0] and reasons[2].startswith("DecompressionBombError")
    assert reasons[1].startswith("UnidentifiedImageError") and reasons[3].startswith("UnidentifiedImageError")
    with pytest.raises(ValueError, match=rf"'h': 4 of its 6 images cannot be used: {re.escape(str(first))} row 1 \("):
        screen(records, "fail", tmp_path / "bad_images.csv", dataset="h", max_scale=256)


@pytest.mark.parametrize(
    "label, origin, problem",
    [
        (None, "imagenet", "label is None"),
        ([3, None], "imagenet", r"label is \[3, None\]"),
        ([1000], "imagenet", r"label is \[1000\]"),
        ([-1, -1], "imagenet", r"label is \[-1, -1\]"),
        ([3], None, "origin is None"),
        ([3], "", "origin is ''"),
    ],
)
def test_imagenet_hard_refuses_a_row_with_a_bad_label_or_origin_naming_shard_and_row(tmp_path, label, origin, problem):
    good = (image_bytes("PNG", (4, 4)), [1], "imagenet")
    shard = write_hard_shard(tmp_path / "validation-00000-of-00001.parquet", [good, (good[0], label, origin)])
    with pytest.raises(ValueError, match=rf"{re.escape(str(shard))} row 1: {problem}; expected"):
        imagenet_hard([shard], tmp_path / "images")


def test_imagenet_hard_refuses_a_shard_that_is_not_imagenet_hard_parquet(tmp_path):
    shard = tmp_path / "validation-00000-of-00001.parquet"
    rows = [(image_bytes("PNG", (4, 4)), [1], "imagenet")] * 200
    intact = write_hard_shard(shard, rows).read_bytes()
    for garbage in (b"<html>rate limited</html>", intact[: len(intact) // 2], intact[:4] + b"\0" * 200 + intact[204:]):
        shard.write_bytes(garbage)
        with pytest.raises(ValueError, match=f"{re.escape(str(shard))} is not a readable Parquet file .*download it"):
            imagenet_hard([shard], tmp_path / "images")
    image = {"bytes": image_bytes("PNG", (4, 4)), "path": "x"}
    for column, value in [("label", pa.array([3])), ("origin", pa.array([7])), ("image", pa.array([b"x"]))]:
        table = {
            "image": pa.array([image], pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            "label": pa.array([[3]]),
            "origin": pa.array(["imagenet"]),
            column: value,
        }
        pq.write_table(pa.table(table), shard)
        with pytest.raises(ValueError, match=rf"{re.escape(str(shard))}: column '{column}' is \w+, expected"):
            imagenet_hard([shard], tmp_path / "images")


@pytest.mark.parametrize(
    "names, problem",
    [
        (
            ["validation-00000-of-00003.parquet", "validation-00002-of-00003.parquet"],
            r"\['missing validation-00001-of-00003'\]",
        ),
        (["validation-00000-of-00003.parquet"], r"\['missing validation-00001-of-00003', 'missing validation-00002"),
        (
            [
                "validation-00000-of-00001-36efe923955f51bb.parquet",
                "validation-00000-of-00001-5f636587730321d1.parquet",
            ],
            r"\['validation-00000-of-00001 found 2 times'\]",
        ),
        (
            ["validation-00000-of-00001.parquet", "validation-00001-of-00001.parquet"],
            r"\['extra validation-00001-of-00001.parquet'\]",
        ),
        (
            [
                "validation-00000-of-00001.parquet",
                "validation-00000-of-00002.parquet",
                "validation-00001-of-00002.parquet",
            ],
            r"2 shard sets, \['validation-\*-of-00001', 'validation-\*-of-00002'\]",
        ),
        (["test-00000-of-00001.parquet", "validation-00000-of-00001.parquet"], "2 shard sets"),
        (["validation-00000-of-00001.parquet", "extra.parquet"], r"\['extra.parquet'\] are not named like"),
        (["a.parquet", "b.parquet"], r"\['a.parquet', 'b.parquet'\] are not named like"),
    ],
)
def test_imagenet_hard_needs_one_complete_set_of_shards(tmp_path, names, problem):
    row = [(image_bytes("PNG", (4, 4)), [1], "imagenet")]
    shards = [write_hard_shard(tmp_path / name, row) for name in names]
    with pytest.raises(ValueError, match=f"ImageNet-Hard: .*{problem}.*pin the hf input's revision"):
        imagenet_hard(shards, tmp_path / "images")
    assert not (tmp_path / "images").exists()  # refused before any image is written


def test_hidden_files_and_folders_are_ignored(tmp_path, val_tree):
    make_wnid_tree(tmp_path / "a", {GOLDFINCH: ["a.png"]})
    for hidden in (tmp_path / "a" / ".ipynb_checkpoints", tmp_path / "a" / GOLDFINCH / ".ipynb_checkpoints"):
        save_image(hidden / "a-checkpoint.png", (5, 5), "PNG")
    (tmp_path / "a" / GOLDFINCH / "._a.png").write_bytes(b"\x00\x05\x16\x07 macOS AppleDouble")
    records, _ = imagenet_a(tmp_path / "a")
    assert [r.image_id for r in records] == [f"{GOLDFINCH}/a"]

    save_image(tmp_path / "v2" / "3" / "a.jpeg", (9, 7))
    save_image(tmp_path / "v2" / ".ipynb_checkpoints" / "a.jpeg", (9, 7))
    assert [r.image_id for r in imagenet_v2(tmp_path / "v2")[0]] == ["3/a"]

    # a hidden copy of an annotation with other objects is not read
    stem = "ILSVRC2012_val_00000001"
    hidden = val_tree / "bbox" / "val" / ".ipynb_checkpoints" / f"{stem}.xml"
    hidden.parent.mkdir()
    hidden.write_text(voc_xml(stem, (20, 10), [(GOLDFISH, (1, 1, 2, 2))]))
    save_image(val_tree / "val" / ".ipynb_checkpoints" / f"{stem}.JPEG", (20, 10))
    records, _ = imagenet_val(val_tree / "val", val_tree / "bbox", val_tree / "real.json")
    assert [r.image_id for r in records] == [f"ILSVRC2012_val_0000000{n}" for n in (1, 2, 3)]
    assert records[0].labels == [0]


def test_imagenet_val_image_of_another_size_than_its_annotation_is_a_bad_image(val_tree):
    stem = "ILSVRC2012_val_00000002"
    save_image(val_tree / "val" / f"{stem}.JPEG", (31, 16))  # the XML says 30 x 16
    records, _ = imagenet_val(val_tree / "val", val_tree / "bbox", val_tree / "real.json")
    assert [(r.width, r.height) for r in records] == [(20, 10), (30, 16), (12, 12)]  # the annotated sizes
    kept, excluded = screen(records, "skip", val_tree / "bad.csv", dataset="v", max_scale=256)
    assert [r.image_id for r in kept] == ["ILSVRC2012_val_00000001", "ILSVRC2012_val_00000003"] and excluded == 1
    rows = list(csv.reader((val_tree / "bad.csv").open()))
    assert rows[1] == [stem, records[1].path, "decoded size 31x16 differs from the 30x16 its annotation gives", ""]
