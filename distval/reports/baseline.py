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
(distval/reports/comparison.py) and renders it as text, Markdown or JSON.

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
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distval import strict_json
from distval.bounded_read import REPORT_MAX_BYTES, FileRefused, read_regular_file
from distval.config.references import REFERENCES_CASE
from distval.errors import BadInput
from distval.reports.json_report import json_report
from distval.results.bandwidth import count_range
from distval.results.outcome import ERROR, EXIT_STATUS_CASE, FAILED, PASSED, SKIPPED, CaseResult
from distval.results.records import json_problem
from distval.results.scenario import RunSummary, ScenarioResult

BASELINE_CASE = "baseline"
DEFAULT_BUSBW_TOLERANCE = 0.20
DEFAULT_DURATION_TOLERANCE = 0.50
DEFAULT_DURATION_SLACK_S = 1.0
# A busbw figure regresses only when its call also got slower by more than this: a call of a small message
# takes 0.2-0.7 ms on a shared 2-core VM with gloo, and its time moved by up to ~0.1 ms between runs of one
# image even as the median of 100+ calls (docs/measurements.md, "Noise"). Lower it on a dedicated runner (NCCL's small
# calls take tens of microseconds); 0 judges by the fraction alone.
DEFAULT_BUSBW_SLACK_US = 100.0
NOT_COMPARED = ("process_group", EXIT_STATUS_CASE, BASELINE_CASE, REFERENCES_CASE)


class BadReport(BadInput):
    """A --baseline or compare file that is not a distval JSON report."""

    kind = "baseline"


@dataclass(frozen=True)
class Tolerances:
    busbw: float = DEFAULT_BUSBW_TOLERANCE  # a drop of more than this fraction regresses
    duration: float = DEFAULT_DURATION_TOLERANCE  # a growth of more than this fraction ...
    duration_slack_s: float = DEFAULT_DURATION_SLACK_S  # ... and by more than this many seconds regresses
    busbw_slack_us: float = DEFAULT_BUSBW_SLACK_US  # a busbw drop regresses when the call is this much slower too
    # Whether a duration past the tolerance regresses (--baseline) or is only said (``distval compare`` without
    # --duration-tolerance: around one real failure many checks' times move, and a list of regressions that is
    # mostly durations hides the one that matters).
    durations_judged: bool = True

    def slower(self, before_s: float, after_s: float) -> bool:
        """A duration past the tolerance: longer by more than the fraction and by more than the slack."""
        return after_s > before_s * (1 + self.duration) and after_s - before_s > self.duration_slack_s


