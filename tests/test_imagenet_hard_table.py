"""The ImageNet-Hard table from typed metrics: card numbers beside each model, study models apart, by origin."""

from dataclasses import replace

import pytest
import yaml

from tests.conftest import ROOT
from tests.test_tables import metric, wilson
from zoomeval.report.imagenet_hard import CARD, STUDY_MODELS, card_row, write_table_imagenet_hard

MODELS = {
    "r50": {"source": "torchvision", "architecture": "resnet50", "weights": "IMAGENET1K_V1"},
    "vgg19": {"source": "torchvision", "architecture": "vgg19", "weights": "IMAGENET1K_V1"},
    "clip336": {"source": "open_clip", "architecture": "ViT-L-14-336", "weights": "openai", "mean": [0.5] * 3},
    "lite0": {"source": "embedded", "architecture": "tf_efficientnet_lite0", "weights": "x.pth"},
}


def share(k, n=10_980):
    """``k`` of ``n`` images in percent (the accuracies are counts of the images: the Markdown's intervals check)."""
    return 100 * k / n


ONE_CROP, MAX = share(110), share(329)  # 1.00 and 3.00 as the tables show them


def hard(model, acc_standard, by_origin, n_images=10_980, acc_1crop=ONE_CROP, acc_max=MAX):
    return replace(
        metric(model, "imagenet_hard", 1000, acc_1crop, 2.0, acc_max),
        acc_standard=acc_standard,
        n_images=n_images,
        by_origin=by_origin,
    )


def test_rows_carry_the_card_and_the_origins(tmp_path):
    # 2 of 20 sketches and 41 of 200 ObjectNet images right
    origins = {
        "imagenet_sketch": {"n_images": 20, "acc_standard": 10.0},
        "objectnet": {"n_images": 200, "acc_standard": 20.5},
    }
    metrics = [
        hard("r50", share(1537), origins),  # 13.998
        hard("vgg19", share(1373), {"objectnet": {"n_images": 200, "acc_standard": 1.0}}),  # 12.505
        hard("clip336", None, None),
        hard("lite0", share(3294), origins),  # 30
        replace(hard("r50", 99.0, origins), variant="fgset"),  # not the original images: left out
    ]
    write_table_imagenet_hard(metrics, MODELS, tmp_path / "h.csv", tmp_path / "h.md")
    assert (tmp_path / "h.csv").read_text().splitlines() == [
        "dataset,model,selection,n_images,acc_standard,acc_1crop,acc_max,card_model,card_accuracy,card_diff,"
        "acc_standard:imagenet_sketch,acc_standard:objectnet,n_scales,n_bad,n_unscored,left_out",
        "imagenet_hard,r50,study,10980,14.00,1.00,3.00,ResNet-50,14.74,-0.74,10.00,20.50,36,0,0,none",
        "imagenet_hard,vgg19,held_out,10980,12.50,1.00,3.00,VGG-16 (run as VGG-19),11.99,+0.51,,1.00,36,0,0,none",
        "imagenet_hard,clip336,held_out,10980,,1.00,3.00,CLIP-ViT-L/14@336,2.02,,,,36,0,0,none",
        "imagenet_hard,lite0,held_out,10980,30.00,1.00,3.00,,,,10.00,20.50,36,0,0,none",
    ]
    md = (tmp_path / "h.md").read_text()
    never, study = md.index("## Models that never saw the selection"), md.index("## Models of the zoom study")
    assert never < md.index("| vgg19 |") < study < md.index("| r50 |")
    # the Markdown's accuracies with their 95 % Wilson interval: over the 10,980 images, or over each origin's
    r50 = (
        "| imagenet_hard | r50 | study | 10980 | 14.00 [13.36, 14.66] | 1.00 [0.83, 1.21] | 3.00 [2.69, 3.33] | "
        "ResNet-50 | 14.74 | -0.74 | 10.00 [2.79, 30.10] | 20.50 [15.49, 26.63] | 36 | 0 | 0 | none |"
    )
    assert r50 in md
    assert r50 == (
        f"| imagenet_hard | r50 | study | 10980 | {wilson(1537, 10980)} | {wilson(110, 10980)} | "
        f"{wilson(329, 10980)} | ResNet-50 | 14.74 | -0.74 | {wilson(2, 20)} | {wilson(41, 200)} | 36 | 0 | "
        "0 | none |"
    )
    assert f"| +0.51 |  | {wilson(2, 200)} | 36 |" in md  # vgg19: no sketch of its own
    assert "| CLIP-ViT-L/14@336 | 2.02 |  |  |  | 36 |" in md  # no standard evaluation: empty, not an interval
    assert "Scales searched (n_scales): 36." in md
    assert "VGG-16 (run as VGG-19): the notebook's VGG-19 run behind the card's 12.00." in md
    assert "compares different image sets" not in md


def test_a_run_on_another_image_count_says_so(tmp_path):
    only5 = hard("r50", 20.0, None, n_images=5, acc_1crop=20.0, acc_max=40.0)
    write_table_imagenet_hard([only5], MODELS, tmp_path / "h.csv", tmp_path / "h.md")
    assert (
        "This run has 5 images, the card 10,980: card_diff compares different image sets."
        in (tmp_path / "h.md").read_text()
    )


def test_the_card_and_the_study_models():
    assert [(r.name, r.accuracy) for r in CARD if r.name.startswith(("CLIP", "OpenCLIP", "EfficientNet-L2"))] == [
        ("EfficientNet-L2-NS", 39.00),
        ("CLIP-ViT-L/14@224", 1.86),
        ("CLIP-ViT-L/14@336", 2.02),
        ("OpenCLIP ViT-bigG-14", 15.93),
        ("OpenCLIP ViT-L-14 DataComp", 15.60),
    ]
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


def test_an_origin_accuracy_that_is_no_count_of_its_images_is_refused_naming_it(tmp_path):
    bad = hard("r50", share(1537), {"objectnet": {"n_images": 7, "acc_standard": 10.0}})
    with pytest.raises(ValueError, match="r50 imagenet_hard: acc_standard:objectnet 10.0 is not a count of 7 images"):
        write_table_imagenet_hard([bad], MODELS, tmp_path / "h.csv", tmp_path / "h.md")
