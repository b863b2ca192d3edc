"""SAM masks on a tiny randomly initialised SAM built from segment-anything's own modules (CPU, offline)."""

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from segment_anything import SamPredictor, sam_model_registry

from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import CountFilter
from zoomeval.core.io import read_metadata
from zoomeval.core.manifest import Record
from zoomeval.masks.boxes import decode_mask
from zoomeval.masks.sam import (
    box_masks_sam,
    build_tiny_sam,
    count_objects,
    load_sam,
    write_sam_masks,
)

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_sam")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("sam") / "tiny_sam.pth"
    torch.save(build_tiny_sam().state_dict(), path)
    return path


@pytest.fixture(scope="module")
def predictor(checkpoint: Path) -> SamPredictor:
    return SamPredictor(load_sam("tiny", checkpoint, "cpu", build=None))


def synthetic_image(height: int, width: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 60, (height, width, 3), dtype=np.uint8)
    image[height // 4 : height // 2, width // 5 : width // 2] = (230, 40, 40)  # a bright "object"
    return image


def test_checkpoint_loads_with_weights_only(checkpoint: Path):
    saved = torch.load(checkpoint, weights_only=True)
    sam = load_sam("tiny", checkpoint, "cpu", build=None)
    assert not sam.training
    loaded = sam.state_dict()
    assert loaded.keys() == saved.keys()
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)


def test_registry_builder_never_sees_the_checkpoint(tmp_path: Path, checkpoint: Path, monkeypatch):
    calls: list[dict] = []
    monkeypatch.setitem(sam_model_registry, "vit_b", lambda **kwargs: (calls.append(kwargs), build_tiny_sam())[1])
    load_sam("vit_b", checkpoint, "cpu")
    assert calls == [{"checkpoint": None}]
    partial = tmp_path / "partial.pth"
    torch.save({k: v for k, v in torch.load(checkpoint, weights_only=True).items() if "mask_decoder" not in k}, partial)
    with pytest.raises(RuntimeError, match="Missing key"):  # strict: every parameter must come from the file
        load_sam("vit_b", partial, "cpu")


