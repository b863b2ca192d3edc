"""Study directories (zoomeval init): the files written, and the demo run from one outside the checkout."""

import ast
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from tests.conftest import ROOT, SMALL_TARGETS, write_small_config
from zoomeval.core.provenance import workflow_commit
from zoomeval.core.strict_yaml import load_yaml
from zoomeval.study import directory as study_dir


def zoomeval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The zoomeval command, as the console script runs it (``python -m zoomeval``)."""
    return subprocess.run([sys.executable, "-m", "zoomeval", *args], capture_output=True, text=True, cwd=cwd)


def test_every_config_of_the_checkout_is_a_preset_and_the_reverse() -> None:
    assert sorted(files[0] for files in study_dir.PRESETS.values() if len(files) == 1) == sorted(
        p.name for p in (ROOT / "config").glob("*.yaml")
    )
    assert study_dir.preset_summary("demo").startswith("The embedded demo")


def test_init_writes_the_module_snakefile_the_preset_and_the_profiles(tmp_path: Path) -> None:
    proc = zoomeval("init", "study", "--preset", "paper", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "study"
    snakefile = (folder / "Snakefile").read_text()
    assert f"snakefile:\n        {str(ROOT / 'Snakefile')!r}" in snakefile
    assert "config:\n        config" in snakefile and "use rule * from zoomeval" in snakefile
    config = (folder / "config" / "config.yaml").read_text()
    assert config.startswith("# zoomeval study config, preset 'paper'")
    assert yaml.safe_load(config) == yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    assert (folder / "profiles" / "default").resolve() == ROOT / "profiles" / "default"
    slurm = folder / "profiles" / "slurm" / "config.yaml"
    assert not slurm.is_symlink() and slurm.read_text() == (ROOT / "profiles" / "slurm" / "config.yaml").read_text()
    # a second init into the same folder is refused and changes nothing
    again = zoomeval("init", "study", "--preset", "demo", cwd=tmp_path)
    assert again.returncode == 2 and "already exist" in again.stderr
    assert (folder / "config" / "config.yaml").read_text() == config


def test_the_gpu_preset_is_the_imagenet_recipe_with_the_gpu_overlay(tmp_path: Path) -> None:
    assert zoomeval("init", "gpu", "--preset", "gpu", cwd=tmp_path).returncode == 0
    written = load_yaml(tmp_path / "gpu" / "config" / "config.yaml")  # strict: no key given twice
    recipe = yaml.safe_load((ROOT / "config" / "imagenet_val.yaml").read_text())
    overlay = yaml.safe_load((ROOT / "config" / "overlays" / "gpu.yaml").read_text())
    assert written == recipe | overlay and written["inference"]["precision"] == "bf16"


def test_an_unknown_preset_or_a_folder_without_the_workflow_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown preset 'papr'; expected one of \['quick', 'demo', 'paper'"):
        study_dir.init_study(tmp_path / "s", "papr")
    with pytest.raises(FileNotFoundError, match="holds no zoomeval workflow"):
        study_dir.init_study(tmp_path / "s", "demo", root=tmp_path)
    assert not (tmp_path / "s").exists()


def files_and_times(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time (ns)."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            found[str(path.relative_to(folder))] = (path.stat().st_size, path.stat().st_mtime_ns)
    return found


@pytest.mark.workflow
def test_the_demo_from_two_study_directories_outside_the_checkout(tmp_path: Path, small_reference: Path) -> None:
    """``zoomeval init`` then plain ``snakemake`` in the study gives the checkout's Table A8 (the small demo), and a
    second study beside it leaves the first one's files alone."""
    assert not tmp_path.is_relative_to(ROOT)
    env = {k: v for k, v in os.environ.items() if k != "PWD"}
    studies = []
    for name in ("first", "second"):
        assert zoomeval("init", name, "--preset", "demo", cwd=tmp_path).returncode == 0
        folder = tmp_path / name
        config = write_small_config(tmp_path / "small")  # the small demo of tests/conftest.py, as the study's config
        (folder / "config" / "config.yaml").write_text(yaml.safe_dump(config))
        studies.append(folder)
    before = None
    # each study sealed by the same run (its index, written last by `all`: every metrics file, here the one)
    for folder, targets in zip(studies, (SMALL_TARGETS, ["results/table_a8.csv"]), strict=True):
        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "2", *targets, "results/study.json"],
            cwd=folder,
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        for target in targets:
            assert (folder / target).read_bytes() == (small_reference / target).read_bytes(), (folder.name, target)
        if before is None:
            before = files_and_times(studies[0])
    assert files_and_times(studies[0]) == before  # the second run wrote nothing in the first study
    assert "results/table_a8.csv" in before and not (tmp_path / "results").exists()
    plan = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "-n", *SMALL_TARGETS],
        cwd=studies[0],
        capture_output=True,
        text=True,
        env=env,
    )
    assert "Nothing to be done" in plan.stdout + plan.stderr
    # the report's captions and the workflow description are the module's files
    command = [sys.executable, "-m", "snakemake", "--cores", "2", "--report", "report.html", "results/table_a8.csv"]
    report = subprocess.run(command, cwd=studies[1], capture_output=True, text=True, env=env)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "greedy and exact cover sizes" in (studies[1] / "report.html").read_text()  # Table A8's caption
    # the two sealed studies on one leaderboard: one group, the same numbers twice, real provenance
    board = zoomeval("leaderboard", "first", "second", "-o", "board.csv", cwd=tmp_path)
    assert board.returncode == 0, board.stderr
    with open(tmp_path / "board.csv") as fh:
        rows = list(csv.DictReader(fh))
    with open(small_reference / "results/table_a8.csv") as fh:
        (a8,) = list(csv.DictReader(fh))
    assert [(r["study"], r["note"]) for r in rows] == [
        ("first", "same numbers as study second"),
        ("second", "same numbers as study first"),
    ]
    same = ("acc_standard", "acc_1crop", "acc_top_k", "acc_max", "cover_size", "cover_size_exact")
    for row in rows:
        assert {k: row[k] for k in same} == {k: a8[k] for k in same}
        geometry = (row["n_scales"], row["img_size"], row["crop_pct"], row["interpolation"])
        assert geometry == ("3", "224", "0.875", "bicubic")  # timm's data config: Resize(256, bicubic) + crop 224
        assert float(row["param_count"]) == pytest.approx(4.65, abs=0.01)  # EfficientNet-Lite0
        assert row["zoomeval_commit"] == workflow_commit() and row["device"] == "cpu"
    # the leaderboard rule: the same row for the study alone
    rule = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "results/leaderboard.csv"],
        cwd=studies[0],
        capture_output=True,
        text=True,
        env=env,
    )
    assert rule.returncode == 0, rule.stderr[-3000:]
    with open(studies[0] / "results/leaderboard.csv") as fh:
        (own,) = list(csv.DictReader(fh))
    assert own == {**rows[0], "note": ""}


