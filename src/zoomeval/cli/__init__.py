"""The zoomeval command: init writes a study directory, run checks and runs one with a progress display, list
shows what the registries and the model libraries hold, leaderboard merges studies into one table, audit
recomputes a sample of a study's rows, policy export takes a fitted zoom policy away as a file and predict applies
one to images. Each subcommand is a thin call into the package."""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shlex
import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from zoomeval import __version__
from zoomeval.core.cells import terminal_text
from zoomeval.core.layout import Layout, limited_root
from zoomeval.core.provenance import workflow_commit, workflow_root
from zoomeval.core.strict_yaml import load_config_file
from zoomeval.registries import REGISTRIES
from zoomeval.study import directory as study_dir

#: ``zoomeval list`` kinds that print a registry of the package.
REGISTRY_KINDS = ("adapters", "sources", "label-sets", "presets")


#: reStructuredText roles (``:mod:`zoomeval.x```, ``:class:`~a.B```) and literals (````x````), for plain text.
_ROLE = re.compile(r":\w+:`(~?)([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """``text`` with its reStructuredText markup removed: a role shows its target (its last part after ``~``), a
    literal its text."""
    text = _ROLE.sub(lambda m: m[2].rsplit(".", 1)[-1] if m[1] else m[2], text)
    return _LITERAL.sub(r"\1", text)


def first_paragraph(text: str) -> str:
    """A docstring's first paragraph, on one line, in plain words."""
    return plain(" ".join(text.strip().split("\n\n")[0].split()))


def registry_rows(kind: str) -> list[tuple[str, str]]:
    """``(name, what it is)`` for every entry of one registry, in registration order."""
    if kind == "adapters":
        return [
            (a.name, f"inputs: {', '.join(a.required) or '-'}; boxes: {'yes' if a.boxes else 'no'}; {a.classes}")
            for a in REGISTRIES.adapters.values()
        ]
    if kind == "sources":
        modules = {s.name: sys.modules[s.load.__module__] for s in REGISTRIES.sources.values()}
        docs = {name: first_paragraph(inspect.getdoc(module) or "") for name, module in modules.items()}
        return [(name, text.removeprefix(f"{name}: ")) for name, text in docs.items()]
    if kind == "label-sets":
        sets = REGISTRIES.label_sets.values()
        return [(s.name, first_paragraph(inspect.getdoc(s.relabel) or s.source)) for s in sets]
    if kind == "presets":
        return [(name, study_dir.preset_summary(name)) for name in study_dir.PRESETS]
    raise ValueError(f"unknown kind {kind!r}; expected one of {[*REGISTRY_KINDS, 'models']}")


def _print_rows(rows: Iterable[tuple[str, ...]]) -> None:
    for row in rows:
        print("\t".join(row))


def _init(args: argparse.Namespace) -> int:
    root, folder = Path(args.workflow) if args.workflow else workflow_root(), Path(args.directory)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file; give a new directory for the study")
    written = study_dir.init_study(folder, args.preset, root)
    print(f"wrote {', '.join(map(str, written))}")
    print("next:")
    print(f"  cd {shlex.quote(args.directory)}")
    if todo := list(study_dir.placeholders(load_config_file(written[1]))):
        print("  edit config/config.yaml; these keys name files you provide:")
        print("\n".join(f"    {key}: {value}" for key, value in todo))
    print("\n".join(f"  {step}" for step in study_dir.run_steps(args.preset, root)))
    return 0


def _list(args: argparse.Namespace) -> int:
    if args.kind == "models":
        from zoomeval.inference.catalogue import catalogue, matching, unusable

        if not args.source:
            raise ValueError("zoomeval list models needs a SOURCE (zoomeval list sources)")
        cat = catalogue(args.source)
        if not (pairs := matching(cat, args.pattern or "*")):
            raise ValueError(
                f"no {args.source} model matches {args.pattern!r} (a shell pattern over "
                "architecture.weights, e.g. 'resnet50*')"
            )
        # a model that cannot be evaluated gets a third column saying why
        _print_rows((a, t, *[f"not evaluable: {why}" for why in [unusable(cat, a, t)] if why]) for a, t in pairs)
        return 0
    if args.source:
        raise ValueError(f"zoomeval list {args.kind} takes no further argument")
    _print_rows(registry_rows(args.kind))
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from zoomeval.core.layout import run_layout
    from zoomeval.publish.boards import write_merged

    output = _output(args)
    directories, layout = [Path(d) for d in args.directories], run_layout(_limit(args))
    auditor = _board_auditor(args, layout)
    text, apart = write_merged(
        directories, output, args.format, args.dataset, args.allow_stale, args.verify, layout, auditor, args.rank_by
    )
    for line in apart:
        print(terminal_text(f"zoomeval leaderboard: left apart: {line}"), file=sys.stderr)
    if not args.output:
        print(terminal_text(text))
    return 0


def _audit(args: argparse.Namespace) -> int:
    """recompute a seeded sample of every file's rows of a sealed study here and compare them with what is stored;
    exit 1 on any mismatch"""
    from zoomeval.audit.sample import Audited, Auditor
    from zoomeval.audit.study import audit_study, report_lines, write_record
    from zoomeval.core.layout import run_layout

    if args.sample < 1:
        raise ValueError(f"--sample: {args.sample} is no number of rows; give N >= 1")
    auditor = Auditor(
        args.sample,
        args.seed,
        args.device,
        args.precision,
        tuple(args.images or ()),
        args.resources,
        run_layout(_limit(args)),
    )
    record = audit_study(Path(args.directory), auditor)
    for line in report_lines(record):
        print(terminal_text(line))
    print(f"record kept for reference (not proof) in {write_record(Path(args.directory), record, auditor.layout)}")
    return 0 if all(Audited(**item).clean for item in record["files"]) else 1


def _board_auditor(args: argparse.Namespace, layout: object) -> object:
    """``leaderboard --audit N``'s auditor (None without it)."""
    if args.audit is None:
        return None
    if args.audit < 1:
        raise ValueError(f"--audit: {args.audit} is no number of rows; give N >= 1")
    from zoomeval.audit.sample import Auditor

    return Auditor(args.audit, args.seed, images=tuple(args.images or ()), layout=layout)


def _export(args: argparse.Namespace) -> int:
    """write a study's verified results in the formats other tools read, as a bundle that zoomeval leaderboard reads
    back"""
    from zoomeval.core.layout import run_layout
    from zoomeval.publish.bundle import write_bundle

    out = Path(args.output or f"{Path(args.directory).resolve().name}-{args.format}")
    options = {"date": args.date, "source_url": args.source_url}
    print(f"wrote {write_bundle(Path(args.directory), out, args.format, options, run_layout(_limit(args))).parent}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from zoomeval.run.launch import run_study

    return run_study(Path(args.directory), args.targets, _limit(args), args.cores, args.report, args.settings)


def _output(args: argparse.Namespace) -> Path | None:
    """``-o``'s path, refused before any work where no output may be written to it
    (:func:`zoomeval.core.io.output_target`)."""
    if args.output is None:
        return None
    from zoomeval.core.io import output_target

    try:
        output_target(args.output)
    except ValueError as exc:
        raise ValueError(f"-o {exc}") from None
    return Path(args.output)


def _limit(args: argparse.Namespace) -> int | None:
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit: {args.limit} is no number of images; give N >= 1")
    return args.limit


class Parser(argparse.ArgumentParser):
    """An argument parser whose refusals are one line naming the argument, exit status 2 (argparse's own print the
    usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


class Version(argparse.Action):
    """--version: the package's version, the workflow's folder and its git commit (asked of git only when the option
    is given; an installed wheel has none)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, help="print the version, the workflow's folder and its git commit, then exit"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        commit = workflow_commit() or "unknown (not a git checkout: an installed package)"
        print(f"zoomeval {__version__}, commit {commit}, workflow in {workflow_root()}")
        parser.exit(0)


def cores(text: str) -> int:
    """A number of cores, at least 1 (argparse type); otherwise the refusal names it."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is no number of cores; give N >= 1")
    return value


def directory(text: str) -> Path:
    """An existing directory (argparse type); otherwise the refusal names it."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {'not a directory' if path.exists() else 'no such directory'}")
    return path


def setting(item: str) -> tuple[str, Any]:
    """A ``zoomeval run --set KEY=VALUE`` item (argparse type); otherwise the refusal names it."""
    from zoomeval.run.settings import parse_setting

    try:
        return parse_setting(item)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


#: How the arguments several commands share parse (each command gives its own help).
SHARED_ARGUMENTS: dict[str, dict[str, Any]] = {
    "--limit": {"type": int, "metavar": "N"},
    "--seed": {"type": int, "metavar": "S"},
    "--images": {"action": "append", "type": directory, "metavar": "DIR"},
    "--resources": {"type": directory, "metavar": "DIR"},
}


def add_shared(
    parser: argparse.ArgumentParser | argparse._ActionsContainer, name: str, help: str | None = None
) -> None:
    """Add the shared argument ``name`` (:data:`SHARED_ARGUMENTS`) to ``parser``, with the command's ``help``."""
    parser.add_argument(name, **SHARED_ARGUMENTS[name], help=help)


def add_study_command(
    commands: argparse._SubParsersAction, name: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """A subcommand over one study directory, its first argument, run by ``handler``; its help is the handler's
    docstring."""
    command = commands.add_parser(name, help=first_paragraph(inspect.getdoc(handler) or ""))
    command.add_argument("directory", metavar="DIR", type=directory)
    command.set_defaults(run=handler)
    return command


def parser() -> argparse.ArgumentParser:
    top = Parser(prog="zoomeval", description=plain(__doc__ or ""))
    top.add_argument("--version", action=Version)
    commands = top.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="write a study directory that uses this workflow as a Snakemake module")
    init.add_argument("directory")
    init.add_argument(
        "--preset", default="quick", choices=list(study_dir.PRESETS), help="what the study runs (default: quick)"
    )
    init.add_argument("--workflow", help="a zoomeval checkout to use (default: the installed workflow)")
    init.set_defaults(run=_init)
    listing = commands.add_parser("list", help="list adapters, sources, label sets, presets, or a source's models")
    listing.add_argument("kind", choices=[*REGISTRY_KINDS, "models"])
    listing.add_argument(
        "source", nargs="?", help="models: the model source (timm, torchvision, open_clip, entry_point)"
    )
    listing.add_argument("pattern", nargs="?", help="models: a shell pattern over architecture.weights")
    listing.set_defaults(run=_list)
    add_leaderboard(commands)
    add_export(commands)
    add_audit(commands)
    add_policy(commands)
    add_predict(commands)
    add_run(commands)
    return top


def add_leaderboard(commands: argparse._SubParsersAction) -> None:
    from zoomeval.publish.leaderboard import RANK_BY

    board = commands.add_parser("leaderboard", help="merge the metrics.json of study directories into one table")
    board.add_argument("directories", nargs="+", metavar="DIR", type=directory)
    board.add_argument("-o", "--output", help="FILE.csv, FILE.md or FILE.html (default: Markdown on stdout)")
    board.add_argument(
        "--allow-stale",
        action="store_true",
        help="list stale, missing, tampered or malformed results apart instead of refusing them",
    )
    board.add_argument(
        "--verify",
        action="store_true",
        help="recompute every result from its predictions first and fail on any difference",
    )
    board.add_argument(
        "--format",
        choices=["leaderboard", "timm"],
        default="leaderboard",
        help="timm: the standard evaluation in timm's results-CSV columns (one scored dataset)",
    )
    board.add_argument("--dataset", help="--format timm: the scored dataset to write (e.g. imagenet_real)")
    board.add_argument(
        "--rank-by",
        choices=RANK_BY,
        default=RANK_BY[0],
        help=f"the accuracy that ranks each protocol's models, best first (default {RANK_BY[0]})",
    )
    add_shared(
        board, "--limit", f"read each study's run limited to N images (zoomeval run --limit N: {limited_root('N')})"
    )
    board.add_argument(
        "--audit",
        type=int,
        metavar="N",
        help="audit each study here first (N rows per file, zoomeval audit) and refuse a row that fails",
    )
    add_shared(board, "--seed", "--audit: the samples' seed (default: drawn fresh)")
    add_shared(board, "--images", "--audit: your copy of the dataset, where images are found by content")
    board.set_defaults(run=_leaderboard)


def add_run(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="check a study, then build its tables and seal it, with a progress display")
    run.add_argument("directory", nargs="?", default=".", help="the study directory (default: the current one)")
    run.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="`study` (default: every table and the sealed study.json), `all` (also the figures, "
        "browser and hard sets) or a path of the results layout, e.g. "
        f"{Layout().path('table_tta', ext='csv')}",
    )
    add_shared(run, "--limit", f"the first N images of each dataset, in {limited_root('N')}")
    run.add_argument(
        "--cores", type=cores, metavar="N", help="cores for Snakemake, N >= 1 (default: all this process may use)"
    )
    run.add_argument(
        "--report",
        action="store_true",
        help=f"write Snakemake's report of the targets after the run ({Layout().path('report')})",
    )

    run.add_argument(
        "--set",
        action="append",
        default=[],
        type=setting,
        dest="settings",
        metavar="KEY=VALUE",
        help="this run only, set a config key (a dotted path: top_k, inference.batch_size) to a YAML value "
        "(3, cpu, [64,256], {key: value}); repeatable; checked like the config file, which is left unchanged, "
        "e.g. --set scales=[64,256] --set top_k=3",
    )
    run.set_defaults(run=_run)