class Payload:
    """Unpickling this runs ``open(marker, "w")``: the code execution a weights-only load must refuse."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def test_pickled_payload_is_refused(tmp_path: Path, checkpoint: Path):
    state = torch.load(checkpoint, weights_only=True)
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pth"
    torch.save({**state, "payload": Payload(marker)}, evil)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        load_sam("tiny", evil, "cpu", build=None)
    assert not marker.exists()
    torch.load(evil, weights_only=False)  # the payload is live: an unsafe load does run it
    assert marker.exists()


def test_box_prompts_share_one_encoding_and_one_decoder_batch(predictor: SamPredictor, monkeypatch):
    image = synthetic_image(48, 40, seed=1)
    boxes = [(8, 12, 20, 24), (2, 30, 38, 46)]
    encodings: list[tuple[int, ...]] = []
    decoder_batches: list[int] = []
    set_image = predictor.set_image
    monkeypatch.setattr(predictor, "set_image", lambda img: (encodings.append(img.shape), set_image(img)))
    hook = predictor.model.mask_decoder.register_forward_hook(lambda _m, _a, out: decoder_batches.append(len(out[0])))
    try:
        mask, scores = box_masks_sam(predictor, image, boxes)
    finally:
        hook.remove()
    assert encodings == [(48, 40, 3)] and decoder_batches == [2]
    assert mask.shape == (48, 40) and mask.dtype == bool
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)

    # Same selection as prompting box by box: the best of three masks per box, united.
    expected = np.zeros_like(mask)
    for box, score in zip(boxes, scores, strict=True):
        masks, ious, _ = predictor.predict(box=np.asarray(box), multimask_output=True)
        expected |= masks[ious.argmax()]
        assert ious.max() == pytest.approx(score, abs=1e-5)
    assert np.array_equal(mask, expected)

    empty, none = box_masks_sam(predictor, image, [])
    assert empty.shape == (48, 40) and not empty.any() and none == []


def auto_mask(name: str, rows: slice, cols: slice, iou: float, stability: float) -> dict:
    """A mask record as SamAutomaticMaskGenerator returns it (on a 10 x 10 image), plus a name."""
    seg = np.zeros((10, 10), dtype=bool)
    seg[rows, cols] = True
    return {"name": name, "segmentation": seg, "predicted_iou": iou, "stability_score": stability}


def counted(masks: list[dict], **rule: float) -> list[str]:
    return [m["name"] for m in count_objects(masks, **rule)]


def test_count_objects_thresholds_and_deduplication():
    masks = [
        auto_mask("band", slice(3, 7), slice(None), 0.91, 0.99),  # 40 px: IoU 20/70 with top, 10/55 with corner
        auto_mask("copy", slice(0, 5), slice(None), 0.90, 0.99),  # exact duplicate of top, lower score
        auto_mask("corner", slice(5, 10), slice(0, 5), 0.92, 0.96),  # 25 px, disjoint from top
        auto_mask("unsure", slice(6, 9), slice(6, 9), 0.50, 0.99),  # predicted IoU too low
        auto_mask("unstable", slice(6, 9), slice(6, 9), 0.99, 0.80),  # stability too low
        auto_mask("pixel", slice(9, 10), slice(9, 10), 0.99, 0.99),  # 1 px: below the area fraction
        auto_mask("empty", slice(0, 0), slice(None), 0.99, 0.99),  # never an object
        auto_mask("top", slice(0, 5), slice(None), 0.95, 0.97),  # 50 px
    ]
    rule = {"min_iou": 0.88, "min_stability": 0.95, "min_area_fraction": 0.05}
    assert counted(masks, **rule, max_overlap=0.5) == ["top", "corner", "band"]
    assert counted(masks, **rule, max_overlap=0.25) == ["top", "corner"]  # band now duplicates top
    assert counted(masks, **{**rule, "min_area_fraction": 0.0}, max_overlap=0.5) == ["pixel", "top", "corner", "band"]
    assert counted(masks, **rule, max_overlap=1.0) == ["top", "corner", "band", "copy"]
    assert counted([], **rule, max_overlap=0.5) == []


@pytest.fixture
def records(tmp_path: Path) -> list[Record]:
    """Two tiny images; the second has a 2-px frame that decoding crops away."""
    plain, framed = tmp_path / "plain.png", tmp_path / "framed.png"
    Image.fromarray(synthetic_image(30, 44, seed=2)).save(plain)
    Image.fromarray(np.pad(synthetic_image(36, 28, seed=3), ((2, 2), (2, 2), (0, 0)), constant_values=255)).save(framed)
    return [
        Record("plain", str(plain), [1], ["n1"], width=44, height=30, boxes=[(4, 5, 20, 18), (25, 2, 40, 28)]),
        Record("framed", str(framed), [2], ["n2"], width=28, height=36, boxes=[], border=2),
    ]


@pytest.mark.parametrize("method", ["sam_box", "sam_auto"])
def test_write_sam_masks_end_to_end(tmp_path: Path, checkpoint: Path, records: list[Record], method: str):
    out = tmp_path / "masks" / f"{method}.parquet"
    # Permissive settings so a random model's masks reach the counting code; content is not asserted.
    counting = CountFilter(min_iou=-1e9, min_stability=0.0, min_area_fraction=0.0, max_overlap=0.7)
    generator = {"points_per_side": 4, "crop_n_layers": 0, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0}
    write_sam_masks(
        out,
        records,
        dataset="demo",
        method=method,
        model_type="tiny",
        checkpoint=checkpoint,
        counting=counting,
        generator_options=generator,
        build=None,
    )

    table = pq.read_table(out)
    assert table.schema.names == [
        "image_id",
        "method",
        "mask_png",
        "area_fraction",
        "n_objects",
        "scores",
        "box_coverage",
    ]
    types = dict(zip(table.schema.names, table.schema.types, strict=True))
    assert types["area_fraction"] == pa.float32() and types["n_objects"] == pa.int16()
    assert types["scores"] == pa.list_(pa.float32()) and types["box_coverage"] == pa.float32()
    rows = table.to_pylist()
    assert [r["image_id"] for r in rows] == ["plain", "framed"] and {r["method"] for r in rows} == {method}
    for row, record in zip(rows, records, strict=True):
        mask = decode_mask(row["mask_png"])
        assert mask.shape == (record.height, record.width)
        assert row["area_fraction"] == pytest.approx(mask.mean(), abs=1e-6)
        assert row["n_objects"] == len(row["scores"])
        if method == "sam_box":
            assert row["n_objects"] == len(record.boxes)
        if record.boxes:
            assert 0.0 <= row["box_coverage"] <= 1.0
        else:
            assert row["box_coverage"] is None

    if method == "sam_auto":  # the seeded random model does yield masks, so the counting path ran
        assert sum(r["n_objects"] for r in rows) > 0

    meta = read_metadata(out)
    assert meta["kind"] == "masks" and meta["method"] == method and meta["dataset"] == "demo"
    assert meta["model_type"] == "tiny" and meta["checkpoint_sha256"] == sha256_file(checkpoint)
    assert ("counting" in meta) == (method == "sam_auto")
    if method == "sam_auto":
        assert meta["counting"]["max_overlap"] == 0.7 and meta["generator_options"] == generator


def test_write_sam_masks_is_deterministic(tmp_path: Path, checkpoint: Path, records: list[Record]):
    options = {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0}
    tables = []
    for run in ("a", "b"):
        write_sam_masks(
            tmp_path / f"{run}.parquet",
            records,
            dataset="demo",
            method="sam_auto",
            model_type="tiny",
            checkpoint=checkpoint,
            counting=CountFilter(min_iou=-1e9, min_stability=0.0),
            generator_options=options,
            build=None,
        )
        tables.append(pq.read_table(tmp_path / f"{run}.parquet"))
    assert tables[0].equals(tables[1])


def test_unknown_method_or_model_type_is_rejected(tmp_path: Path, checkpoint: Path, records: list[Record]):
    with pytest.raises(ValueError, match="method"):
        write_sam_masks(
            tmp_path / "x.parquet",
            records,
            dataset="demo",
            method="sam",
            model_type="tiny",
            checkpoint=checkpoint,
            build=None,
        )
    with pytest.raises(ValueError, match="model type"):
        load_sam("vit_xl", checkpoint)
