"""The zoomeval command: init writes a study directory, run checks and runs one with a progress display, list
shows what the registries and the model libraries hold, leaderboard merges studies into one table, audit
recomputes a sample of a study's rows, policy save takes a fitted zoom policy away as a file and predict applies
one to images. Each subcommand is a thin call into the package."""

# This docstring is `zoomeval --help`'s description. Each command is a module of this package, its arguments (add)
# beside its handler; this one builds the top parser, dispatches and turns a bad input into one line.

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from zoomeval import __version__
from zoomeval.cli import audit, export, init, leaderboard, policy, predict, run
from zoomeval.cli import list as listing  # not to shadow the builtin
from zoomeval.cli.common import plain
from zoomeval.core.cells import terminal_text
from zoomeval.core.provenance import workflow_commit, workflow_root

#: The commands in --help's order: run, the one a study is mostly driven by, first.
COMMANDS = (run, init, listing, leaderboard, export, audit, policy, predict)


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


def parser() -> argparse.ArgumentParser:
    top = Parser(prog="zoomeval", description=plain(__doc__ or ""))
    top.add_argument("--version", action=Version)
    commands = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add(commands)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(policy.respelled(sys.argv[1:] if argv is None else argv))
    try:
        return args.run(args)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as a shell command does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 128 + signal.SIGPIPE
    except (ValueError, OSError) as exc:  # a bad input: one line naming it, no traceback
        command = " ".join(filter(None, (args.command, getattr(args, "action", None))))  # `policy save`
        print(terminal_text(f"zoomeval {command}: {_message(exc)}"), file=sys.stderr)  # names may hold escape codes
        return 2


def _message(exc: Exception) -> str:
    """The one-line refusal of a bad input; an operating-system error names its file."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    return " ".join(str(exc).split())
