"""Safe cells: the one place each output format escapes what a user or a file supplies (folder names, model names,
metadata), so that no cell becomes a formula, a column break or a terminal command.

- CSV (OWASP's rule against formula injection): a cell that begins with ``=``, ``+``, ``-``, ``@``, tab or carriage
  return is written as text, prefixed with a single quote. A plain number (``-0.5``, ``-12``, ``-1e-3``) is left as
  it is: a spreadsheet reads it as a number, never as a formula, and negative differences stay numeric.
- Markdown: ``|`` is escaped and line breaks become spaces, so a cell never shifts the columns after it.
- Terminal: control characters (escape codes among them) are dropped; newlines and tabs stay.
- HTML: :func:`html.escape`, quotes included.
"""

from __future__ import annotations

import html
import re
from typing import Any

#: What a spreadsheet may read as the start of a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV writer may write it: text that a spreadsheet would run as a formula gets a leading ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def markdown_cell(value: str) -> str:
    """A Markdown table cell: ``|`` escaped, line breaks as spaces."""
    return markdown_line(value).replace("|", "\\|")


def markdown_line(value: str) -> str:
    """Text for one Markdown line (a heading): line breaks as spaces."""
    return value.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def terminal_text(text: str) -> str:
    """``text`` without control characters (ANSI escape codes and the like); newlines and tabs stay."""
    return _CONTROL.sub("", text)


def html_text(value: str) -> str:
    """Text for an HTML element or attribute."""
    return html.escape(value, quote=True)
