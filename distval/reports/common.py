"""What several reports state alike, derived from the ``RunSummary``: the command that reproduces a
scenario, how many check results passed, a scenario's failing testcases, a duration to the millisecond."""

from __future__ import annotations

import glob
import shlex

from distval.results.bandwidth import TopologyRow, topology_rows
from distval.results.outcome import ERROR, FAILED, PASSED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult


def reproduce_command(summary: RunSummary, scenario: ScenarioResult) -> str:
    """The one command that runs this scenario again, on the same image."""
    config = summary.config_path or "CONFIG"
    return shlex.join(
        [
            "distval",
            "run",
            config,
            *scenario.plan.target_args,
            "--filter",
            glob.escape(scenario.plan.scenario.name),
            *summary.selection_args,
        ]
    )


def passed_counts(summary: RunSummary) -> tuple[int, int]:
    """(passed check results, all check results) over every scenario."""
    passed = sum(1 for s in summary.scenarios for c in s.cases if c.status == PASSED)
    return passed, sum(len(s.cases) for s in summary.scenarios)


def failing_cases(scenario: ScenarioResult) -> list[CaseResult]:
    """The scenario's failed or errored testcases, in order."""
    return [c for c in scenario.cases if c.status in (FAILED, ERROR)]


MAX_SECONDS = 1e9  # about 32 years: a longer duration is a clock gone wrong


def milliseconds(seconds: float) -> int:
    """A duration in whole milliseconds; a negative, NaN, infinite or absurd one (a clock gone wrong) is 0."""
    return round(seconds * 1000) if 0 < seconds <= MAX_SECONDS else 0


def topology_rows_of(summary: RunSummary) -> list[TopologyRow]:
    """busbw in one container next to across containers, for each world size that has both."""
    return topology_rows(
        (s.plan.scenario.name, s.plan.scenario.topology, s.plan.scenario.world_size, s.figures) for s in summary.scenarios
    )
