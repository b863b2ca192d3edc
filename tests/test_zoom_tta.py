"""zoomeval policy export and zoomeval.ZoomTTA on a tiny finished study (the demo model, its first 6 images, 2 scales):
the wrapper, recomputing every view it runs, answers each image exactly as the policies' rules answer on the study's
prediction matrix, for every policy and budget; its crops are the predict job's, pixel for pixel; another model is
refused; bad arguments are one line, exit 2."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import zoomeval
from tests.conftest import ROOT, run_snakemake, write_config
from zoomeval.analysis.policies import apply, choose_cascade, fit
from zoomeval.analysis.policy_eval import budgets_for, read_views
from zoomeval.cli import main, study_settings
from zoomeval.core.config import InferenceSettings
from zoomeval.core.layout import run_layout
from zoomeval.core.manifest import read_manifest
from zoomeval.core.zoom import Transform, transforms
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crop_dataset import ZoomCrops
from zoomeval.inference.models import IMAGENET_MEAN, IMAGENET_STD, load_model
from zoomeval.inference.recompute import recorded_spec
from zoomeval.report.policy_export import export_policy
from zoomeval.report.zoom_tta import study_classifier

LAYOUT6 = run_layout(6)
SCALES = [64, 256]
WHERE = {"scored": "demo", "variant": "original", "model": "lite0"}
pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("zoom_tta") / "study"
    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    write_config(work, scales=SCALES, top_k=2, limit=6, stats={"pairs": []},
                 datasets={"demo": {**demo["datasets"]["demo"], "variants": ["original"]}},
                 models={"lite0": demo["models"]["efficientnet_lite0"]}, policies={**demo["policies"], "folds": 3})
    run_snakemake(work, LAYOUT6.path("policies", **WHERE))
    return work


@pytest.fixture(scope="module")
def images(study: Path) -> list:
    """The study's images as its predict job decodes them."""
    records = read_manifest(study / LAYOUT6.path("manifest", dataset="demo"))
    crops = ZoomCrops([dataclasses.replace(r, path=str(study / r.path)) for r in records], SCALES)
    return [crops.decoded(i) for i in range(len(records))]


def study_choices(study: Path):
    """The policies fitted on every image of the study's matrix, applied to its stored predictions."""
    views, _ = read_views(study / LAYOUT6.path("correct", **WHERE),
                          study / LAYOUT6.path("predictions", dataset="demo", variant="original", model="lite0"))
    budgets = budgets_for(study_settings(study).budgets, len(views.order))
    return views, budgets, apply(fit(views, budgets, 200_000, 0), views.unlabelled(), budgets)


def test_the_wrapper_answers_every_image_as_the_policy_does_on_the_studys_predictions(study, images):
    views, budgets, choices = study_choices(study)
    assert budgets == [1, 2, 4, 9, 18]
    classifier = study_classifier(export_policy(study, LAYOUT6, **WHERE, name="cascade", budget=1,
                                                settings=study_settings(study)), study / "resources")  # fmt: skip
    rows = np.arange(views.n_images)
    stopped_early = 0
    for name in ("cascade", "max_conf", "vote", "selector"):
        for budget in budgets:
            document = export_policy(study, LAYOUT6, **WHERE, name=name, budget=budget, settings=study_settings(study))
            answers = zoomeval.ZoomTTA(classifier, document)(images)
            view, passes = choices[name, budget]
            assert [views.order.index(Transform(*a.view)) for a in answers] == view.tolist(), (name, budget)
            assert [a.passes for a in answers] == passes.tolist(), (name, budget)
            assert [a.label for a in answers] == views.pred[rows, view].tolist()
            # recomputed in other batches: the same up to float rounding (CPU kernels' sums depend on the batch)
            np.testing.assert_allclose([a.confidence for a in answers], views.conf[rows, view], rtol=1e-5, atol=0)
            stopped_early += name == "cascade" and min(passes) < len(document["views"])
    assert stopped_early  # some cascade stopped before its last view on some image: early stopping was exercised


@pytest.mark.parametrize("tau, passes", [(0.0, [1] * 6), (None, [3] * 6)])
def test_a_cascade_whose_every_image_stops_at_once_or_never_runs_only_those_passes(study, images, tau, passes):
    views, _, _ = study_choices(study)
    document = export_policy(study, LAYOUT6, **WHERE, name="cascade", budget=4, settings=study_settings(study))
    order = [[256, 1, 1], [64, 0, 0], [256, 2, 2]]
    document = {**document, "views": order, "rule": {"name": "cascade", "tau": tau, "length": 3}}
    tta = zoomeval.ZoomTTA(study_classifier(document, study / "resources"), document)
    runs = []
    tta.crops = lambda image, wanted, cut, crops=tta.crops: runs.append(list(wanted)) or crops(image, wanted, cut)
    answers = tta(images)
    chosen = [views.order.index(Transform(*v)) for v in order]
    view, expected = choose_cascade(views, chosen, np.inf if tau is None else tau, 3)
    assert [a.passes for a in answers] == expected.tolist() == passes
    assert [views.order.index(Transform(*a.view)) for a in answers] == view.tolist()
    assert sum(map(len, runs)) == sum(passes)  # no crop cut, no pass run, beyond each image's stop
    assert tta([]) == []


