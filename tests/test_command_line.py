"""The zoomeval command as a user meets it: --version, init's next steps, plain-word help and list text, what list
prints of the registries and the model libraries, the help's command order, the old spelling policy export, and every
bad argument or input refused in one line naming it, exit status 2, without a traceback."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from zoomeval import __version__, cli
from zoomeval.analysis.label_sets import LABEL_SETS
from zoomeval.cli.common import plain
from zoomeval.cli.list import registry_rows
from zoomeval.core.provenance import workflow_commit, workflow_root
from zoomeval.datasets.registry import ADAPTERS
from zoomeval.inference.models import MODEL_SOURCES
from zoomeval.preflight import missing_extras
from zoomeval.registries import load_config
from zoomeval.study import directory as study_dir

MARKUP = re.compile(r"``|:\w+:`")


def zoomeval(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zoomeval", *args], capture_output=True, text=True, cwd=cwd)


def test_version_gives_the_version_and_the_checkouts_commit() -> None:
    """The editable install finds the workflow through its package's links: the checkout's top level."""
    proc = zoomeval("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"zoomeval {__version__}, commit {workflow_commit()}, workflow in {ROOT}\n"
    assert workflow_root() == ROOT
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", workflow_commit())


def test_the_version_is_declared_once_and_the_changelog_has_its_section() -> None:
    assert 'version = {attr = "zoomeval.__version__"}' in (ROOT / "pyproject.toml").read_text()
    assert re.search(rf"^## {re.escape(__version__)}\b", (ROOT / "CHANGELOG.md").read_text(), re.M)


def test_the_quick_preset_comes_first_and_is_inits_default() -> None:
    assert next(iter(study_dir.PRESETS)) == "quick" == registry_rows("presets")[0][0]
    assert cli.parser().parse_args(["init", "s"]).preset == "quick"


def test_a_study_that_needs_a_missing_extra_is_refused_naming_the_key_and_the_extra() -> None:
    """Segment Anything for a SAM mask or count method, open_clip for an open_clip model; the extras installed
    (make's environment has them all) or unneeded, nothing."""
    config = yaml_config(ROOT / "config" / "config.yaml")
    config["datasets"]["demo"]["mask_method"] = "sam_box"
    config["models"]["clip"] = {"source": "open_clip", "architecture": "ViT-B-32", "weights": "openai"}
    typed = load_config(config, check_paths=False)
    assert missing_extras(typed, has=lambda extra: False) == [
        "datasets.demo.mask_method: sam_box needs zoomeval's 'sam' extra, which is not installed: pip install "
        "'zoomeval[sam]'",
        "models.clip.source: open_clip needs zoomeval's 'clip' extra, which is not installed: pip install "
        "'zoomeval[clip]'",
    ]
    assert missing_extras(typed) == []
    assert missing_extras(load_config(yaml_config(ROOT / "config" / "config.yaml")), lambda extra: False) == []


def test_an_open_clip_model_without_open_clip_is_refused_naming_the_extra_not_the_architecture(monkeypatch) -> None:
    """open_clip's model configs come with open_clip: without it, an architecture cannot be looked up, and the
    refusal says what to install (it said the architecture was unknown)."""
    from zoomeval.inference.sources import open_clip_models

    config = yaml_config(ROOT / "config" / "paper.yaml")
    spec = load_config(config, check_paths=False).models["clip_vit_l_14"]
    monkeypatch.setattr(open_clip_models, "find_spec", lambda name: None)
    with pytest.raises(ValueError) as error:
        open_clip_models.model_config(spec)
    assert str(error.value) == (
        "models.clip_vit_l_14.source: open_clip needs zoomeval's 'clip' extra, which is not installed: pip install "
        "'zoomeval[clip]'"
    )


def yaml_config(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


def test_plain_removes_restructuredtext_roles_and_literals() -> None:
    text = "``init`` writes; see :mod:`zoomeval.study.directory` and :class:`~zoomeval.core.manifest.Record`."
    assert plain(text) == "init writes; see zoomeval.study.directory and Record."


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["init", "--help"],
        ["list", "--help"],
        ["leaderboard", "--help"],
        ["list", "adapters"],
        ["list", "sources"],
        ["list", "label-sets"],
        ["list", "presets"],
    ],
)
def test_help_and_list_text_is_plain_words(args: list[str]) -> None:
    proc = zoomeval(*args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() and not MARKUP.search(proc.stdout), proc.stdout


@pytest.mark.parametrize("kind", ["sources", "label-sets", "presets"])
def test_every_list_entry_has_its_own_description(kind: str) -> None:
    rows = [line.split("\t") for line in zoomeval("list", kind).stdout.splitlines()]
    descriptions = [text for _, text in rows]
    assert len(set(descriptions)) == len(rows) > 2
    assert not any(text.startswith(f"{name}:") for name, text in rows)  # no name said twice


def test_preset_summaries_name_no_file_a_study_does_not_have() -> None:
    summaries = dict(registry_rows("presets"))
    assert summaries["gpu"] != summaries["imagenet-val"] and "bf16" in summaries["gpu"]
    assert [name for name, text in summaries.items() if re.search(r"[\w/]+\.(ya?ml|md)\b|config/", text)] == []


def test_list_models_says_when_a_pattern_matches_no_model_and_fails() -> None:
    proc = zoomeval("list", "models", "torchvision", "nosuch*")
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr == "zoomeval list: no torchvision model matches 'nosuch*' (a shell pattern over "
        "architecture.weights, e.g. 'resnet50*')\n"
    )


