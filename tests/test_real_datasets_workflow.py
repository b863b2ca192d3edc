"""The workflow on tiny archives in the real datasets' published formats, fetched offline."""

import csv
import hashlib
import http.server
import json
import tarfile
import threading
from functools import partial

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import LAYOUT, ROOT
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
from tests.zipcrypto import write_encrypted_zip
from zoomeval.datasets.adapters.imagefolder import imagenet_a
from zoomeval.datasets.adapters.objectnet import PUBLISHED_PASSWORD

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
    build_objectnet_zip(src)
    # ImageNet-Hard: a Hugging Face Parquet shard
    (src / "hard").mkdir()
    hard = [
        (image_bytes("JPEG", (50, 40)), [0, 1], "imagenet"),
        (b"<html>", [3], "objectnet"),
        (image_bytes("PNG", (30, 30)), [6], "imagenet_a"),
    ]
    write_hard_shard(src / "hard" / "validation-00000-of-00001.parquet", hard)
    return hashlib.sha256((www / "imagenet-a.tar").read_bytes()).hexdigest()


def build_objectnet_zip(src):
    """objectnet-1.0/{images,mappings}/ in a zip encrypted like the published one, with the published password."""
    write_objectnet_mappings(src / "objectnet-1.0" / "mappings")
    save_image(src / "objectnet-1.0" / "images" / "alarm_clock" / "a.png", (60, 50), "PNG")
    save_image(src / "objectnet-1.0" / "images" / "squeegee" / "b.png", (60, 50), "PNG")
    members = {
        path.relative_to(src).as_posix() + ("/" if path.is_dir() else ""): b"" if path.is_dir() else path.read_bytes()
        for path in sorted((src / "objectnet-1.0").rglob("*"))
    }
    return write_encrypted_zip(src / "objectnet-1.0.zip", members, PUBLISHED_PASSWORD)


def test_workflow_on_real_formats(tmp_path, served, snakemake_run, config_writer):
    www, base = served
    src = tmp_path / "src"
    sha = build_archives(src, www)
    config_writer(
        tmp_path,
        scales=[256],
        top_k=9,  # every zoom transform, as the default 36 was with 9 (the workflow refuses more)
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
        },
    )
    snakemake_run(tmp_path, "results/table_a8.csv")
    with open(tmp_path / "results/table_a8.csv") as fh:
        rows = {(r["dataset"], r["variant"]): r for r in csv.DictReader(fh)}
    # ReaL (timm's copy) has an empty list for val image 1: it leaves ReaL scoring only
    assert {k: rows[k]["n_images"] for k in rows} == {
        ("imagenet", "original"): "3",
        ("imagenet", "bgset"): "3",
        ("imagenet_real", "original"): "2",
        ("imagenet_real", "bgset"): "2",
        ("imagenet_in_real", "original"): "3",
        ("imagenet_in_real", "bgset"): "3",
        ("imagenet_a", "original"): "2",
        ("objectnet", "original"): "1",
        ("hard", "original"): "2",
    }
    # and each row says what it left out: ReaL's image without a label, ImageNet-Hard's undecodable row
    left = {k[0]: (r["n_bad"], r["n_unscored"], r["left_out"]) for k, r in rows.items() if k[1] == "original"}
    assert left == {
        "imagenet": ("0", "0", "none"),
        "imagenet_real": ("0", "1", "1 not scored (no ReaL label)"),
        "imagenet_in_real": ("0", "0", "none"),
        "imagenet_a": ("0", "0", "none"),
        "objectnet": ("0", "0", "none"),
        "hard": ("1", "0", f"1 bad (1 unreadable, listed in {LAYOUT.path('bad_images', dataset='hard')})"),
    }
    # the subset policy restricts pred to each dataset's classes
    a = pq.read_table(tmp_path / "results/predictions/imagenet_a/original/efficientnet_lite0.parquet")
    (extracted,) = (tmp_path / "resources" / "imagenet_a" / "root.extracted").glob(f"imagenet-a.tar.{sha}.d")
    allowed = set(imagenet_a(extracted / "imagenet-a")[1])
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


def test_the_papers_objectnet_entry_reads_the_published_encrypted_zip(tmp_path, snakemake_run, config_writer):
    entry = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["datasets"]["objectnet"]
    assert entry["root"].endswith("/objectnet-1.0.zip") and "password" not in entry  # the published default
    entry["root"] = str(build_objectnet_zip(tmp_path / "src"))
    config_writer(tmp_path, datasets={"objectnet": entry}, stats={"pairs": []})
    snakemake_run(tmp_path, "results/datasets/objectnet/manifest.parquet")
    rows = pq.read_table(tmp_path / "results/datasets/objectnet/manifest.parquet").to_pylist()
    assert [(r["image_id"], r["labels"], r["width"], r["height"]) for r in rows] == [
        ("alarm_clock/a", [409, 530], 56, 46)  # the squeegee has no ImageNet class; 2-pixel frame cropped
    ]


