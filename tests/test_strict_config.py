"""Strict configs: a YAML key given twice is refused naming it and both lines, and every numeric, boolean or
nullable key of the schema takes its value from ``--config`` (which passes the values inside lists and mappings
as strings), found by walking the schema rather than listed by hand."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from snakemake.cli import parse_config
from snakemake.utils import update_config

from tests.conftest import ROOT, run_snakemake, write_config
from zoomeval.core.config_schema import schema_file
from zoomeval.core.strict_yaml import (
    DuplicateKeyError,
    UnsafeYamlError,
    _expanded_size,
    _StrictLoader,
    load_yaml,
    loads_yaml,
)
from zoomeval.registries import load_config

DEMO = load_yaml(ROOT / "config" / "config.yaml")
#: The names a walk of the schema gives the entries of a mapping of free keys (a dataset, a model of the demo).
NAMES = {("datasets",): "demo", ("models",): "efficientnet_lite0"}
CAST = {"integer", "number", "boolean"}


def resolved(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    return {**root["$defs"][schema["$ref"].rsplit("/", 1)[1]], **schema} if "$ref" in schema else schema


def kinds(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    schema = resolved(schema, root)
    if "type" in schema:
        return {schema["type"]}
    return set().union(*(kinds(branch, root) for branch in schema.get("oneOf", [])))


def leaves(schema: dict[str, Any], root: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple]:
    """(path, schema, list length or None) of every key whose values are numbers, booleans or null (a list of them:
    its length), descending into properties, free keys of NAMES and list items."""
    schema = resolved(schema, root)
    for key, sub in schema.get("properties", {}).items():
        yield from leaves(sub, root, (*path, key))
    if isinstance(schema.get("additionalProperties"), dict) and path in NAMES:
        yield from leaves(schema["additionalProperties"], root, (*path, NAMES[path]))
    if isinstance(schema.get("items"), dict):
        item = resolved(schema["items"], root)
        if kinds(item, root) & CAST:
            yield path, item, schema.get("minItems", 1)
    elif kinds(schema, root) & (CAST | {"null"}):
        yield path, schema, None


def samples(schema: dict[str, Any], root: dict[str, Any]) -> list[tuple[str, Any]]:
    """(text as written on the command line, value meant) for a value in range of each type the key allows."""
    allowed, schema = kinds(schema, root), resolved(schema, root)
    ranged = next((resolved(b, root) for b in schema.get("oneOf", []) if kinds(b, root) & CAST), schema)
    low = ranged.get("minimum", ranged.get("exclusiveMinimum", 0))
    out: list[tuple[str, Any]] = []
    if "integer" in allowed:
        value = low + 1 if low + 1 <= ranged.get("maximum", low + 1) else low
        out.append((str(value), value))
    elif "number" in allowed:
        out.append((str(low + 0.5), low + 0.5))
    if "boolean" in allowed:
        out += [("true", True), ("false", False)]
    if "null" in allowed:
        out += [("null", None), ("~", None)]
    return out


ROOT_SCHEMA = load_yaml(schema_file())
CASES = [
    pytest.param(path, text, value, length, id=f"{'.'.join(path)}={text}")
    for path, schema, length in leaves(ROOT_SCHEMA, ROOT_SCHEMA)
    for text, value in samples(schema, ROOT_SCHEMA)
]


def command_line(path: tuple[str, ...], text: str, length: int | None) -> str:
    """``--config``'s argument setting ``path`` to ``text`` (a list of ``length`` copies), in YAML flow style."""
    value = text if length is None else "[" + ", ".join([text] * length) + "]"
    for key in reversed(path[1:]):
        value = f"{{{key}: {value}}}"
    return f"{path[0]}={value}"


