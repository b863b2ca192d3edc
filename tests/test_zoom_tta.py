"""zoomeval policy export and zoomeval.ZoomTTA on a tiny finished study (the demo model, its first 6 images, 2 scales):
the wrapper, recomputing every view it runs, answers each image exactly as the policies' rules answer on the study's
prediction matrix, for every policy and budget; its crops are the predict job's, pixel for pixel; another model is
refused; bad arguments are one line, exit 2."""

import csv
import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import zoomeval
from tests.conftest import ROOT, run_snakemake, write_config
from zoomeval.analysis.metrics import read_metrics
from zoomeval.analysis.policies import apply, choose_cascade, fit
from zoomeval.analysis.policy_eval import budgets_for, cross_validate, read_views, transfer_document
from zoomeval.cli import main, study_settings
from zoomeval.core.classes import wnids
from zoomeval.core.config import InferenceSettings
from zoomeval.core.io import write_json
from zoomeval.core.layout import run_layout
from zoomeval.core.manifest import read_manifest
from zoomeval.core.zoom import Transform, transforms
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crop_dataset import ZoomCrops
from zoomeval.inference.models import IMAGENET_MEAN, IMAGENET_STD, load_model
from zoomeval.inference.recorded import recorded_spec
from zoomeval.report.policy_export import export_policy
from zoomeval.report.policy_predict import open_image
from zoomeval.report.zoom_tta import study_classifier

LAYOUT6 = run_layout(6)
SCALES = [64, 256]
WHERE = {"scored": "demo", "variant": "original", "model": "lite0"}
RULE_NAMES = ("cascade", "max_conf", "vote", "selector")
# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("test_zoom_tta")]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("zoom_tta") / "study"
    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    write_config(
        work,
        scales=SCALES,
        top_k=2,
        limit=6,
        stats={"pairs": []},
        datasets={"demo": {**demo["datasets"]["demo"], "variants": ["original"]}},
        models={"lite0": demo["models"]["efficientnet_lite0"]},
        policies={**demo["policies"], "folds": 3},
    )
    run_snakemake(work, LAYOUT6.path("policies", **WHERE))
    return work


@pytest.fixture(scope="module")
def images(study: Path) -> list:
    """The study's images as its predict job decodes them."""
    records = read_manifest(study / LAYOUT6.path("manifest", dataset="demo"))
    crops = ZoomCrops([dataclasses.replace(r, path=str(study / r.path)) for r in records], SCALES)
    return [crops.decoded(i) for i in range(len(records))]


@pytest.fixture(scope="module")
def classifier(study: Path) -> Classifier:
    """The study's classifier, each distinct crop's logits computed once for the module: the rule tests run the same
    views of the same images for every rule, budget and fold (the logits of a crop do not depend on the rule)."""
    loaded = study_classifier(document_of(study, "max_conf", 1), study / "resources")
    memo: dict[bytes, torch.Tensor] = {}
    real = loaded.logits

    def logits(crops: torch.Tensor) -> torch.Tensor:
        keys = [hashlib.sha256(crop.numpy().tobytes()).digest() for crop in crops]
        new = list({k: i for i, k in reversed(list(enumerate(keys))) if k not in memo}.items())
        if new:
            for (key, _), row in zip(new, real(crops[[i for _, i in new]]), strict=True):
                memo[key] = row
        return torch.stack([memo[k] for k in keys])

    loaded.logits = logits
    return loaded