def test_the_crops_it_runs_are_the_predict_jobs_pixel_for_pixel(study, images):
    document = export_policy(study, LAYOUT6, **WHERE, name="max_conf", budget=18, settings=study_settings(study))
    classifier = study_classifier(document, study / "resources")
    tta = zoomeval.ZoomTTA(classifier, document)
    order = transforms(SCALES)
    study_crops = ZoomCrops([], SCALES, extra_views=True)
    for image in images:
        expected = study_crops.host_crops(image, "pil").numpy()
        got = tta.crops(image, range(len(tta.views)))
        assert np.array_equal(got, expected[[order.index(Transform(*v)) for v in tta.views]])


def test_the_file_is_versioned_deterministic_and_names_its_model_and_data(study, tmp_path, capsys):
    out = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in out:
        args = ["policy", "export", str(study), "--policy", "cascade", "--budget", "4", "--fit", "demo",
                "--limit", "6", "-o", str(path)]  # fmt: skip
        assert main(args) == 0
    assert out[0].read_bytes() == out[1].read_bytes()
    document = json.loads(out[0].read_text())
    assert (document["kind"], document["schema_version"], document["policy"], document["budget"]) == (
        "zoom_policy", 1, "cascade", 4)  # fmt: skip
    assert document["rule"]["length"] == len(document["views"]) and document["views"][0] == [256, 1, 1]
    assert document["model"]["weights_sha256"] == recorded_spec_sha(study)
    held = json.loads((study / LAYOUT6.path("policies", **WHERE)).read_text())["rows"]
    assert document["held_out"] == {"protocol": "cv3", **next(r for r in held if r["policy"] == "cascade"
                                                               and r["budget"] == 4)}  # fmt: skip
    assert document["fitted_on"]["n_images"] == 6 and document["fitted_on"]["budgets"] == [1, 2, 4, 9, 18]


def recorded_spec_sha(study: Path) -> str:
    from zoomeval.core.io import read_metadata

    meta = read_metadata(study / LAYOUT6.path("predictions", dataset="demo", variant="original", model="lite0"))
    return meta["model"]["weights_sha256"]


def test_another_model_is_refused(study):
    document = export_policy(study, LAYOUT6, **WHERE, name="cascade", budget=4, settings=study_settings(study))
    spec, settings = recorded_spec(document["model"]["entry"]), InferenceSettings(device="cpu", num_workers=0)
    loaded = load_model(spec, None)
    zoomeval.ZoomTTA(Classifier(spec, settings, None, loaded=loaded), document)  # the study's own model
    other = Classifier(spec, settings, None, loaded=dataclasses.replace(loaded, weights_sha256="0" * 64))
    with pytest.raises(ValueError, match="fitted for weights with sha256 [0-9a-f]{64}, this model's have 0000"):
        zoomeval.ZoomTTA(other, document)
    renormalised = Classifier(dataclasses.replace(spec, mean=IMAGENET_MEAN, std=IMAGENET_STD), settings, None)
    with pytest.raises(ValueError, match="inputs normalised with"):  # the same weights, fed other inputs
        zoomeval.ZoomTTA(renormalised, document)


def test_a_config_edited_since_the_policies_job_is_refused(study):
    """The refit must be the table's: a seed that is not the one the policies document records is refused."""
    edited = dataclasses.replace(study_settings(study), seed=study_settings(study).seed + 1)
    with pytest.raises(ValueError, match=r"^policies.seed: \d+ in the study's config, \d+ in .*policies.*: the config "
                       "changed since its policies job ran"):  # fmt: skip
        export_policy(study, LAYOUT6, **WHERE, name="cascade", budget=4, settings=edited)


@pytest.mark.parametrize("change", [{"kind": "zoom_policies"}, {"schema_version": 2}, {"views": [[256, 1]]},
                                    {"rule": {"name": "cascade", "tau": 0.5}}, {"rule": {"name": "oracle"}},
                                    {"views": "256"}, {"model": {}}])  # fmt: skip
def test_a_malformed_policy_file_is_refused_naming_it(study, tmp_path, change):
    document = export_policy(study, LAYOUT6, **WHERE, name="cascade", budget=4, settings=study_settings(study))
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({**document, **change}))
    classifier = Classifier(recorded_spec(document["model"]["entry"]), InferenceSettings(device="cpu"), None)
    with pytest.raises(ValueError, match=f"^{path}: ") as error:
        zoomeval.ZoomTTA(classifier, path)
    assert "\n" not in str(error.value)


def run_cli(args: list[str]) -> int:
    try:
        return main(args)
    except SystemExit as exit_:  # argparse's refusals
        return int(exit_.code)


@pytest.mark.parametrize("args, message", [
    (["--policy", "cascade", "--budget", "3", "--fit", "demo"], "--budget: 3 is none of the study's budgets"),
    (["--policy", "cascade", "--budget", "4", "--fit", "nowhere"], "--model: "),
    (["--policy", "oracle", "--budget", "4", "--fit", "demo"], "--policy: invalid choice"),
    (["--policy", "vote", "--budget", "4", "--fit", "demo", "--model", "nobody"], "no such file"),
])  # fmt: skip
def test_bad_arguments_are_one_line_exit_2(study, tmp_path, capsys, args, message):
    code = run_cli(["policy", "export", str(study), *args, "--limit", "6", "-o", str(tmp_path / "p.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message.lower() in err.lower() and len(err.splitlines()) == 1, err
    assert not (tmp_path / "p.json").exists()
