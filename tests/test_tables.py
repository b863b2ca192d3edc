"""The tables from typed metrics: Table A8's notes, Table 1 with the paper's "Random" rows, the zoom-group and
aggregation tables, each with what it leaves out."""

from dataclasses import replace

import pytest
from scipy.stats import binomtest

from tests.conftest import LAYOUT
from zoomeval.analysis.metrics import Metrics
from zoomeval.core.left_out import LeftOut
from zoomeval.report.imagenet_hard import write_table_imagenet_hard
from zoomeval.report.tables import (
    table_1_rows,
    write_table_1,
    write_table_a8,
    write_table_aggregation,
    write_table_zoom_groups,
)


def metric(model, dataset, n_classes, a, b, c, variant="original"):
    """Metrics with the given accuracies; the fields no test here reads are zero or empty."""
    return Metrics(
        model=model,
        dataset=dataset,
        variant=variant,
        acc_1crop=a,
        acc_top_k=b,
        acc_max=c,
        top_k=36,
        n_transforms=324,
        n_classes=n_classes,
        n_images=0,
        cover_size=0,
        cover_size_exact=0,
        cover_gap=0,
        zoom_groups={},
        top_k_centre_share=None,
        n_excluded=0,
        by_origin=None,
        aggregation=None,
        left_out=LeftOut(dataset),
    )


def wilson(k, n):
    """``k`` of ``n`` as the Markdown shows it, the interval by scipy."""
    ci = binomtest(k, n).proportion_ci(method="wilson")
    return f"{100 * k / n:.2f} [{100 * ci.low:.2f}, {100 * ci.high:.2f}]"


METRICS = [
    # torchvision's reference evaluation of ResNet-50 V1 gives 76.13, the paper's 1-crop 75.75 (paper.md pitfall 6)
    replace(metric("resnet50", "imagenet", 1000, 75.75, 94.46, 96.78), acc_standard=76.13),
    metric("resnet50", "imagenet_a", 200, 0.21, 55.68, 66.68),
    metric("resnet50", "objectnet", 113, 36.18, 69.6, 76.83),
    metric("vit32", "imagenet", 1000, 75.754, 95.046, 97.19),
    metric("vit32", "imagenet", 1000, 1.0, 1.0, 1.0, variant="bgset"),  # other variants are not Table 1
]


def test_table_1_panels_and_random_rows_match_the_paper():
    header, rows = table_1_rows(METRICS)
    assert header == ["panel", "model", "imagenet", "imagenet_a", "objectnet"]
    assert rows == [
        ["a", "resnet50", "75.75", "0.21", "36.18"],
        ["a", "vit32", "75.75", "", ""],
        ["b", "Random", "3.60", "18.00", "31.86"],  # 36/1000, 36/200, 36/113 (the paper truncates to 31.85)
        ["b", "resnet50", "94.46", "55.68", "69.60"],
        ["b", "vit32", "95.05", "", ""],
        ["c", "Random", "32.40", "100.00", "100.00"],  # 324 guesses, capped at 100
        ["c", "resnet50", "96.78", "66.68", "76.83"],
        ["c", "vit32", "97.19", "", ""],
        ["s", "resnet50", "76.13", "", ""],  # appended after the paper's panels
        ["s", "vit32", "", "", ""],
    ]


def test_table_1_files(tmp_path):
    write_table_1(METRICS, tmp_path / "t.csv", tmp_path / "t.md")
    header, *_, random_b = (tmp_path / "t.csv").read_text().splitlines()[:4]
    assert header.endswith(
        ",n_bad:imagenet,n_unscored:imagenet,n_bad:imagenet_a,n_unscored:imagenet_a,"
        "n_bad:objectnet,n_unscored:objectnet,left_out"
    )
    assert random_b == "b,Random,3.60,18.00,31.86,0,0,0,0,0,0,imagenet: none; imagenet_a: none; objectnet: none"
    md = (tmp_path / "t.md").read_text()
    assert "(c) all" in md and "| Random | 32.40 | 100.00 | 100.00 |" in md
    titles = [line for line in md.splitlines() if line.startswith("(")]
    assert [t[:3] for t in titles] == ["(a)", "(s)", "(b)", "(c)"]  # the standard evaluation beside 1 crop
    assert "| resnet50 | 76.13 |  |  |" in md and "not acc_1crop, the zoom pipeline at S=256" in md