@pytest.fixture
def fit_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The export's fits memoised for a test that exports every rule at every budget from the same study: each fit
    (a fold's, the all-image one) runs once, not once per file (each takes a quarter of a second)."""
    import zoomeval.report.policy_export as export

    fits: dict = {}

    def once(key: tuple, run) -> object:
        if key not in fits:
            fits[key] = run()
        return fits[key]

    real = export.fold_fit
    monkeypatch.setattr(export, "fit", lambda views, *args: once(("all", *map(str, args)), lambda: fit(views, *args)))
    monkeypatch.setattr(
        export,
        "fold_fit",
        lambda views, folds, k, *args: once(
            (k, folds.tobytes(), *map(str, args)), lambda: real(views, folds, k, *args)
        ),
    )


@pytest.fixture(scope="module")
def image_ids(study: Path) -> list[str]:
    """The ids of the ``images`` fixture's images, in its order."""
    return [r.image_id for r in read_manifest(study / LAYOUT6.path("manifest", dataset="demo"))]


def study_choices(study: Path):
    """The policies fitted on every image of the study's matrix, applied to its stored predictions."""
    views, _ = read_views(
        study / LAYOUT6.path("correct", **WHERE),
        study / LAYOUT6.path("predictions", dataset="demo", variant="original", model="lite0"),
    )
    budgets = budgets_for(study_settings(study).budgets, len(views.order))
    return views, budgets, apply(fit(views, budgets, 200_000, 0), views.unlabelled(), budgets)


def test_the_wrapper_answers_every_image_as_the_policy_does_on_the_studys_predictions(
    study, images, classifier, fit_once
):
    views, budgets, choices = study_choices(study)
    assert budgets == [1, 2, 4, 9, 18]
    rows = np.arange(views.n_images)
    stopped_early = 0
    for name in RULE_NAMES:
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
        args = [
            "policy",
            "export",
            str(study),
            "--policy",
            "cascade",
            "--budget",
            "4",
            "--fit",
            "demo",
            "--limit",
            "6",
            "-o",
            str(path),
        ]
        assert main(args) == 0
    assert out[0].read_bytes() == out[1].read_bytes()
    document = json.loads(out[0].read_text())
    assert (document["kind"], document["schema_version"], document["policy"], document["budget"]) == (
        "zoom_policy",
        1,
        "cascade",
        4,
    )
    assert document["rule"]["length"] == len(document["views"]) and document["views"][0] == [256, 1, 1]
    assert document["model"]["weights_sha256"] == recorded_spec_sha(study)
    held = json.loads((study / LAYOUT6.path("policies", **WHERE)).read_text())["rows"]
    assert document["held_out"] == {
        "protocol": "cv3",
        **next(r for r in held if r["policy"] == "cascade" and r["budget"] == 4),
    }
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
    with pytest.raises(
        ValueError,
        match=r"^policies.seed: \d+ in the study's config, \d+ in .*policies.*: the config "
        "changed since its policies job ran",
    ):
        export_policy(study, LAYOUT6, **WHERE, name="cascade", budget=4, settings=edited)


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "zoom_policies"},
        {"schema_version": 2},
        {"views": [[256, 1]]},
        {"rule": {"name": "cascade", "tau": 0.5}},
        {"rule": {"name": "oracle"}},
        {"views": "256"},
        {"model": {}},
    ],
)
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


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policy", "cascade", "--budget", "3", "--fit", "demo"], "--budget: 3 is none of the study's budgets"),
        (["--policy", "cascade", "--budget", "4", "--fit", "nowhere"], "--model: "),
        (["--policy", "oracle", "--budget", "4", "--fit", "demo"], "--policy: invalid choice"),
        (["--policy", "vote", "--budget", "4", "--fit", "demo", "--model", "nobody"], "no such file"),
        (["--policy", "vote", "--budget", "4", "--fit", "demo", "--fold", "3"], "--fold: 3 is no fold of"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(study, tmp_path, capsys, args, message):
    code = run_cli(["policy", "export", str(study), *args, "--limit", "6", "-o", str(tmp_path / "p.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message.lower() in err.lower() and len(err.splitlines()) == 1, err
    assert err.startswith("zoomeval policy export: ")  # the subcommand that refused it
    assert not (tmp_path / "p.json").exists()


def test_each_folds_own_policy_answers_its_held_out_images_as_the_cross_validation(
    study, images, image_ids, classifier, fit_once
):
    """Item 3: fold K's file on fold K's images gives the cross-validation's choices, passes and labels there, so the
    folds together give the table row's count of right answers, for every rule and budget."""
    settings = study_settings(study)
    views, budgets, _ = study_choices(study)
    choices, folds, _ = cross_validate(views, budgets, settings.folds, settings.seed, settings.selector_rows)
    document = json.loads((study / LAYOUT6.path("policies", **WHERE)).read_text())
    rows = {(r["policy"], r["budget"]): r for r in document["rows"]}
    right = {key: 0 for key in rows if key[0] in RULE_NAMES}
    for fold, held_ids in enumerate(document["folds"]):
        held = [image_ids.index(i) for i in held_ids]
        assert held == np.flatnonzero(folds == fold).tolist()  # the policies job's folds are the ones dealt here
        for name in RULE_NAMES:
            for budget in budgets:
                exported = document_of(study, name, budget, fold=fold)
                assert exported["fitted_on"]["fold"] == fold and exported["fitted_on"]["n_images"] == 6 - len(held)
                assert exported["held_out"]["fold"] == fold and exported["held_out"]["fold_images"] == len(held)
                assert exported["held_out"]["n_images"] == 6  # the row: every fold's images
                answers = zoomeval.ZoomTTA(classifier, exported)([images[i] for i in held])
                view, passes = choices[name, budget]
                got = [views.order.index(Transform(*a.view)) for a in answers]
                assert got == view[held].tolist(), (fold, name, budget)
                assert [a.passes for a in answers] == passes[held].tolist(), (fold, name, budget)
                assert [a.label for a in answers] == views.pred[held, got].tolist()
                right[name, budget] += int(views.correct[held, got].sum())
    assert right == {key: rows[key]["n_correct"] for key in right}


def document_of(study: Path, name: str, budget: int, **options):
    return export_policy(study, LAYOUT6, **WHERE, name=name, budget=budget, settings=study_settings(study), **options)


@pytest.mark.parametrize("fold", [None, 1])
@pytest.mark.parametrize("edit", [{"budgets": [1, 2]}, {"selector_rows": 2}, {"folds": 2}])
def test_a_config_whose_settings_no_longer_give_the_jobs_fits_is_refused(study, fold, edit):
    """Budgets, the selector's sample and the folds are not recorded as such: the refit is compared with the fits the
    policies document records (fold 0's for an all-image export)."""
    edited = dataclasses.replace(study_settings(study), **edit)
    message = "images are not those policies.folds" if "folds" in edit else "fitted here is not the one its policies"
    with pytest.raises(ValueError, match=message):
        export_policy(study, LAYOUT6, **WHERE, name="cascade", budget=2, settings=edited, fold=fold)


@pytest.fixture
def transferred(study: Path):
    """A transfer document from the demo into itself, as the transfer job writes it (the 6-image study has one scored
    dataset; a second under another name would cost a second study run), removed afterwards."""
    matrix = study / LAYOUT6.path("correct", **WHERE)
    predictions = study / LAYOUT6.path("predictions", dataset="demo", variant="original", model="lite0")
    metrics = read_metrics(study / LAYOUT6.path("metrics", **WHERE))
    document = transfer_document((matrix, predictions), (matrix, predictions), metrics, "demo", study_settings(study))
    path = study / LAYOUT6.path("policy_transfer", source="demo", **WHERE)
    write_json(path, document)
    yield path, document
    path.unlink()


def test_the_all_image_fit_is_the_transfer_jobs_and_answers_its_target_as_the_table_does(
    study, images, classifier, transferred
):
    path, document = transferred
    views, _, _ = study_choices(study)
    for name in RULE_NAMES:
        exported = document_of(study, name, 4)
        row = next(r for r in document["rows"] if r["policy"] == name and r["budget"] == 4)
        assert exported["transferred"] == [{"scored": "demo", "protocol": "transfer:demo", **row}]
        answers = zoomeval.ZoomTTA(classifier, exported)(images)  # every image of the target
        got = [views.order.index(Transform(*a.view)) for a in answers]
        assert int(views.correct[np.arange(6), got].sum()) == row["n_correct"], name
    tampered = json.loads(path.read_text())
    tampered["fitted"][0]["cascade"]["4"]["length"] += 1
    write_json(path, tampered)
    with pytest.raises(ValueError, match=f"^{path}: the transfer's policy fitted here is not the one its policies job"):
        document_of(study, "vote", 4)


@pytest.fixture(scope="module")
def policy_file(study: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("policy") / "cascade-4.json"
    write_json(path, document_of(study, "cascade", 4))
    return path


def test_predict_answers_files_and_folders_as_the_wrapper_does_one_csv_row_each(
    study, images, policy_file, tmp_path, monkeypatch, capsys
):
    """zoomeval predict: files as named, then a folder's image files recursively in sorted order (hidden ones and
    other files left out); each row the wrapper's answer; a path a spreadsheet would run is written as text."""
    folder = tmp_path / "images"
    (folder / "sub").mkdir(parents=True)
    (folder / ".hidden.jpg").write_bytes(b"not read")
    (folder / "notes.txt").write_text("not an image")
    named = {folder / "sub" / "b.png": 1, folder / "a.jpg": 2, tmp_path / "=cmd.jpg": 0}
    for path, i in named.items():
        images[i].save(path, quality=100) if path.suffix == ".jpg" else images[i].save(path)
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "predict",
                "--policy",
                str(policy_file),
                "--study",
                str(study),
                "=cmd.jpg",
                "images",
                "-o",
                "out.csv",
                "--batch-size",
                "5",
            ]
        )
        == 0
    )
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0] == "path,label,wnid,class_name,confidence,scale,row,col,passes"
    order = [tmp_path / "=cmd.jpg", folder / "a.jpg", folder / "sub" / "b.png"]
    assert [line.split(",")[0] for line in lines[1:]] == ["'=cmd.jpg", "images/a.jpg", "images/sub/b.png"]
    tta = zoomeval.ZoomTTA(study_classifier(json.loads(policy_file.read_text()), study / "resources"), policy_file)
    answers = tta([open_image(p) for p in order])  # the saved files (JPEG re-encodes), decoded as predict does
    for line, answer in zip(lines[1:], answers, strict=True):
        cells = next(csv.reader([line]))
        assert cells[1:3] == [str(answer.label), wnids()[answer.label]] and cells[5:] == [
            *map(str, answer.view),
            str(answer.passes),
        ]
        assert float(cells[4]) == pytest.approx(answer.confidence, rel=1e-5)
    png, own = lines[3].split(","), tta([images[1]])[0]  # PNG is lossless: the study's own image, answered alike
    assert (int(png[1]), [int(x) for x in png[5:8]]) == (own.label, list(own.view))
    assert main(["predict", "--policy", str(policy_file), "--study", str(study), "images/a.jpg"]) == 0
    assert capsys.readouterr().out.splitlines() == [lines[0], lines[2]]  # CSV on stdout without -o


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "nowhere.jpg: no such file or folder"),
        ("junk", "junk.jpg: not an image this reads"),
        ("policy", "policy.json: not a JSON document"),
        ("weights", "no such folder: the policy's weights are not under"),
        ("device", "--device: 'gpu0' is no torch device"),
        ("empty", "no image files"),
    ],
)
def test_predict_refuses_a_bad_input_in_one_line_exit_2(
    study, policy_file, tmp_path, capsys, monkeypatch, case, message
):
    # the demo's weights ship in the package (its source fetches nothing): a source that keeps them in a folder
    monkeypatch.setattr(
        "zoomeval.inference.models.weights_folder",
        lambda spec, resources: None if case != "weights" else f"{resources}/weights/x/y.tag",
    )
    (tmp_path / "junk.jpg").write_text("not a JPEG")
    (tmp_path / "policy.json").write_text("{")
    (tmp_path / "empty").mkdir()
    (tmp_path / "resources").mkdir()
    policy = tmp_path / "policy.json" if case == "policy" else policy_file
    weights = ["--resources", str(tmp_path / "resources")] if case == "weights" else ["--study", str(study)]
    image = {"missing": "nowhere.jpg", "empty": str(tmp_path / "empty")}.get(case, str(tmp_path / "junk.jpg"))
    device = ["--device", "gpu0"] if case == "device" else []
    out = tmp_path / "out.csv"
    code = run_cli(["predict", "--policy", str(policy), *weights, *device, image, "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("zoomeval predict: ") and message in err and len(err.splitlines()) == 1, err
    assert not out.exists()
