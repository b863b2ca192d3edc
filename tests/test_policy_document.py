"""The declared-document machinery the zoom policy file is read through (nested objects, lists with element forms
and bounded lengths, forms given by other fields, forms derived from the config's schema), the strict JSON reader
and the network fingerprint ZoomTTA checks; the policy files themselves are edited in tests/test_zoom_tta.py, on
its exported ones. No study, no model: fast."""

import json

import pytest
import torch

from zoomeval.core.config_schema import key_schema
from zoomeval.core.documents import (
    COUNT,
    PERCENT,
    STRING,
    Document,
    Field,
    list_of,
    nullable,
    number,
    object_of,
    one_of,
    schema_form,
    tagged,
    tuple_of,
    whole,
)
from zoomeval.core.io import read_json
from zoomeval.inference.classifier import parameters_sha256

SHAPE = Document(
    "shape",
    1,
    (
        Field("size", whole(1, 10)),
        # a form given by another field: each item must be below size
        Field("items", lambda doc: list_of(tuple_of(("x", whole(0, doc["size"] - 1)), ("tag", STRING)), 1, 3, True)),
        Field("rule", tagged("name", {"plain": (), "scaled": (Field("by", nullable(number(0, 1, "a share"))),)})),
        Field("meta", object_of(Field("count", COUNT), Field("note", STRING, required=False))),
    ),
    "write it again",
    kind="shape",
)
GOOD = {"kind": "shape", "schema_version": 1, "size": 3, "items": [[0, "a"], [2, "b"]], "rule": {"name": "plain"}}


@pytest.mark.parametrize(
    "edit, message",
    [
        ({}, None),
        ({"meta": {"count": 1, "note": None}}, None),  # an optional field may be null
        ({"size": 11}, "size is 11; expected a whole number from 1 to 10"),
        ({"size": True}, "size is True; expected a whole number from 1 to 10"),
        ({"items": [[3, "a"]]}, "items[0][0] is 3; expected a whole number from 0 to 2"),  # read after size
        ({"items": [[0, "a"], [0]]}, "items[1] is [0]; expected a list [x, tag]"),
        ({"items": []}, "items is []; expected a list of 1 to 3 items, no two alike"),
        (
            {"items": [[0, "a"]] * 4},
            "items is [[0, 'a'], [0, 'a'], [0, 'a']]... (4 items); expected a list of 1 to 3 items, no two alike",
        ),
        ({"items": [[0, "a"], [1, "b"], [0, "a"]]}, "items[2] is [0, 'a']; expected no repeat of items[0]"),
        ({"rule": {"name": "odd"}}, "rule.name is 'odd'; expected one of plain, scaled"),
        ({"rule": {"name": "scaled"}}, "rule.by is absent; expected a share or null"),
        ({"rule": {"name": "scaled", "by": float("nan")}}, "rule.by is nan; expected a share or null"),
        ({"rule": [1]}, "rule is [1]; expected an object whose name is one of plain, scaled"),
        ({"meta": {"count": -1}}, "meta.count is -1; expected a whole number >= 0"),
        ({"meta": {}}, "meta.count is absent; expected a whole number >= 0"),
        ({"meta": {"count": 10**400}}, None),  # no float conversion (an OverflowError)
    ],
)
def test_nested_fields_are_checked_and_named_by_their_path(edit, message):
    document = {**GOOD, "meta": {"count": 1}, **edit}
    if message is None:
        assert SHAPE.upgraded(document, "s.json")["items"] == document["items"]
        return
    with pytest.raises(ValueError) as refused:
        SHAPE.upgraded(document, "s.json")
    assert str(refused.value) == f"s.json: {message}"


def test_a_huge_value_is_shown_cut_short():
    with pytest.raises(ValueError) as refused:
        SHAPE.upgraded({**GOOD, "meta": {"count": 1}, "size": 10**400}, "s.json")
    assert str(refused.value).startswith("s.json: size is 1000") and len(str(refused.value)) < 200
    assert not PERCENT.accepts(10**400) and not PERCENT.accepts(float("inf"))


def test_forms_are_derived_from_the_config_schema():
    assert schema_form(key_schema("models", "*", "input_size")).expected == "a whole number from 16 to 1024"
    scales = schema_form(key_schema("scales"))
    assert scales.expected == "a list of at least 1 items, no two alike" and not scales.accepts([])
    assert schema_form(key_schema("inference", "precision")).expected == "one of fp32, bf16, fp16"
    assert one_of([64, 256]).accepts(64) and not one_of([64, 256]).accepts(64.0) and not one_of(["a"]).accepts(["a"])


@pytest.mark.parametrize(
    "text, key",
    [
        ('{"views": [], "views": [1]}', "views"),
        ('{"model": {"crop_size": 224, "crop_size": 0}}', "crop_size"),
        ('[{"a": 1}, {"b": 1, "b": 2}]', "b"),
    ],
)
def test_the_json_reader_refuses_a_key_twice_naming_the_file(tmp_path, text, key):
    (path := tmp_path / "d.json").write_text(text)
    with pytest.raises(ValueError) as refused:
        read_json(path)
    assert str(refused.value) == f"{path}: not a JSON document (the key {key!r} appears twice in one object)"


def test_the_json_reader_refuses_a_number_python_does_not_read_naming_the_file(tmp_path):
    (path := tmp_path / "d.json").write_text('{"n": ' + "9" * 5000 + "}")
    with pytest.raises(ValueError, match=rf"^{path}: not a JSON document \(Exceeds the limit"):
        read_json(path)
    (path := tmp_path / "ok.json").write_text(json.dumps({"a": {"b": [1, {"c": None}]}, "n": float("nan")}))
    assert json.dumps(read_json(path)) == json.dumps({"a": {"b": [1, {"c": None}]}, "n": float("nan")})


def test_the_parameters_fingerprint_follows_values_not_layout():
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(), torch.nn.LazyLinear(2)
    )
    net(torch.zeros(1, 3, 5, 5))
    before = parameters_sha256(net)
    assert parameters_sha256(net.to(memory_format=torch.channels_last)) == before  # the same values, another layout
    with torch.no_grad():
        net[3].bias[0] += 1
    assert parameters_sha256(net) != before
    with torch.no_grad():
        net[3].bias[0] -= 1
    net.train()(torch.ones(2, 3, 5, 5))  # a BatchNorm run in training mode moves its running statistics
    assert parameters_sha256(net) != before
