"""The tta job (determinism, episodic order independence, class subsets, the baseline) and Table 5."""

import csv
import statistics

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import skimage.data
import torch
from PIL import Image

from tests.conftest import LAYOUT
from tests.test_config import refusal, validated
from zoomeval.core.config import MemoSettings, ModelSpec
from zoomeval.core.io import read_metadata, write_parquet
from zoomeval.core.left_out import LeftOut
from zoomeval.core.manifest import Record
from zoomeval.inference import tta
from zoomeval.inference.models import load_model
from zoomeval.inference.sources import embedded
from zoomeval.inference.tta import SCHEMA, run_tta_to_file
from zoomeval.inference.tta_views import standard_view
from zoomeval.report.tta_table import PAPER_TABLE_5, TTAResult, score_tta, table_tta_rows, write_table_tta

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_tta")

LITE0 = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE)
FAST = MemoSettings(views=2)
TIMING = {"seconds", "seconds_per_image", "cpu_seconds_per_image"}


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[Record]:
    folder = tmp_path_factory.mktemp("photos")
    out = []
    for name, label in (("chelsea", 285), ("coffee", 967)):
        pixels = getattr(skimage.data, name)()
        Image.fromarray(pixels).save(folder / f"{name}.png")
        out.append(Record(name, str(folder / f"{name}.png"), [label], ["x"], pixels.shape[1], pixels.shape[0]))
    return out


@pytest.fixture(scope="module")
def augmix_runs(records, tmp_path_factory) -> list[tuple[pa.Table, dict]]:
    """MEMO + AugMix twice over both photos, then over the second photo alone."""
    folder = tmp_path_factory.mktemp("tta")
    runs = []
    for k, chunk in enumerate([records, records, records[1:]]):
        path = folder / f"run{k}.parquet"
        run_tta_to_file(path, chunk, LITE0, "memo_augmix", "toy", FAST, seed=5, threads=2)
        runs.append((pq.read_table(path), read_metadata(path)))
    return runs


def test_a_rerun_gives_identical_predictions_and_settings(augmix_runs) -> None:
    (first, meta1), (second, meta2), _ = augmix_runs
    assert first.schema.remove_metadata() == SCHEMA.set(0, pa.field("image_id", pa.dictionary(pa.int32(), pa.string())))
    assert first.drop(["seconds"]).equals(second.drop(["seconds"]))
    assert {k: v for k, v in meta1.items() if k not in TIMING} == {k: v for k, v in meta2.items() if k not in TIMING}
    assert all(s > 0 for s in first["seconds"].to_pylist())
    settings = meta1["settings"]
    assert settings["views"] == 2 and settings["lr"] == 0.00025 and settings["prior_strength"] == 16
    assert settings["authors_code_views"] == 64 and settings["bn_layers"] == 49 and settings["seed"] == 5
    assert settings["standard_view"] == {"resize": 256, "crop": 224, "interpolation": "bilinear"}
    assert settings["views"] == 2 and meta1["method"] == "memo_augmix" and meta1["kind"] == "tta"


def test_each_image_is_adapted_from_the_original_weights_whatever_came_before(augmix_runs) -> None:
    (both, _), _, (alone, _) = augmix_runs
    assert both.slice(1).drop(["seconds"]).to_pydict() == alone.drop(["seconds"]).to_pydict()


def test_the_baseline_is_the_plain_model_on_the_standard_view_over_the_class_subset(records, tmp_path) -> None:
    subset = [281, 282, 285, 967, 968]
    path = tmp_path / "none.parquet"
    meta = run_tta_to_file(path, records, LITE0, "none", "toy", class_indices=subset, threads=2)
    table = pq.read_table(path).to_pydict()
    model = load_model(LITE0, None).module
    x = torch.stack([(standard_view(Image.open(r.path).convert("RGB")) - 0.5) / 0.5 for r in records])
    with torch.no_grad():
        logits = model(x)
    probs = logits[:, subset].softmax(dim=1)
    assert table["pred"] == [subset[i] for i in probs.argmax(dim=1).tolist()]
    assert table["pred_full"] == logits.argmax(dim=1).tolist()
    assert table["conf"] == pytest.approx(probs.max(dim=1).values.tolist(), abs=1e-5)
    assert meta["class_set"] == "subset" and meta["class_indices"] == subset and "lr" not in meta["settings"]


