"""Diagnosis against the real Engine: the stacks of a hung rank, the flight recorder's comparison (torch
2.15) and its stated absence (2.6), a dead worker's root-cause traceback, and TORCH_DISTRIBUTED_DEBUG=DETAIL
naming a collective mismatch. Each with a broken fixture image that fails in exactly that way."""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distval.config import load_config
from distval.errors import EngineError
from distval.plan.model import ScenarioPlan
from distval.reports.json_report import json_report
from distval.reports.junit import render_junit
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.run.events import NoEvents
from distval.targets.docker.engine import Engine
from distval.targets.docker.plan import RESULTS_DIR
from distval.targets.docker.runtime import run_scenario
from distval.targets.docker.stacks import before_kill
from distval.targets.engines.planning import plan_run
from tests.docker_helpers import leftovers

pytestmark = pytest.mark.docker

HANGS = "distval-fixtures/broken:allreduce-hangs"  # torch 2.6: all_reduce sleeps in Python forever
STALLS = "distval-fixtures/broken:allreduce-stalls-rank1"  # torch 2.15: rank 0 waits inside gloo for rank 1
DIES = "distval-fixtures/broken:shutdown-raises-rank1"
MISMATCH = "distval-fixtures/broken:collective-mismatch"


class Notes(NoEvents):
    """Keeps the runtime's notes: before_kill says how long the diagnosis took."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def note(self, plan: ScenarioPlan | None, line: str) -> None:
        self.lines.append(line)


def run_config(tmp_path: Path, docker_client: object, text: str, image: str) -> tuple[ScenarioResult, RunSummary, Notes]:
    """One scenario through the runtime, as `distval run` runs it; nothing of it may be left behind."""
    config = tmp_path / "diag.yaml"
    config.write_text(text)
    run_id = "d" + secrets.token_hex(4)
    (plan,) = plan_run(load_config(config), run_id, image).scenarios
    notes = Notes()
    engine = Engine(run_id)
    try:
        outcome = run_scenario(engine, plan, notes)
    finally:
        engine.remove_labelled()
    assert leftovers(docker_client, run_id) == [], "the run left containers or networks behind"
    result = summarize_scenario(outcome)
    for c in result.cases:  # shown with -s, and on failure
        print(f"{c.name}: {c.status} in {c.duration_s:.1f} s: {c.message[:300]}")
    print(f"scenario: {outcome.duration_s:.1f} s; notes: {notes.lines}")
    return result, RunSummary(run_id, (result,)), notes


def case(result: ScenarioResult, name: str) -> Any:
    return next(c for c in result.cases if c.name == name)


def junit_case(summary: RunSummary, name: str) -> ET.Element:
    root = ET.fromstring(render_junit(summary))
    return next(c for c in root.iter("testcase") if c.get("name") == name)


def diagnosis_seconds(notes: Notes) -> list[float]:
    return [
        float(m.group(1)) for line in notes.lines for m in [re.search(r"collected in ([0-9.]+) s before the kill", line)] if m
    ]


# The deadline must only outlast both ranks' start up to the hung all_reduce (torch 2.6); each second of it is a
# second of CI. Measured 2026-12-06 on 2 cores: an env-only scenario from its start to its exit 13-15 s at load
# 10-11 and 50-64 s at load 20-26, a fault scenario's first all_reduce done 61 s after its start at load 25; 75 s
# (which this test passed at load 15 and 21) left 11 s of it. 90 s is the worst, 64 s, plus 40 % (up to 150 s at
# load 30 before).
HUNG_DEADLINE_S = 90
HUNG = """timeout_s: {deadline}
collective_timeout_s: 300
check_timeout_s: 300
scenarios:
  - {{topology: cross-container, world_size: 2, checks: [env, all_reduce]}}