def add_export(commands: argparse._SubParsersAction) -> None:
    export = add_study_command(commands, "export", _export)
    export.add_argument(
        "--format",
        required=True,
        choices=["hf", "timm", "eee"],
        help="hf: .eval_results YAML per model repo; timm: results CSVs; eee: Every Eval Ever records",
    )
    export.add_argument("-o", "--output", help="the bundle folder to create (default: <study>-<format>)")
    export.add_argument("--date", help="the results' date, YYYY-MM-DD (default: today)")
    export.add_argument("--source-url", help="hf: where the results can be inspected (the entries' source)")
    add_shared(export, "--limit", "export the study's run limited to N images")


def add_audit(commands: argparse._SubParsersAction) -> None:
    from zoomeval.audit.sample import DEFAULT_SAMPLE, LOGIT_ERROR

    audit = add_study_command(commands, "audit", _audit)
    audit.add_argument(
        "--sample",
        type=int,
        default=DEFAULT_SAMPLE,
        metavar="N",
        help=f"rows recomputed per file (default {DEFAULT_SAMPLE}; all of a smaller file)",
    )
    add_shared(audit, "--seed", "the sample's seed, a whole number >= 0 (default: drawn fresh, and printed)")
    add_shared(audit, "--images", "your copy of the dataset: images are found in it only, by content (repeatable)")
    add_shared(audit, "--resources", "where the weights are (default: the study's resources folder)")
    audit.add_argument(
        "--device", default="auto", help="the audit's device: cpu, cuda, cuda:N or auto (the default: CUDA if present)"
    )
    audit.add_argument(
        "--precision",
        default="fp32",
        choices=sorted({p for p, _ in LOGIT_ERROR}),
        help="the audit's precision (default fp32)",
    )
    add_shared(audit, "--limit", "audit the study's run limited to N images")


