"""``--format timm`` joins timm's own results-imagenet.csv by ``model``: the name timm's results use (a timm tag, the
embedded weights' tag, a torchvision file timm republishes), ``param_count`` as timm writes it, and several studies
merged into one file (comparable rows merged, other keys kept apart with what separates them)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl
import pytest

from tests.test_leaderboard import study
from zoomeval.publish.boards import merge, write_merged
from zoomeval.publish.timm_results import timm_rows

#: Real rows of timm's results/results-imagenet.csv (huggingface/pytorch-image-models, commit 0173a139).
TIMM_CSV = """model,top1,top1_err,top5,top5_err,param_count,img_size,crop_pct,interpolation
eva_giant_patch14_224.clip_ft_in1k,88.880,11.120,98.680,1.320,"1,012.56",224,0.900,bicubic
resnet50.tv2_in1k,80.850,19.150,95.434,4.566,25.56,224,0.965,bilinear
resnet50.tv_in1k,76.130,23.870,92.858,7.142,25.56,224,0.875,bilinear
tf_efficientnet_lite0.in1k,74.830,25.170,92.172,7.828,4.65,224,0.875,bicubic
densenet121.tv_in1k,74.764,25.236,92.154,7.846,7.98,224,0.875,bicubic
"""
EMBEDDED = {
    "source": "embedded",
    "architecture": "tf_efficientnet_lite0",
    "weights": "efficientnet-lite0-57934424.pth",
    "weights_sha256": "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
    "param_count": 4_652_008,
}
#: torchvision's resnet50 IMAGENET1K_V1 file is resnet50-0676ba61.pth, which timm republishes as resnet50.tv_in1k
TV_RESNET50 = {
    "source": "torchvision",
    "architecture": "resnet50",
    "weights": "IMAGENET1K_V1",
    "weights_sha256": "0676ba61" + "0" * 56,
    "param_count": 25_557_032,
}
#: timm's densenet121.tv_in1k config names no file, so no file of torchvision's is known to be it
TV_DENSENET = {
    "source": "torchvision",
    "architecture": "densenet121",
    "weights": "IMAGENET1K_V1",
    "weights_sha256": "a639ec97" + "0" * 56,
    "param_count": 7_978_856,
}
GIANT = {
    "source": "timm",
    "architecture": "eva_giant_patch14_224",
    "weights": "clip_ft_in1k",
    "weights_sha256": "ee" * 32,
    "param_count": 1_012_563_400,
}


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_export_joins_timms_own_results_csv_by_model(tmp_path: Path) -> None:
    folders = [
        study(tmp_path / name, model=name, spec=spec)
        for name, spec in (("lite0", EMBEDDED), ("r50", TV_RESNET50), ("dn121", TV_DENSENET), ("giant", GIANT))
    ]
    text, _ = write_merged(folders, tmp_path / "ours.csv", "timm", "demo")
    assert (tmp_path / "ours.csv").read_text().rstrip("\n") == text
    assert '"1,012.56"' in text  # quoted as in timm's file
    ours = {r["model"]: r for r in rows(text)}
    assert set(ours) == {
        "tf_efficientnet_lite0.in1k",
        "resnet50.tv_in1k",
        "dn121",
        "eva_giant_patch14_224.clip_ft_in1k",
    }
    assert ours["resnet50.tv_in1k"]["note"] == (
        "torchvision resnet50.IMAGENET1K_V1: the file timm republishes as resnet50.tv_in1k"
    )
    assert ours["tf_efficientnet_lite0.in1k"]["note"].startswith(
        "weights efficientnet-lite0-57934424.pth (sha256 579344248a93), not timm's file"
    )
    assert ours["dn121"]["note"] == (
        "torchvision densenet121.IMAGENET1K_V1: not weights timm publishes; named as in the config"
    )
    assert ours["eva_giant_patch14_224.clip_ft_in1k"]["note"] == ""
    timm = pl.read_csv(io.StringIO(TIMM_CSV), infer_schema_length=0)
    joined = pl.read_csv(tmp_path / "ours.csv", infer_schema_length=0).join(timm, on="model", suffix="_timm")
    assert sorted(joined["model"]) == [
        "eva_giant_patch14_224.clip_ft_in1k",
        "resnet50.tv_in1k",
        "tf_efficientnet_lite0.in1k",
    ]
    # param_count is written as timm writes it: each joined row's equals timm's own, text for text
    assert joined["param_count"].to_list() == joined["param_count_timm"].to_list()
    assert joined.filter(model="resnet50.tv_in1k")["top1"].item() == "33.333"  # ours: 4 of 12 (the fixture's rule)


def test_studies_merge_comparable_rows_and_keep_other_keys_apart(tmp_path: Path) -> None:
    a, b = study(tmp_path / "a", spec=TV_RESNET50), study(tmp_path / "b", spec=TV_RESNET50)
    c = study(tmp_path / "c", spec=TV_RESNET50, scales=[64, 256])
    merged = rows(write_merged([a, b], None, "timm", "demo")[0])
    assert [(r["model"], r["note"]) for r in merged] == [
        (
            "resnet50.tv_in1k",
            "torchvision resnet50.IMAGENET1K_V1: the "
            "file timm republishes as resnet50.tv_in1k; the same numbers "
            "in studies a, b",
        )
    ]
    apart = rows(write_merged([a, c], None, "timm", "demo")[0])
    assert [r["model"] for r in apart] == ["resnet50.tv_in1k"] * 2
    notes = {r["note"].split("; ")[-1] for r in apart}
    assert notes == {
        "kept apart from study c's row by scales [64, 224, 256] (not [64, 256])",
        "kept apart from study a's row by scales [64, 256] (not [64, 224, 256])",
    }
    # the same key with other numbers (a run on another device, say; here b's row changed in memory) is refused
    board, _ = merge([a, b])
    board[1]["acc_standard"] = 50.0
    with pytest.raises(
        ValueError,
        match=r"^model resnet50.tv_in1k: studies a and b share its comparability key but "
        r"give other numbers \(top1 33.333, 50.000\); give one of them$",
    ):
        timm_rows(board, "demo")