"""


@pytest.mark.waits
def test_stacks_of_a_hung_rank_are_in_the_reports_and_the_flight_recorder_absence_is_stated(
    fixture_image: Callable[[str], str], docker_client: object, tmp_path: Path
) -> None:
    """all_reduce never returns on torch 2.6: at the deadline each rank's Python stacks (taken by SIGUSR1
    before the kill) name the frame it hangs in, in the JUnit failure and the JSON report; the flight
    recorder is said to be missing from this torch, in words measured inside the image."""
    image = fixture_image(HANGS)
    result, summary, notes = run_config(tmp_path, docker_client, HUNG.format(deadline=HUNG_DEADLINE_S), image)
    exit_case = case(result, "exit_status")
    assert exit_case.status == "error", exit_case
    assert f"was still running at the {HUNG_DEADLINE_S} s deadline" in exit_case.message
    for rank in (0, 1):
        assert f"rank {rank} stacks:" in exit_case.message, exit_case.message
    assert "_all_reduce_that_never_returns (sitecustomize.py:" in exit_case.message, exit_case.message
    failure = junit_case(summary, "exit_status").find("error")
    assert failure is not None and failure.text is not None
    assert "rank 1: Python stacks at SIGUSR1 before the kill" in failure.text
    assert "in _all_reduce_that_never_returns" in failure.text and "check_all_reduce" in failure.text
    report = json_report(summary)["scenarios"][0]["diagnosis"]
    ranks = {entry["rank"]: entry for entry in report["ranks"]}
    assert set(ranks) == {0, 1}
    for entry in ranks.values():
        assert "_all_reduce_that_never_returns" in entry["stacks"], entry
        assert entry["flight_recorder"]["available"] is False
        assert "torch 2.6.0" in entry["flight_recorder"]["reason"] and "no flight recorder" in entry["flight_recorder"]["reason"]
    assert report["flight_recorder_summary"].startswith("not available: torch 2.6.0")
    took = diagnosis_seconds(notes)
    assert len(took) == 2, notes.lines  # one per container
    print(f"diagnosis before the kill took {max(took):.2f} s (per container: {took})")
    # WAIT_S + EXEC_MARGIN_S, the code's own bound; measured 0.7 s at load 15, 1.2 s at 21 (2026-12-06), 3.9 s at 30.
    assert max(took) < 23.0


@pytest.mark.waits
def test_flight_recorder_compares_the_ranks_last_collectives_on_torch_2_15(
    fixture_image: Callable[[str], str], docker_client: Any, tmp_path: Path
) -> None:
    """Rank 1 never enters all_reduce while rank 0 waits inside gloo for it: torch 2.15's flight recorder
    (dumped on request by the suite's thread, not a signal handler: rank 0 is blocked in C++) shows rank 0
    one collective ahead, and rank 0's stack was still taken inside the C++ wait. The diagnosis runs once
    rank 0 has formed its group (not at a fixed deadline: torch 2.15's start took over 240 s at a load of
    35 here), through the same before_kill the deadline calls; then the run is stopped."""
    image = fixture_image(STALLS)
    config = tmp_path / "fr.yaml"
    config.write_text(HUNG.format(deadline=900))
    run_id = "d" + secrets.token_hex(4)
    (plan,) = plan_run(load_config(config), run_id, image).scenarios
    engine, notes, stop = Engine(run_id), Notes(), threading.Event()
    outcomes: list[ScenarioOutcome] = []
    runner = threading.Thread(target=lambda: outcomes.append(run_scenario(engine, plan, notes, stop)), daemon=True)
    runner.start()
    try:
        formed_at = None
        give_up = time.monotonic() + 800
        while runner.is_alive() and time.monotonic() < give_up:
            running = {c.name: c for c in docker_client.containers.list(filters={"label": f"distval.run={run_id}"})}
            n0 = running.get(plan.containers[0].name)
            if formed_at is None and n0 is not None:
                try:
                    rank0 = engine.read_files(n0, RESULTS_DIR).get("rank-0.jsonl", b"")
                except EngineError:
                    rank0 = b""
                if b'"process_group"' in rank0:
                    formed_at = time.monotonic()
            if formed_at is not None and time.monotonic() - formed_at > 10 and len(running) == 2:
                took_s = before_kill(engine, running, plan, notes)
                print(f"diagnosis took {took_s:.2f} s")
                break
            time.sleep(1)
        stop.set()
        runner.join(300)
    finally:
        engine.remove_labelled()
    assert leftovers(docker_client, run_id) == [], "the run left containers or networks behind"
    assert formed_at is not None, f"rank 0 never formed its group; notes: {notes.lines}"
    (outcome,) = outcomes
    result = summarize_scenario(outcome)
    summary = RunSummary(run_id, (result,))
    report = json_report(summary)["scenarios"][0]["diagnosis"]
    ranks = {entry["rank"]: entry for entry in report["ranks"]}
    print(json.dumps(report, indent=1)[:3000])
    assert ranks[0]["flight_recorder"]["available"] is True, ranks[0]
    last0 = ranks[0]["flight_recorder"]["last"][-1]
    assert last0["name"] == "gloo:all_reduce", ranks[0]
    last1 = ranks[1]["flight_recorder"]["last"]
    summary_line = report["flight_recorder_summary"]
    if last1:  # rank 1 is behind: its last collective is an earlier one
        assert last1[-1]["seq"] < last0["seq"], (last0, last1)
        assert summary_line == (
            f"rank 1 is at {last1[-1]['name']} #{last1[-1]['seq']}, rank 0 at gloo:all_reduce #{last0['seq']}"
        ), summary_line
    else:
        assert summary_line == f"rank 0 is at gloo:all_reduce #{last0['seq']}, rank(s) 1 recorded none", summary_line
    assert "check_all_reduce" in ranks[0]["stacks_text"], ranks[0]["stacks_text"]
    assert "_all_reduce_that_stalls_on_rank_one" in ranks[1]["stacks_text"], ranks[1]["stacks_text"]
    assert dict(result.properties)["flight_recorder"] == summary_line
    exit_case = case(result, "exit_status")
    assert f"flight recorder: {summary_line}" in exit_case.message, exit_case.message


def test_a_worker_that_dies_shows_its_root_cause_traceback(
    fixture_image: Callable[[str], str], docker_client: object, tmp_path: Path
) -> None:
    """Rank 1's worker dies with an exception after its checks: the report shows the traceback from
    torchrun's error file (TORCHELASTIC_ERROR_FILE, distval_suite.main wrapped with record), not "exit code 1"."""
    image = fixture_image(DIES)
    text = "timeout_s: 300\nscenarios:\n  - {topology: in-container, world_size: 2, checks: [all_reduce]}\n"
    result, summary, _ = run_config(tmp_path, docker_client, text, image)
    exit_case = case(result, "exit_status")
    assert exit_case.status == "error", exit_case
    assert (
        "exited with code 1: root cause (torchelastic error file): RuntimeError: distval-broken: destroy_process_group "
        "failed on rank 1" in exit_case.message
    ), exit_case.message
    assert "Traceback (most recent call last)" in exit_case.output and "_destroy_that_raises_on_rank_one" in exit_case.output
    cause = json_report(summary)["scenarios"][0]["diagnosis"]["root_cause"]
    assert "destroy_process_group failed on rank 1" in cause["message"] and "sitecustomize.py" in cause["traceback"]
    assert case(result, "all_reduce").status == "passed"


def test_distributed_debug_detail_names_the_collective_mismatch(
    fixture_image: Callable[[str], str], docker_client: object, tmp_path: Path
) -> None:
    """Rank 1 broadcasts where rank 0 all-reduces; with distributed_debug: detail torch's wrapper compares the
    collectives' fingerprints first and its message reaches the all_reduce testcase."""
    image = fixture_image(MISMATCH)
    text = (
        "timeout_s: 150\ncollective_timeout_s: 60\ndistributed_debug: detail\n"
        "scenarios:\n  - {topology: cross-container, world_size: 2, checks: [all_reduce]}\n"
    )
    started = time.monotonic()
    result, summary, _ = run_config(tmp_path, docker_client, text, image)
    all_reduce = case(result, "all_reduce")
    assert all_reduce.status == "error", all_reduce
    assert "Detected mismatch between collectives on ranks" in all_reduce.message, all_reduce.message
    assert "BROADCAST" in all_reduce.message and "ALLREDUCE" in all_reduce.message, all_reduce.message
    env = dict(result.plan.containers[0].env)
    assert env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
    assert json.dumps(json_report(summary))  # the report renders
    assert time.monotonic() - started < 150