def test_memo_predictions_stay_in_the_class_subset(records, tmp_path) -> None:
    subset = [1, 2, 3]  # classes none of the photos shows
    path = tmp_path / "rrc.parquet"
    run_tta_to_file(path, records[:1], LITE0, "memo_rrc", "toy", FAST, class_indices=subset, threads=2)
    table = pq.read_table(path).to_pydict()
    assert table["pred"][0] in subset and table["pred_full"][0] == 285


def test_score_tta_counts_a_prediction_that_is_any_label_as_correct(tmp_path) -> None:
    records = [Record("a", "", [1, 2], [], 1, 1), Record("b", "", [3], [], 1, 1), Record("c", "", [4], [], 1, 1)]
    path = tmp_path / "t.parquet"
    table = pa.table(
        {
            "image_id": ["a", "b", "c"],
            "pred": [2, 3, 5],
            "pred_full": [2, 3, 5],
            "conf": [0.5] * 3,
            "seconds": [1.0, 2.0, 3.0],
        },
        schema=SCHEMA,
    )
    meta = {
        "kind": "tta",
        "schema_version": 1,
        "method": "memo_rrc",
        "model": {"name": "m"},
        "dataset": "d",
        "device": "cpu",
        "settings": {},
    }
    write_parquet(path, table, meta)
    result = score_tta(path, records)
    assert result.accuracy == pytest.approx(200 / 3) and result.seconds == 6.0 and result.n_images == 3
    with pytest.raises(ValueError, match="not those of dataset 'd'"):
        score_tta(path, records[:2])


def test_the_papers_table_5_gives_its_reported_means_and_standard_deviations() -> None:
    for method, mean, std in (("none", 36.75, 24.75), ("memo_augmix", 39.26, 24.32), ("memo_rrc", 39.54, 24.10)):
        cells = [v for (m, _), values in PAPER_TABLE_5.items() if m == method for v in values]
        assert len(cells) == 15
        assert round(statistics.fmean(cells), 2) == mean and round(statistics.stdev(cells), 2) == std


SETTINGS = {"views": 16, "steps": 1, "lr": 0.00025, "prior_strength": 16, "prior_at_prediction": True, "seed": 0}


def result(method: str, model: str, dataset: str, accuracy: float, seconds: float = 10.0) -> TTAResult:
    return TTAResult(method, model, dataset, 10, accuracy, seconds, "cpu", SETTINGS)


def test_table_5_rows_means_differences_and_the_papers_numbers(tmp_path) -> None:
    results = [
        result("none", "r50", "in", 70.0, 1.0),
        result("none", "r50", "ina", 10.0, 1.0),
        result("none", "mine", "in", 60.0, 3.0),
        result("none", "mine", "ina", 20.0, 3.0),
        result("memo_rrc", "r50", "in", 72.0),
        result("memo_rrc", "r50", "ina", 14.0),
        result("memo_rrc", "mine", "in", 61.0, 30.0),
        result("memo_rrc", "mine", "ina", 21.0, 30.0),
    ]
    adapters = {"in": "imagenet_val", "ina": "imagenet_a"}
    datasets, rows = table_tta_rows(results, adapters, {"r50": "resnet50"})
    assert datasets == ["in", "ina"]
    assert [(r["method"], r["model"]) for r in rows] == [
        ("none", "r50"),
        ("none", "mine"),
        ("none", "all"),
        ("memo_rrc", "r50"),
        ("memo_rrc", "mine"),
        ("memo_rrc", "all"),
    ]
    rrc_all = rows[5]
    assert rrc_all["cells"] == {"in": 66.5, "ina": 17.5}
    assert rrc_all["mean"] == pytest.approx(42.0)
    assert rrc_all["std"] == pytest.approx(statistics.stdev([72, 14, 61, 21]))
    assert rrc_all["diff_baseline"] == pytest.approx(42.0 - 40.0)
    assert rrc_all["seconds_per_image"] == pytest.approx((10 + 10 + 30 + 30) / 40)
    assert rows[3]["paper"] == {"in": 77.50, "ina": 1.31} and rows[3]["paper_diff_baseline"] == pytest.approx(
        (77.50 + 1.31) / 2 - (76.13 + 0.00) / 2
    )
    assert rows[4]["paper"] == {"in": None, "ina": None} and rrc_all["paper_mean"] is None  # "mine" is not the paper's
    assert rrc_all["paper_seconds_per_image"] == 0.65

    left_out = {"in": LeftOut("in", {"unreadable": 1}), "ina": LeftOut("ina")}
    write_table_tta(results, adapters, {"r50": "resnet50"}, tmp_path / "t.csv", tmp_path / "t.md", left_out)
    table = list(csv.DictReader((tmp_path / "t.csv").open()))
    why = f"in: 1 bad (1 unreadable, listed in {LAYOUT.path('bad_images', dataset='in')}); ina: none"
    assert table[3] == {
        "method": "memo_rrc",
        "model": "r50",
        "in": "72.00",
        "ina": "14.00",
        "mean": "43.00",
        "std": "41.01",
        "diff_baseline": "3.00",
        "seconds_per_image": "1.000",
        "paper_in": "77.50",
        "paper_ina": "1.31",
        "paper_mean": "39.41",
        "paper_std": "53.87",
        "paper_diff_baseline": "1.34",
        "paper_seconds_per_image": "",
        "n_bad:in": "1",
        "n_unscored:in": "0",
        "n_bad:ina": "0",
        "n_unscored:ina": "0",
        "left_out": why,
    }
    assert f"max_resized_pixels): {why}." in (tmp_path / "t.md").read_text()
    md = (tmp_path / "t.md").read_text()
    assert "| MEMO + RRC | r50 | 72.00 (77.50) | 14.00 (1.31) | 43.00 ± 41.01 (39.41 ± 53.87) | 3.00 (1.34) |" in md
    assert "in (IN)" in md and "ina (IN-A)" in md