def test_zoom_group_table(tmp_path):
    groups = {"ub_in": 50.0, "excl_in": 50.0, "ub_out": 0.0, "excl_out": 0.0, "ub_224": 25.0, "excl_224": 25.0}
    rows = [
        replace(METRICS[0], zoom_groups=groups, top_k_centre_share=25.0),
        replace(METRICS[1], zoom_groups=groups, top_k_centre_share=50.0),
        replace(METRICS[4], zoom_groups=groups, top_k_centre_share=float("nan")),
    ]
    write_table_zoom_groups(rows, tmp_path / "z.csv", tmp_path / "z.md")
    assert (tmp_path / "z.csv").read_text().splitlines() == [
        "model,variant,dataset,ub_in,ub_out,ub_224,excl_in,excl_out,excl_224,top_k_centre_share,n_bad,n_unscored,"
        "left_out",
        "resnet50,original,imagenet,50.00,0.00,25.00,50.00,0.00,25.00,25.00,0,0,none",
        "resnet50,original,imagenet_a,50.00,0.00,25.00,50.00,0.00,25.00,50.00,0,0,none",
        "vit32,bgset,imagenet,50.00,0.00,25.00,50.00,0.00,25.00,,0,0,none",
    ]
    assert (
        "Average top_k_centre_share over the original images: 37.50 (2 model x dataset pairs"
        in (tmp_path / "z.md").read_text()
    )


def test_aggregation_table_uses_the_papers_vit_b32_row(tmp_path):
    # The paper's ImageNet row for ViT-B/32 in its aggregation table; zoom_224 has no view in the second row.
    vit = {
        "zoom_in": {"max": 74.35, "mean": 79.31},
        "zoom_out": {"max": 71.48, "mean": 69.47},
        "zoom_224": {"max": 72.66, "mean": 73.67},
        "five_crop": {"max": 77.33, "mean": 77.73},
        "ten_crop": {"max": 77.30, "mean": 77.87},
    }
    no_224 = {k: v for k, v in vit.items() if k != "zoom_224"}
    rows = [
        replace(METRICS[3], acc_1crop=75.75, n_images=50000, aggregation=vit, acc_standard=75.912),
        replace(METRICS[1], n_images=7500, aggregation=no_224),
        replace(METRICS[4], n_images=50000, aggregation=vit),
    ]
    write_table_aggregation(rows, tmp_path / "g.csv", tmp_path / "g.md")
    assert (tmp_path / "g.csv").read_text().splitlines() == [
        "model,dataset,n_images,acc_1crop,zoom_in_max,zoom_in_mean,zoom_out_max,zoom_out_mean,zoom_224_max,"
        "zoom_224_mean,five_crop_max,five_crop_mean,ten_crop_max,ten_crop_mean,acc_standard,n_bad,n_unscored,left_out",
        "vit32,imagenet,50000,75.75,74.35,79.31,71.48,69.47,72.66,73.67,77.33,77.73,77.30,77.87,75.91,0,0,none",
        "resnet50,imagenet_a,7500,0.21,74.35,79.31,71.48,69.47,,,77.33,77.73,77.30,77.87,,0,0,none",
    ]  # the bgset row is not in the table
    md = (tmp_path / "g.md").read_text()
    assert "| vit32 | imagenet | 50000 | 75.75 | 74.35 (-1.40) | 79.31 (+3.56) | 71.48 (-4.27) |" in md
    assert "| 77.30 (+1.55) | 77.87 (+2.12) | 75.91 (+0.16) | 0 | 0 | none |" in md


