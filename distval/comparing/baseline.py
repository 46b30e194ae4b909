"""Last-known-good: a run's figures against a previous JSON report's, as data.

Scenarios are matched by ``scenario_hash`` (the same scenario on the same image), else by
``scenario_hash_any_image`` (the same scenario on another image: the usual case, a candidate image
against the last good one), else by name for ``distval compare`` only. Compared, per matched scenario:

- every bandwidth figure's busbw (operation x message size, the slowest rank's median of the stated
  iterations): a regression when new < old x (1 - busbw tolerance), and, where both reports have it, the
  best busbw (the slowest rank's fastest iteration) dropped past the tolerance too. Noise on a shared
  machine only ever slows a call down, so it moves the median and hardly the best; a slower image moves
  both (docs/measurements.md, "Noise": measured spread of either between two runs of one image);
- every check's duration (its testcases; not ``process_group`` and ``exit_status``, which are not checks
  but the group forming and the containers' whole life: startup noise that swings by seconds on a
  shared machine, measured 0.1 s vs 2.8 s for process_group; nor ``baseline`` itself): a regression
  when new > old x (1 + duration tolerance) and also longer by more than ``duration_slack_s``
  (sub-second checks jitter by more than 50 %).

``distval run --baseline`` adds one testcase ``baseline`` per scenario (failed, naming each regressed
figure with both numbers and the ratio); ``distval compare`` judges the same comparison item by item
(distval/comparing/comparison.py) and renders it as text, Markdown or JSON.

A figure that regressed in the run is re-measured (``--remeasure N``, default 2): the run command runs
that scenario again, and the figure regresses when it regressed in more than half of the 1 + N runs
(``confirm``; ``majority``). A slower image is slower most times; a burst of load on a shared machine that
slowed one run as a whole (which no statistic inside one report tells from a slower image) does not last
into the next. The earlier rule, "regressed in every run", confirmed a true drop just past the tolerance
with probability p**3 (tests/results/test_remeasure_rule.py simulates both rules' miss and false-alarm rates).
A re-measure that failed or errored fails the ``baseline`` testcase: a failure in any run is a failure.

Fails closed: a matched scenario whose comparison compared nothing fails (unless it was skipped in both
reports: skipped, with the scenario's reasons), a figure (busbw or duration)
the baseline has and the run lacks fails (named), and when no scenario of the run matched the baseline
at all, or when the baseline is ``unusable`` (it has no scenario, or its run ended early; with several
baselines, one of them), every ``baseline`` testcase fails. A scenario the baseline lacks while others matched is skipped
with its hashes (a new scenario), which ``--fail-on-skip`` turns into a failure. Against
several baseline reports (``combined_baseline``), each figure is compared with its median over them, so
that a baseline run that was fast as a whole does not fail every run after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distval.comparing.deltas import BASELINE_CASE, Delta, Tolerances, confirm, delta_as_data, deltas, missing
from distval.comparing.reading import iterations_of, match, scenario_property, unusable
from distval.reports.json_report import json_report
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult
from distval.results.scenario import RunSummary


@dataclass(frozen=True)
class ScenarioComparison:
    name: str
    matched_by: str | None  # "scenario_hash", "scenario_hash_any_image", "name"; None: not in the other report
    old: Mapping[str, Any] | None  # the scenarios' entries of the JSON reports
    new: Mapping[str, Any] | None
    deltas: tuple[Delta, ...] = ()


@dataclass(frozen=True)
class Comparison:
    old_path: str
    new_path: str
    old: Mapping[str, Any]
    new: Mapping[str, Any]
    tolerances: Tolerances
    scenarios: tuple[ScenarioComparison, ...]


def failed_remeasures(remeasures: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per re-measuring run that failed or errored (its JSON report entry's status): what failed."""
    lines = []
    for number, entry in enumerate(remeasures, start=1):
        status = str(entry.get("status"))
        if status in (PASSED, SKIPPED):
            continue
        bad = [c for c in entry.get("cases") or [] if isinstance(c, dict) and c.get("status") in (FAILED, ERROR)]
        what = "; ".join(f"{c.get('name')} {c.get('status')}: {str(c.get('message', ''))[:200]}" for c in bad[:3])
        more = f"; ... ({len(bad)} in all)" if len(bad) > 3 else ""
        lines.append(f"re-measure {number} {status}" + (f" ({what}{more})" if what else ""))
    return lines