def listed(*args: str) -> list[list[str]]:
    proc = zoomeval("list", *args)
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


def test_list_models_refuses_a_source_that_lists_no_models() -> None:
    """(A missing source is one of :data:`REFUSALS`.)"""
    proc = zoomeval("list", "models", "embedded")
    assert proc.returncode == 2
    listing = "['entry_point', 'open_clip', 'timm', 'torchvision']"
    assert f"model source 'embedded' lists no models; sources that do: {listing}" in proc.stderr


def test_run_is_the_first_command_the_help_lists() -> None:
    """The way in first, the other commands in their order."""
    text = cli.parser().format_help()
    assert "{run,init,list,leaderboard,export,audit,policy,predict}" in text
    assert re.findall(r"^    (\w+) ", text, re.M)[0] == "run"


def test_the_old_spelling_policy_export_runs_policy_save_after_one_line_naming_it(tmp_path: Path, capsys) -> None:
    """`policy save` was `policy export`, which read like `zoomeval export` (a study's results as a bundle): the old
    spelling still runs it, its output byte for byte, after one line on stderr."""
    notice = "zoomeval policy export is now zoomeval policy save; running that\n"
    args = [str(tmp_path), "--policy", "vote", "--budget", "1", "--fit", "x"]
    assert cli.main(["policy", "save", *args]) == 2
    saved = capsys.readouterr()
    assert cli.main(["policy", "export", *args]) == 2
    assert capsys.readouterr() == (saved.out, notice + saved.err) and saved.err.startswith("zoomeval policy save: ")
    helps = [zoomeval("policy", spelling, "--help") for spelling in ("save", "export")]
    assert helps[1].stdout == helps[0].stdout and (helps[0].stderr, helps[1].stderr) == ("", notice)


@pytest.mark.parametrize(
    ("preset", "page"),
    [
        ("gpu", "how-to/imagenet-gpu.md"),
        ("quick", "get-started/demo.md"),
        ("demo", "get-started/demo.md"),
        ("paper", "how-to/paper.md"),
        ("imagefolder", "how-to/own-data.md"),
    ],
)
def test_init_prints_the_presets_own_next_steps_with_quoted_paths(tmp_path: Path, preset: str, page: str) -> None:
    folder = tmp_path / "my study's dir"
    proc = zoomeval("init", str(folder), "--preset", preset)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1:3] == ["next:", f"  cd '{tmp_path}/my study'\"'\"'s dir'"]
    steps = study_dir.run_steps(preset)
    assert lines[-len(steps) :] == [f"  {step}" for step in steps]
    # the run command the preset's page gives
    run = steps[1].split("   #")[0]
    assert run in (ROOT / "docs" / page).read_text() and not any("snakemake" in step for step in steps)
    keys = [line.split(":")[0].strip() for line in lines if line.startswith("    ")]
    expected = {
        "gpu": ["datasets.imagenet.images", "datasets.imagenet.annotations"],
        "quick": [],
        "demo": [],
        "paper": [
            "datasets.imagenet.images",
            "datasets.imagenet.annotations",
            "datasets.imagenet_sketch.root",
            "datasets.objectnet.root",
        ],
        "imagefolder": ["datasets.own_data.root"],
    }
    assert keys == expected[preset]


