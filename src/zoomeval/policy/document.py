"""The zoom policy file (``zoomeval policy save``), declared once: :data:`POLICY`, its fields and the form of each
(config enums and ranges taken from the config's schema), and :func:`read_policy`, the only way it is read."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from zoomeval.analysis.policies import FEATURES, RULES
from zoomeval.core.classes import NUM_CLASSES
from zoomeval.core.config_schema import key_schema
from zoomeval.core.documents import (
    BOOLEAN,
    COUNT,
    OBJECT,
    SHA256,
    STRING,
    Document,
    Field,
    Form,
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
from zoomeval.core.zoom import RESIZE_BACKENDS

#: Version of a policy file's layout.
SCHEMA_VERSION = 1
KIND = "zoom_policy"

_POSITIVE = Form(lambda value: number().accepts(value) and value > 0, "a number > 0")
#: What identifies the model and its inputs: the prediction file's metadata (config enums and ranges: the schema's).
_MODEL = object_of(
    Field("name", STRING),
    Field("architecture", STRING),
    Field("source", STRING),
    Field("weights_sha256", SHA256),
    Field("mean", list_of(number(), 3, 3, what="numbers")),
    Field("std", list_of(_POSITIVE, 3, 3, what="numbers")),
    Field("crop_size", schema_form(key_schema("models", "*", "input_size"))),
    Field("scales", schema_form(key_schema("scales"))),
    Field("resize_backend", schema_form(key_schema("inference", "resize_backend"))),
    Field("crop_backend", one_of(RESIZE_BACKENDS)),
    Field("precision", schema_form(key_schema("inference", "precision"))),
    Field("channels_last", BOOLEAN),
    Field("class_set", nullable(schema_form(key_schema("datasets", "*", "class_set")))),
    Field("class_indices", nullable(list_of(whole(0, NUM_CLASSES - 1), 1, NUM_CLASSES, True, "class indices"))),
    Field("entry", OBJECT),  # read as a config entry is (zoomeval.inference.recorded.recorded_spec)
)


def _views(policy: Mapping[str, Any]) -> Form:
    """Views ``[scale, row, col]`` the study evaluated: at its scales, each at most once."""
    scales = policy["model"]["scales"]
    at = one_of(scales, f"one of model.scales ({', '.join(map(str, scales))})")
    anchor = whole(0, 2)
    return list_of(tuple_of(("scale", at), ("row", anchor), ("col", anchor)), 1, 9 * len(scales), True, "views")


def _rule(policy: Mapping[str, Any]) -> Form:
    """The rule by its name, with the fitted parameters it reads (a cascade's ``length``: every view)."""
    n, features, k = len(policy["views"]), list(FEATURES), len(FEATURES)
    parameters = {
        "cascade": (
            Field("tau", nullable(number(0, 1, "a number from 0 to 1"))),  # a confidence; null: never stop early
            Field("length", one_of([n], f"the number of views ({n})")),
        ),
        "selector": (
            Field("features", Form(lambda value: value == features, f"the features {features}")),
            Field("mean", list_of(number(), k, k, what="numbers, one per feature")),
            Field("scale", list_of(_POSITIVE, k, k, what="numbers, one per feature")),
            Field("coef", list_of(number(), k, k, what="numbers, one per feature")),
            Field("intercept", number()),
        ),
    }
    return tagged("name", {name: parameters.get(name, ()) for name in RULES})


#: A policy file: its views, their rule and model are what :class:`ZoomTTA` reads; the rest says where it came from.
POLICY = Document(
    "zoom policy",
    SCHEMA_VERSION,
    (
        Field("policy", one_of(RULES)),
        Field("budget", whole(1)),
        Field("views", _views),
        Field("rule", _rule),
        Field("model", _MODEL),
        Field(
            "fitted_on",
            object_of(
                *(Field(key, STRING) for key in ("dataset", "scored", "variant", "model")),
                Field("fold", nullable(COUNT)),
                Field("n_images", COUNT),
                Field("image_ids_sha256", SHA256),
                Field("predictions", STRING),
                Field("predictions_sha256", SHA256),
                *(Field(key, schema_form(key_schema("policies", key))) for key in ("budgets", "seed", "selector_rows")),
            ),
        ),
        Field("held_out", nullable(OBJECT)),  # the study's row of its policies table
        Field("transferred", list_of(OBJECT, what="rows")),
    ),
    "save it again (zoomeval policy save)",
    kind=KIND,
)


def read_policy(policy: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """The document of a policy file of ``zoomeval policy save`` (or of its parsed JSON), read strictly through its
    declaration :data:`zoomeval.policy.document.POLICY` (``docs/how-to/zoom-policy.md`` lists its fields): a
    ``ValueError`` in one line naming the file and the first field that is not as declared."""
    fields = POLICY.upgraded(dict(policy), "the policy") if isinstance(policy, Mapping) else POLICY.read(policy)
    return POLICY.document(fields)