def compare_reports(
    old: Mapping[str, Any], new: Mapping[str, Any], tolerances: Tolerances, old_path: str = "OLD", new_path: str = "NEW"
) -> Comparison:
    """Every scenario of ``new`` against its match in ``old`` (by hash, else by name), then ``old``'s unmatched ones."""
    old_scenarios = [s for s in old.get("scenarios", []) if isinstance(s, dict)]
    rows: list[ScenarioComparison] = []
    used: list[int] = []
    for scenario in (s for s in new.get("scenarios", []) if isinstance(s, dict)):
        previous, matched_by = match([s for s in old_scenarios if id(s) not in used], scenario, by_name=True)
        if previous is None:
            rows.append(ScenarioComparison(str(scenario.get("name")), None, None, scenario))
            continue
        used.append(id(previous))
        rows.append(
            ScenarioComparison(str(scenario.get("name")), matched_by, previous, scenario, deltas(previous, scenario, tolerances))
        )
    rows += [ScenarioComparison(str(s.get("name")), None, s, None) for s in old_scenarios if id(s) not in used]
    return Comparison(old_path, new_path, old, new, tolerances, tuple(rows))


def baseline_case(
    scenario: Mapping[str, Any],
    baseline: Mapping[str, Any],
    tolerances: Tolerances,
    path: str,
    remeasures: Sequence[Mapping[str, Any]] = (),
) -> CaseResult:
    """The ``baseline`` testcase of one scenario (its JSON report entry) against the baseline report;
    ``remeasures``: the JSON report entries of the runs of the same scenario that re-measured it."""
    previous, matched_by = match([s for s in baseline.get("scenarios", []) if isinstance(s, dict)], scenario, by_name=False)
    run = f"{path} (run {baseline.get('run_id', '?')})"
    if previous is None:
        return CaseResult(
            BASELINE_CASE,
            SKIPPED,
            f"no scenario of {run} has this scenario's scenario_hash {scenario_property(scenario, 'scenario_hash')} "
            f"or scenario_hash_any_image {scenario_property(scenario, 'scenario_hash_any_image')}: nothing to compare with",
            0.0,
        )
    found = confirm(deltas(previous, scenario, tolerances), [deltas(previous, again, tolerances) for again in remeasures])
    how = f"matched by {matched_by}" + (f", baseline image {previous.get('image')}" if matched_by != "scenario_hash" else "")
    busbw = [d for d in found if d.kind == "busbw"]
    iterations = iterations_of(scenario)
    gone = missing(previous, scenario)
    failures = failed_remeasures(remeasures)
    details = {
        "baseline": path,
        "matched_by": matched_by,
        "remeasures": len(remeasures),
        "deltas": [delta_as_data(d) for d in found],
        "missing": gone,
        "failed_remeasures": failures,
    }
    regressed = [d for d in found if d.regressed]
    runs = 1 + len(remeasures)
    again = f" in more than half of the {runs} runs (the run and {_runs(len(remeasures))} re-measuring it)" if remeasures else ""
    problems = []
    if failures:
        problems.append(f"expected every run re-measuring this scenario to pass; {'; '.join(failures)}")
    if gone:
        problems.append(
            f"expected every figure of {run} ({how}) in this run; {len(gone)} missing: "
            + ", ".join(gone[:10])
            + (f", ... ({len(gone)} in all)" if len(gone) > 10 else "")
        )
    if not found and not gone and not failures and scenario.get("status") == SKIPPED and previous.get("status") == SKIPPED:
        # Skipped in the run and in the baseline (no GPU the Engine can give, every check version-gated): the
        # scenario's own skip says why, and a comparison with nothing to compare on either side neither passes nor
        # fails it (as --reference's, distval/reports/reference.py); --fail-on-skip fails it. Skipped in the run
        # alone while the baseline has its figures fails above, each figure named as missing.
        return CaseResult(
            BASELINE_CASE,
            SKIPPED,
            f"the scenario was skipped in this run and in {run} ({how}): {skip_reasons([scenario])}",
            0.0,
            details=details,
        )
    if not found and not gone:
        # Nothing compared is not a pass: neither report has a figure of this scenario that the other has.
        problems.append(f"expected figures to compare with {run} ({how}); neither has a busbw figure or a check's duration")
    if regressed:
        problems.append(
            f"expected no figure to regress past the tolerance against {run} ({how}); "
            f"{len(regressed)} of {len(found)} did{again}: "
            + "; ".join(d.describe(tolerances) for d in regressed)
            + (f" (busbw: medians and bests of {iterations} iterations)" if busbw else "")
            + _machine_slower(regressed, tolerances)
        )
    if problems:
        return CaseResult(BASELINE_CASE, FAILED, "; and ".join(problems), 0.0, details=details)
    cleared = [d for d in found if d.cleared]
    worst_bw = min((d.ratio for d in busbw), default=None)
    worst_duration = max((d.ratio for d in found if d.kind == "duration"), default=None)
    noise = [d for d in busbw if d.within_noise]
    return CaseResult(
        BASELINE_CASE,
        PASSED,
        f"{len(found)} figure(s) within tolerance of {run} ({how}): {len(busbw)} busbw"
        + (f" (lowest ratio {worst_bw:.2f}x, medians of {iterations} iterations)" if worst_bw is not None else "")
        + (
            f"; {len(noise)} busbw median(s) below the tolerance, their best held or their call slower by at most "
            f"{tolerances.busbw_slack_us:g} us (noise, not a slower image): "
            + "; ".join(f"{d.describe(tolerances)}: {d.noise_why}" for d in noise[:3])
            + (f"; ... ({len(noise)} in all)" if len(noise) > 3 else "")
            if noise
            else ""
        )
        + f", {len(found) - len(busbw)} durations"
        + (f" (highest ratio {worst_duration:.2f}x)" if worst_duration is not None else "")
        + (
            f"; {len(cleared)} regressed in the run and not in most of the {runs} runs (noise, not a "
            "slower image): "
            + "; ".join(d.describe(tolerances) for d in cleared[:3])
            + (f"; ... ({len(cleared)} in all)" if len(cleared) > 3 else "")
            if cleared
            else ""
        ),
        0.0,
        details=details,
    )


