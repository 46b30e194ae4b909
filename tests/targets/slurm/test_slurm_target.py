"""distval run --target slurm without a cluster: Slurm's client as a stand-in that keeps a job running until scancel.
The job is cancelled at the deadline, on a stop (Ctrl-C, SIGTERM: the run sets ``stop``) and by close; every
outcome of a cancelled job fails closed (tests/targets/slurm/test_slurm_docker.py runs the real cluster)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from distval.config import load_config
from distval.errors import EnvironmentUnusable
from distval.plan.model import ScenarioPlan
from distval.results.outcome import EXIT_STATUS_CASE
from distval.results.scenario import summarize_scenario
from distval.targets.registry import choose_target
from distval.targets.slurm import jobs
from distval.targets.slurm.target import SlurmTarget
from tests.paths import ROOT
from tests.reproduce_helpers import reproduced, run_options, same_target

IMAGE = "distval-fixtures/torch:2.6-debian"
NO_EVENTS: Any = None  # the slurm target tells no phases


class Slurm:
    """sbatch, scontrol, squeue, scancel, sinfo: one job that runs until it is cancelled."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.state = "PENDING"

    def run(self, argv: Sequence[str], timeout_s: float = 30.0) -> tuple[int, str]:
        self.calls.append(list(argv))
        if argv[0] == "sbatch":
            self.state = "RUNNING"
            return 0, "7\n"
        if argv[0] == "scancel":
            self.state = "CANCELLED"
            return 0, ""
        if argv[0] == "scontrol":
            return 0, f"JobId=7 JobName=x JobState={self.state} Reason=None StartTime=2026-12-04T22:00:00 NodeList=c[1-2]"
        return 0, ""


def _target(tmp_path: Path, slurm: Slurm) -> SlurmTarget:
    return SlurmTarget(slurm, str(tmp_path / "jobs"), IMAGE, "configs/default.yaml", "apptainer")


def _plan(target: SlurmTarget, timeout_s: float | None = None) -> ScenarioPlan:
    config = load_config(str(ROOT / "configs" / "default.yaml"))
    scenario = next(s for s in config.scenarios if s.name == "cross-container-2ranks")
    plan = target.plan_scenario(scenario, "r1", "cross-container-2ranks")
    if timeout_s is not None:
        plan = dataclasses.replace(plan, scenario=dataclasses.replace(plan.scenario, timeout_s=timeout_s))
    return plan


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs, "POLL_S", 0.01)
    monkeypatch.setattr(jobs, "UNREADABLE_WAIT_S", 0.0)


def test_a_job_past_its_deadline_is_cancelled_and_fails_closed(tmp_path: Path) -> None:
    slurm = Slurm()
    target = _target(tmp_path, slurm)
    plan = _plan(target, timeout_s=0.3)
    started = time.monotonic()
    outcome = target.execute(plan, NO_EVENTS, threading.Event())
    assert time.monotonic() - started < 10
    assert ["scancel", "7"] in slurm.calls and slurm.state == "CANCELLED"
    result = summarize_scenario(outcome)
    exit_case = next(c for c in result.cases if c.name == EXIT_STATUS_CASE)
    assert exit_case.status == "error" and "past its deadline" in exit_case.message
    assert all(c.status != "passed" for c in result.cases)


def test_a_stop_cancels_the_job_at_once(tmp_path: Path) -> None:
    slurm = Slurm()
    target = _target(tmp_path, slurm)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    outcome = target.execute(_plan(target), NO_EVENTS, stop)
    assert slurm.state == "CANCELLED"
    assert "stopped (Ctrl-C or SIGTERM)" in summarize_scenario(outcome).cases[-1].message


def test_close_cancels_every_job_still_running(tmp_path: Path) -> None:
    slurm = Slurm()
    target = _target(tmp_path, slurm)
    worker = threading.Thread(target=target.execute, args=(_plan(target), NO_EVENTS, threading.Event()), daemon=True)
    worker.start()
    while slurm.state != "RUNNING":
        time.sleep(0.01)
    target.interrupted()
    assert slurm.state == "CANCELLED"
    worker.join(10)
    assert not worker.is_alive()


def test_an_interrupt_raised_while_following_cancels_the_job(tmp_path: Path) -> None:
    """A run of one scenario executes it in the main thread, where Ctrl-C and SIGTERM raise: the job is cancelled
    before the exception leaves execute (measured on the real cluster: it kept running until this)."""

    class Interrupting(Slurm):
        def run(self, argv: Sequence[str], timeout_s: float = 30.0) -> tuple[int, str]:
            if argv[0] == "scontrol" and self.state == "RUNNING" and ["scancel", "7"] not in self.calls:
                self.calls.append(list(argv))
                raise KeyboardInterrupt
            return super().run(argv, timeout_s)

    slurm = Interrupting()
    target = _target(tmp_path, slurm)
    with pytest.raises(KeyboardInterrupt):
        target.execute(_plan(target), NO_EVENTS, threading.Event())
    assert ["scancel", "7"] in slurm.calls and slurm.state == "CANCELLED"


HICCUP = "slurm_load_jobs error: Socket timed out on send/recv operation"


