"""Host mode against a real local torch: ``distval run --host`` with torch 2.15.0 from PyPI in a venv.

What it costs (measured here, 2 cores, Python 3.11): the venv is built once and reused by content
(tests/host_venv.py) under ~/.cache/distval. Building it downloaded 813 MiB (torch, triton, numpy
and a few more for this Python; the 24 interpreter-independent nvidia-* wheels, about 2.1 GB, were
hard-linked from the torch 2.15 fixture's download) and took 155 s; the venv takes 5.4 GB on disk,
the wheels 2.9 GB (of which 813 MiB are new when the fixture's are there). Without the fixture's
wheels, add about 2.1 GB and their download time. Once built: the default config in host mode
takes about 50 s, the NCCL skip a few seconds.

Marked ``host``; needs PyPI the first time. Where the venv cannot be built the tests are skipped with
the reason, and ``--require-docker`` (CI's flag for "everything must run") turns that into a failure.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from distval.cli.main import main
from tests.docker_helpers import DEFAULT_CONFIG, DEFAULT_LAYOUTS, GOOD, cases, layout_key, outcome, unavailable
from tests.host_venv import torch_venv

# CI runs this file in its second process (.ci/run): alone in a CI run, images built, it kept 64 % of the 2 cores
# busy (115.3 s with the venv built; 2026-12-07, /proc/stat every 10 s); tests/budgets.py WAITING_S holds its budget.
pytestmark = [pytest.mark.host, pytest.mark.waits]
# The container run of the same config on the same torch (tests/suite/test_suite_docker.py): its skips.
CONTAINER_FIXTURE = "distval-fixtures/torch:2.15-pypi"


@pytest.fixture(scope="session")
def torch_python(pytestconfig: pytest.Config) -> str:
    try:
        python = torch_venv(lambda line: print(line, flush=True))
    except (OSError, RuntimeError) as exc:
        unavailable(pytestconfig, f"cannot build the venv with torch from PyPI for host mode: {exc}")
    return str(python)


def run(args: list[str], junit: Path) -> tuple[int, dict[tuple[str, str], tuple[str, str]], ET.Element]:
    """Exit code, every testcase's (outcome, message) by (suite name, testcase), and the JUnit root."""
    code = main(["run", *args, "--junit", str(junit), "--quiet"])
    root = ET.parse(junit).getroot()
    for suite in root.findall("testsuite"):
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert properties["mode"] == "host", properties
    return code, {key: outcome(case) for key, case in cases(root).items()}, root


def test_default_config_passes_with_the_container_runs_verdicts(torch_python: str, tmp_path: Path) -> None:
    code, found, root = run(["--local", "--python", torch_python, DEFAULT_CONFIG], tmp_path / "results.xml")
    assert code == 0, found
    expected_skips, timeout_path = GOOD[CONTAINER_FIXTURE]
    by_topology: dict[str, dict[str, tuple[str, str]]] = {}
    for (suite, name), verdict in found.items():
        assert suite.endswith(" [host]"), suite
        by_topology.setdefault(layout_key(suite.removesuffix(" [host]")), {})[name] = verdict
    assert set(by_topology) == set(DEFAULT_LAYOUTS)
    for topology, verdicts in by_topology.items():
        # The same verdict per (scenario, check) as the container run: passed, except its skips (none), and the
        # environment check, which the local target declares it cannot run (no image's environment starts the ranks).
        skipped = {n for n, (status, _) in verdicts.items() if status == "skipped"}
        assert skipped == expected_skips | {"environment"}, topology
        assert "the local target cannot give it: its ranks start from this host" in verdicts["environment"][1]
        assert {status for status, _ in verdicts.values()} <= {"passed", "skipped"}, verdicts
        assert sum(1 for name in verdicts if name.startswith("collectives.")) == 19
        for name in ("env", "identity", "process_group", "launch", "all_reduce", "ddp_sync", "ddp_sampler", "store"):
            assert verdicts[name][0] == "passed", (topology, name, verdicts[name])
    # The same timeout path as in the container: torch 2.15's set_timeout() on a live group.
    outputs = [c.findtext("system-out") or "" for c in root.iter("testcase") if c.get("name") == "timeout"]
    assert len(outputs) == len(DEFAULT_LAYOUTS) and all(f"(timeout via {timeout_path}" in text for text in outputs), outputs


def test_an_nccl_scenario_without_gpus_is_skipped_with_the_measured_reason(
    torch_python: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    count = subprocess.run(
        [torch_python, "-c", "import torch; print(torch.cuda.device_count())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if int(count) >= 2:
        pytest.skip(f"this host's torch sees {count} GPUs: the NCCL scenario would run, not skip")
    config = tmp_path / "nccl.yaml"
    config.write_text("backend: nccl\nscenarios:\n  - {topology: cross-container, world_size: 2, checks: [env, all_reduce]}\n")
    code, found, _ = run(["--local", "--python", torch_python, str(config)], tmp_path / "results.xml")
    assert code == 5  # nothing was validated: not 0, not the image's failure
    assert "nothing was validated" in capfd.readouterr().out
    assert [name for _, name in found] == ["process_group", "env", "all_reduce"]
    for status, message in found.values():
        assert status == "skipped"
        assert f"the scenario needs 2 GPU(s), one per NCCL rank; the local torch sees {count} (" in message