def _machine_slower(regressed: Sequence[Delta], tolerances: Tolerances) -> str:
    """A hint, when every regressed busbw figure's raw TCP yardstick fell past the tolerance too in the run: the
    machine was slower than when the baseline ran, which a stored baseline cannot tell from a slower image. It does
    not clear the figures (the image could have slowed its own sockets too); it says how to tell."""
    busbw = [d for d in regressed if d.kind == "busbw"]
    ratios = [r for r in (d.tcp_ratio for d in busbw) if r is not None]
    if not busbw or len(ratios) < len(busbw) or any(r >= 1 - tolerances.busbw for r in ratios):
        return ""
    return (
        f". In the run, the raw TCP between the same ranks fell too ({min(ratios):.2f}-{max(ratios):.2f}x of the "
        "baseline's at those sizes): the machine may have been slower, not the image; --reference IMAGE compares the "
        "two images in pairs on this machine in one run"
    )


def skip_reasons(entries: Sequence[Mapping[str, Any]]) -> str:
    """Why skipped scenarios (their JSON report entries) were skipped: their testcases' distinct messages, the first 3."""
    reasons = sorted({str(c.get("message", ""))[:200] for e in entries for c in e.get("cases") or [] if isinstance(c, dict)})
    return "; ".join(reasons[:3]) or "no reason given"


def _runs(count: int) -> str:
    return "the run" if count == 1 else f"the {count} runs"


def apply_baseline(
    summary: RunSummary,
    baseline: Mapping[str, Any],
    tolerances: Tolerances,
    path: str,
    remeasures: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
    fail_on_skip: bool = False,
) -> RunSummary:
    """The summary with a ``baseline`` testcase added to every scenario (``baseline_cases``, on the summary's own
    JSON report entries)."""
    cases = baseline_cases(json_report(summary)["scenarios"], baseline, tolerances, path, remeasures, fail_on_skip)
    return with_cases(summary, cases)


def baseline_cases(
    entries: Sequence[Mapping[str, Any]],
    baseline: Mapping[str, Any],
    tolerances: Tolerances,
    path: str,
    remeasures: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
    fail_on_skip: bool = False,
) -> list[CaseResult]:
    """The ``baseline`` testcase of each scenario of a run (``entries``: their JSON report entries, in order);
    ``remeasures``: by the scenario's index, the JSON report entries of the runs that re-measured it. When no
    scenario matched the baseline, every ``baseline`` testcase fails (the run compared nothing); ``fail_on_skip``
    (--fail-on-skip) fails the skip of a scenario the baseline lacks."""
    cases = [
        baseline_case(entry, baseline, tolerances, path, (remeasures or {}).get(index, ())) for index, entry in enumerate(entries)
    ]
    reasons = unusable(baseline, path)
    if cases and (reasons or all(case.details.get("matched_by") is None for case in cases)):
        return [_not_compared(case, baseline, path, reasons) for case in cases]
    if fail_on_skip:
        return [
            dataclasses.replace(case, status=FAILED, message=f"expected no skip (--fail-on-skip); skipped: {case.message}")
            if case.status == SKIPPED
            else case
            for case in cases
        ]
    return cases


def with_cases(summary: RunSummary, cases: Sequence[CaseResult]) -> RunSummary:
    """The summary with one more testcase in each scenario: ``cases``, one per scenario, in order."""
    scenarios = tuple(
        dataclasses.replace(result, cases=(*result.cases, case)) for result, case in zip(summary.scenarios, cases, strict=True)
    )
    return dataclasses.replace(summary, scenarios=scenarios)


def _not_compared(case: CaseResult, baseline: Mapping[str, Any], path: str, reasons: Sequence[str]) -> CaseResult:
    """The ``baseline`` testcase of a run that the baseline cannot vouch for: failed, saying why. Either the
    baseline is unusable (``reasons``: no scenario, or its run ended early, so it is no last-known-good), or none
    of its scenarios matched one of the run's (a wrong file)."""
    count = len([s for s in baseline.get("scenarios", []) if isinstance(s, dict)])
    why = "; ".join(reasons) or f"none of its {count} scenario(s) matched a scenario of this run"
    return dataclasses.replace(
        case, status=FAILED, message=f"expected this run to be compared with {path}; {why}: {case.message}"
    )
