"""The scenarios of a plan run on a target: up to ``jobs`` at once, each one's outcome summarized as it ends, and
every worker told to stop (and to remove what it created) when the run is interrupted. ``ScenarioRuns`` holds what
every run of the run stage shares (the target, the progress display, --require-gpu, --fail-on-skip): a scenario's
first run, and its runs again (--baseline's re-measures, --reference's later pairs)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from distval.plan.model import ScenarioPlan
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import ScenarioResult, summarize_scenario
from distval.run.events import RunEvents
from distval.run.interrupts import signals_deferred
from distval.targets.base import Target

Execute = Callable[[ScenarioPlan, RunEvents, threading.Event], ScenarioOutcome]


def default_jobs() -> int:
    """Scenarios at once by default: one per core, at most one per 4 GiB of memory, at most 8."""
    cores = os.cpu_count() or 1
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**30
    return max(1, min(cores, memory_gib // 4, 8))


@dataclass(frozen=True)
class ScenarioRuns:
    """The run's scenarios on its open target, with the run's progress display and verdict options."""

    target: Target
    events: RunEvents
    require_gpu: bool
    fail_on_skip: bool

    def first(self, plans: tuple[ScenarioPlan, ...], jobs: int) -> list[ScenarioResult]:
        """Each scenario's own run; the target settles each as it ends (--keep-on-failure keeps a failed one's)."""
        target = self.target
        return run_scenarios(target.execute, plans, self.events, jobs, self.require_gpu, self.fail_on_skip, target.settle)

    def again(self, plans: tuple[ScenarioPlan, ...], jobs: int = 1) -> list[ScenarioResult]:
        """A re-measure or a later run of a pair: never kept."""
        return run_scenarios(self.target.execute_again, plans, self.events, jobs, self.require_gpu, self.fail_on_skip)


def run_scenarios(
    execute: Execute,
    plans: tuple[ScenarioPlan, ...],
    events: RunEvents,
    jobs: int,
    require_gpu: bool = False,
    fail_on_skip: bool = False,
    settle: Callable[[ScenarioResult], None] | None = None,
) -> list[ScenarioResult]:
    """Run the scenarios with ``execute`` (a runtime), up to ``jobs`` at once; their results in plan order.

    The workers share the Engine client (docker-py's connection pool serves concurrent requests). On
    Ctrl-C or SIGTERM (raised in this thread) the workers are told to stop, kill their containers and
    clean up before this re-raises. ``events`` must be safe to call from the worker threads (the progress
    display locks inside). ``settle``: called with each scenario's result as it finishes (--keep-on-failure
    keeps or removes its resources then).
    """
    stop = threading.Event()

    def run_one(index: int, scenario_plan: ScenarioPlan) -> ScenarioResult:
        events.scenario_started(scenario_plan, index, len(plans))
        started_at = time.time()  # the reports' timestamps and the run's wall-clock time (first start to last end)
        result = summarize_scenario(execute(scenario_plan, events, stop), require_gpu=require_gpu, fail_on_skip=fail_on_skip)
        result = dataclasses.replace(result, started_at=started_at)
        if settle is not None:
            settle(result)
        events.scenario_finished(result)
        return result

    if jobs <= 1 or len(plans) <= 1:
        return [run_one(index, p) for index, p in enumerate(plans, start=1)]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="distval-scenario")
    futures = [pool.submit(run_one, index, p) for index, p in enumerate(plans, start=1)]
    try:
        return [future.result() for future in futures]
    except BaseException:
        stop.set()  # the workers kill their containers and clean up; shutdown below waits for them
        raise
    finally:
        # A second Ctrl-C must not end the wait: a worker still creating would outlive the run's cleanup.
        with signals_deferred():
            pool.shutdown(wait=True, cancel_futures=True)
