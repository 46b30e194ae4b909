"""A run against --baseline (last-known-good): the re-measures of the scenarios whose figures regressed and are
undecided (distval/comparing/judges.py adds the 'baseline' testcase, distval/comparing/baseline.py judges it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distval.comparing.baseline import failed_remeasures
from distval.comparing.deltas import deltas, undecided
from distval.comparing.judges import BaselineOptions
from distval.comparing.reading import match, scenario_entries
from distval.errors import BadInput
from distval.plan.model import ScenarioPlan
from distval.results.outcome import PASSED
from distval.results.scenario import RunSummary, ScenarioResult

# Re-measured twice: between runs of one image on a shared 2-core VM, the default sweep's baseline failed
# 24 of 120 comparisons with one re-measure and 12 of 360 with two (docs/measurements.md, "Noise"); a slower image pays
# two more runs of its regressed scenarios.
DEFAULT_REMEASURE = 2


def check_remeasure(options: BaselineOptions) -> None:
    """--remeasure re-runs what regressed against --baseline: alone it is bad input (exit code 2)."""
    if options.remeasure is not None and not options.baselines:
        raise BadInput("--remeasure runs again the scenarios that regressed against --baseline: give --baseline too")


def remeasure(
    summary: RunSummary,
    options: BaselineOptions,
    run_again: Callable[[tuple[ScenarioPlan, ...]], list[ScenarioResult]],
    log: Callable[[str], None],
) -> dict[int, list[dict[str, Any]]]:
    """Up to --remeasure times, the scenarios with a figure that regressed in the run and that the runs so far
    have not decided (it regresses when it regressed in more than half of the 1 + N runs: distval/comparing/baseline.py
    ``majority``) run again with ``run_again``; by the scenario's index in the summary, the JSON report entries of
    its re-measuring runs, each built once as its run comes back (the 'baseline' testcase judges these same entries).
    A scenario whose re-measure failed is not run again: that failure fails its 'baseline' testcase anyway."""
    if options.against is None or not summary.scenarios:
        return {}

    path, baseline = options.against
    tolerances = options.tolerances
    entries = scenario_entries(summary, summary.scenarios)
    previous = [match([s for s in baseline.get("scenarios", []) if isinstance(s, dict)], e, by_name=False)[0] for e in entries]
    found: dict[int, list[dict[str, Any]]] = {}
    times = DEFAULT_REMEASURE if options.remeasure is None else options.remeasure

    def suspect(index: int) -> bool:
        old = previous[index]
        if old is None or summary.scenarios[index].status != PASSED:
            # Only scenarios whose checks passed: one that failed a check fails the run whatever its figures, and
            # --keep-on-failure may hold its containers (a second run of it would clash with them).
            return False
        again = found.get(index, [])
        if failed_remeasures(again):
            return False
        return undecided(deltas(old, entries[index], tolerances), [deltas(old, e, tolerances) for e in again], 1 + times)

    for attempt in range(1, times + 1):
        suspects = [index for index in range(len(entries)) if suspect(index)]
        if not suspects:
            break
        names = ", ".join(summary.scenarios[i].plan.scenario.name for i in suspects)
        past = f"with a figure past the tolerance against {path}"
        log(f"re-measuring {len(suspects)} scenario(s) {past} ({attempt} of {times}): {names}")
        again = scenario_entries(summary, run_again(tuple(summary.scenarios[i].plan for i in suspects)))
        for index, entry in zip(suspects, again, strict=True):
            found.setdefault(index, []).append(entry)
    return found
