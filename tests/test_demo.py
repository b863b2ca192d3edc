"""The embedded demo: deterministic scenes whose photos the embedded model recognises."""

import numpy as np
import pytest
import torch
from PIL import Image

from zoomeval.core.config import ModelSpec
from zoomeval.core.zoom import zoom_crop
from zoomeval.datasets.adapters.demo import PHOTOS, SCENES, build_demo, load_photo
from zoomeval.inference.models import load_model
from zoomeval.inference.sources import embedded

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_demo")


def test_demo_is_byte_identical_on_rerun(tmp_path):
    first = build_demo(tmp_path / "a")
    second = build_demo(tmp_path / "b")
    assert len(first) == len(SCENES) == 12
    for r1, r2 in zip(first, second, strict=True):
        assert (r1.image_id, r1.labels, r1.boxes, r1.width, r1.height) == (
            r2.image_id,
            r2.labels,
            r2.boxes,
            r2.width,
            r2.height,
        )
        assert (tmp_path / "a" / f"{r1.image_id}.png").read_bytes() == (
            tmp_path / "b" / f"{r2.image_id}.png"
        ).read_bytes()


def test_demo_manifest_matches_the_scene_table(tmp_path):
    records = build_demo(tmp_path)
    assert sum(len(r.boxes) > 1 for r in records) >= 3
    for record, scene in zip(records, SCENES, strict=True):
        assert (record.width, record.height) == scene.size
        assert len(record.boxes) == len(scene.objects)
        for (xmin, ymin, xmax, ymax), placement in zip(record.boxes, scene.objects, strict=True):
            assert (xmin, ymin, xmax - xmin) == (placement.x, placement.y, placement.width)
            assert 0 <= xmin < xmax <= record.width and 0 <= ymin < ymax <= record.height
        assert record.labels == sorted({lab for p in scene.objects for lab in PHOTOS[p.photo].labels})
    # scene 4's small top-left cat: the box holds exactly the shrunk photo
    ((xmin, ymin, xmax, ymax),) = records[4].boxes
    photo = load_photo(PHOTOS["chelsea"].loader).resize((xmax - xmin, ymax - ymin), Image.Resampling.LANCZOS)
    with Image.open(records[4].path) as scene:
        assert np.array_equal(np.asarray(scene)[ymin:ymax, xmin:xmax], np.asarray(photo))
        assert np.asarray(scene)[ymax:, xmax:].std() > 10  # textured background, not a blank canvas


@pytest.fixture(scope="module")
def model():
    spec = ModelSpec(
        "lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE, 224, embedded.MEAN, embedded.STD
    )
    return load_model(spec, None).module, spec


@pytest.mark.parametrize("name", sorted(PHOTOS))
def test_each_clean_photo_is_classified_as_its_label(model, name):
    module, spec = model
    crop = np.asarray(zoom_crop(load_photo(PHOTOS[name].loader), 256, 1, 1), dtype=np.float32) / 255
    x = (torch.from_numpy(crop).permute(2, 0, 1)[None] - torch.tensor(spec.mean)[:, None, None]) / torch.tensor(
        spec.std
    )[:, None, None]
    with torch.inference_mode():
        top1 = int(module(x).argmax())
    assert top1 in PHOTOS[name].labels