class Hiccups(Slurm):
    """scontrol answers ``unreadable`` times (exit code 0, no job record) while the job runs, then as before; the
    job ends COMPLETED at the first readable answer after them."""

    def __init__(self, unreadable: int) -> None:
        super().__init__()
        self.unreadable = unreadable

    def run(self, argv: Sequence[str], timeout_s: float = 30.0) -> tuple[int, str]:
        if argv[0] == "scontrol" and self.state == "RUNNING":
            if self.unreadable > 0:
                self.unreadable -= 1
                self.calls.append(list(argv))
                return 0, HICCUP
            self.state = "COMPLETED"
        return super().run(argv, timeout_s)


def test_an_unreadable_scontrol_answer_is_asked_again() -> None:
    slurm = Hiccups(jobs.UNREADABLE_TRIES - 1)
    jobs.submit(slurm, "job.sbatch")
    state = jobs.follow(slurm, "7", time.monotonic() + 60, threading.Event())
    assert state.state == "COMPLETED"
    assert slurm.calls.count(["scontrol", "--oneliner", "show", "job", "7"]) == jobs.UNREADABLE_TRIES


class Unreachable(Slurm):
    """While the job runs, scontrol and squeue both fail ``silent`` times (exit code 1, or 124: no answer within
    COMMAND_TIMEOUT_S), as when slurmctld is restarting or too busy to answer; the job ends COMPLETED at the first
    answer after them. ``forgotten``: after one answer that it runs, scontrol fails and squeue answers without the
    job (exit code 0, nothing)."""

    def __init__(self, silent: int, code: int = 1, forgotten: bool = False) -> None:
        super().__init__()
        self.silent, self.code, self.forgotten = silent, code, forgotten

    def run(self, argv: Sequence[str], timeout_s: float = 30.0) -> tuple[int, str]:
        if argv[0] in ("scontrol", "squeue") and self.state == "RUNNING":
            if self.silent > 0:
                self.calls.append(list(argv))
                if argv[0] == "squeue":
                    self.silent -= 1
                return self.code, HICCUP
            if self.forgotten and any(call[0] == "scontrol" for call in self.calls):
                self.calls.append(list(argv))
                return (1, "slurm_load_jobs error: Invalid job id specified") if argv[0] == "scontrol" else (0, "")
            if not self.forgotten:
                self.state = "COMPLETED"
        return super().run(argv, timeout_s)


@pytest.mark.parametrize("code", [1, 124])
def test_a_controller_that_does_not_answer_is_asked_again_not_taken_for_the_jobs_end(code: int) -> None:
    slurm = Unreachable(jobs.UNREADABLE_TRIES - 1, code)
    jobs.submit(slurm, "job.sbatch")
    state = jobs.follow(slurm, "7", time.monotonic() + 60, threading.Event())
    assert state.state == "COMPLETED"  # before: UNKNOWN at the first silence, the job left running
    assert slurm.calls.count(["squeue", "--noheader", "--jobs", "7", "--format=%T %R"]) == jobs.UNREADABLE_TRIES - 1


@pytest.mark.parametrize(
    ("silent", "says"),
    [
        (
            Hiccups,
            f"scontrol show job 7 answered {jobs.UNREADABLE_TRIES} times in a row without the job's state; the last "
            f"answer: {HICCUP}",
        ),
        (
            Unreachable,
            f"scontrol show job 7 and squeue --jobs 7 answered {jobs.UNREADABLE_TRIES} times in a row without the job's "
            f"state; the last answer: scontrol exited 1: {HICCUP}; squeue exited 1: {HICCUP}",
        ),
    ],
)
def test_answers_without_the_jobs_state_in_a_row_stop_the_run_with_the_last_and_cancel_the_job(
    tmp_path: Path, silent: type[Hiccups | Unreachable], says: str
) -> None:
    slurm = silent(jobs.UNREADABLE_TRIES)
    target = _target(tmp_path, slurm)
    with pytest.raises(EnvironmentUnusable) as raised:
        target.execute(_plan(target), NO_EVENTS, threading.Event())
    assert str(raised.value) == says
    assert ["scancel", "7"] in slurm.calls and slurm.state == "CANCELLED"


def test_a_job_squeue_answers_without_is_gone() -> None:
    # Slurm answered (squeue, exit code 0) and holds no such job: its end went unseen, which follow says.
    slurm = Unreachable(0, forgotten=True)
    jobs.submit(slurm, "job.sbatch")
    state = jobs.follow(slurm, "7", time.monotonic() + 60, threading.Event())
    assert (state.state, state.reason) == ("UNKNOWN", "Slurm no longer knows the job")


def test_a_jobs_results_are_reproduced_on_slurm_with_the_options_given(tmp_path: Path) -> None:
    """The outcome's plan is the job's plan file's (collect.py): its reproduce command still says --target slurm."""
    options = run_options(["--target", "slurm", "--integration", "apptainer", "--slurm-dir", str(tmp_path), "--image", IMAGE])
    target = choose_target(options, load_config(str(ROOT / "configs" / "default.yaml")), _no_engine, lambda _line: None)
    assert isinstance(target, SlurmTarget)
    target.commands = Slurm()
    result = summarize_scenario(target.execute(_plan(target, timeout_s=0.3), NO_EVENTS, threading.Event()))
    again = reproduced(result)
    assert again[3:8] == ["--target", "slurm", "--slurm-dir", str(tmp_path), "--integration"]
    same_target(options, again, "cross-container-2ranks")


def _no_engine(_run_id: str) -> Any:
    raise AssertionError("the slurm target asks no Engine")