def test_each_presets_steps_run_its_own_targets_and_read_the_seal_where_they_build_it() -> None:
    """The preset commands' targets, less the tables the default target builds: Table A8 (gpu), the ImageNet-Hard
    table (imagenet-hard); `all` (paper) and Table 5 (tta) stay."""
    assert [study_dir.preset_targets(p) for p in ("demo", "gpu", "imagenet-hard", "paper", "tta")] == [
        [],
        [],
        [],
        ["all"],
        ["results/table_tta.csv"],
    ]
    assert study_dir.run_steps("tta") == [
        "zoomeval run . results/table_tta.csv --limit 2   # a smoke test: the first 2 images of each dataset, in "
        "results/limit-2",
        "zoomeval run . results/table_tta.csv   # the preflight, then results/table_tta.csv",
    ]
    assert study_dir.run_steps("paper")[1:] == [
        "zoomeval run . all   # the preflight, then the study: its tables, sealed in results/study.json and the rest "
        "of `all`",
        "zoomeval leaderboard .   # its results, read through the seal",
    ]


def fake_checkout(folder: Path) -> Path:
    """A checkout whose preset file cannot be read (a directory where config/config.yaml should be)."""
    (folder / "workflow" / "rules").mkdir(parents=True)
    (folder / "Snakefile").touch()
    (folder / "config" / "config.yaml").mkdir(parents=True)
    return folder


def bad_metrics(folder: Path, content: bytes) -> Path:
    """A study whose one metrics file holds ``content``, sealed by its index (so the leaderboard reads the file)."""
    path = folder / "results" / "analysis" / "demo" / "original" / "m" / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    entry = {
        "path": "results/analysis/demo/original/m/metrics.json",
        "sha256": hashlib.sha256(content).hexdigest(),
        "key": {},
    }
    index = {"kind": "study_index", "schema_version": 1, "results": [entry]}
    (folder / "results" / "study.json").write_text(json.dumps(index))
    return folder


#: (subcommand, arguments with {tmp} for the test's folder, what the one line says); each a missing, a wrong-type or
#: an unreadable input.
REFUSALS = [
    ("", [], "zoomeval: the following arguments are required: command"),
    ("", ["nosuch"], "zoomeval: argument command: invalid choice: 'nosuch'"),
    ("init", ["init"], "zoomeval init: the following arguments are required: directory"),
    ("init", ["init", "{tmp}/file"], "zoomeval init: {tmp}/file is a file; give a new directory for the study"),
    ("init", ["init", "{tmp}/file/s"], "zoomeval init: {tmp}/file/s/config: Not a directory"),
    ("init", ["init", "{tmp}/s", "--preset", "papr"], "zoomeval init: argument --preset: invalid choice: 'papr'"),
    ("init", ["init", "{tmp}/s", "--workflow", "{tmp}/file"], "zoomeval init: {tmp}/file holds no zoomeval workflow"),
    (
        "init",
        ["init", "{tmp}/s", "--preset", "demo", "--workflow", "{tmp}/checkout"],
        "zoomeval init: {tmp}/checkout/config/config.yaml: Is a directory",
    ),
    ("list", ["list"], "zoomeval list: the following arguments are required: kind"),
    ("list", ["list", "modles"], "zoomeval list: argument kind: invalid choice: 'modles'"),
    ("list", ["list", "presets", "gpu"], "zoomeval list: zoomeval list presets takes no further argument"),
    ("list", ["list", "models"], "zoomeval list: zoomeval list models needs a SOURCE"),
    ("list", ["list", "models", "nosuch"], "zoomeval list: unknown model source 'nosuch'"),
    ("leaderboard", ["leaderboard"], "zoomeval leaderboard: the following arguments are required: DIR"),
    (
        "leaderboard",
        ["leaderboard", "{tmp}/nosuchdir"],
        "zoomeval leaderboard: argument DIR: {tmp}/nosuchdir: no such directory",
    ),
    ("leaderboard", ["leaderboard", "{tmp}/file"], "zoomeval leaderboard: argument DIR: {tmp}/file: not a directory"),
    (
        "leaderboard",
        ["leaderboard", "{tmp}/text"],
        "zoomeval leaderboard: {tmp}/text/results/analysis/demo/original/m/metrics.json: not a JSON document",
    ),
    (
        "leaderboard",
        ["leaderboard", "{tmp}/binary"],
        "zoomeval leaderboard: {tmp}/binary/results/analysis/demo/"
        "original/m/metrics.json: not a JSON document ('utf-8' codec",
    ),
    (
        "leaderboard",
        ["leaderboard", "{tmp}/array"],
        "zoomeval leaderboard: {tmp}/array/results/analysis/demo/original/m/metrics.json: not a metrics document",
    ),
    (
        "policy save",
        ["policy", "save", "{tmp}/array", "--policy", "vote", "--budget", "4", "--fit", "demo"],
        "zoomeval policy save: --model: {tmp}/array/results/policies/demo/original holds policies of 0 models",
    ),
    (
        "predict",
        ["predict", "--policy", "{tmp}/file", "--resources", "{tmp}/checkout", "{tmp}/nosuch.jpg"],
        "zoomeval predict: {tmp}/nosuch.jpg: no such file or folder",
    ),
    (
        "predict",
        ["predict", "--policy", "{tmp}/file", "--resources", "{tmp}/checkout", "{tmp}/checkout"],
        "zoomeval predict: no image files (.jpeg, .jpg, .png) under {tmp}/checkout",
    ),
]


