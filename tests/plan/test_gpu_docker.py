"""The GPU half against the real Engine here, which has no GPU runtime: every NCCL scenario of
configs/nccl.yaml appears in the JUnit as skipped with the Engine's own words, on every good fixture,
never failed and never missing; the run says nothing was validated (exit 5); --require-gpu fails them.
Marked ``docker``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distval.cli.main import main
from distval.config import load_config
from tests.docker_helpers import leftovers
from tests.paths import ROOT

pytestmark = pytest.mark.docker
NCCL_CONFIG = ROOT / "configs" / "nccl.yaml"
GOOD = ("distval-fixtures/torch:1.13-debian", "distval-fixtures/torch:2.6-debian", "distval-fixtures/torch:2.15-pypi")
# moby answers a device request it has no driver for with this (daemon/devices.go).
NO_DRIVER = 'could not select device driver "" with capabilities: [[gpu]]'


def run(docker_client: object, image: str, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    run_id = "g" + secrets.token_hex(4)
    report = tmp_path / f"{run_id}.json"
    code = main(["run", str(NCCL_CONFIG), "--image", image, "--run-id", run_id, "--quiet", "--json", str(report), *extra])
    assert leftovers(docker_client, run_id) == []  # the GPU probe container included
    return code, json.loads(report.read_text(encoding="utf-8"))


@pytest.mark.parametrize("image", GOOD)
def test_every_nccl_scenario_is_skipped_with_the_engines_reason(
    fixture_image: Callable[[str], str],
    docker_client: object,
    image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = run(docker_client, fixture_image(image), tmp_path)
    assert code == 5  # nothing was validated: never exit 0, and not the image's failure (1)
    assert "nothing was validated" in capsys.readouterr().out
    scenarios = report["scenarios"]
    expected = load_config(NCCL_CONFIG).scenarios
    assert [s["name"] for s in scenarios] == [s.name for s in expected]  # never missing
    for scenario, config in zip(scenarios, expected, strict=True):
        assert scenario["status"] == "skipped"
        assert [c["name"] for c in scenario["cases"]] == ["process_group", *(c.name for c in config.checks)]
        for case in scenario["cases"]:
            assert case["status"] == "skipped"
            assert case["message"].startswith("the scenario needs ") and NO_DRIVER in case["message"], case["message"]


def test_require_gpu_turns_the_skips_into_failures(
    fixture_image: Callable[[str], str], docker_client: object, tmp_path: Path
) -> None:
    code, report = run(docker_client, fixture_image(GOOD[1]), tmp_path, "--require-gpu", "--filter", "nccl.nccl.cross")
    assert code == 1
    (scenario,) = report["scenarios"]
    assert scenario["status"] == "failed"
    assert {c["status"] for c in scenario["cases"]} == {"failed"}
    assert all(c["message"].startswith("expected GPUs (--require-gpu): ") for c in scenario["cases"])