def test_the_tta_section_may_only_name_configured_datasets_and_models() -> None:
    model = "efficientnet_lite0"
    section = {"datasets": ["demo"], "models": [model], "paper_models": {model: "resnet50"}}
    config = validated(lambda c: c["tta"].update(section))
    assert config.tta.datasets == ("demo",) and config.tta.views == 4 and config.tta.memo().views == 4
    for key, value, message in (
        ("datasets", ["imagenet"], "tta.datasets: 'imagenet' is not in this config's datasets; use one of ['demo',"),
        ("models", ["r50"], "tta.models: 'r50' is not in this config's models; use one of ['efficientnet_lite0']"),
        ("paper_models", {"r50": "resnet50"}, "tta.paper_models: 'r50' is not in this config's models"),
    ):
        assert refusal(lambda c, key=key, value=value: c["tta"].update({key: value})).startswith(message)
    assert refusal(lambda c: c["tta"].update(views=0)).startswith("tta.views: 0 is less than the minimum of 1")


def test_a_killed_job_resumes_at_its_last_finished_shard_with_identical_output(records, tmp_path, monkeypatch) -> None:
    whole, resumed = tmp_path / "whole.parquet", tmp_path / "resumed.parquet"
    run_tta_to_file(whole, records, LITE0, "memo_rrc", "toy", FAST, threads=2, shard_images=1)
    predict, calls = tta.Adapter.predict, []

    def killed_at_the_second_image(self, record):
        calls.append(record.image_id)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as if the job were killed
        return predict(self, record)

    monkeypatch.setattr(tta.Adapter, "predict", killed_at_the_second_image)
    with pytest.raises(KeyboardInterrupt):
        run_tta_to_file(resumed, records, LITE0, "memo_rrc", "toy", FAST, threads=2, shard_images=1)
    assert not resumed.exists() and (tmp_path / ".resumed.parquet.shards" / "00000.parquet").exists()
    calls.clear()
    counted = lambda self, record: calls.append(record.image_id) or predict(self, record)  # noqa: E731
    monkeypatch.setattr(tta.Adapter, "predict", counted)
    meta = run_tta_to_file(resumed, records, LITE0, "memo_rrc", "toy", FAST, threads=2, shard_images=1)
    assert calls == [records[1].image_id]  # the first image's shard was reused
    assert pq.read_table(resumed).drop(["seconds"]).equals(pq.read_table(whole).drop(["seconds"]))
    assert meta["n_images"] == 2 and not (tmp_path / ".resumed.parquet.shards").exists()
    other = run_tta_to_file(tmp_path / "seed.parquet", records[:1], LITE0, "memo_rrc", "toy", FAST, seed=1, threads=2)
    assert other["settings"]["seed"] == 1  # the seed is part of the shards' identity, like every MEMO setting
