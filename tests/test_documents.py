"""The result documents, each declared once (:mod:`zoomeval.core.documents`): what the jobs write is exactly the
declared fields in the order the files have always had, what the readers and tables use is derived from the same
declaration, older versions read as the current value, and a malformed document is refused in one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.test_policies import ONE, A, confident_when_right, metrics, write_files
from zoomeval.analysis.metrics import COVER, METRICS, METRICS_KEYS, Metrics, read_greedy, read_metrics, write_metrics
from zoomeval.analysis.policy_eval import POLICIES_DOCUMENT, cv_document, transfer_document
from zoomeval.core.config import PoliciesConfig
from zoomeval.core.left_out import LeftOut
from zoomeval.core.zoom import Transform
from zoomeval.report.tables import TABLE_A8_COLUMNS
from zoomeval.study.index import STUDY_INDEX, Entry, index_document, read_index, write_index
from zoomeval.study.verified import META_FIELDS, checked_prediction_metadata

#: metrics.json's fields in the order schema 6 files have them: an interface, so a reordered declaration fails here.
SCHEMA_6 = [
    "model",
    "variant",
    "dataset",
    "n_images",
    "acc_1crop",
    "acc_top_k",
    "acc_max",
    "cover_size",
    "cover_size_exact",
    "cover_gap",
    "zoom_groups",
    "top_k_centre_share",
    "n_transforms",
    "n_classes",
    "n_excluded",
    "by_origin",
    "aggregation",
    "top_k",
    "acc_standard",
    "left_out",
    "inputs",
    "key",
]
METRICS_REMEDY = "re-run the analysis (snakemake --forcerun analyze)"
#: A result with every field set (none at its default).
RESULT = Metrics(
    model="m",
    variant="original",
    dataset="toy",
    n_images=3,
    acc_1crop=100 / 3,
    acc_top_k=200 / 3,
    acc_max=200 / 3,
    cover_size=2,
    cover_size_exact=2,
    cover_gap=0,
    zoom_groups={"in": 33.3},
    top_k_centre_share=50.0,
    n_transforms=18,
    n_classes=1000,
    n_excluded=1,
    by_origin={"x": {"n_images": 3, "acc_1crop": None, "acc_max": 66.7}},
    aggregation={"five_crop": {"max": 33.3}},
    top_k=2,
    acc_standard=100.0,
    left_out=LeftOut("toy", {"unreadable": 1}, {}),
    inputs={"predictions": {"path": "p.parquet", "sha256": "0" * 64}, "standard": None},
    key={"dataset": "toy"},
)
#: What every document starts with, besides its fields.
HEAD = ("kind", "schema_version")
COVERS = {"greedy": [{"rank": 1, "scale": 224, "row": 0, "col": 2}], "exact": {"size": 2}}


def test_metrics_and_cover_json_are_the_dataclass_fields_in_their_files_order(tmp_path):
    assert list(METRICS_KEYS) == SCHEMA_6 == [f.name for f in dataclasses.fields(Metrics)]
    assert TABLE_A8_COLUMNS == [*SCHEMA_6[:10], "acc_standard", "architecture", "n_scales"]
    write_metrics(RESULT, COVERS, tmp_path / "metrics.json", tmp_path / "cover.json")
    values = dataclasses.asdict(RESULT)
    # the bytes schema 6's writer wrote: the version, then each field in order, 2-space indented, a final newline
    expected = {"schema_version": 6, **{name: values[name] for name in SCHEMA_6}}
    assert (tmp_path / "metrics.json").read_text() == json.dumps(expected, indent=2) + "\n"
    assert (tmp_path / "cover.json").read_text() == json.dumps({**expected, **COVERS}, indent=2) + "\n"
    assert read_metrics(tmp_path / "metrics.json") == RESULT == read_metrics(tmp_path / "cover.json")
    assert read_greedy(tmp_path / "cover.json") == [Transform(224, 0, 2)]
    assert list(COVER.read(tmp_path / "cover.json")) == [*SCHEMA_6, "greedy", "exact"]


def test_each_older_metrics_version_reads_as_the_current_value_without_what_it_lacks(tmp_path):
    assert [u.version for u in METRICS.upgrades] == [2, 3, 4, 5, 6]  # one upgrade to each version after the 1st
    current = METRICS.document(dataclasses.asdict(RESULT))
    version_5 = {**current, "schema_version": 5}
    version_4 = {k: v for k, v in version_5.items() if k not in ("inputs", "key")} | {"schema_version": 4}
    version_3 = {k: v for k, v in version_4.items() if k != "left_out"} | {"schema_version": 3}
    version_2 = {k: v for k, v in version_3.items() if k != "acc_standard"} | {"schema_version": 2}
    version_1 = {("acc_top36" if k == "acc_top_k" else k): v for k, v in version_2.items() if k != "schema_version"}
    unrecorded = dataclasses.replace(RESULT, inputs=None, key=None)
    for document, value in [
        (current, RESULT),
        (version_5, RESULT),
        (version_4, unrecorded),
        (version_3, dataclasses.replace(unrecorded, left_out=None)),
        (version_2, dataclasses.replace(unrecorded, left_out=None, acc_standard=None)),
        (version_1, dataclasses.replace(unrecorded, left_out=None, acc_standard=None)),
    ]:
        (tmp_path / "m.json").write_text(json.dumps(document))
        assert read_metrics(tmp_path / "m.json") == value, document.get("schema_version")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"acc_max": "75"}, "acc_max is '75'; expected a number from 0 to 100"),
        ({"acc_max": 100.5}, "acc_max is 100.5; expected a number from 0 to 100"),
        ({"acc_1crop": float("nan")}, "acc_1crop is nan; expected a number from 0 to 100 or null"),
        ({"n_images": True}, "n_images is True; expected a whole number >= 0"),
        ({"top_k": -1}, "top_k is -1; expected a whole number >= 0"),
        ({"dataset": None}, "dataset is None; expected a string"),
        ({"n_classes": None}, "n_classes is None; expected a whole number >= 0"),
        (
            {"schema_version": 7},
            f"metrics schema_version 7 is not one this zoomeval reads (1 to 6); upgrade zoomeval or {METRICS_REMEDY}",
        ),
        ({"schema_version": "6"}, "metrics schema_version '6' is not one this zoomeval reads (1 to 6)"),
        ({"schema_version": 0}, "metrics schema_version 0 is not one this zoomeval reads (1 to 6)"),
        ({"cover_size": 19}, "cover sizes 2 (exact) and 19 (greedy); expected exact <= greedy <= n_transforms (18)"),
    ],
)
def test_a_malformed_metrics_file_is_refused_in_one_line_naming_the_file_field_and_form(tmp_path, edit, message):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({**METRICS.document(dataclasses.asdict(RESULT)), **edit}))
    with pytest.raises(ValueError) as refused:
        read_metrics(path)
    assert str(refused.value).startswith(f"{path}: {message}") and "\n" not in str(refused.value)


def test_a_metrics_file_without_a_field_or_not_an_object_is_refused(tmp_path):
    path = tmp_path / "metrics.json"
    current = METRICS.document(dataclasses.asdict(RESULT))
    path.write_text(json.dumps({k: v for k, v in current.items() if k not in ("top_k", "key")}))
    with pytest.raises(ValueError) as refused:
        read_metrics(path)
    assert str(refused.value) == f"{path}: no ['key', 'top_k']; {METRICS_REMEDY}"
    path.write_text("[]")
    with pytest.raises(ValueError) as refused:
        read_metrics(path)
    assert str(refused.value) == f"{path}: not a metrics document (a JSON object); {METRICS_REMEDY}"


def test_fields_beyond_the_declared_are_not_read_and_an_undeclared_one_is_never_written():
    assert METRICS.upgraded({**METRICS.document(dataclasses.asdict(RESULT)), "extra": 1}, "m") == dataclasses.asdict(
        RESULT
    )
    with pytest.raises(KeyError, match=r"metrics document: no field \['extra'\]"):
        METRICS.document({**dataclasses.asdict(RESULT), "extra": 1})


def test_study_json_is_its_declared_fields_and_is_refused_naming_the_field(tmp_path):
    metrics_path = "results/analysis/toy/original/m/metrics.json"
    METRICS.write(tmp_path / metrics_path, dataclasses.asdict(RESULT))
    write_index(tmp_path / "results/study.json", tmp_path, [metrics_path])
    document = json.loads((tmp_path / "results/study.json").read_text())
    assert document == index_document(tmp_path, [metrics_path])
    assert (
        list(document)
        == ["kind", "schema_version", *STUDY_INDEX.names]
        == [
            "kind",
            "schema_version",
            "zoomeval",
            "results",
        ]
    )
    assert document["kind"] == "study_index" and document["schema_version"] == 1
    assert document["results"] == [
        {"path": metrics_path, "sha256": document["results"][0]["sha256"], "key": {"dataset": "toy"}}
    ]
    path = tmp_path / "study.json"
    remedy = "re-run the study's workflow to rewrite it"
    for edit, message in [
        ({"kind": "metrics"}, f"kind is 'metrics'; expected 'study_index'; {remedy}"),
        (
            {"schema_version": 2},
            f"study index schema_version 2 is not one this zoomeval reads (1); upgrade zoomeval or {remedy}",
        ),
        ({"results": []}, "results is []; expected a non-empty list of finished results"),
        ({"zoomeval": 1}, "zoomeval is 1; expected a string"),
    ]:
        path.write_text(json.dumps({**document, **edit}))
        with pytest.raises(ValueError) as refused:
            STUDY_INDEX.read(path)
        assert str(refused.value) == f"{path}: {message}"
    path.write_text(json.dumps({k: v for k, v in document.items() if k != "zoomeval"}))  # a hand-made index
    assert STUDY_INDEX.read(path) == {"zoomeval": None, "results": document["results"]}
    entry = document["results"][0]
    index = tmp_path / "results/study.json"
    assert read_index(tmp_path) == [Entry(metrics_path, entry["sha256"], {"dataset": "toy"})]  # written above
    for edit, message in [
        ({"sha256": "abc"}, "sha256 is 'abc'; expected 64 hexadecimal digits"),
        ({"key": []}, "key is []; expected the comparability key (an object)"),
    ]:
        index.write_text(json.dumps({**document, "results": [{**entry, **edit}]}))
        with pytest.raises(ValueError) as refused:
            read_index(tmp_path)
        assert str(refused.value) == f"{index}: results[0].{message}"


def test_a_policies_document_is_its_declared_fields_and_reads_back_to_the_same_bytes(tmp_path):
    settings = PoliciesConfig(budgets=(1, 2), folds=2)
    files = write_files(tmp_path / "d", "d", confident_when_right([{ONE}, {A}], copies=3))
    cv = cv_document(*files, metrics("d"), settings)
    moved = transfer_document(files, files, metrics("d"), "d", settings)
    fields = ["model", "variant", "dataset", "protocol", "acc_1crop", "acc_max", "left_out", "rows", "seed"]
    assert list(POLICIES_DOCUMENT.names) == [*fields, "folds", "fitted", "not_fitted"]
    assert list(cv) == ["kind", "schema_version", *fields, "folds", "fitted"]
    assert list(moved) == ["kind", "schema_version", *fields, "fitted"]
    assert (cv["kind"], cv["schema_version"], moved["protocol"]) == ("zoom_policies", 2, "transfer:d")
    for document in (cv, moved):
        POLICIES_DOCUMENT.write(tmp_path / "p.json", {k: v for k, v in document.items() if k not in HEAD})
        assert (tmp_path / "p.json").read_text() == json.dumps(document, indent=2) + "\n"
        again = POLICIES_DOCUMENT.document(POLICIES_DOCUMENT.read(tmp_path / "p.json"))
        assert json.dumps(again, indent=2) + "\n" == (tmp_path / "p.json").read_text()
    remedy = "re-run the zoom_policies jobs"
    for edit, message in [
        (
            {"schema_version": 1},
            f"zoom policies schema_version 1 is not one this zoomeval reads (2); upgrade zoomeval or {remedy}",
        ),
        ({"kind": "study_index"}, f"kind is 'study_index'; expected 'zoom_policies'; {remedy}"),
        ({"acc_max": None}, "acc_max is None; expected a number from 0 to 100"),
        ({"rows": {}}, "rows is {}; expected a list"),
    ]:
        (tmp_path / "p.json").write_text(json.dumps({**cv, **edit}))
        with pytest.raises(ValueError) as refused:
            POLICIES_DOCUMENT.read(tmp_path / "p.json")
        assert str(refused.value) == f"{tmp_path / 'p.json'}: {message}"


def test_the_prediction_metadata_a_row_needs_is_refused_naming_the_field(monkeypatch):
    from zoomeval.study import verified

    meta = {
        "model": {"name": "m", "architecture": "a", "weights": "w", "param_count": 5},
        "dataset": "d",
        "variant": "original",
        "crop_size": 224,
        "zoomeval": "1",
        "precision": "fp32",
        "resize_backend": "pil",
        "torch": "2",
        "scales": [224],
    }
    assert [f.name for f in META_FIELDS] == list(meta)
    for edit, message in [
        ({}, None),
        (
            {"model": {"name": "m"}},
            "model is {'name': 'm'}; expected an object with the strings name, architecture, weights",
        ),
        ({"crop_size": "224"}, "crop_size is '224'; expected a whole number >= 0"),
        ({"torch": None}, "torch is None; expected a string"),
        ({"scales": [224, 0]}, "scales is [224, 0]; expected a list of whole numbers > 0"),
    ]:
        monkeypatch.setattr(verified, "zoomeval_metadata", lambda path, edit=edit: {**meta, **edit})
        if message is None:
            assert checked_prediction_metadata(Path("p.parquet")) == meta
            continue
        with pytest.raises(ValueError) as refused:
            checked_prediction_metadata(Path("p.parquet"))
        assert str(refused.value) == f"p.parquet: metadata field {message}"
