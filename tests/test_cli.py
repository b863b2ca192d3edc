"""``zoomeval list``: every registry of the package, and a source's models from its library."""

import subprocess
import sys

import pytest

from zoomeval.analysis.label_sets import LABEL_SETS
from zoomeval.datasets.registry import ADAPTERS
from zoomeval.inference.models import MODEL_SOURCES
from zoomeval.study import directory as study_dir


def listed(*args: str) -> list[list[str]]:
    proc = subprocess.run([sys.executable, "-m", "zoomeval", "list", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [line.split("\t") for line in proc.stdout.splitlines()]


@pytest.mark.parametrize(
    ("kind", "registry"),
    [("adapters", ADAPTERS), ("sources", MODEL_SOURCES), ("label-sets", LABEL_SETS), ("presets", study_dir.PRESETS)],
)
def test_list_prints_every_entry_of_a_registry_in_its_order(kind, registry) -> None:
    rows = listed(kind)
    assert [row[0] for row in rows] == list(registry)
    assert all(len(row) == 2 and row[1] for row in rows)  # each with what it is


def test_list_models_prints_the_librarys_pretrained_models_matching_a_pattern() -> None:
    import timm
    import torchvision

    assert [f"{a}.{t}" for a, t in listed("models", "timm", "resnet50.a*")] == timm.list_pretrained("resnet50.a*")
    weights = [w.name for w in torchvision.models.get_model_weights("resnet50")]
    assert listed("models", "torchvision", "resnet50.*") == [["resnet50", name] for name in weights]
    # models whose output is not ImageNet-1k's classes are marked with why (timm's pretrained configs)
    assert listed("models", "timm", "resnet50_clip*.openai") == [
        [
            "resnet50_clip",
            "openai",
            "not evaluable: a 1024-wide output (timm's config), not ImageNet-1k's 1000 classes",
        ],
        [
            "resnet50_clip_gap",
            "openai",
            "not evaluable: no classifier head (timm's config gives 0 outputs: a feature extractor)",
        ],
    ]


def test_list_refuses_a_source_without_models_and_a_missing_source() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "zoomeval", "list", "models", "embedded"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    listing = "['entry_point', 'open_clip', 'timm', 'torchvision']"
    assert f"model source 'embedded' lists no models; sources that do: {listing}" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "zoomeval", "list", "models"], capture_output=True, text=True)
    assert proc.returncode == 2 and "needs a SOURCE" in proc.stderr