def typed_at(typed: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        typed = typed[key] if isinstance(typed, Mapping) else getattr(typed, key)
    return typed


def test_the_walk_finds_every_kind_of_key() -> None:
    ids = {case.id for case in CASES}
    assert {
        "tta.prior_strength=0.5",
        "tta.prior_strength=null",
        "inference.compile=false",
        "top_k=2",
        "models.efficientnet_lite0.input_size=17",
        "models.efficientnet_lite0.mean=0.5",
        "sam.counting.min_iou=0.5",
        "scales=2",
        "browser.predictions_shown=1",
    } <= ids
    assert len(CASES) >= 35


@pytest.mark.parametrize(("path", "text", "value", "length"), CASES)
def test_every_numeric_boolean_or_nullable_key_takes_its_value_from_the_command_line(path, text, value, length):
    config = copy.deepcopy(DEMO)
    update_config(config, parse_config([command_line(path, text, length)]))
    if path == ("policies", "budgets"):  # the where-zoom-helps budget must be one of them
        update_config(config, parse_config([command_line(("where_zoom_helps", "budget"), text, None)]))
    typed = load_config(config, check_paths=False)
    expected = value if length is None else [value] * length
    got = list(typed_at(typed, path)) if length else typed_at(typed, path)
    assert got == expected
    assert [type(g) for g in got] == [type(e) for e in expected] if length else type(got) is type(expected)


IN_FORCE = load_config(copy.deepcopy(DEMO), check_paths=False)
NUMERIC = [
    pytest.param(path, length, id=".".join(path))
    for path, schema, length in leaves(ROOT_SCHEMA, ROOT_SCHEMA)
    if kinds(schema, ROOT_SCHEMA) & {"integer", "number"} and typed_at(IN_FORCE, path) is not None
]


@pytest.mark.parametrize(("path", "length"), NUMERIC)
def test_every_numeric_key_given_its_value_in_force_gives_the_same_params(path, length) -> None:
    """The value in force (the demo's, or the default), given back written as integers and as floats, types to the
    same value of the schema's type: Snakemake compares params by repr, and `16` against `16.0` reran a job."""
    in_force = typed_at(IN_FORCE, path)
    values = list(in_force) if length else [in_force]
    schema = next(schema for p, schema, _ in leaves(ROOT_SCHEMA, ROOT_SCHEMA) if p == path)
    expected = int if "integer" in kinds(schema, ROOT_SCHEMA) else float
    assert {type(v) for v in values} == {expected}
    for form in (int, float):
        if form is int and not all(float(v).is_integer() for v in values):
            continue
        texts = [repr(form(v)) for v in values]
        config = copy.deepcopy(DEMO)
        given = "[" + ", ".join(texts) + "]" if length else texts[0]
        update_config(config, parse_config([command_line(path, given, None)]))
        assert repr(typed_at(load_config(config, check_paths=False), path)) == repr(in_force), texts


def test_the_tta_prior_strength_of_the_command_line_is_taken() -> None:
    config = copy.deepcopy(DEMO)
    update_config(config, parse_config(["tta={prior_strength: 16, prior_at_prediction: false}"]))
    typed = load_config(config, check_paths=False)
    assert (typed.tta.prior_strength, typed.tta.prior_at_prediction) == (16, False)


def test_a_string_is_kept_where_the_schema_allows_one() -> None:
    """A model's checkpoint may be a path string: one that spells a number stays a path."""
    config = copy.deepcopy(DEMO)
    update_config(config, parse_config(["sam={checkpoint: 16}", "inference={device: auto}"]))
    typed = load_config(config, check_paths=False)
    assert typed.sam.checkpoint.path == "16" and typed.inference.device == "auto"


def test_a_duplicate_key_is_refused_naming_it_the_file_and_both_lines() -> None:
    text = "scales: [224]\ndatasets:\n  demo:\n    adapter: demo\n    variants: [original]\n    adapter: demo\n"
    with pytest.raises(DuplicateKeyError, match=r"^c\.yaml: key 'adapter' is given twice, on lines 4 and 6; "):
        loads_yaml(text, "c.yaml")
    with pytest.raises(DuplicateKeyError, match=r"key 'a' is given twice, on lines 1 and 1"):
        loads_yaml('{"a": 1, "a": 2}')  # JSON too
    # a merge key's values may be overridden, and equal keys in different mappings are no duplicates
    assert loads_yaml("base: &b {x: 1, y: 2}\nm: {<<: *b, x: 3}\nn: {x: 4}\n")["m"] == {"x": 3, "y": 2}


def test_a_yte_key_at_any_level_is_refused_naming_the_file_and_line() -> None:
    for text, line in (("__use_yte__: true\ntop_k: 3\n", 1), ("a:\n  - b:\n      __use_yte__: false\n", 3)):
        with pytest.raises(UnsafeYamlError, match=rf"^c\.yaml: line {line}: __use_yte__ asks Snakemake"):
            loads_yaml(text, "c.yaml")


def bomb(levels: int, width: int = 10) -> str:
    """A list of ``width`` scalars, then ``levels`` lists of ``width`` aliases of the one before: width^(levels+1)
    scalars once expanded."""
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_aliases_count_as_the_nodes_they_name_up_to_the_limit() -> None:
    # 1 mapping + 2 keys + the list of 2 scalars (3 nodes) + a list of 2 aliases of it (1 + 2 * 3): 13 nodes
    node = _StrictLoader("a: &a [x, y]\nb: [*a, *a]\n").get_single_node()
    assert _expanded_size(node, "c.yaml") == 13
    # bomb(4): 1 + 5 keys + sum over levels of the level's size: 11, 111, 1111, 11111, 111111 -> 123,461 > 100,000
    with pytest.raises(UnsafeYamlError, match=r"^b\.yaml: the document expands to more than 100,000 nodes"):
        loads_yaml(bomb(4), "b.yaml")
    assert len(loads_yaml(bomb(3))["a3"]) == 10  # 1 + 4 + 11 + 111 + 1111 + 11111 = 12,349 nodes: loaded
    with pytest.raises(UnsafeYamlError, match=r"^b\.yaml: the document expands"):
        loads_yaml(bomb(9), "b.yaml")  # 10^10 scalars: counted without expanding
    with pytest.raises(UnsafeYamlError, match=r"line 1: a recursive alias"):
        loads_yaml("a: &a {x: [1, *a]}\n", "r.yaml")


@pytest.mark.parametrize(
    "path",
    [
        *ROOT.glob("config/*.yaml"),
        *ROOT.glob("profiles/*/config.yaml"),
        *ROOT.glob("workflow/schemas/*.yaml"),
        *ROOT.glob("envs/*.yaml"),
        ROOT / ".github" / "workflows" / "ci.yaml",
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_shipped_yaml_file_has_no_duplicate_key(path) -> None:
    if path.exists():
        load_yaml(path)


@pytest.mark.workflow
def test_snakemake_refuses_a_config_file_with_a_duplicate_key_before_any_job(tmp_path) -> None:
    write_config(
        tmp_path,
        scales=[224, 256],
        datasets={"demo": {"adapter": "demo", "variants": ["original"]}},
        stats={"pairs": []},
    )
    text = (tmp_path / "config.yaml").read_text()
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("scales:")) + 1
    (tmp_path / "config.yaml").write_text(text + "scales: [64]\n")
    proc = run_snakemake(tmp_path, "--dry-run", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{tmp_path / 'config.yaml'}: key 'scales' is given twice, on lines {first} and {len(lines) + 1}" in out
    assert not (tmp_path / "results").exists()


@pytest.mark.workflow
def test_a_command_line_configfile_that_is_a_template_or_a_bomb_is_refused_naming_it(tmp_path) -> None:
    """A --configfile is loaded by Snakemake's command line before any workflow code: a list bomb loads there as
    shared references and is refused by the re-read; a template is rendered there first (Snakemake's doing, which
    no workflow can prevent; the checkout's and a study's own config/config.yaml are read before it is) and
    refused after."""
    for text, message in (
        (bomb(9), "config.yaml: the document expands to more than 100,000 nodes"),
        ("__use_yte__: true\ntop_k: 3\n", "config.yaml: line 1: __use_yte__ asks Snakemake"),
    ):
        (tmp_path / "config.yaml").write_text(text)
        proc = run_snakemake(tmp_path, "--dry-run", check=False)
        assert proc.returncode != 0 and message in proc.stdout + proc.stderr
    # the checkout's default config, read before its configfile directive: the template never runs
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("__use_yte__: true\ntop_k: ?open('pwned', 'w') and 3\n")
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-n"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "config/config.yaml: line 1: __use_yte__" in proc.stdout + proc.stderr
    assert not (tmp_path / "pwned").exists()


def bad_configs(marker: str) -> dict[str, tuple[str, str]]:
    """Files no config may be, each with the start of its one-line refusal after the file's name (a ``line N``
    where the parser gives one)."""
    deep_list, deep_map = "[" * 100_000, "{a: " * 3_000 + "1" + "}" * 3_000
    return {
        "object-apply": (
            f'!!python/object/apply:os.system ["touch {marker}"]\n',
            "line 1, column 1: could not determine a constructor for the tag",
        ),
        "python-name": ("scales: !!python/name:os.system\n", "line 1, column 9: could not determine a constructor"),
        "syntax": ("scales: [1, 2\ntop_k: 3\n", "line 2, column 6: expected ',' or ']', but got ':'"),
        "tab": ("scales:\n\t- 1\n", "line 2, column 1: found character '\\t' that cannot start any token"),
        "deep-list": (deep_list, "line 1: lists and mappings nested more than 100 deep"),
        "deep-mapping": (deep_map, "line 1: lists and mappings nested more than 100 deep"),
        "list": ("- scales\n- 1\n", "the config is a list, not a mapping"),
        "scalar": ("3\n", "the config is one value, not a mapping"),
        "empty": ("", "the config is empty"),
        "comments-only": ("# nothing\n", "the config is empty"),
        "2-MB": ("# " + "x" * 2_000_000 + "\n", "2,000,003 bytes, more than the 1,000,000"),
    }


BAD_CONFIGS = list(bad_configs("M"))


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_zoomeval_run_refuses_every_bad_config_in_one_line_naming_the_file(tmp_path, capsys, case) -> None:
    from zoomeval.cli import main
    from zoomeval.study.directory import init_study

    init_study(tmp_path / "study")
    marker = tmp_path / "marker"
    text, refusal = bad_configs(str(marker))[case]
    (tmp_path / "study" / "config" / "config.yaml").write_text(text)
    assert main(["run", str(tmp_path / "study")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"zoomeval run: config/config.yaml: {refusal}"), err
    assert "Traceback" not in err and not marker.exists()
    assert not (tmp_path / "study" / "results").exists() and not (tmp_path / "study" / "logs").exists()


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_the_workflows_config_loader_refuses_every_bad_config_naming_the_file(tmp_path, case) -> None:
    """``check_config_file``: what the Snakefiles call before their ``configfile:`` directive (common.smk reads a
    --configfile with ``load_config_file``, which it calls)."""
    from zoomeval.core.config import ConfigError
    from zoomeval.core.strict_yaml import check_config_file

    text, refusal = bad_configs(str(tmp_path / "marker"))[case]
    (path := tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError) as error:
        check_config_file(path)
    assert str(error.value).startswith(f"{path}: {refusal}") and "\n" not in str(error.value)
    assert not (tmp_path / "marker").exists()
    check_config_file(ROOT / "config" / "config.yaml")  # the demo passes, and a missing file is Snakemake's to name
    check_config_file(tmp_path / "missing.yaml")


def test_zoomeval_init_refuses_a_bad_preset_file_before_writing_anything(tmp_path, capsys) -> None:
    """A checkout (--workflow) whose preset config the workflow would refuse: one line naming it, nothing written."""
    from zoomeval.cli import main

    root = tmp_path / "checkout"
    (root / "workflow" / "rules").mkdir(parents=True)
    (root / "config").mkdir()
    (root / "Snakefile").write_text("")
    (root / "config" / "config.yaml").write_text("scales: [1, 2\n")
    assert main(["init", str(tmp_path / "study"), "--preset", "demo", "--workflow", str(root)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == (
        "",
        f"zoomeval init: {root}/config/config.yaml: line 2, column 1: expected ',' or ']', but "
        "got '<stream end>'; not a YAML file zoomeval reads\n",
    )
    assert not (tmp_path / "study").exists()
