"""The ImageNet-Hard table from typed metrics: card numbers beside each model, study models apart, by origin."""

from dataclasses import replace

import pytest
import yaml

from tests.conftest import ROOT
from tests.test_tables import metric
from zoomeval.report.imagenet_hard import CARD, STUDY_MODELS, card_row, write_table_imagenet_hard

MODELS = {
    "r50": {"source": "torchvision", "architecture": "resnet50", "weights": "IMAGENET1K_V1"},
    "vgg19": {"source": "torchvision", "architecture": "vgg19", "weights": "IMAGENET1K_V1"},
    "clip336": {"source": "open_clip", "architecture": "ViT-L-14-336", "weights": "openai", "mean": [0.5] * 3},
    "lite0": {"source": "embedded", "architecture": "tf_efficientnet_lite0", "weights": "x.pth"},
}


def hard(model, acc_standard, by_origin, n_images=10_980):
    return replace(metric(model, "imagenet_hard", 1000, 1.0, 2.0, 3.0), acc_standard=acc_standard,
                   n_images=n_images, by_origin=by_origin)  # fmt: skip


def test_rows_carry_the_card_and_the_origins(tmp_path):
    origins = {"imagenet_sketch": {"acc_standard": 10.0}, "objectnet": {"acc_standard": 20.5}}
    metrics = [
        hard("r50", 14.0, origins),
        hard("vgg19", 12.5, {"objectnet": {"acc_standard": 1.0}}),
        hard("clip336", None, None),
        hard("lite0", 30.0, origins),
        replace(hard("r50", 99.0, origins), variant="fgset"),  # not the original images: left out
    ]
    write_table_imagenet_hard(metrics, MODELS, tmp_path / "h.csv", tmp_path / "h.md")
    assert (tmp_path / "h.csv").read_text().splitlines() == [
        "dataset,model,selection,n_images,acc_standard,acc_1crop,acc_max,card_model,card_accuracy,card_diff,"
        "acc_standard:imagenet_sketch,acc_standard:objectnet,n_bad,n_unscored,left_out",
        "imagenet_hard,r50,study,10980,14.00,1.00,3.00,ResNet-50,14.74,-0.74,10.00,20.50,0,0,none",
        "imagenet_hard,vgg19,held_out,10980,12.50,1.00,3.00,VGG-16 (run as VGG-19),11.99,+0.51,,1.00,0,0,none",
        "imagenet_hard,clip336,held_out,10980,,1.00,3.00,CLIP-ViT-L/14@336,2.02,,,,0,0,none",
        "imagenet_hard,lite0,held_out,10980,30.00,1.00,3.00,,,,10.00,20.50,0,0,none",
    ]
    md = (tmp_path / "h.md").read_text()
    never, study = md.index("## Models that never saw the selection"), md.index("## Models of the zoom study")
    assert never < md.index("| vgg19 |") < study < md.index("| r50 |")
    assert "VGG-16 (run as VGG-19): the notebook's VGG-19 run behind the card's 12.00." in md
    assert "compares different image sets" not in md


def test_a_run_on_another_image_count_says_so(tmp_path):
    write_table_imagenet_hard([hard("r50", 14.0, None, n_images=5)], MODELS, tmp_path / "h.csv", tmp_path / "h.md")
    assert "This run has 5 images, the card 10,980: card_diff compares different image sets." in (
        tmp_path / "h.md"
    ).read_text()


def test_the_card_and_the_study_models():
    assert [(r.name, r.accuracy) for r in CARD if r.name.startswith(("CLIP", "OpenCLIP", "EfficientNet-L2"))] == [
        ("EfficientNet-L2-NS", 39.00), ("CLIP-ViT-L/14@224", 1.86), ("CLIP-ViT-L/14@336", 2.02),
        ("OpenCLIP ViT-bigG-14", 15.93), ("OpenCLIP ViT-L-14 DataComp", 15.60),
    ]  # fmt: skip
    assert len(STUDY_MODELS) == 7  # five torchvision models and CLIP ViT-L/14 (with and without -quickgelu)
    assert ("torchvision", "vgg16", "IMAGENET1K_V1") in STUDY_MODELS
    assert ("torchvision", "vgg19", "IMAGENET1K_V1") not in STUDY_MODELS


@pytest.mark.parametrize("config", ["imagenet_hard.yaml", "paper.yaml"])
def test_every_model_of_the_shipped_configs_has_its_card_row(config):
    models = yaml.safe_load((ROOT / "config" / config).read_text())["models"]
    rows = {name: card_row(entry) for name, entry in models.items()}
    assert all(rows.values()), [name for name, row in rows.items() if row is None]
    if config == "imagenet_hard.yaml":
        assert len({row.name for row in rows.values()}) == len(CARD) == 13
