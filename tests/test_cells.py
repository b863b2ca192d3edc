"""Safe cells: formulas written as text in CSV (OWASP), numbers kept; Markdown pipes and line breaks escaped;
control characters dropped from the terminal; one writer per format used by the tables."""

import csv

import pytest

from zoomeval.core.cells import csv_cell, markdown_cell, terminal_text
from zoomeval.core.io import write_csv
from zoomeval.report.tables import markdown_table


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://x","x")', '\'=HYPERLINK("http://x","x")'),
        ("-1+1", "'-1+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-", "'-"),
        ("-0.5", "-0.5"),
        ("-12", "-12"),
        ("-1e-3", "-1e-3"),
        ("-.5", "-.5"),
        ("+0.52", "+0.52"),
        ("+1+1", "'+1+1"),
        ("-1e3+1", "'-1e3+1"),
        ("a=1", "a=1"),
        (-0.5, -0.5),
        (None, None),
    ],
)
def test_a_csv_cell_that_a_spreadsheet_would_run_is_text_and_a_negative_number_a_number(cell, written) -> None:
    assert csv_cell(cell) == written


def test_the_csv_writer_escapes_every_cell_and_the_header(tmp_path) -> None:
    write_csv(tmp_path / "t.csv", ["=h", "b"], [["+1+1", "-2.5"], ["@x", "ok"]])
    with open(tmp_path / "t.csv", newline="") as fh:
        assert list(csv.reader(fh)) == [["'=h", "b"], ["'+1+1", "-2.5"], ["'@x", "ok"]]


def test_a_markdown_cell_never_shifts_the_columns_after_it() -> None:
    assert markdown_cell("a|b|c") == "a\\|b\\|c"
    assert markdown_cell("a\nb\r\nc") == "a b c"
    lines = markdown_table(["study", "acc"], [["a|b|c", "41.67"]])
    assert lines == ["| study | acc |", "|---|---|", "| a\\|b\\|c | 41.67 |"]
    # a row splits on the pipes no backslash precedes: two columns, as the header
    assert len([p for p in lines[2].replace("\\|", "").split("|") if p.strip()]) == 2


def test_the_terminal_gets_no_control_characters() -> None:
    assert terminal_text("a\x1b[31mred\x1b[0m\x07\tb\nc\x9b") == "a[31mred[0m\tb\nc"