@pytest.mark.parametrize(("command", "args", "message"), REFUSALS, ids=[" ".join(r[1]) or "none" for r in REFUSALS])
def test_every_subcommand_refuses_a_bad_input_in_one_line(
    tmp_path: Path, command: str, args: list[str], message: str
) -> None:
    (tmp_path / "file").touch()
    fake_checkout(tmp_path / "checkout")
    for name, content in (("text", b"not json"), ("binary", b"\xff\xfe"), ("array", b"[1]")):
        bad_metrics(tmp_path / name, content)
    proc = zoomeval(*(arg.format(tmp=tmp_path) for arg in args), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(message.format(tmp=tmp_path)), proc.stderr
    assert command in proc.stderr.split(":")[0]


def test_a_reader_that_goes_away_stops_the_listing_quietly() -> None:
    """`zoomeval list models timm | head -1`: about 100 KB, more than a pipe holds, so the write fails once the
    reader has closed its end; the command stops with the shell's status for SIGPIPE and writes nothing to stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "zoomeval", "list", "models", "timm"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"aimv2_1b_patch14_224\t")
    proc.stdout.close()
    assert (proc.wait(), proc.stderr.read()) == (141, b"")


@pytest.mark.parametrize(
    "args",
    [
        ["export", "{d}", "--format", "hf"],
        ["audit", "{d}"],
        ["policy", "save", "{d}", "--policy", "vote", "--budget", "1", "--fit", "x"],
    ],
)
def test_a_refusal_naming_a_file_prints_no_escape_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """The error line of every subcommand goes through the terminal cells: a folder named with ESC prints without it."""
    folder = tmp_path / "x\x1b[31mred"
    folder.mkdir()
    assert cli.main([a.format(d=folder) for a in args]) == 2
    line = capsys.readouterr().err
    assert "\x1b" not in line and f"{tmp_path}/x[31mred/" in line and len(line.splitlines()) == 1, line


def test_policy_save_offers_the_rules_a_policy_file_carries(tmp_path, capsys) -> None:
    """The command line spells its --policy choices (its parser imports no numpy): they are analysis.policies'."""
    from zoomeval.analysis.policies import RULES

    def accepted(rule: str) -> bool:
        try:
            cli.parser().parse_args(["policy", "save", str(tmp_path), "--policy", rule, "--budget", "1", "--fit", "d"])
        except SystemExit:
            return False
        return True

    assert [r for r in (*RULES, "max_conf_cover") if accepted(r)] == list(RULES)
    assert "invalid choice: 'max_conf_cover'" in capsys.readouterr().err