@dataclass(frozen=True)
class Delta:
    kind: str  # "busbw" or "duration"
    name: str  # "all_reduce 1MiB" or a testcase name
    old: float
    new: float
    regressed: bool
    old_best: float | None = None  # busbw only: the best figures, where both reports have them
    new_best: float | None = None
    # busbw only: the median dropped past the tolerance, yet the best held or the call is slower by no more
    # than the slack; noise_why says which.
    within_noise: bool = False
    noise_why: str = ""
    # The same figure in each run that re-measured it (None where that run has no such figure): a figure
    # regresses when it regressed in more than half of the runs, the run and its re-measures (``majority``).
    remeasured: tuple[float | None, ...] = ()
    cleared: bool = False  # regressed in the run, not in most of the runs: noise
    votes: int = 0  # of the 1 + len(remeasured) runs, how many saw it regressed (0 where not re-measured)
    # busbw only: the raw TCP yardstick at the same size in either run (``tcp_gbps``), where both reports have it.
    # Evidence, never a verdict: the yardstick is taken once before the sweep, and judging by efficiency did not
    # cancel this machine's noise (docs/measurements.md, "Candidate against reference").
    old_tcp: float | None = None
    new_tcp: float | None = None

    @property
    def best_ratio(self) -> float | None:
        if self.old_best is None or self.new_best is None or not self.old_best:
            return None
        return self.new_best / self.old_best

    @property
    def ratio(self) -> float:
        return self.new / self.old if self.old else float("inf") if self.new else 1.0

    @property
    def tcp_ratio(self) -> float | None:
        """The raw TCP yardstick's new / old at this figure's size, where both runs measured it."""
        if self.old_tcp is None or self.new_tcp is None or not self.old_tcp:
            return None
        return self.new_tcp / self.old_tcp

    @property
    def unit(self) -> str:
        return "GB/s" if self.kind == "busbw" else "s"

    def describe(self, tolerances: Tolerances) -> str:
        if self.kind == "busbw":
            return f"busbw {self.name}: {self.old:.4g} -> {self.new:.4g} GB/s ({self.judged(tolerances)}){self._again()}"
        return f"duration {self.name}: {self.old:.2f} -> {self.new:.2f} s ({self.judged(tolerances)}){self._again()}"

    def judged(self, tolerances: Tolerances) -> str:
        """The ratio and the tolerance it was judged by, e.g. '0.50x, tolerance -20%; best 1.2 -> 0.6 GB/s (0.50x)'."""
        if self.kind == "busbw":
            best = self.best_ratio
            at_best = "" if best is None else f"; best {self.old_best:.4g} -> {self.new_best:.4g} GB/s ({best:.2f}x)"
            tcp = self.tcp_ratio
            raw = "" if tcp is None else f"; raw TCP {self.old_tcp:.4g} -> {self.new_tcp:.4g} GB/s ({tcp:.2f}x)"
            return f"{self.ratio:.2f}x, tolerance -{tolerances.busbw:.0%}{at_best}{raw}"
        return f"{self.ratio:.2f}x, tolerance +{tolerances.duration:.0%} and +{tolerances.duration_slack_s:g} s"

    def _again(self) -> str:
        """What the re-measuring runs saw of this figure, e.g. '; re-measured: 0.98 GB/s (1.02x)'."""
        if not self.remeasured:
            return ""
        unit = " GB/s" if self.kind == "busbw" else " s"
        seen = [
            "not measured"
            if value is None
            else f"{value:.4g}{unit} ({value / self.old:.2f}x)"
            if self.old
            else f"{value:.4g}{unit}"
            for value in self.remeasured
        ]
        return "; re-measured: " + ", ".join(seen) + f" (regressed in {self.votes} of {1 + len(self.remeasured)} runs)"


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


def unusable(report: Mapping[str, Any], label: str) -> list[str]:
    """Why a report cannot be compared with, one line each (none: it can): it has no scenario, or its run ended
    early (what it has is part of a run at best). ``distval compare`` fails on either side's, ``--baseline``
    fails every ``baseline`` testcase on the baseline's: a comparison of nothing is not a pass."""
    why = []
    run = f"{label} (run {report.get('run_id')})"
    if not [s for s in report.get("scenarios", []) if isinstance(s, dict)]:
        why.append(f"{run} has no scenario: nothing to compare")
    early = report.get("early_error")
    if early is not None:
        kind, message = (early.get("kind"), early.get("message")) if isinstance(early, dict) else ("?", early)
        why.append(f"{run} ended early: {kind}: {message}")
    return why


def iterations_of(scenario: Mapping[str, Any] | None) -> str:
    """The timed iterations behind a scenario's figures: '5', or '5-212' where min_time_s added some."""
    found: list[int] = []
    for figure in (scenario or {}).get("bandwidth") or []:
        try:
            found.append(int(figure["iterations"]))
        except (KeyError, TypeError, ValueError):
            continue
    return count_range(found)


def read_report(path: str | Path) -> dict[str, Any]:
    """A distval JSON report (schema_version 1) from a file; BadReport (exit code 2) otherwise."""
    return parse_report(read_report_bytes(path), path)


def read_report_bytes(path: str | Path) -> bytes:
    """The bytes of a JSON report file (a regular file of at most REPORT_MAX_BYTES); BadReport otherwise."""
    try:
        return read_regular_file(path, REPORT_MAX_BYTES)
    except FileRefused as exc:
        raise BadReport(f"cannot read the JSON report {path}: {exc}") from exc


def parse_report(raw: bytes, path: str | Path) -> dict[str, Any]:
    """A distval JSON report (schema_version 1) from the bytes of the file ``path``; BadReport otherwise."""
    try:
        data = strict_json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise BadReport(f"{path} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema_version") != 1 or not isinstance(data.get("scenarios"), list):
        raise BadReport(f"{path} is not a distval JSON report (expected schema_version 1 and a list of scenarios)")
    # json reads NaN, Infinity and 1e999, which no report writer can write back (a comparison would crash).
    problem = json_problem(data, "the report")
    if problem is not None:
        raise BadReport(f"{path} is not a usable distval JSON report: {problem}")
    return data


MEDIAN_FIELDS = ("busbw_gbps", "best_busbw_gbps", "algbw_gbps", "time_us", "best_time_us")


