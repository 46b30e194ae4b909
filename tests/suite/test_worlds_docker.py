"""Worlds above two ranks: the default config's 3-rank and 2 x 2 scenarios catch what a 2-rank world cannot.

Each broken image is right in every group of two ranks (so cross-container-2ranks passes it whole) and wrong
from three on; the default config must fail it (exit 1) in exactly the intended testcases of in-container-3ranks
and cross-container-2x2. The good images passing the same config is tests/suite/test_suite_docker.py's
test_default_config_passes_with_every_skip_explained. Marked ``docker``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from distval.cli.main import main
from tests.docker_helpers import DEFAULT_CONFIG, DEFAULT_LAYOUTS, cases, layout_key, leftovers, outcome, validate

pytestmark = pytest.mark.docker

ABOVE_TWO = ("in-container", "cross-container 2x2")  # layout_key of in-container-3ranks and cross-container-2x2
WORLD = {"in-container": 3, "cross-container": 2, "cross-container 2x2": 4}


@pytest.fixture
def run_id(docker_client: object) -> object:
    value = "w" + secrets.token_hex(4)
    yield value
    assert leftovers(docker_client, value) == [], "the run left containers or networks behind"


def run_default(image: str, run_id: str, junit: Path) -> tuple[int, dict[str, dict[str, tuple[str, str]]]]:
    # One scenario at a time: on 2 cores two at once gain little, and each scenario keeps its deadline's headroom.
    # The default config's scenarios and the checks these defects can reach (all_reduce, collectives) with those that
    # must stay green beside them; the rest of its list (DDP, the timeout, libraries...) costs minutes per image here
    # and goes through neither of the broken calls.
    skipped = ("identity", "ddp_sync", "ddp_sampler", "timeout", "reconfigure", "libraries", "environment")
    argv = ["run", DEFAULT_CONFIG, "--image", image, "--junit", str(junit), "--run-id", run_id, "--quiet", "--jobs", "1"]
    argv += [arg for check in skipped for arg in ("--skip-check", check)]
    code = main(argv)
    by_layout: dict[str, dict[str, tuple[str, str]]] = {}
    for (suite, name), case in cases(validate(junit)).items():
        by_layout.setdefault(layout_key(suite), {})[name] = outcome(case)
    return code, by_layout


def red(found: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Every testcase neither passed nor skipped, with its status and message (an assertion's evidence)."""
    return {
        name: f"{status}: {message[:300]}" for name, (status, message) in found.items() if status not in ("passed", "skipped")
    }


def test_a_ring_that_misses_a_hop_is_caught_above_two_ranks_only(
    fixture_image: Callable[[str], str], run_id: str, tmp_path: Path
) -> None:
    """all_reduce leaves out the last rank's data and all_gather repeats a slot, in groups of 3 ranks or more."""
    image = fixture_image("distval-fixtures/broken:wrong-above-two-ranks")
    code, results = run_default(image, run_id, tmp_path / "results.xml")
    assert code == 1
    assert set(results) == set(DEFAULT_LAYOUTS)
    for layout in ABOVE_TWO:
        found, world = results[layout], WORLD[layout]
        status, message = found["all_reduce"]
        # Rank r contributes r + 1; without the last rank's the sum is short by world.
        assert status == "failure", (layout, found["all_reduce"])
        assert f"expected {world * (world + 1) / 2} in every element, got {world * (world - 1) / 2}" in message, message
        # SUM and PRODUCT tell a rank's contribution left out (every rank adds to them); MAX and MIN need not: the
        # collectives' inputs are 1 or 2 per element (exact in int8, PRODUCT <= 64), and the ranks that remain often
        # reach the same maximum.
        for case in ("collectives.all_reduce.sum", "collectives.all_reduce.product"):
            assert found[case][0] == "failure" and "all_reduce(" in found[case][1], (layout, case, found[case])
        status, message = found["collectives.all_gather"]
        assert status == "failure" and f"all_gather, slot of rank {world - 1}" in message, (layout, message)
        # What does not go through torch.distributed.all_reduce or all_gather is untouched.
        for case in ("env", "launch", "collectives.broadcast", "collectives.gather", "collectives.scatter", "store"):
            assert found[case][0] == "passed", (layout, case, found[case])
    assert red(results["cross-container"]) == {}  # right at 2 ranks: nothing caught


def test_a_non_contiguous_group_of_the_wrong_ranks_is_caught_by_subgroup_only(
    fixture_image: Callable[[str], str], run_id: str, tmp_path: Path
) -> None:
    """new_group([0, 2]) makes [0, 1]: every rank's view of the group is compared before anyone waits in it, so
    the part fails on every rank at once (no timeout), and nothing else fails."""
    image = fixture_image("distval-fixtures/broken:subgroup-noncontiguous")
    code, results = run_default(image, run_id, tmp_path / "results.xml")
    assert code == 1
    assert set(results) == set(DEFAULT_LAYOUTS)
    for layout in ABOVE_TWO:
        found = results[layout]
        assert set(red(found)) == {"collectives.subgroup"}, (layout, red(found))
        status, message = found["collectives.subgroup"]
        assert status == "failure", (layout, status, message)
        assert "new_group([0, 2]): expected (group rank, group size) (-1, -1) on rank 1" in message, message
        assert "got (1, 2) on rank 1" in message, message
    assert red(results["cross-container"]) == {}  # no non-contiguous group at 2 ranks
