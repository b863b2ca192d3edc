"""make test's parallel pytest keeps each xdist group in one process (tests/conftest.py): a pytest that pytest-xdist
cannot name the groups in would drop them silently, and the suite would build each shared study once per process."""

import pytest

pytestmark = pytest.mark.xdist_group("test_suite_groups")


def test_a_grouped_tests_id_names_its_group_under_make_tests_distribution(request, pytestconfig) -> None:
    if not getattr(pytestconfig.option, "loadgroup", False):  # set in each worker of --dist loadgroup
        pytest.skip("not run under pytest-xdist's --dist loadgroup (make test)")
    assert request.node.nodeid.endswith("@test_suite_groups"), request.node.nodeid