def combined_baseline(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[str, Mapping[str, Any]]:
    """One baseline from one or several JSON reports of the last good image(s) (``--baseline`` given several
    times): each scenario (grouped by ``scenario_hash_any_image``) with, per busbw figure that every report
    has, the median of each number, and per testcase the median duration. A run that was fast as a whole
    (a lucky baseline, which re-measuring the new run cannot undo) then moves no figure."""
    if len(reports) == 1:
        return reports[0]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for _, report in reports:
        for scenario in report.get("scenarios", []):
            if isinstance(scenario, dict):
                key = (
                    _property(scenario, "scenario_hash_any_image")
                    or _property(scenario, "scenario_hash")
                    or str(scenario.get("name"))
                )
                groups.setdefault(key, []).append(scenario)
    label = "the median of " + ", ".join(path for path, _ in reports)
    run_ids = "/".join(str(report.get("run_id", "?")) for _, report in reports)
    combined: dict[str, Any] = {
        "schema_version": 1,
        "run_id": run_ids,
        "scenarios": [_median_scenario(g) for g in groups.values()],
    }
    # One empty or cut-short report among several would silently leave the median to the others: it fails the
    # baseline as it would alone (apply_baseline reads this as the baseline's early end).
    problems = [why for path, report in reports for why in unusable(report, path)]
    if problems:
        combined["early_error"] = {"kind": "baseline", "message": "; ".join(problems)}
    return label, combined


def _median_scenario(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    merged = dict(entries[0])
    if len(entries) == 1:
        return merged
    by_figure: dict[tuple[str, Any], list[Mapping[str, Any]]] = {}
    for entry in entries:
        for figure in entry.get("bandwidth") or []:
            if isinstance(figure, dict):
                by_figure.setdefault((str(figure.get("operation")), figure.get("size")), []).append(figure)
    figures = []
    for same in by_figure.values():
        if len(same) < len(entries):
            continue  # a figure some good run lacks is no baseline
        figure = dict(same[0])
        for name in MEDIAN_FIELDS:
            values = [_number(f.get(name)) for f in same]
            figure[name] = statistics.median(v for v in values if v is not None) if None not in values else None
        figures.append(figure)
    durations: dict[str, list[float]] = {}
    for entry in entries:
        for case in entry.get("cases") or []:
            if isinstance(case, dict) and _number(case.get("duration_s")) is not None:
                durations.setdefault(str(case.get("name")), []).append(float(case["duration_s"]))
    merged["bandwidth"] = figures
    merged["cases"] = [
        {**case, "duration_s": statistics.median(durations[str(case.get("name"))])}
        for case in entries[0].get("cases") or []
        if isinstance(case, dict) and len(durations.get(str(case.get("name")), [])) == len(entries)
    ]
    return merged


def _property(scenario: Mapping[str, Any], name: str) -> str | None:
    properties = scenario.get("properties")
    value = properties.get(name) if isinstance(properties, dict) else None
    return value if isinstance(value, str) and value else None


def match(
    old: Sequence[Mapping[str, Any]], scenario: Mapping[str, Any], by_name: bool
) -> tuple[Mapping[str, Any] | None, str | None]:
    """The old report's scenario that ``scenario`` is compared with, and what matched them."""
    keys = ("scenario_hash", "scenario_hash_any_image")
    for key in keys:
        value = _property(scenario, key)
        for candidate in old:
            if value is not None and _property(candidate, key) == value:
                return candidate, key
    if by_name:
        for candidate in old:
            if candidate.get("name") == scenario.get("name"):
                return candidate, "name"
    return None, None


@dataclass(frozen=True)
class BusbwFigure:
    label: str
    median: float  # GB/s
    best: float | None  # GB/s; None in reports older than best figures
    time_us: float | None  # the median call; None where the report lacks it
    best_time_us: float | None
    tcp_gbps: float | None = None  # the raw TCP yardstick at this size; None without one (yardstick: false, older reports)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _positive(value: Any) -> float | None:
    """A finite number above 0, else None: a stored report is read back, and its yardstick only ever informs."""
    number = _number(value)
    return number if number is not None and math.isfinite(number) and number > 0 else None


def busbw_figures(scenario: Mapping[str, Any]) -> dict[tuple[str, int], BusbwFigure]:
    """(operation, size) -> the figure's busbw and call times."""
    found: dict[tuple[str, int], BusbwFigure] = {}
    for figure in scenario.get("bandwidth") or []:
        try:
            found[(str(figure["operation"]), int(figure["size"]))] = BusbwFigure(
                str(figure["label"]),
                float(figure["busbw_gbps"]),
                _number(figure.get("best_busbw_gbps")),
                _number(figure.get("time_us")),
                _number(figure.get("best_time_us")),
                _positive(figure.get("tcp_gbps")),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    return found


def _slower_by_more_than(before_us: float | None, after_us: float | None, slack_us: float) -> bool:
    """Whether the call got slower by more than the slack (True where a report lacks the times)."""
    return before_us is None or after_us is None or after_us - before_us > slack_us


def check_durations(scenario: Mapping[str, Any], not_compared: Sequence[str] = NOT_COMPARED) -> dict[str, float]:
    """Each testcase's duration (one JSON report entry's), but the skipped ones and those named in ``not_compared``."""
    found: dict[str, float] = {}
    for case in scenario.get("cases") or []:
        if isinstance(case, dict) and case.get("name") not in not_compared and case.get("status") != SKIPPED:
            try:
                found[str(case["name"])] = float(case["duration_s"])
            except (KeyError, TypeError, ValueError):
                continue
    return found


def deltas(old: Mapping[str, Any], new: Mapping[str, Any], tolerances: Tolerances) -> tuple[Delta, ...]:
    """Every busbw figure and testcase duration both scenarios have, each judged against the tolerances."""
    result: list[Delta] = []
    old_bw, new_bw = busbw_figures(old), busbw_figures(new)
    floor = 1 - tolerances.busbw
    slack = tolerances.busbw_slack_us
    for key in sorted(set(old_bw) & set(new_bw), key=lambda k: list(new_bw).index(k)):
        was, now = old_bw[key], new_bw[key]
        both = was.best is not None and now.best is not None
        best_dropped = not both or (
            now.best < was.best * floor  # type: ignore[operator]
            and _slower_by_more_than(was.best_time_us, now.best_time_us, slack)
        )
        median_dropped = now.median < was.median * floor
        median_slower = median_dropped and _slower_by_more_than(was.time_us, now.time_us, slack)
        bests = (was.best, now.best) if both else (None, None)
        noise = median_dropped and not (median_slower and best_dropped)
        why = ""
        if noise and not median_slower:
            why = f"its median call {now.time_us - was.time_us:+.0f} us, within the {slack:g} us slack"  # type: ignore[operator]
        elif noise and now.best is not None and not now.best < was.best * floor:  # type: ignore[operator]
            why = f"its best held ({now.best / was.best:.2f}x)" if was.best else "its best held"
        elif noise:
            why = f"its best call {now.best_time_us - was.best_time_us:+.0f} us, within the {slack:g} us slack"  # type: ignore[operator]
        delta = Delta("busbw", f"{key[0]} {was.label}", was.median, now.median, median_slower and best_dropped, *bests, noise)
        result.append(dataclasses.replace(delta, noise_why=why, old_tcp=was.tcp_gbps, new_tcp=now.tcp_gbps))
    old_d, new_d = check_durations(old), check_durations(new)
    for name in [n for n in new_d if n in old_d]:
        before, after = old_d[name], new_d[name]
        result.append(Delta("duration", name, before, after, tolerances.durations_judged and tolerances.slower(before, after)))
    return tuple(result)


def regressed_in(scenario: Mapping[str, Any], baseline: Mapping[str, Any], tolerances: Tolerances) -> bool:
    """Whether a figure of ``scenario`` (its JSON report entry) regressed against its match in ``baseline``."""
    previous, _ = match([s for s in baseline.get("scenarios", []) if isinstance(s, dict)], scenario, by_name=False)
    return previous is not None and any(d.regressed for d in deltas(previous, scenario, tolerances))


def majority(regressed: int, cleared: int, runs: int) -> bool | None:
    """The re-measure rule for one figure over ``runs`` runs (the run and its re-measures), of which
    ``regressed`` saw it regressed and ``cleared`` did not: True once it regressed in more than half of
    them, False once it no longer can, None while the runs still to come decide. With an odd number of runs
    this is "the median run regressed"; with two it needs both (a tie clears)."""
    need = runs // 2 + 1
    if regressed >= need:
        return True
    if runs - cleared < need:
        return False
    return None


def _votes(delta: Delta, by_run: Sequence[Mapping[tuple[str, str], Delta]]) -> tuple[int, int, tuple[float | None, ...]]:
    """(runs that saw ``delta`` regressed, runs that did not, the re-measured values) over the run (which saw
    it regressed) and the re-measures; a re-measure that lacks the figure counts as regressed: nothing cleared it."""
    again = [run.get((delta.kind, delta.name)) for run in by_run]
    regressed = 1 + sum(1 for d in again if d is None or d.regressed)
    return regressed, len(again) - regressed + 1, tuple(None if d is None else d.new for d in again)


def confirm(found: Sequence[Delta], remeasures: Sequence[Sequence[Delta]]) -> tuple[Delta, ...]:
    """``found`` (the run's deltas) with each regression checked against the re-measuring runs' deltas of
    the same figures: it stays a regression when it regressed in more than half of the 1 + len(remeasures)
    runs (``majority``)."""
    if not remeasures:
        return tuple(found)
    by_run = [{(d.kind, d.name): d for d in run} for run in remeasures]
    confirmed: list[Delta] = []
    for delta in found:
        if not delta.regressed:
            confirmed.append(delta)
            continue
        regressed, cleared, remeasured = _votes(delta, by_run)
        still = bool(majority(regressed, cleared, 1 + len(remeasures)))
        confirmed.append(dataclasses.replace(delta, regressed=still, remeasured=remeasured, cleared=not still, votes=regressed))
    return tuple(confirmed)


def undecided(found: Sequence[Delta], remeasures: Sequence[Sequence[Delta]], runs: int) -> bool:
    """Whether a figure that regressed in the run is still undecided after ``remeasures`` out of ``runs``
    runs in all (the run and up to ``runs - 1`` re-measures): another re-measure would decide it."""
    by_run = [{(d.kind, d.name): d for d in run} for run in remeasures]
    return any(majority(*_votes(d, by_run)[:2], runs) is None for d in found if d.regressed)


def missing(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The figures ``old`` has and ``new`` lacks: busbw figures ('busbw all_reduce 1MiB') and the durations
    of testcases that ran in ``old`` and did not run in ``new`` ('duration collectives.all_reduce')."""
    old_bw, new_bw = busbw_figures(old), busbw_figures(new)
    gone = [f"busbw {key[0]} {figure.label}" for key, figure in old_bw.items() if key not in new_bw]
    new_d = check_durations(new)
    return gone + [f"duration {name}" for name in check_durations(old) if name not in new_d]


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
            f"no scenario of {run} has this scenario's scenario_hash {_property(scenario, 'scenario_hash')} "
            f"or scenario_hash_any_image {_property(scenario, 'scenario_hash_any_image')}: nothing to compare with",
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
        "deltas": [_as_data(d) for d in found],
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
    remeasures: Mapping[int, Sequence[ScenarioResult]] | None = None,
    fail_on_skip: bool = False,
) -> RunSummary:
    """The summary with a ``baseline`` testcase added to every scenario; ``remeasures``: by the scenario's
    index in the summary, the results of the runs that re-measured it. When no scenario matched the
    baseline, every ``baseline`` testcase fails (the run compared nothing); ``fail_on_skip`` (--fail-on-skip)
    fails the skip of a scenario the baseline lacks."""
    entries = json_report(summary)["scenarios"]
    cases = [
        baseline_case(entry, baseline, tolerances, path, scenario_entries(summary, (remeasures or {}).get(index, ())))
        for index, entry in enumerate(entries)
    ]
    reasons = unusable(baseline, path)
    if cases and (reasons or all(case.details.get("matched_by") is None for case in cases)):
        cases = [_not_compared(case, baseline, path, reasons) for case in cases]
    elif fail_on_skip:
        cases = [
            dataclasses.replace(case, status=FAILED, message=f"expected no skip (--fail-on-skip); skipped: {case.message}")
            if case.status == SKIPPED
            else case
            for case in cases
        ]
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


def scenario_entries(summary: RunSummary, results: Sequence[ScenarioResult]) -> list[dict[str, Any]]:
    """The JSON report entries of ``results`` (scenarios of the run ``summary`` describes)."""
    if not results:
        return []
    return list(json_report(dataclasses.replace(summary, scenarios=tuple(results), early_error=None))["scenarios"])


def _as_data(delta: Delta) -> dict[str, Any]:
    return {**dataclasses.asdict(delta), "ratio": round(delta.ratio, 4) if math.isfinite(delta.ratio) else None}
