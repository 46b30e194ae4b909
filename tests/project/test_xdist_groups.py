"""CI's Docker run puts the tests that mostly wait beside the others (tests/conftest.py): every test is in
exactly one xdist group, ``waits`` where it is marked so, else ``main``."""

from __future__ import annotations

import pytest

from tests.conftest import MAIN_GROUP, WAITING_GROUP


def test_every_selected_test_is_in_one_group_named_by_its_marker(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    assert items
    for item in items:
        groups = [marker.args[0] for marker in item.iter_markers("xdist_group")]
        assert groups == [WAITING_GROUP if item.get_closest_marker("waits") else MAIN_GROUP], item.nodeid


def test_the_waits_marker_is_declared(pytestconfig: pytest.Config) -> None:
    assert any(line.startswith("waits:") for line in pytestconfig.getini("markers"))