def test_the_workflow_commit_is_the_checkouts_and_none_outside_git(tmp_path: Path) -> None:
    from zoomeval.core.provenance import workflow_root

    head = subprocess.run(["git", "-C", str(workflow_root()), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert workflow_commit().removesuffix("-dirty") == head.stdout.strip()
    assert workflow_commit(tmp_path) is None


def test_a_study_plans_with_its_default_profile_and_with_the_slurm_profile(tmp_path: Path) -> None:
    assert zoomeval("init", "s", cwd=tmp_path).returncode == 0
    # the study's copy of the SLURM profile keeps its placeholders until they are filled in, and is refused till then
    profile = tmp_path / "s" / "profiles" / "slurm" / "config.yaml"
    refused = subprocess.run(
        [sys.executable, "-m", "snakemake", "--workflow-profile", "profiles/slurm", "-n"],
        cwd=tmp_path / "s",
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and "slurm_partition" in refused.stdout + refused.stderr
    profile.write_text(profile.read_text().replace("CHANGE_ME", "gpu"))
    for flags, profile in (([], "profiles/default"), (["--workflow-profile", "profiles/slurm"], "profiles/slurm")):
        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", *flags, "-n", "results/table_a8.csv"],
            cwd=tmp_path / "s",
            capture_output=True,
            text=True,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
        assert f"Using workflow specific profile {profile}" in out and "table_a8" in out
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [".snakemake", "Snakefile", "config", "profiles"]


#: Checkout folder names that would end a string literal or a comment of the generated files, or be formatted.
HOSTILE_NAMES = ['quote"d', "single'quote", "back\\slash", "new\nline", "br{ac}es {root}", 'x"+str(1)+"\\n#']


def fake_checkout(parent: Path, name: str) -> Path:
    """A copy of the checkout's workflow files (no src: the package is importable) in ``parent/name``."""
    root = parent / name
    for part in ("workflow", "config", "profiles"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(ROOT / "Snakefile", root / "Snakefile")
    return root


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_the_checkout_path_enters_the_study_files_as_a_literal(tmp_path: Path, name: str) -> None:
    """The generated Snakefile and config header differ from a plain checkout's only by the path's repr, and the
    module's snakefile is that literal (ast, no evaluation)."""
    written = {}
    for label, folder in (("plain", "plain"), ("hostile", name)):
        root = fake_checkout(tmp_path / label, folder)
        study_dir.init_study(tmp_path / f"{label}-study", "gpu", root=root)
        texts = [(tmp_path / f"{label}-study" / f).read_text() for f in ("Snakefile", "config/config.yaml")]
        for relative in ("Snakefile", "src", "config/imagenet_val.yaml", "config/overlays/gpu.yaml", ""):
            texts = [t.replace(repr(str(root.resolve() / relative)), f"<{relative}>") for t in texts]
        written[label] = texts
        snakefile = (tmp_path / f"{label}-study" / "Snakefile").read_text().splitlines()
        literal = snakefile[snakefile.index("    snakefile:") + 1].strip()
        assert ast.literal_eval(literal) == str(root.resolve() / "Snakefile")
    assert written["hostile"] == written["plain"]
    assert load_yaml(tmp_path / "hostile-study" / "config" / "config.yaml") == load_yaml(
        tmp_path / "plain-study" / "config" / "config.yaml"
    )


def test_a_checkout_path_holding_code_plans_without_running_it(tmp_path: Path) -> None:
    """Before: the path was pasted between double quotes, so this folder name ran `touch pwned` at `snakemake -n`."""
    root = fake_checkout(tmp_path, 'a"+str(__import__("os").system("touch pwned"))[:0]+"b')
    study_dir.init_study(tmp_path / "s", "demo", root=root)
    plan = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "results/table_a8.csv"],
        cwd=tmp_path / "s",
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "table_a8" in plan.stdout and not (tmp_path / "s" / "pwned").exists()


YTE_CONFIG = "__use_yte__: true\ntop_k: ?__import__('os').system('touch pwned') + 3\n"


@pytest.mark.parametrize(
    "text,message",
    [
        (YTE_CONFIG, "config/config.yaml: line 1: __use_yte__ asks Snakemake to run"),
        (
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)),
            "config/config.yaml: the document expands to more than 100,000 nodes",
        ),
    ],
)
def test_a_study_config_that_is_a_template_or_an_alias_bomb_is_refused_by_a_dry_run(
    tmp_path: Path, text: str, message: str
) -> None:
    """Refused before Snakemake's configfile directive renders it (the marker is never created) or expands it."""
    study_dir.init_study(tmp_path / "s", "demo")
    (tmp_path / "s" / "config" / "config.yaml").write_text(text)
    plan = subprocess.run([sys.executable, "-m", "snakemake", "-n"], cwd=tmp_path / "s", capture_output=True, text=True)
    assert plan.returncode != 0 and message in plan.stdout + plan.stderr, plan.stdout[-3000:]
    assert not (tmp_path / "s" / "pwned").exists()


@pytest.mark.workflow
def test_the_gpu_preset_plans_and_runs_on_a_cpu_only_machine(tmp_path: Path) -> None:
    """`zoomeval init DIR --preset gpu`, its data and model swapped for two images and the embedded model, the GPU
    inference settings kept (compile, bf16, 12 workers, batches of 333): `snakemake -n`, then a run with CUDA hidden
    ends with Table A8; before, standard_eval died with SIGSEGV under torch.compile."""
    assert zoomeval("init", "s", "--preset", "gpu", cwd=tmp_path).returncode == 0
    for k, wnid in enumerate(("n01440764", "n02123045")):
        (tmp_path / "images" / wnid).mkdir(parents=True)
        Image.fromarray(np.full((240, 320, 3), 60 * k, np.uint8)).save(tmp_path / "images" / wnid / "x.png")
    path = tmp_path / "s" / "config" / "config.yaml"
    config = load_yaml(path)
    assert (config["inference"]["compile"], config["inference"]["num_workers"]) == (True, 12)
    demo = load_yaml(ROOT / "config" / "config.yaml")
    config |= {
        "scales": [224, 256],
        "top_k": 2,
        "models": demo["models"],
        "datasets": {"two": {"adapter": "imagefolder", "root": str(tmp_path / "images")}},
    }
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    for args in (["-n"], []):
        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "2", *args, "results/table_a8.csv"],
            cwd=tmp_path / "s",
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        if args:  # the plan says it once
            note = "inference.compile: no GPU is visible here, so the jobs run on the CPU with compile turned off"
            assert (proc.stdout + proc.stderr).count(note) == 1
    with open(tmp_path / "s" / "results" / "table_a8.csv") as fh:
        (row,) = list(csv.DictReader(fh))
    assert (row["dataset"], row["model"], row["n_scales"]) == ("two", "efficientnet_lite0", "2")
    for log in ("logs/standard/two/efficientnet_lite0.log", "logs/predictions/two/original/efficientnet_lite0.log"):
        text = (tmp_path / "s" / log).read_text()
        assert "inference.compile: turned off: inference.device 'auto' resolved to the cpu here" in text, log
        assert "inference.num_workers: 12 capped at this job's 2 cores" in text, log