BAD = LeftOut("imagenet", {"unreadable": 2, "over max_resized_pixels": 1}, {})
REAL = LeftOut("imagenet", BAD.bad, {"no ReaL label": 5})
FILE = f"listed in {LAYOUT.path('bad_images', dataset='imagenet')}"


def test_table_a8_notes_name_the_excluded_images_per_dataset(tmp_path):
    bad = {"n_excluded": 3, "left_out": BAD}
    rows = [
        replace(METRICS[0], **bad),
        METRICS[1],
        replace(METRICS[4], **bad),
        replace(METRICS[0], dataset="imagenet_real", left_out=REAL),
    ]
    write_table_a8(rows, tmp_path / "a8.csv", tmp_path / "a8.md", {"resnet50": "resnet50.IMAGENET1K_V1"})
    csv_lines = (tmp_path / "a8.csv").read_text().splitlines()
    assert csv_lines[0].split(",")[4:7] == ["acc_1crop", "acc_top_k", "acc_max"]
    assert csv_lines[0].split(",")[10:] == [
        "acc_standard",
        "architecture",
        "n_scales",
        "n_bad",
        "n_unscored",
        "left_out",
        "key_sha256",
    ]  # appended in this order
    why = f"3 bad (2 unreadable, 1 over max_resized_pixels, {FILE})"
    arch = "resnet50.IMAGENET1K_V1,36"
    none = ","  # no key recorded (metrics typed by hand)
    assert csv_lines[1] == f'resnet50,original,imagenet,0,75.75,94.46,96.78,0,0,0,76.13,{arch},3,0,"{why}"{none}'
    assert csv_lines[2].endswith(f",0,0,0,,resnet50.IMAGENET1K_V1,36,0,0,none{none}")  # no standard evaluation: empty
    assert csv_lines[4].endswith(f',3,5,"{why} and 5 not scored (no ReaL label)"{none}')
    notes = (tmp_path / "a8.md").read_text()
    # listed once per dataset (its variants share one manifest); imagenet_a lost no image
    assert (
        f"max_resized_pixels): imagenet: {why}; imagenet_a: none; imagenet_real: {why} and 5 not scored "
        "(no ReaL label).\n"
    ) in notes


@pytest.mark.parametrize("write", [write_table_a8, write_table_1, write_table_aggregation])
def test_a_limited_runs_tables_name_its_own_bad_images_file(tmp_path, write):
    """A run limited to 2 images lists its bad images in its own results root: its tables name that file."""
    write([replace(METRICS[0], n_excluded=3, left_out=BAD)], tmp_path / "t.csv", tmp_path / "t.md", limit=2)
    for path in (tmp_path / "t.csv", tmp_path / "t.md"):
        text = path.read_text()
        assert "listed in results/limit-2/datasets/imagenet/bad_images.csv)" in text
        assert "listed in results/datasets/" not in text


@pytest.mark.parametrize(
    ("variants", "title"),
    [
        (["original"], "original"),
        (["bgset", "original", "bgset"], "original and background-only (bgset)"),
        (["bgset", "fgset", "original"], "original, object-only (fgset) and background-only (bgset)"),
    ],
)
def test_table_a8s_title_names_the_variants_that_ran(tmp_path, variants, title):
    write_table_a8([replace(METRICS[0], variant=v) for v in variants], tmp_path / "a8.csv", tmp_path / "a8.md")
    heading = (tmp_path / "a8.md").read_text().splitlines()[0]
    assert heading == f"# Table A8: maximum possible top-1 accuracy (%) on {title} images"


def test_a_metrics_file_without_what_it_left_out_says_so(tmp_path):
    write_table_a8([replace(METRICS[1], left_out=None)], tmp_path / "a8.csv", tmp_path / "a8.md")
    assert (
        (tmp_path / "a8.csv")
        .read_text()
        .splitlines()[1]
        .endswith(",,,not recorded (metrics written before schema 4; re-run the analysis),")
    )


