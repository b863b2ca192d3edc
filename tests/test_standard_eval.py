"""The standard evaluation: each library's own evaluation transform, and predictions recomputed by hand with the
library transforms end to end (decode, resize, crop, to-tensor, normalise, forward)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import torch
from open_clip.transform import PreprocessCfg, image_transform_v2
from PIL import Image
from timm.models import get_pretrained_cfg
from torchvision import transforms as T

from tests.test_open_clip import spec_of, tiny, tiny_head, tiny_weights  # noqa: F401 (fixtures)
from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.io import read_metadata
from zoomeval.core.manifest import Record
from zoomeval.inference.models import load_model
from zoomeval.inference.sources import embedded
from zoomeval.inference.standard_eval import eval_transform, evaluate_to_file

EMBEDDED = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE, mean=(0.1,) * 3, std=(0.9,) * 3)
SETTINGS = InferenceSettings(device="cpu", threads=1, num_workers=0, batch_size=3)


def steps(transform) -> list[tuple[str, object, str]]:
    """(step, size, interpolation) of a geometry Compose."""
    out = []
    for step in transform.transforms:
        interpolation = getattr(step, "interpolation", None)
        out.append((type(step).__name__, step.size, interpolation.value if interpolation else ""))
    return out


def test_each_library_gives_its_own_evaluation_transform():
    resnet = eval_transform(ModelSpec("r", "torchvision", "resnet50", "IMAGENET1K_V1"), None)
    assert steps(resnet.geometry) == [("Resize", [256], "bilinear"), ("CenterCrop", (224, 224), "")]
    assert (resnet.mean, resnet.std) == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    b7 = eval_transform(ModelSpec("b7", "torchvision", "efficientnet_b7", "IMAGENET1K_V1"), None)
    assert steps(b7.geometry) == [("Resize", [600], "bicubic"), ("CenterCrop", (600, 600), "")]
    # timm reads the pretrained config off the model; EfficientNet-L2-NS: crop_pct 0.96 at 800 px
    l2 = SimpleNamespace(pretrained_cfg=get_pretrained_cfg("tf_efficientnet_l2.ns_jft_in1k").to_dict())
    l2_transform = eval_transform(ModelSpec("l2", "timm", "tf_efficientnet_l2", "ns_jft_in1k"), l2)
    assert steps(l2_transform.geometry) == [("Resize", 833, "bicubic"), ("CenterCrop", (800, 800), "")]
    # the embedded weights: timm's data config of tf_efficientnet_lite0.in1k, crop_pct 0.875 at 224 px, bicubic
    lite = eval_transform(EMBEDDED, None)
    assert steps(lite.geometry) == [("Resize", 256, "bicubic"), ("CenterCrop", (224, 224), "")]
    assert (lite.mean, lite.std) == (embedded.MEAN, embedded.STD)
    assert lite.crop_settings() == {"img_size": 224, "crop_pct": 0.875, "interpolation": "bicubic"}


@pytest.fixture
def records(tmp_path) -> list[Record]:
    rng = np.random.default_rng(4)
    out = []
    for k, (size, labels) in enumerate([((300, 200), [1]), ((180, 260), [409, 530]), ((256, 256), [2])]):
        path = tmp_path / f"{k}.png"
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path)
        out.append(Record(f"img{k}", str(path), labels, [], *size))
    return out


def by_hand(model: torch.nn.Module, transform, records: list[Record], subset=None) -> tuple[list[int], np.ndarray]:
    """pred and conf with the library's full transform (ToTensor and Normalize included), one image at a time."""
    with torch.inference_mode():
        logits = torch.cat([model(transform(Image.open(r.path).convert("RGB"))[None]) for r in records])
    index = torch.tensor(subset if subset is not None else range(1000))
    probs = logits[:, index].softmax(dim=1)
    return index[probs.argmax(dim=1)].tolist(), probs.max(dim=1).values.numpy()


def test_the_embedded_model_by_hand_with_its_own_normalisation_not_the_configs(tmp_path, records):
    subset = [0, 1, 2, 409, 530, 999]
    metadata = evaluate_to_file(tmp_path / "s.parquet", records, EMBEDDED, SETTINGS, "toy", class_indices=subset)
    table = pq.read_table(tmp_path / "s.parquet")
    assert table.column_names == ["image_id", "pred", "pred_full", "conf"]
    assert [str(t) for t in table.schema.types] == ["string", "int16", "int16", "float"]
    bicubic = T.InterpolationMode.BICUBIC
    timm_eval = T.Compose(
        [T.Resize(256, bicubic), T.CenterCrop(224), T.ToTensor(), T.Normalize(embedded.MEAN, embedded.STD)]
    )
    pred, conf = by_hand(load_model(EMBEDDED, None).module, timm_eval, records, subset)
    frame = pl.read_parquet(tmp_path / "s.parquet")
    assert frame["image_id"].to_list() == ["img0", "img1", "img2"]
    assert frame["pred"].to_list() == pred and set(pred) <= set(subset)
    np.testing.assert_allclose(frame["conf"].to_numpy(), conf, rtol=1e-4)
    assert metadata == read_metadata(tmp_path / "s.parquet")
    assert metadata["kind"] == "standard_predictions" and metadata["schema_version"] == 1
    assert (metadata["model"]["mean"], metadata["class_indices"]) == ([0.5] * 3, subset)  # not the config's 0.1


def test_an_open_clip_model_by_hand_with_its_own_preprocess_and_top5(
    tmp_path,
    records,
    tiny,  # noqa: F811 (a fixture)
    tiny_weights,  # noqa: F811 (a fixture)
    tiny_head,  # noqa: F811 (a fixture)
):
    spec = spec_of(tiny)
    settings = InferenceSettings(device="cpu", threads=1, num_workers=0, batch_size=2, store_top5=True)
    metadata = evaluate_to_file(tmp_path / "s.parquet", records, spec, settings, "toy", None, tiny_weights, tiny_head)
    loaded = load_model(spec, tiny_weights, tiny_head)
    preprocess = image_transform_v2(PreprocessCfg(**loaded.module.model.visual.preprocess_cfg), is_train=False)
    pred, conf = by_hand(loaded.module, preprocess, records)
    frame = pl.read_parquet(tmp_path / "s.parquet")
    assert frame["pred"].to_list() == frame["pred_full"].to_list() == pred
    np.testing.assert_allclose(frame["conf"].to_numpy(), conf, rtol=1e-4)
    assert [row[0] for row in frame["top5"].to_list()] == pred
    assert "Resize(size=32, interpolation=bicubic" in metadata["transform"]
    assert metadata["model"]["zero_shot"]["duplicate_names"]["policy"] == "keep_first"
    assert metadata["model"]["zero_shot"]["template_list"] == ["a photo of a {}.", "a sketch of the {}."]


def test_an_empty_manifest_is_refused(tmp_path):
    with pytest.raises(ValueError, match="dataset 'toy': the manifest lists no images"):
        evaluate_to_file(tmp_path / "s.parquet", [], EMBEDDED, SETTINGS, "toy")
