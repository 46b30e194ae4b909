"""``distval run --reference`` against the real Engine (marked ``docker``): a defect of the candidate that the
reference lacks is caused by the image (exit 1); the same defect in the reference only is said and passes; the
pairs ran in ABBA order on both images, and nothing is left behind.

Small on purpose: one scenario in one container, all_reduce and a two-size bandwidth sweep, two pairs."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distval.cli.main import main
from distval.errors import EXIT_CHECKS_FAILED, EXIT_PASSED
from tests.docker_helpers import leftovers

pytestmark = pytest.mark.docker

GOOD = "distval-fixtures/torch:2.6-debian"
WRONG = "distval-fixtures/broken:allreduce-wrong"
CONFIG = """\
version: 1
timeout_s: 180
scenarios:
  - name: pairs
    topology: in-container
    world_size: 2
    checks:
      - all_reduce
      - {name: bandwidth, args: {sizes: [64KiB, 1MiB], ops: [broadcast], yardstick: false}}
"""


def run(tmp_path: Path, candidate: str, reference: str, docker_client: Any) -> tuple[int, dict[str, Any]]:
    config = tmp_path / "pairs.yaml"
    config.write_text(CONFIG)
    report = tmp_path / f"{candidate.rsplit(':', 1)[1]}.json"
    run_id = "p" + secrets.token_hex(4)
    # The checks' attribution is what these tests judge: no confirmation pairs, so that a figure that a failing check's
    # different work moves past its tolerance cannot change how many pairs ran (tests/comparing/test_confirmation.py).
    argv = ["run", str(config), "--image", candidate, "--reference", reference, "--pairs", "2", "--confirm-pairs", "0"]
    argv += ["--json", str(report)]
    code = main([*argv, "--run-id", run_id, "--quiet"])
    assert leftovers(docker_client, run_id) == [], "the run left containers or networks behind"
    (scenario,) = json.loads(report.read_text())["scenarios"]
    return code, scenario


def test_a_defect_only_the_candidate_has_is_caused_by_the_image(
    fixture_image: Callable[[str], str], docker_client: Any, tmp_path: Path
) -> None:
    fixture_image(GOOD)
    fixture_image(WRONG)
    code, scenario = run(tmp_path, WRONG, GOOD, docker_client)
    cases = {c["name"]: c for c in scenario["cases"]}
    assert code == EXIT_CHECKS_FAILED
    reference = cases["reference"]
    assert reference["status"] == "failed", reference["message"]
    assert "caused by the image: all_reduce (failed/failed vs passed/passed)" in reference["message"], reference["message"]
    details = reference["details"]
    assert details["order"] == ["candidate first", "reference first"]
    assert [r["image"] for r in details["runs"]["reference"]] == [GOOD, GOOD]
    assert [r["image"] for r in details["runs"]["candidate"]] == [WRONG, WRONG]
    assert scenario["properties"]["reference_image"] == GOOD
    assert scenario["properties"]["reference_image_id"].startswith("sha256:")
    # The figures were paired too (busbw of both sizes, the durations, the time to verdict).
    assert {f["kind"] for f in details["figures"]} == {"busbw", "duration", "time to verdict"}, details["figures"]


def test_the_same_defect_in_the_reference_only_is_said_and_passes(
    fixture_image: Callable[[str], str], docker_client: Any, tmp_path: Path
) -> None:
    fixture_image(GOOD)
    fixture_image(WRONG)
    code, scenario = run(tmp_path, GOOD, WRONG, docker_client)
    reference = {c["name"]: c for c in scenario["cases"]}["reference"]
    assert reference["status"] == "passed", reference["message"]
    assert "failed on the reference only: all_reduce" in reference["message"]
    assert code == EXIT_PASSED
