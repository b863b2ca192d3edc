"""zoomeval policy save and zoomeval.ZoomTTA on a tiny finished study (the demo model, its first 6 images, 2 scales):
the wrapper, recomputing every view it runs, answers each image exactly as the policies' rules answer on the study's
prediction matrix, for every policy and budget; its crops are the predict job's, pixel for pixel; it decodes images
as the study does; another model or network is refused; the public API (``ZoomTTA.from_file``, the user's own
module, uint8 tensors) answers alike; a hand-edited policy file is refused naming its field; bad arguments are one
line, exit 2."""

import csv
import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

import zoomeval
from tests.conftest import ROOT, run_snakemake, write_config
from zoomeval.analysis.metrics import read_metrics
from zoomeval.analysis.policies import apply, choose_cascade, fit
from zoomeval.analysis.policy_eval import budgets_for, cross_validate, read_views, transfer_document
from zoomeval.cli import main
from zoomeval.cli.policy import study_settings
from zoomeval.core.checksums import sha256_file
from zoomeval.core.classes import wnids
from zoomeval.core.config import InferenceSettings
from zoomeval.core.images import load_rgb
from zoomeval.core.io import read_json, write_json
from zoomeval.core.layout import run_layout
from zoomeval.core.manifest import Record, read_manifest
from zoomeval.core.zoom import Transform, transforms
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crop_dataset import ZoomCrops
from zoomeval.inference.models import IMAGENET_MEAN, IMAGENET_STD, load_model
from zoomeval.inference.recorded import recorded_spec
from zoomeval.policy.apply import open_image
from zoomeval.policy.fitted import export_policy
from zoomeval.policy.tta import study_classifier

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
    import zoomeval.policy.fitted as export

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


@pytest.fixture(scope="module")
def exported(study: Path) -> dict:
    """A real exported cascade and selector policy (budget 4), to edit by hand."""
    return {name: document_of(study, name, 4) for name in ("cascade", "selector")}


def at(*keys_and_value):
    """An edit of a policy document: the value at the path ``keys`` set (a deep copy)."""
    *keys, value = keys_and_value

    def edit(document: dict) -> dict:
        document = json.loads(json.dumps(document))
        node = document
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
        return document

    return edit