def add_policy(commands: argparse._SubParsersAction) -> None:
    policy = commands.add_parser("policy", help="take a study's fitted label-free zoom policy away as a file")
    actions = policy.add_subparsers(dest="action", required=True)
    export = add_study_command(actions, "export", _policy_export)
    export.add_argument("--policy", required=True, choices=["cascade", "max_conf", "vote", "selector"])
    export.add_argument("--budget", required=True, type=int, metavar="K", help="forward passes (views) per image")
    export.add_argument("--fit", required=True, metavar="DATASET", help="the scored dataset to fit it on (all images)")
    export.add_argument("--model", metavar="NAME", help="the study's model (default: its only one)")
    export.add_argument("--variant", default="original", help="the image variant (default: original)")
    add_shared(export, "--limit", "the study's run limited to N images")
    export.add_argument(
        "--fold",
        type=int,
        metavar="K",
        help="cross-validation fold K's own policy, fitted on the other folds' images (default: fitted on every image)",
    )
    export.add_argument(
        "-o", "--output", metavar="FILE", help="default: <policy>-<budget>.<model>.<DATASET>[.fold<K>].json"
    )


def add_predict(commands: argparse._SubParsersAction) -> None:
    predict = commands.add_parser(
        "predict",
        help="apply an exported zoom policy to image files and folders: a CSV "
        "row per image (class, confidence, the view that answered, passes)",
    )
    predict.add_argument("images", nargs="+", metavar="IMAGE", help="image files, and folders searched recursively")
    predict.add_argument("--policy", required=True, metavar="FILE", help="a file of zoomeval policy export")
    weights = predict.add_mutually_exclusive_group(required=True)
    weights.add_argument("--study", type=directory, metavar="DIR", help="the policy's study (weights in DIR/resources)")
    add_shared(weights, "--resources", "the folder holding the weights/ folder")
    predict.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    predict.add_argument("--batch-size", type=int, default=64, metavar="N", help="crops per forward pass (default 64)")
    predict.add_argument("-o", "--output", metavar="FILE.csv", help="default: CSV on stdout")
    predict.set_defaults(run=_predict)


