"""What several zoomeval commands share: help in plain words, the arguments several take (a study directory,
--limit, --seed, --images, --resources) and the checks of -o and --limit."""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def directory(text: str) -> Path:
    """An existing directory (argparse type); otherwise the refusal names it."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {'not a directory' if path.exists() else 'no such directory'}")
    return path


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


def output(args: argparse.Namespace) -> Path | None:
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


def limit(args: argparse.Namespace) -> int | None:
    """``--limit``'s number of images, refused below 1."""
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit: {args.limit} is no number of images; give N >= 1")
    return args.limit