SCALE = "expected one of model.scales (64, 256)"
ANCHOR = "expected a whole number from 0 to 2"
NUMBERS = "expected a list of 5 numbers, one per feature"
#: Hand-edited policy files (the cascade's unless the id says selector), each refused naming the field.
EDITS = {
    "a list": (lambda d: [d], "not a zoom policy document (a JSON object); save it again (zoomeval policy save)"),
    "kind": (at("kind", "zoom_policies"), "kind is 'zoom_policies'; expected 'zoom_policy'"),
    "schema_version true": (at("schema_version", True), "zoom policy schema_version True is not one this zoomeval"),
    "schema_version 2": (at("schema_version", 2), "zoom policy schema_version 2 is not one this zoomeval reads (1)"),
    "duplicate key": (None, "not a JSON document (the key 'views' appears twice in one object)"),
    "tau NaN": (at("rule", "tau", float("nan")), "rule.tau is nan; expected a number from 0 to 1 or null"),
    "tau -Infinity": (at("rule", "tau", -float("inf")), "rule.tau is -inf; expected a number from 0 to 1 or null"),
    "tau string": (at("rule", "tau", "0.5"), "rule.tau is '0.5'; expected a number from 0 to 1 or null"),
    "tau 1.5": (at("rule", "tau", 1.5), "rule.tau is 1.5; expected a number from 0 to 1 or null"),
    "length": (at("rule", "length", 5), "rule.length is 5; expected the number of views (2)"),
    "no length": (at("rule", {"name": "cascade", "tau": 0.5}), "rule.length is absent; expected the number of views"),
    "rule name": (at("rule", {"name": "oracle"}), "rule.name is 'oracle'; expected one of max_conf, vote, cascade"),
    "row -1": (at("views", 0, [256, -1, 1]), f"views[0][1] is -1; {ANCHOR}"),
    "row 3": (at("views", 0, 1, 3), f"views[0][1] is 3; {ANCHOR}"),
    "col 3": (at("views", 0, 2, 3), f"views[0][2] is 3; {ANCHOR}"),
    "view of two": (at("views", 0, [256, 1]), "views[0] is [256, 1]; expected a list [scale, row, col]"),
    "views string": (at("views", "256"), "views is '256'; expected a list of 1 to 18 views, no two alike"),
    "booleans": (at("views", [[True, True, True], [True, False, True]]), f"views[0][0] is True; {SCALE}"),
    "scale 0": (at("views", 0, 0, 0), f"views[0][0] is 0; {SCALE}"),
    "scale 200000": (at("views", 0, 0, 200000), f"views[0][0] is 200000; {SCALE}"),
    "scale not evaluated": (at("views", 0, 0, 128), f"views[0][0] is 128; {SCALE}"),
    "model scale 0": (at("model", "scales", [0, 256]), "model.scales[0] is 0; expected a whole number from 1 to 4096"),
    "model scale 200000": (at("model", "scales", [64, 200000]), "model.scales[1] is 200000; expected a whole number"),
    "10^6 views": (
        at("views", [[256, 1, 1]] * 10**6),
        "views is [[256, 1, 1], [256, 1, 1], [256, 1, 1]]... (1000000 items); expected a list of 1 to 18 views",
    ),
    "a view twice": (
        at("views", [[256, 1, 1], [256, 1, 1]]),
        "views[1] is [256, 1, 1]; expected no repeat of views[0]",
    ),
    "selector NaN": (at("rule", "coef", 0, float("nan")), "rule.coef[0] is nan; expected a number"),
    "selector short coef": (at("rule", "coef", [1.0] * 4), f"rule.coef is [1.0, 1.0, 1.0]... (4 items); {NUMBERS}"),
    "selector long mean": (at("rule", "mean", [0.0] * 6), f"rule.mean is [0.0, 0.0, 0.0]... (6 items); {NUMBERS}"),
    "selector scale 0": (at("rule", "scale", 1, 0.0), "rule.scale[1] is 0.0; expected a number > 0"),
    "selector features": (at("rule", "features", ["conf"]), "rule.features is ['conf']; expected the features"),
    "crop_size 0": (at("model", "crop_size", 0), "model.crop_size is 0; expected a whole number from 16 to 1024"),
    "crop_size 60000": (at("model", "crop_size", 60000), "model.crop_size is 60000; expected a whole number from 16"),
    "no classes": (at("model", "class_indices", []), "model.class_indices is []; expected a list of 1 to 1000 class"),
    "class 1000": (at("model", "class_indices", [0, 1000]), "model.class_indices[1] is 1000; expected a whole number"),
    "class -1": (at("model", "class_indices", [-1]), "model.class_indices[0] is -1; expected a whole number from 0"),
    "class twice": (at("model", "class_indices", [3, 3]), "model.class_indices[1] is 3; expected no repeat of"),
    "crop_backend": (at("model", "crop_backend", "cuda"), "model.crop_backend is 'cuda'; expected one of pil, torch"),
    "precision": (at("model", "precision", "fp8"), "model.precision is 'fp8'; expected one of fp32, bf16, fp16"),
    "model empty": (at("model", {}), "model.name is absent; expected a string"),
    "weights sha256": (at("model", "weights_sha256", "x"), "model.weights_sha256 is 'x'; expected 64 hexadecimal"),
    "fitted_on seed": (at("fitted_on", "seed", -1), "fitted_on.seed is -1; expected a whole number >= 0"),
}


def policy_text(exported: dict, case: str) -> str:
    """The policy file of an :data:`EDITS` case, as JSON text (NaN and Infinity as Python writes them)."""
    edit = EDITS[case][0]
    if edit is None:  # "views" twice in the top object: the second replaces the first in a lenient reader
        text = json.dumps(exported["cascade"])
        return text.replace('"views": ', '"views": [[64, 0, 0]], "views": ', 1)
    return json.dumps(edit(exported["selector" if case.startswith("selector") else "cascade"]))


