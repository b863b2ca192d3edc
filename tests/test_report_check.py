"""``snakemake --report`` before its targets are built names the target to build first
(``zoomeval.report.report_check``; end to end in tests/test_report.py)."""

import pytest

from zoomeval.report.report_check import ReportNotReady, check_built

BUILDS = {"all": ["results/a.csv", "results/b.csv", "results/c.png", "results/d.png", "results/e.png"]}


def test_a_report_of_all_before_all_is_built_names_what_is_missing_and_the_command():
    with pytest.raises(ReportNotReady) as info:
        check_built(set(), BUILDS, exists=lambda f: f == "results/b.csv")
    assert str(info.value).startswith(
        "snakemake --report: all is not built yet (results/a.csv, results/c.png, results/d.png and 1 more missing). "
        "Build it first with the same --configfile and --config, without --report: `snakemake --cores N all`; "
    )


def test_file_targets_are_checked_themselves_and_a_built_target_passes():
    with pytest.raises(ReportNotReady, match=r"`snakemake --cores N results/table_tta.csv`"):
        check_built({"results/table_tta.csv"}, BUILDS, exists=lambda f: False)
    check_built({"results/table_tta.csv"}, BUILDS, exists=lambda f: f == "results/table_tta.csv")
    check_built(set(), BUILDS, exists=lambda f: True)
