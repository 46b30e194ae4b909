"""ddp_training against real images: every part passes on the three good torch versions (at 2 ranks, and at 3 on
2.6, where averaging is not exact in float32 and the tolerances are what passes), and each broken image is caught
by its part, naming which answer the parameters got instead, while ddp_sync (one step, one bucket) misses the new
defects and the other parts still pass. In one container only: the topology is the collectives' concern, DDP's
reducer runs the same either way. Marked ``docker``.
"""

from __future__ import annotations

import secrets
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from distval.cli.main import main
from tests.docker_helpers import GOOD, cases, leftovers, outcome, validate

# CI runs this file in its second process (.ci/run): alone in a CI run, images built, it kept 64 % (74.4 s) of the 2 cores busy
# (2026-12-07, /proc/stat every 10 s), a core idle much of its time; tests/budgets.py WAITING_S holds its budget.
pytestmark = [pytest.mark.docker, pytest.mark.waits]

PARTS = ("buckets", "no_sync", "find_unused", "static_graph", "comm_hook", "join")


@pytest.fixture
def run_id(docker_client: object) -> object:
    value = "d" + secrets.token_hex(4)
    yield value
    assert leftovers(docker_client, value) == [], "the run left containers or networks behind"


def run(image: str, checks: str, run_id: str, tmp_path: Path, world_size: int = 2) -> tuple[int, dict[str, tuple[str, str]]]:
    """Exit code and every testcase's (outcome, message) of one in-container scenario; a passed testcase's
    message is rank 0's, from its output (JUnit gives a passed testcase none)."""
    config = tmp_path / "ddp.yaml"
    # The default config's limits (configs/default.yaml: what a loaded 2-core runner needs).
    config.write_text(
        "timeout_s: 600\ncheck_timeout_s: 300\nscenarios:\n"
        f"  - {{topology: in-container, world_size: {world_size}, checks: {checks}}}\n"
    )
    junit = tmp_path / "results.xml"
    code = main(["run", str(config), "--image", image, "--junit", str(junit), "--run-id", run_id, "--quiet"])
    root: ET.Element = validate(junit)
    found: dict[str, tuple[str, str]] = {}
    for (_, name), case in cases(root).items():
        status, message = outcome(case)
        if status == "passed":
            first = [line for line in (case.findtext("system-out") or "").splitlines() if line.startswith("rank 0: passed: ")]
            message = first[0].removeprefix("rank 0: passed: ") if first else ""
        found[name] = (status, message)
    return code, found


GOOD_RUNS = [*((image, 2) for image in sorted(GOOD)), ("distval-fixtures/torch:2.6-debian", 3)]


@pytest.mark.parametrize(("image", "world_size"), GOOD_RUNS)
def test_every_part_passes_on_a_good_image(
    fixture_image: Callable[[str], str], image: str, world_size: int, run_id: str, tmp_path: Path
) -> None:
    fixture_image(image)
    code, found = run(image, "[ddp_training]", run_id, tmp_path, world_size)
    assert code == 0, found
    for part in PARTS:
        status, message = found[f"ddp_training.{part}"]
        assert status == "passed", (part, message)
        assert f"averaged over {world_size} ranks" in message, message
    # The parts that are about the bucket layout say how many buckets they ran with (at least 3).
    for part in ("buckets", "static_graph"):
        buckets = int(found[f"ddp_training.{part}"][1].split("(")[1].split(" buckets")[0])
        assert buckets >= 3, found[f"ddp_training.{part}"]


def test_a_bucket_past_the_first_left_unsynced_is_caught_by_the_buckets_part_and_missed_by_ddp_sync(
    fixture_image: Callable[[str], str], run_id: str, tmp_path: Path
) -> None:
    image = fixture_image("distval-fixtures/broken:ddp-later-bucket-unsynced")
    code, found = run(image, "[ddp_sync, ddp_sampler, ddp_training]", run_id, tmp_path)
    assert code == 1
    # One step of a one-bucket model: the old check cannot see it, nor can the sampler's.
    assert found["ddp_sync"][0] == "passed", found["ddp_sync"]
    assert found["ddp_sampler"][0] == "passed", found["ddp_sampler"]
    status, message = found["ddp_training.buckets"]
    assert status == "failure", message
    # Parameter by parameter: the ones past the first bucket kept this rank's own gradient, the first bucket's
    # were averaged.
    assert "this rank's own gradient, not all-reduced" in message, message
    assert "averaged correctly: " in message and "(bucket 0)" in message.split("averaged correctly: ")[1], message
    assert "table.weight (bucket" in message, message
    # Every part trains the same multi-bucket model: each sees the defect (none passes, none errors).
    for part in PARTS:
        assert found[f"ddp_training.{part}"][0] == "failure", (part, found[f"ddp_training.{part}"])


def test_no_sync_that_syncs_anyway_is_caught_by_the_no_sync_part_only(
    fixture_image: Callable[[str], str], run_id: str, tmp_path: Path
) -> None:
    image = fixture_image("distval-fixtures/broken:ddp-no-sync-ignored")
    code, found = run(image, "[ddp_sync, ddp_training]", run_id, tmp_path)
    assert code == 1
    status, message = found["ddp_training.no_sync"]
    assert status == "failure", message
    assert "inside no_sync() to be this rank's own" in message, message
    assert "no_sync() did not stop the all-reduce" in message, message
    for name in ("ddp_sync", *(f"ddp_training.{part}" for part in PARTS if part != "no_sync")):
        assert found[name][0] == "passed", (name, found[name])


@pytest.mark.parametrize(
    ("image", "answer"),
    [
        ("distval-fixtures/broken:ddp-sums-gradients", "the gradient summed over the ranks, not averaged"),
        ("distval-fixtures/broken:ddp-no-grad-sync", "this rank's own gradient, not all-reduced"),
    ],
)
def test_the_known_answers_tell_a_sum_and_a_missing_all_reduce_apart(
    fixture_image: Callable[[str], str], image: str, answer: str, run_id: str, tmp_path: Path
) -> None:
    """The old DDP defects, caught by ddp_sync, are named by the buckets part too: every parameter got the same
    wrong answer, and which one it was says what the defect is. (Only that part: ddp-sums-gradients registers its
    own comm hook, so the comm_hook part's registration would raise there.)"""
    fixture_image(image)
    code, found = run(image, "[ddp_sync, {name: ddp_training, args: {parts: [buckets]}}]", run_id, tmp_path)
    assert code == 1
    assert found["ddp_sync"][0] == "failure", found["ddp_sync"]
    status, message = found["ddp_training.buckets"]
    assert status == "failure", message
    assert answer in message and "averaged correctly" not in message, message
    assert set(found) == {"process_group", "ddp_sync", "ddp_training.buckets", "exit_status"}, found