@pytest.mark.parametrize("case", list(EDITS))
def test_a_hand_edited_policy_file_is_refused_in_one_line_naming_the_field(exported, classifier, tmp_path, case):
    path = tmp_path / "policy.json"
    path.write_text(policy_text(exported, case))
    with pytest.raises(ValueError) as refused:
        zoomeval.ZoomTTA(classifier, path)
    message = str(refused.value)
    assert message.startswith(f"{path}: {EDITS[case][1]}") and "\n" not in message and len(message) < 400, message


@pytest.mark.parametrize("case", ["a list", "duplicate key", "tau NaN", "scale not evaluated", "crop_size 0"])
def test_predict_refuses_a_hand_edited_policy_file_in_one_line_exit_2(study, exported, tmp_path, capsys, case):
    path = tmp_path / "policy.json"
    path.write_text(policy_text(exported, case))
    (tmp_path / "a.png").write_bytes(b"")  # never opened: the policy is read first
    code = run_cli(["predict", "--policy", str(path), "--study", str(study), str(tmp_path / "a.png")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"zoomeval predict: {path}: {EDITS[case][1]}") and "\n" not in err, err


def test_an_export_is_read_back_through_the_declaration_before_it_is_written(study, tmp_path, monkeypatch, capsys):
    import zoomeval.policy.fitted as export

    real = export._model
    monkeypatch.setattr(export, "_model", lambda meta: {**real(meta), "crop_size": 0})
    out = tmp_path / "p.json"
    args = ["--policy", "vote", "--budget", "2", "--fit", "demo", "--limit", "6", "-o", str(out)]
    code = run_cli(["policy", "save", str(study), *args])
    err = capsys.readouterr().err.strip()
    expected = f"zoomeval policy save: vote policy exported from {study}: model.crop_size is 0; expected a whole"
    assert code == 2 and err.startswith(expected) and "\n" not in err, err
    assert not out.exists()


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
    code = run_cli(["policy", "save", str(study), *args, "--limit", "6", "-o", str(tmp_path / "p.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message.lower() in err.lower() and len(err.splitlines()) == 1, err
    assert err.startswith("zoomeval policy save: ")  # the subcommand that refused it
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
    answers = tta([open_image(p, tta) for p in order])  # the saved files (JPEG re-encodes), decoded as predict does
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
        ("weights", "no such folder: the weights of the policy's model are not under"),
        ("checkpoint", "the policy's model: no weights file with sha256 "),
        ("device", "--device: 'gpu0' is no torch device"),
        ("nonsense", "--device: 'nonsense' is no torch device"),
        ("batch 0", "--batch-size: 0 is no number of crops; give N >= 1"),
        ("batch -3", "--batch-size: -3 is no number of crops; give N >= 1"),
        (
            "too large",
            "tall.png: resized to S=256 it would be 256x5120000 = 1310720000 pixels, over max_resized_pixels",
        ),
        ("empty", "no image files"),
    ],
)
def test_predict_refuses_a_bad_input_in_one_line_exit_2(study, policy_file, tmp_path, capsys, case, message):
    (tmp_path / "junk.jpg").write_text("not a JPEG")
    (tmp_path / "policy.json").write_text("{")
    (private := tmp_path / "private.pth").write_bytes(b"a file of the user's own")
    sha = sha256_file(private)
    entries = {  # the demo's weights ship in the package: models whose weights are kept in a folder
        "weights": {"name": "r18", "source": "torchvision", "architecture": "resnet18", "weights": "IMAGENET1K_V1"},
        # a checkpoint path in the file is not read: the file is not hashed, nor its sha256 kept in the resources
        "checkpoint": {"source": "checkpoint", "architecture": "resnet18", "weights": sha, "checkpoint": str(private)},
    }
    if case in entries:
        document = read_json(policy_file)
        document["model"]["entry"] = {**document["model"]["entry"], **entries[case], "weights_sha256": sha}
        write_json(tmp_path / "policy.json", document)
    (tmp_path / "empty").mkdir()
    (tmp_path / "resources").mkdir()
    policy = tmp_path / "policy.json" if case in ("policy", *entries) else policy_file
    weights = ["--resources", str(tmp_path / "resources")] if case in entries else ["--study", str(study)]
    Image.new("L", (1, 20000)).save(tmp_path / "tall.png")  # 256 x 5,120,000 pixels at S = 256, but 100-odd bytes
    images = {"missing": "nowhere.jpg", "empty": str(tmp_path / "empty"), "too large": str(tmp_path / "tall.png")}
    image = images.get(case, str(tmp_path / "junk.jpg"))
    options = {"device": ["--device", "gpu0"], "nonsense": ["--device", "nonsense"]}
    options |= {"batch 0": ["--batch-size", "0"], "batch -3": ["--batch-size", "-3"]}
    out = tmp_path / "out.csv"
    code = run_cli(["predict", "--policy", str(policy), *weights, *options.get(case, []), image, "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("zoomeval predict: ") and message in err and len(err.splitlines()) == 1, err
    assert not out.exists()
    assert list((tmp_path / "resources").iterdir()) == []


def test_an_image_is_decoded_as_the_study_decodes_it_16_bit_included(
    study, images, classifier, policy_file, tmp_path, capsys
):
    """16-bit greyscale is scaled to 8 bits (not clipped at 255 as PIL's convert would); palette, CMYK, LA and an
    EXIF-rotated JPEG are the study's pixels (EXIF orientation ignored); the answers follow the pixels."""
    tta = zoomeval.ZoomTTA(classifier, policy_file)
    grey = np.asarray(images[1].convert("L"))
    Image.fromarray(grey.astype(np.uint16) * 257).save(deep := tmp_path / "deep.png")  # 16 bits: grey * 257
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° to show": the study uses the stored pixels
    files = {
        deep: grey,
        tmp_path / "palette.png": images[2].convert("P"),
        tmp_path / "cmyk.jpg": images[3].convert("CMYK"),
        tmp_path / "la.png": images[4].convert("LA"),
        tmp_path / "exif.jpg": images[5],
    }
    for path, image in files.items():
        if path != deep:
            image.save(path, exif=exif) if path.name == "exif.jpg" else image.save(path)
    with Image.open(deep) as raw:
        assert raw.mode.startswith("I") and np.asarray(raw).max() > 255
    for path in files:
        record = Record(path.name, str(path), [0], ["n0"], *Image.open(path).size)
        assert np.array_equal(np.asarray(tta.decoded(Image.open(path), "x")), np.asarray(load_rgb(record))), path
    answers = tta([Image.open(path) for path in files])  # the PIL images as opened, not converted
    assert answers == tta([load_rgb(Record(p.name, str(p), [0], ["n0"], *Image.open(p).size)) for p in files])
    alone = tta([Image.fromarray(grey).convert("RGB")])[0]  # 16 bits scaled: the 8-bit grey image's answer
    assert alone._replace(confidence=0) == answers[0]._replace(confidence=0)  # in other batches: up to rounding
    assert alone.confidence == pytest.approx(answers[0].confidence, rel=1e-5)
    assert main(["predict", "--policy", str(policy_file), "--study", str(study), str(deep)]) == 0
    row = next(csv.reader(capsys.readouterr().out.splitlines()[1:]))  # predict's answer, alone in its call
    assert [int(row[1]), tuple(map(int, row[5:8])), int(row[8])] == [alone.label, alone.view, alone.passes]
    assert float(row[4]) == pytest.approx(alone.confidence, rel=1e-5)
    with pytest.raises(ValueError, match=r"^image 1: resized to S=256 it would be 256x5120000 = \d+ pixels, over"):
        tta([images[0], Image.new("L", (1, 20000))])


def test_a_network_that_is_not_the_recorded_weights_is_refused_before_its_first_answer(study, images, exported):
    """Its class set, its head's width and its parameters (a head zeroed in memory after the weights were loaded
    and verified) are checked, not only the sha256 of the weights file it loaded."""
    document = exported["cascade"]
    spec, settings = recorded_spec(document["model"]["entry"]), InferenceSettings(device="cpu", num_workers=0)
    loaded = load_model(spec, None)
    with pytest.raises(ValueError, match=r"over its model's class_indices \(1000 classes\), this model's are over 3"):
        zoomeval.ZoomTTA(Classifier(spec, settings, [1, 2, 3], loaded=loaded), document)
    tampered = Classifier(spec, settings, None, loaded=loaded)
    head = [m for m in tampered.model.modules() if isinstance(m, torch.nn.Linear)][-1]
    assert head.out_features == 1000
    with torch.no_grad():
        head.weight.zero_()
    with pytest.raises(ValueError, match="parameters have sha256 [0-9a-f]{64}, not the [0-9a-f]{64} of the weights"):
        zoomeval.ZoomTTA(tampered, document)
    ten = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 10)).eval()
    small = dataclasses.replace(loaded, module=ten)  # the recorded weights' sha256, a 10-class head
    tta = zoomeval.ZoomTTA(Classifier(spec, settings, None, loaded=small), document)
    with pytest.raises(ValueError, match=r"^this model gives 10 logits per crop; the policy's model gives one per"):
        tta(images[:1])


def test_the_public_api_as_the_how_to_shows_it_with_the_users_own_module(study, images, policy_file, tmp_path):
    """``zoomeval.ZoomTTA.from_file`` and ``zoomeval.ZoomTTA`` around a plain ``nn.Module`` (the demo's timm network,
    built by the user's code) give the same answers; uint8 tensors, one by one or as a batch, answer as the PIL
    images of their pixels do."""
    from zoomeval.inference.sources.embedded import load_efficientnet_lite0

    width, height = min(i.width for i in images[:3]), min(i.height for i in images[:3])
    paths = [tmp_path / f"{i}.png" for i in range(3)]
    for path, image in zip(paths, images, strict=False):
        image.crop((0, 0, width, height)).save(path)  # one size: the tensors stack into a batch
    tta = zoomeval.ZoomTTA.from_file(policy_file, weights=study)
    answers = tta([Image.open(p) for p in paths])
    assert all(isinstance(a, zoomeval.Answer) for a in answers) and len(answers) == 3
    model = zoomeval.ZoomTTA(load_efficientnet_lite0(), zoomeval.load_policy(policy_file), weights=study)
    assert model([Image.open(p) for p in paths]) == answers
    tensors = [torch.from_numpy(np.array(Image.open(p))).permute(2, 0, 1) for p in paths]  # (3, H, W) uint8
    assert model(tensors) == model(torch.stack(tensors)) == answers
    with pytest.raises(ValueError, match=r"^image 0 is a torch.float32 tensor of shape \(3, \d+, \d+\); expected a"):
        model([tensors[0].float()])
    with pytest.raises(ValueError, match=r"^a batch tensor is \(N, C, H, W\), this one has shape \(3, \d+, \d+\)$"):
        model(tensors[0])


def zeroed_head(module: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():
        module.classifier.weight.zero_()
    return module


@pytest.mark.parametrize(
    "edit, message",
    [
        (zeroed_head, "its classifier.weight has other values than the policy's verified weights"),
        (lambda m: m.half(), r"its blocks.0.0.bn1.bias is torch.float16 \(\d+,\), the policy's model's torch.float32"),
        (lambda m: torch.nn.Sequential(m).eval(), "0.blocks.0.0.bn1.bias is in this module only"),
        (lambda m: m.train(), "^the module is in training mode"),
    ],
    ids=["zeroed head", "half", "wrapped", "training"],
)
def test_a_module_that_is_not_the_policys_network_is_refused_naming_what_differs(study, policy_file, edit, message):
    from zoomeval.inference.sources.embedded import load_efficientnet_lite0

    with pytest.raises(ValueError, match=message):
        zoomeval.ZoomTTA(edit(load_efficientnet_lite0()), policy_file, weights=study)


def test_a_module_needs_the_weights_it_is_checked_against(policy_file):
    with pytest.raises(ValueError, match="^weights: give the study directory or resources folder holding"):
        zoomeval.ZoomTTA(torch.nn.Identity(), policy_file)
    with pytest.raises(TypeError, match="^expected a torch.nn.Module or a zoomeval Classifier, not a str$"):
        zoomeval.ZoomTTA("model.pth", policy_file)
