"""``distval doctor`` against the real Engine: a reachable Engine and the sample image are ok (torch 2.6 with gloo,
probed as ranks run and removed afterwards), a missing image fails without a pull, an unreachable DOCKER_HOST says
what to do and exits 3 without a traceback. Marked ``docker``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from distval.cli.main import main
from tests.docker_helpers import leftovers
from tests.paths import ROOT

pytestmark = pytest.mark.docker
SAMPLE = "distval-fixtures/torch:2.6-debian"


def findings(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    capsys.readouterr()  # what came before (a fixture build's progress) is not the command's output
    code = main(["doctor", *args, "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    return code, {c["check"]: c for c in data["checks"]}


def probes_left(client: object) -> list[str]:
    return [name for name in leftovers(client) if name.startswith("distval-doctor-")]


def test_a_reachable_engine_and_the_sample_image_are_ok(
    docker_client: object, fixture_image: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    image = fixture_image(SAMPLE)
    code, found = findings(capsys, "--image", image)
    assert found["engine"]["status"] == "ok", found["engine"]
    assert found["image"]["status"] == "ok", found["image"]
    torch = found["image-torch"]
    assert torch["status"] == "ok", torch
    assert torch["found"].startswith("torch 2.6.") and "gloo yes" in torch["found"], torch
    # Only a full disk on the test machine may fail it; compose and the GPU runtime are warnings at worst.
    assert not any(c["status"] == "fail" for name, c in found.items() if name != "engine-disk"), found
    assert code == (3 if found["engine-disk"]["status"] == "fail" else 0)
    assert probes_left(docker_client) == []


def test_a_missing_image_fails_and_is_not_pulled(docker_client: object, capsys: pytest.CaptureFixture[str]) -> None:
    missing = "distval-tests/never-built:doctor"
    code, found = findings(capsys, "--image", missing)
    assert code == 3
    assert found["image"]["status"] == "fail" and "distval never pulls" in found["image"]["found"]
    assert found["image-torch"]["status"] == "skip"
    images = docker_client.images  # type: ignore[attr-defined]
    assert not images.list(name="distval-tests/never-built")
    assert probes_left(docker_client) == []


def test_an_unreachable_docker_host_says_what_to_do_and_exits_3() -> None:
    """As a user runs it: a process of its own, DOCKER_HOST at a socket that does not exist."""
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent"}
    done = subprocess.run(
        [sys.executable, "-m", "distval", "doctor"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done
    assert "Traceback" not in done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("fail  engine")]
    assert "cannot reach the Docker Engine at unix:///nonexistent" in line
    assert "-> no Engine listens on that socket: start Docker" in line
