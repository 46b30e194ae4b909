"""The bytecode check against real images, through ``distval run``: the good 2.6 fixture passes, and
``broken:stale-bytecode`` (every torch .py touched after compiling, as mtime clamping does) fails it with
what was expected and what was seen. Marked ``docker``; builds only the fixtures it uses.
"""

from __future__ import annotations

import re
import secrets
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distval.cli.main import main
from tests.docker_helpers import cases, leftovers, outcome, validate

pytestmark = pytest.mark.docker

GOOD = "distval-fixtures/torch:2.6-debian"
STALE = "distval-fixtures/broken:stale-bytecode"
# Two ranks under torchrun in one container (the launcher imports torch before the workers; where it may
# write .pyc files, what it recompiles still counts against the image).
CONFIG = "timeout_s: 150\nscenarios:\n  - {topology: in-container, world_size: 2, checks: [env, bytecode]}\n"
FAILURE = re.compile(
    r"^expected torch's bytecode to match its sources \(at most 5% stale or missing\); "
    r"(\d+) of (\d+) \.pyc files are not: (\d+) stale \(their source's mtime differs\)"
)


@pytest.fixture
def run_id(docker_client: object) -> Iterator[str]:
    value = "b" + secrets.token_hex(4)
    yield value
    assert leftovers(docker_client, value) == [], "the run left containers or networks behind"


def run(image: str, run_id: str, tmp_path: Path) -> tuple[int, dict[str, tuple[str, str, str]]]:
    """Exit code and every testcase's (outcome, message, system-out)."""
    config = tmp_path / "bytecode.yaml"
    config.write_text(CONFIG)
    junit = tmp_path / "results.xml"
    code = main(["run", str(config), "--image", image, "--junit", str(junit), "--run-id", run_id, "--quiet"])
    root: ET.Element = validate(junit)
    found = {}
    for (_, name), case in cases(root).items():
        status, message = outcome(case)
        found[name] = (status, message, case.findtext("system-out") or "")
    return code, found


def test_the_good_fixture_passes(fixture_image: Callable[[str], str], run_id: str, tmp_path: Path) -> None:
    fixture_image(GOOD)
    code, found = run(GOOD, run_id, tmp_path)
    status, message, output = found["bytecode"]
    assert (code, status) == (0, "passed"), (message, output)
    # Each rank's message: "N of M torch .pyc fresh (...) in S s", at most 5% not fresh.
    counts = re.findall(r"(\d+) of (\d+) torch \.pyc fresh", output)
    assert len(counts) == 2, output
    for fresh, total in counts:
        assert int(total) > 1000 and int(fresh) >= 0.95 * int(total), output
    print(output)  # the measured counts and time, for the record (pytest -s)


def test_stale_bytecode_fails_with_what_was_expected_and_seen(
    fixture_image: Callable[[str], str], run_id: str, tmp_path: Path
) -> None:
    fixture_image(STALE)
    code, found = run(STALE, run_id, tmp_path)
    assert code == 1
    assert found["env"][0] == "passed", found["env"]
    status, message, output = found["bytecode"]
    assert status == "failure", (status, message, output)
    match = FAILURE.search(message.split(": ", 1)[1] if message.startswith("rank ") else message)
    assert match is not None, message
    not_fresh, total, stale = map(int, match.groups())
    # Every module: those no import touched are stale in place; those torchrun and the ranks imported were
    # recompiled by this launch (the layer left every one of them stale).
    assert not_fresh == total and total > 1000 and 0 < stale <= total, message
    assert "source mtime 2030-01-01 00:00:00 UTC, its .pyc header says " in message, message
    # distval's containers run with PYTHONDONTWRITEBYTECODE=1 (distval/plan/model.py): nothing is repaired during the run.
    cost = (
        "every fresh container compiles torch's Python again on import (here every process does: PYTHONDONTWRITEBYTECODE is set)"
    )
    assert message.endswith(cost), message
    print(message)
