"""Elastic restart against the real Engine: with c10d rendezvous and max_restarts, a worker SIGKILLed mid-run
(through processes.signal_workers, in the running container found by its distval labels) is restarted by
torchrun, the job completes, the report says one restart happened and which store the workers used, and the
failed attempt's records neither count twice nor turn the verdict red."""

from __future__ import annotations

import json
import secrets
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.config import load_config
from harness.engine import Engine
from harness.errors import EngineError
from harness.events import NoEvents
from harness.plan import RESULTS_DIR, plan_run
from harness.processes import signal_workers
from harness.results import ScenarioOutcome, summarize_scenario
from harness.runtime import run_scenario
from tests.docker_helpers import leftovers

pytestmark = pytest.mark.docker

IMAGE = "distval-fixtures/torch:2.6-debian"
CHECKS = "[env, all_reduce, collectives]"  # collectives runs for seconds: time to kill a worker inside it
CONFIG = """timeout_s: {timeout_s}
collective_timeout_s: 60
check_timeout_s: {check_timeout_s}
scenarios:
  - {{topology: cross-container, world_size: 2, rendezvous: c10d, max_restarts: 1, share_rdzv_store: {share},
      rdzv_join_timeout_s: 60, checks: {checks}}}
"""


def records_of(engine: Engine, container: Any, rank: int) -> list[dict[str, Any]]:
    try:
        files = engine.read_files(container, RESULTS_DIR)
    except EngineError:
        return []
    data = files.get(f"rank-{rank}.jsonl", b"").decode("utf-8", "replace")
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def run_and_kill_rank1(
    fixture_image: Callable[[str], str], docker_client: Any, tmp_path: Path, text: str
) -> tuple[ScenarioOutcome, str | None]:
    """Run the scenario; once rank 1 has written a record, SIGKILL its worker wherever c10d put it."""
    image = fixture_image(IMAGE)
    config = tmp_path / "restart.yaml"
    config.write_text(text)
    run_id = "r" + secrets.token_hex(4)
    (plan,) = plan_run(load_config(config), run_id, image).scenarios
    engine = Engine(run_id)
    outcomes: list[ScenarioOutcome] = []
    runner = threading.Thread(target=lambda: outcomes.append(run_scenario(engine, plan, NoEvents())), daemon=True)
    runner.start()
    killed_in: str | None = None
    try:
        # Rank 1 has finished its first check: kill its worker, wherever c10d put it.
        deadline = time.monotonic() + 400
        while killed_in is None and time.monotonic() < deadline and runner.is_alive():
            for container in docker_client.containers.list(filters={"label": f"distval.run={run_id}"}):
                if records_of(engine, container, 1):
                    try:
                        killed = signal_workers(engine, container, plan.scenario.python, signal.SIGKILL, ranks=[1])
                    except EngineError:
                        continue
                    if killed and killed[0].error is None:
                        killed_in = container.name
                        break
            time.sleep(0.5)
        runner.join(600)
    finally:
        engine.remove_labelled()
    assert leftovers(docker_client, run_id) == [], "the run left containers or networks behind"
    (outcome,) = outcomes
    return outcome, killed_in


def test_a_killed_worker_is_restarted_and_the_job_completes(
    fixture_image: Callable[[str], str], docker_client: Any, tmp_path: Path
) -> None:
    text = CONFIG.format(timeout_s=500, check_timeout_s=200, share="false", checks=CHECKS)
    outcome, killed_in = run_and_kill_rank1(fixture_image, docker_client, tmp_path, text)
    assert killed_in is not None, "rank 1's worker was never seen running after its first check"
    result = summarize_scenario(outcome)
    for case in result.cases:
        print(f"{case.name}: {case.status}: {case.message[:200]}")
    properties = dict(result.properties)
    print(f"killed rank 1 in {killed_in}; restarts {properties.get('restarts')}; store {properties.get('rendezvous_store')}")
    assert {c.name: c.status for c in result.cases if c.status != "passed" and c.status != "skipped"} == {}, result.cases
    assert properties["restarts"] == "1"
    assert "after 1 torchrun restart(s)" in result.cases[-1].message
    assert properties["rendezvous_store"] == (
        "a store of the workers' own, not the agent's (TORCHELASTIC_USE_AGENT_STORE=False) (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)"
    )
    # The failed attempt's records are still in the files, and only the last attempt's counted: one
    # testcase per check, each passed.
    attempts = {
        json.loads(line).get("attempt")
        for container in outcome.containers
        for name, data in container.result_files.items()
        if name.startswith("rank-")
        for line in data.decode().splitlines()
        if line.strip()
    }
    assert attempts == {0, 1}
    assert [c.name for c in result.cases if not c.name.startswith("collectives.")] == [
        "env",
        "process_group",
        "all_reduce",
        "exit_status",
    ]
