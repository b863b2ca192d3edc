"""The workflow on tiny archives in the real datasets' published formats, fetched offline."""

import csv
import hashlib
import http.server
import json
import tarfile
import threading
import zipfile
from functools import partial

import pyarrow.parquet as pq
import pytest

from tests.test_adapters import (
    GOLDFINCH,
    STINGRAY,
    VAL,
    image_bytes,
    save_image,
    voc_xml,
    write_hard_shard,
    write_objectnet_mappings,
)
from zoomeval.adapters import imagenet_a

pytestmark = pytest.mark.workflow


@pytest.fixture
def served(tmp_path):
    """A static file server on 127.0.0.1 for tmp_path/www."""
    www = tmp_path / "www"
    www.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield www, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def build_archives(src, www):
    # ImageNet val: the flat image tar and the bbox XML tgz (members under val/)
    for number, size, objects in VAL:
        stem = f"ILSVRC2012_val_{number:08d}"
        save_image(src / "val" / f"{stem}.JPEG", size)
        (src / "xml" / "val").mkdir(parents=True, exist_ok=True)
        (src / "xml" / "val" / f"{stem}.xml").write_text(voc_xml(stem, size, objects))
    with tarfile.open(src / "ILSVRC2012_img_val.tar", "w") as tar:
        for path in sorted((src / "val").iterdir()):
            tar.add(path, arcname=path.name)
    with tarfile.open(src / "ILSVRC2012_bbox_val_v3.tgz", "w:gz") as tar:
        tar.add(src / "xml" / "val", arcname="val")
    # ImageNet-A: imagenet-a/<wnid>/<file>.jpg, served over HTTP
    for wnid, name in [(STINGRAY, "0.000116_digital clock _ digital clock_0.865662.jpg"), (GOLDFINCH, "x.jpg")]:
        save_image(src / "imagenet-a" / wnid / name, (40, 30))
    with tarfile.open(www / "imagenet-a.tar", "w") as tar:
        tar.add(src / "imagenet-a", arcname="imagenet-a")
    # ObjectNet: objectnet-1.0/{images,mappings}/ in a zip
    write_objectnet_mappings(src / "objectnet-1.0" / "mappings")
    save_image(src / "objectnet-1.0" / "images" / "alarm_clock" / "a.png", (60, 50), "PNG")
    save_image(src / "objectnet-1.0" / "images" / "squeegee" / "b.png", (60, 50), "PNG")
    with zipfile.ZipFile(src / "objectnet-1.0.zip", "w") as zf:
        for path in sorted((src / "objectnet-1.0").rglob("*")):
            zf.write(path, path.relative_to(src))
    # ImageNet-Hard: a Hugging Face Parquet shard
    (src / "hard").mkdir()
    hard = [(image_bytes("JPEG", (50, 40)), [0, 1], "imagenet"), (b"<html>", [3], "objectnet"),
            (image_bytes("PNG", (30, 30)), [6], "imagenet_a")]  # fmt: skip
    write_hard_shard(src / "hard" / "validation-00000-of-00001.parquet", hard)
    return hashlib.sha256((www / "imagenet-a.tar").read_bytes()).hexdigest()


def test_workflow_on_real_formats(tmp_path, served, snakemake_run, config_writer):
    www, base = served
    src = tmp_path / "src"
    sha = build_archives(src, www)
    config_writer(
        tmp_path,
        scales=[256],
        stats={"pairs": []},
        datasets={
            "imagenet": {
                "adapter": "imagenet_val",
                "images": str(src / "ILSVRC2012_img_val.tar"),
                "annotations": {"path": str(src / "ILSVRC2012_bbox_val_v3.tgz")},
                "label_sets": ["in", "real", "in_real"],
                "variants": ["original", "bgset"],
            },
            "imagenet_a": {
                "adapter": "imagenet_a",
                "root": {"url": f"{base}/imagenet-a.tar", "sha256": sha},
                "class_set": "subset",
            },
            "objectnet": {"adapter": "objectnet", "root": str(src / "objectnet-1.0.zip"), "class_set": "subset"},
            "hard": {"adapter": "imagenet_hard", "parquet": str(src / "hard")},
        },  # fmt: skip
    )
    snakemake_run(tmp_path, "results/table_a8.csv")
    with open(tmp_path / "results/table_a8.csv") as fh:
        rows = {(r["dataset"], r["variant"]): r for r in csv.DictReader(fh)}
    # ReaL (timm's copy) has an empty list for val image 1: it leaves ReaL scoring only
    assert {k: rows[k]["n_images"] for k in rows} == {
        ("imagenet", "original"): "3", ("imagenet", "bgset"): "3",
        ("imagenet_real", "original"): "2", ("imagenet_real", "bgset"): "2",
        ("imagenet_in_real", "original"): "3", ("imagenet_in_real", "bgset"): "3",
        ("imagenet_a", "original"): "2", ("objectnet", "original"): "1", ("hard", "original"): "2",
    }  # fmt: skip
    # the subset policy restricts pred to each dataset's classes
    a = pq.read_table(tmp_path / "results/predictions/imagenet_a/original/efficientnet_lite0.parquet")
    allowed = set(imagenet_a(tmp_path / "resources" / "imagenet_a" / "imagenet-a.tar.d" / "imagenet-a")[1])
    assert set(a["pred"].to_pylist()) <= allowed and len(allowed) == 200
    on = pq.read_table(tmp_path / "results/predictions/objectnet/original/efficientnet_lite0.parquet")
    assert set(on["pred"].to_pylist()) <= {409, 530}
    manifest = pq.read_table(tmp_path / "results/datasets/imagenet/manifest.parquet").to_pylist()
    assert [m["boxes"] for m in manifest][0] == [[0, 0, 10, 5], [4, 2, 20, 10]]
    hard = json.loads((tmp_path / "results/analysis/hard/original/efficientnet_lite0/metrics.json").read_text())
    assert hard["n_images"] == 2 and hard["n_excluded"] == 1
    with open(tmp_path / "results/datasets/hard/bad_images.csv") as fh:
        (bad,) = list(csv.DictReader(fh))
    assert (bad["image_id"], bad["source"]) == ("00001", f"{src / 'hard' / 'validation-00000-of-00001.parquet'} row 1")
    assert {o: v["n_images"] for o, v in hard["by_origin"].items()} == {"imagenet": 1, "imagenet_a": 1}
