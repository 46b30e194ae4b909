"""The beside-helper (distval/targets/docker/beside.py) against the real Engine: from distval's own image, with
only its declared capabilities, it finds and signals the workers of a paused container whose ranks run as
root or as another user, and a freeze scenario's frozen rank still has its stacks. Marked ``docker``."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from distval.images import REAPER_ENTRYPOINT, REAPER_IMAGE
from distval.labels import LABEL_MANAGED, LABEL_RUN
from distval.targets.docker.engine import Engine
from distval.targets.docker.processes import signal_workers_beside
from tests.docker_helpers import leftovers
from tests.paths import ROOT

pytestmark = pytest.mark.docker
# A stand-in worker: its command line names distval_suite.main and its environment has RANK, as a suite worker's
# does; SIGUSR1 makes it print and exit.
WORKER = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGUSR1, lambda *_: (print('got SIGUSR1', flush=True), sys.exit(0)))\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def run_id(docker_client: Any) -> Iterator[str]:
    run_id = "b" + secrets.token_hex(4)
    yield run_id
    for container in docker_client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"}):
        container.remove(force=True, v=True)


@pytest.mark.parametrize("user", ["0:0", "1000:1000"])
def test_the_beside_helper_signals_a_paused_containers_workers(
    user: str, run_id: str, fixture_image: Callable[[str], str], docker_client: Any
) -> None:
    fixture_image(REAPER_IMAGE)  # the stand-in rank's image too: small, with a python
    rank = docker_client.containers.create(
        REAPER_IMAGE,
        entrypoint=[REAPER_ENTRYPOINT[0], "-c", WORKER, "-m", "distval_suite.main"],
        command=[],
        name=f"distval-{run_id}-n0",
        user=user,
        environment={"RANK": "1", "LOCAL_RANK": "0"},
        labels={LABEL_MANAGED: "true", LABEL_RUN: run_id},
        network_mode="none",
        detach=True,
    )
    rank.start()
    deadline = time.monotonic() + 60
    while b"ready" not in rank.logs() and time.monotonic() < deadline:
        time.sleep(0.2)
    rank.pause()
    engine = Engine(run_id, client=docker_client)
    workers = signal_workers_beside(engine, rank, signal.SIGUSR1)
    assert [(w.rank, w.local_rank, w.error) for w in workers] == [(1, 0, None)], workers
    rank.unpause()
    assert rank.wait(timeout=30)["StatusCode"] == 0
    assert b"got SIGUSR1" in rank.logs()
    # The helper removed itself; only the stand-in rank is left.
    assert leftovers(docker_client, run_id) == [f"distval-{run_id}-n0"]


CONFIG = """
version: 1
backend: gloo
timeout_s: 300
collective_timeout_s: 60
check_timeout_s: 120
scenarios:
  - name: freeze-2x1
    topology: cross-container
    world_size: 2
    checks: [all_reduce, {name: collective_loop, args: {duration_s: 60, timeout_s: 10}}]
    faults: [{kind: freeze, node: 1, after: {check: all_reduce, delay_s: 2}}]
    expect:
      # configs/faults.yaml's freeze-2x1 window: the loop's 10 s timeout; 10.03-10.52 s at load 10-25 (2026-12-06)
      - {ranks: survivors, error: timeout, within_s: [8, 16]}
"""


@pytest.mark.waits
def test_a_frozen_ranks_stacks_are_collected_from_beside_it(
    fixture_image: Callable[[str], str], docker_client: Any, tmp_path: Path
) -> None:
    image = fixture_image("distval-fixtures/torch:2.6-debian")
    fixture_image(REAPER_IMAGE)
    config = tmp_path / "freeze.yaml"
    config.write_text(CONFIG)
    report = tmp_path / "report.json"
    run_id = "b" + secrets.token_hex(4)
    done = subprocess.run(
        [sys.executable, "-m", "distval", "run", str(config), "--image", image, "--json", str(report)]
        + ["--run-id", run_id, "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert leftovers(docker_client, run_id) == [], "the run left containers or networks behind"
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    (scenario,) = json.loads(report.read_text())["scenarios"]
    frozen = {r["rank"]: r for r in scenario["diagnosis"]["ranks"]}
    assert set(frozen) == {0, 1}, scenario["diagnosis"]
    # Signalled from beside it while paused, delivered as it thawed: where the freeze held it.
    assert "check_collective_loop" in frozen[1]["stacks_text"] and "_linger" not in frozen[1]["stacks_text"], frozen[1]