@pytest.mark.parametrize("writer", ["table_1", "zoom_groups", "aggregation", "imagenet_hard"])
def test_every_metrics_table_notes_the_bad_and_unscored_images(tmp_path, writer):
    groups = {c: 0.0 for c in ("ub_in", "ub_out", "ub_224", "excl_in", "excl_out", "excl_224")}
    rows = [replace(METRICS[0], left_out=REAL, zoom_groups=groups)]
    paths = (tmp_path / "t.csv", tmp_path / "t.md")
    if writer == "imagenet_hard":
        write_table_imagenet_hard(rows, {"resnet50": {"source": "timm", "architecture": "x", "weights": "y"}}, *paths)
    else:
        {"table_1": write_table_1, "zoom_groups": write_table_zoom_groups, "aggregation": write_table_aggregation}[
            writer
        ](rows, *paths)
    why = f"3 bad (2 unreadable, 1 over max_resized_pixels, {FILE}) and 5 not scored (no ReaL label)"
    header, first = (tmp_path / "t.csv").read_text().splitlines()[:2]
    assert header.endswith(
        ",n_bad:imagenet,n_unscored:imagenet,left_out" if writer == "table_1" else ",n_bad,n_unscored,left_out"
    )
    assert first.endswith(f',3,5,"{why}"' if writer != "table_1" else f',3,5,"imagenet: {why}"')
    assert f"imagenet: {why}." in (tmp_path / "t.md").read_text()


def test_table_1_markdown_gives_each_accuracy_its_wilson_interval_and_the_scales(tmp_path):
    # 3,750 of 7,500 images (ImageNet-A's size) right at 1 crop, 6,000 within all transforms
    m = replace(metric("r50", "imagenet_a", 200, 50.0, 70.0, 80.0), n_images=7500, acc_standard=49.0)
    write_table_1([m], tmp_path / "t.csv", tmp_path / "t.md")
    assert (tmp_path / "t.csv").read_text().splitlines()[1] == "a,r50,50.00,0,0,imagenet_a: none"  # plain
    md = (tmp_path / "t.md").read_text()
    ci = {k: binomtest(k, 7500).proportion_ci(method="wilson") for k in (3750, 6000)}
    assert f"| r50 | 50.00 [{100 * ci[3750].low:.2f}, {100 * ci[3750].high:.2f}] |" in md
    assert "| r50 | 50.00 [48.87, 51.13] |" in md and f"| r50 | 80.00 [{100 * ci[6000].low:.2f}, " in md
    assert "Scales searched: 36." in md


def test_a_subset_of_the_classes_is_stated_with_its_chance_level_in_every_tables_title(tmp_path):
    """A 4-class folder scored with class_set: subset is a 4-way task (chance 25 %): each table's title says so, with
    ImageNet-A's 200 (0.5 %) and ObjectNet's 113 (100 / 113 = 0.885 %); ImageNet's 1000 classes add nothing."""
    from zoomeval.report.tables import ZOOM_GROUP_COLUMNS

    rows = [
        replace(m, zoom_groups=dict.fromkeys(ZOOM_GROUP_COLUMNS, 0.0))
        for m in [*METRICS, metric("resnet50", "own_data", 4, 100.0, 100.0, 100.0)]
    ]
    said = (
        " [scored imagenet_a over 200 of the 1000 classes, chance 0.50 %; objectnet over 113 of the 1000 classes, "
        "chance 0.88 %; own_data over 4 of the 1000 classes, chance 25.00 %]"
    )
    for write in (write_table_a8, write_table_1, write_table_zoom_groups, write_table_aggregation):
        write(rows, tmp_path / "t.csv", tmp_path / "t.md", limit=2)
        heading = (tmp_path / "t.md").read_text().splitlines()[0]
        assert heading.endswith(
            f"{said} [LIMITED RUN: the first 2 images of each dataset only (config limit), not a result]"
        ), heading
    write_table_a8(METRICS[:1], tmp_path / "t.csv", tmp_path / "t.md")
    assert "scored" not in (tmp_path / "t.md").read_text().splitlines()[0]