def _predict(args: argparse.Namespace) -> int:
    from zoomeval.core.io import csv_text, write_text
    from zoomeval.policy.apply import COLUMNS, image_paths, policy_wrapper, predict_rows

    output, paths = _output(args), image_paths(args.images)
    resources = args.resources or args.study / "resources"
    text = csv_text(COLUMNS, predict_rows(policy_wrapper(args.policy, resources, args.device, args.batch_size), paths))
    if output:
        write_text(output, text)
        print(terminal_text(f"{args.output}: {len(paths)} images"), file=sys.stderr)
    else:
        print(terminal_text(text), end="")
    return 0


def study_settings(directory: Path) -> object:
    """The ``policies`` settings of the study in ``directory`` (its ``config/config.yaml``, else ``config.yaml``)."""
    from zoomeval.registries import load_config

    path = next((p for p in (directory / "config" / "config.yaml", directory / "config.yaml") if p.is_file()), None)
    if path is None:
        raise ValueError(f"{directory}: no config/config.yaml nor config.yaml: the study's policy settings are unknown")
    return load_config(load_config_file(path), check_paths=False).policies


def _policy_export(args: argparse.Namespace) -> int:
    """write one fitted policy (views, rule, model, held-out accuracy) as a versioned JSON file that zoomeval.ZoomTTA
    applies"""
    from zoomeval.core.io import write_json
    from zoomeval.core.layout import run_layout
    from zoomeval.policy.fitted import export_policy, study_model

    layout, folder, output = run_layout(_limit(args)), Path(args.directory), _output(args)
    model = args.model or study_model(folder, layout, args.fit, args.variant)
    document = export_policy(
        folder, layout, args.fit, args.variant, model, args.policy, args.budget, study_settings(folder), args.fold
    )
    fold = "" if args.fold is None else f".fold{args.fold}"
    output = output or f"{args.policy}-{args.budget}.{model}.{args.fit}{fold}.json"
    write_json(output, document)
    held = document["held_out"]
    shown = f"held out ({held['protocol']}): {held['acc']:.2f} % in {held['passes']:.2f} passes" if held else ""
    whose = "" if args.fold is None else f"fold {args.fold}'s "  # its row is every fold's
    print(terminal_text(f"{output}: {whose}{args.policy}, {len(document['views'])} views; {shown}"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as a shell command does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 128 + signal.SIGPIPE
    except (ValueError, OSError) as exc:  # a bad input: one line naming it, no traceback
        command = " ".join(filter(None, (args.command, getattr(args, "action", None))))  # `policy export`
        print(terminal_text(f"zoomeval {command}: {_message(exc)}"), file=sys.stderr)  # names may hold escape codes
        return 2


def _message(exc: Exception) -> str:
    """The one-line refusal of a bad input; an operating-system error names its file."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    return " ".join(str(exc).split())