def wnid_archive(path, n_images):
    """An ImageFolder tree of ``n_images`` tiny JPEGs under one top folder, as a tar; returns its sha256."""
    src = path.with_name(f"{path.name}.{n_images}")
    for i in range(n_images):
        save_image(src / "ds" / (STINGRAY if i % 2 else GOLDFINCH) / f"{i}.jpg", (20, 20))
    with tarfile.open(path, "w") as tar:
        tar.add(src / "ds", arcname="ds")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_ids(workdir, dataset="ds"):  # sorted: STINGRAY's wnid comes before GOLDFINCH's
    table = pq.read_table(workdir / f"results/datasets/{dataset}/manifest.parquet")
    return sorted(table["image_id"].to_pylist())


def test_a_replaced_archive_gives_a_new_manifest(tmp_path, served, snakemake_run, config_writer):
    www, base = served
    manifests = []
    for n_images in (2, 6):  # each archive replaced by a larger one, and its sha256 updated in the config
        local, remote = wnid_archive(www / "local.tar", n_images), wnid_archive(www / "remote.tar", n_images)
        datasets = {
            "local": {"adapter": "imagefolder", "root": {"path": str(www / "local.tar"), "sha256": local}},
            "remote": {"adapter": "imagefolder", "root": {"url": f"{base}/remote.tar", "sha256": remote}},
        }
        config_writer(tmp_path, datasets=datasets, stats={"pairs": []})
        snakemake_run(tmp_path, *(f"results/datasets/{name}/manifest.parquet" for name in datasets))
        manifests.append([manifest_ids(tmp_path, name) for name in datasets])
    two = [f"{STINGRAY}/1", f"{GOLDFINCH}/0"]
    six = [f"{STINGRAY}/1", f"{STINGRAY}/3", f"{STINGRAY}/5", f"{GOLDFINCH}/0", f"{GOLDFINCH}/2", f"{GOLDFINCH}/4"]
    assert manifests == [[two, two], [six, six]]


def resources(workdir):
    """The files under the resources root, the extracted dataset's left out."""
    root = workdir / "resources"
    files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()] if root.exists() else []
    return sorted(f for f in files if ".tar." not in f)


class CutFirstHandler(http.server.SimpleHTTPRequestHandler):
    """Answers the first request with half the file, no Content-Length and a closed connection."""

    def send_head(self):
        self.server.requests += 1
        file = super().send_head()
        if file is not None and not self.server.cut_done:
            self.server.cut_done = True
            data = file.read()
            file.close()
            self.wfile.write(data[: len(data) // 2])
            return None
        return file

    def send_header(self, keyword, value):
        if keyword == "Content-Length" and not self.server.cut_done:
            return  # the first answer does not say how long it is
        super().send_header(keyword, value)


def test_a_cut_download_is_not_kept_and_a_rerun_fetches_it(tmp_path, snakemake_run, config_writer):
    www = tmp_path / "www"
    www.mkdir()
    wnid_archive(www / "ds.tar", 3)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(CutFirstHandler, directory=str(www)))
    server.cut_done, server.requests = False, 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        root = {"url": f"http://127.0.0.1:{server.server_address[1]}/ds.tar"}  # no sha256 to catch it
        config_writer(tmp_path, datasets={"ds": {"adapter": "imagefolder", "root": root}}, stats={"pairs": []})
        proc = snakemake_run(tmp_path, "results/datasets/ds/manifest.parquet", check=False)
        assert proc.returncode != 0 and server.cut_done
        log = (tmp_path / "logs/fetch/ds/ds.tar.log").read_text()  # the fetch_url job's
        assert "ds.tar: not a complete tar archive" in log and "the download was deleted" in log
        assert resources(tmp_path) == []  # nothing kept under any name
        snakemake_run(tmp_path, "results/datasets/ds/manifest.parquet")
        assert manifest_ids(tmp_path) == [f"{STINGRAY}/1", f"{GOLDFINCH}/0", f"{GOLDFINCH}/2"]
        requests = server.requests
        # the download and its extraction are outputs of their own jobs: rebuilding the manifest fetches nothing
        snakemake_run(tmp_path, "results/datasets/ds/manifest.parquet", "--forcerun", "dataset_manifest")
        assert server.requests == requests and manifest_ids(tmp_path)[0] == f"{STINGRAY}/1"
        # and they are declared outputs, which --delete-all-output removes with the manifest
        assert resources(tmp_path) == [
            "ds/ds.tar",
            "ds/root.extracted/.sha256.json",
            "ds/root.extracted/.snakemake_timestamp",
        ]
        snakemake_run(tmp_path, "results/datasets/ds/manifest.parquet", "--delete-all-output")
        assert resources(tmp_path) == []
        assert not (tmp_path / "results/datasets/ds/manifest.parquet").exists()
    finally:
        server.shutdown()
