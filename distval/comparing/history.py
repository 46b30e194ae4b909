"""N JSON reports of ``distval run`` -> one history, as data (``distval history``, ``distval run --html``).

The runs in the order they started; a matrix of runs x (scenario, check) with each cell's status; each scenario's
figures run by run (busbw per operation and size, efficiency where a report recorded it, time to verdict); and the
regressions, each with the run that introduced it:

- a check that passed in an earlier run of its scenario and failed (or errored) in a later one: marked from the
  first failing run after the last pass until it passes again;
- a busbw figure judged against the previous run that has it, by the rule ``distval compare`` applies
  (distval/comparing/baseline.py ``deltas``: the median past the tolerance, its best and its call time too), and a
  scenario's time to verdict longer by more than the duration tolerance and slack. Efficiency is plotted, not
  judged: it is busbw over the machine's raw TCP throughput, so it moves with the machine as well as the image.

Everything in a report is untrusted text (an image's records end up in it): the reader checks the shape and the
numbers (finite, in range) of what the page uses and refuses a report that fails (BadReport, exit code 2, one
line naming the file and the field); texts are kept as they are here and escaped where they are shown
(distval/comparing/html.py).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from distval.comparing.deltas import Tolerances, deltas
from distval.comparing.reading import BadReport, read_report
from distval.results.bandwidth import EFFICIENCY_MAX  # the bound the harness itself keeps an efficiency within
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED

ABSENT = "absent"  # the run has no such scenario, or its scenario no such check
STATUSES = (PASSED, FAILED, SKIPPED, ERROR)
FAILING = (FAILED, ERROR)
# Where ``distval run -o DIR`` puts the JUnit and Markdown reports next to its report.json (distval/session/reports.py's
# OUTPUT_NAMES, which this stage must not import; tests/comparing/test_history.py checks that they agree).
OUTPUT_DIR_JSON = "report.json"
OUTPUT_DIR_JUNIT = "junit.xml"
OUTPUT_DIR_MARKDOWN = "summary.md"
# Bounds on the numbers the page shows: a report past them was not written by distval.
BUSBW_MAX_GBPS = 1e6  # 1 PB/s
DURATION_MAX_S = 1e7  # 115 days


@dataclass(frozen=True)
class Run:
    """One JSON report: a row of the matrix."""

    index: int  # its place in start order, from 0
    path: str  # the report as given
    run_id: str
    images: tuple[str, ...]  # its scenarios' images, in order, once each
    image_ids: tuple[str, ...]
    started_at: datetime | None  # its first scenario's start; None where the report has none
    exit_code: int | None
    early_error: str | None  # "kind: message" of a run that ended early
    junit: str | None  # the JUnit file beside the report, where one exists
    markdown: str | None  # the Markdown summary beside it

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def date(self) -> str:
        return "start unknown" if self.started_at is None else self.started_at.strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class Column:
    scenario: str
    check: str


@dataclass(frozen=True)
class Cell:
    status: str  # one of STATUSES or ABSENT
    message: str
    regressed_since: int | None = None  # failing after a pass: the index of the run that started the failures


@dataclass(frozen=True)
class Point:
    run: int  # the run's index
    value: float
    regressed: bool = False  # past the tolerance against the previous point


@dataclass(frozen=True)
class Series:
    name: str  # "all_reduce 1MiB", or the metric's own name for time to verdict
    points: tuple[Point, ...]


@dataclass(frozen=True)
class FigureRegression:
    scenario: str
    metric: str  # "busbw" or "time to verdict"
    name: str
    previous_run: int
    run: int
    old: float
    new: float
    unit: str


@dataclass(frozen=True)
class CheckRegression:
    column: Column
    last_pass: int  # the run it last passed in
    run: int  # the first failing run after it
    until: int  # the last run of that failing streak


@dataclass(frozen=True)
class Trend:
    """One scenario's figures over the runs."""

    scenario: str
    busbw: tuple[Series, ...]
    efficiency: tuple[Series, ...]  # () where no report recorded one
    time_to_verdict: Series


@dataclass(frozen=True)
class History:
    runs: tuple[Run, ...]
    columns: tuple[Column, ...]
    cells: tuple[tuple[Cell, ...], ...]  # [run][column]
    trends: tuple[Trend, ...]
    check_regressions: tuple[CheckRegression, ...]
    figure_regressions: tuple[FigureRegression, ...]
    tolerances: Tolerances


# --- reading and checking one report -------------------------------------------------------------------


def _where(path: str, field: str) -> str:
    return f"{path} is not a usable distval JSON report: {field}"


def _text(value: Any, path: str, field: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise BadReport(_where(path, f"{field}: expected a string; got {type(value).__name__}"))
    return value


def _number(value: Any, path: str, field: str, low: float, high: float, optional: bool = False) -> float | None:
    """A finite number from low to high (json_problem already refused NaN and infinities; this names the field)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        shown = repr(value)[:40]
        raise BadReport(_where(path, f"{field}: expected a number from {low:g} to {high:g}; got {shown}"))
    return float(value)


def _start(value: Any, path: str, field: str) -> datetime | None:
    text = _text(value, path, field, optional=True)
    if text is None:
        return None
    try:
        # Python 3.10's fromisoformat does not read the "Z" that utc_iso writes.
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise BadReport(_where(path, f"{field}: expected an ISO 8601 time; got {text[:40]!r}")) from None
    return moment.astimezone(timezone.utc) if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _items(value: Any, path: str, field: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise BadReport(_where(path, f"{field}: expected a list of objects"))
    return value


def checked_report(path: str, report: Mapping[str, Any]) -> None:
    """BadReport (one line: the file and the field) unless every field the history uses has its type and range."""
    _text(report.get("run_id"), path, "run_id")
    for number, scenario in enumerate(_items(report.get("scenarios"), path, "scenarios")):
        where = f"scenarios[{number}]"
        if not _text(scenario.get("name"), path, f"{where}.name"):
            raise BadReport(_where(path, f"{where}.name: expected a name; got an empty string"))
        if scenario.get("status") not in STATUSES:
            raise BadReport(_where(path, f"{where}.status: expected one of {', '.join(STATUSES)}"))
        _text(scenario.get("image"), path, f"{where}.image")
        _text(scenario.get("image_id"), path, f"{where}.image_id", optional=True)
        _start(scenario.get("started_at"), path, f"{where}.started_at")
        _number(scenario.get("duration_s"), path, f"{where}.duration_s", 0, DURATION_MAX_S)
        for index, case in enumerate(_items(scenario.get("cases"), path, f"{where}.cases")):
            _text(case.get("name"), path, f"{where}.cases[{index}].name")
            if case.get("status") not in STATUSES:
                raise BadReport(_where(path, f"{where}.cases[{index}].status: expected one of {', '.join(STATUSES)}"))
            _text(case.get("message"), path, f"{where}.cases[{index}].message", optional=True)
        for index, figure in enumerate(_items(scenario.get("bandwidth"), path, f"{where}.bandwidth")):
            at = f"{where}.bandwidth[{index}]"
            _text(figure.get("operation"), path, f"{at}.operation")
            _text(figure.get("label"), path, f"{at}.label")
            _number(figure.get("size"), path, f"{at}.size", 0, 2**62)
            _number(figure.get("busbw_gbps"), path, f"{at}.busbw_gbps", 0, BUSBW_MAX_GBPS)
            for optional in ("best_busbw_gbps", "algbw_gbps"):
                _number(figure.get(optional), path, f"{at}.{optional}", 0, BUSBW_MAX_GBPS, optional=True)
            for optional in ("time_us", "best_time_us"):
                _number(figure.get(optional), path, f"{at}.{optional}", 0, DURATION_MAX_S * 1e6, optional=True)
            efficiency = _number(figure.get("efficiency"), path, f"{at}.efficiency", 0, EFFICIENCY_MAX, optional=True)
            if efficiency == 0:
                raise BadReport(_where(path, f"{at}.efficiency: expected a number above 0 and at most {EFFICIENCY_MAX:g}; got 0"))
    exit_code = report.get("exit_code")
    if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
        raise BadReport(_where(path, "exit_code: expected an integer"))
    early = report.get("early_error")
    if early is not None and not isinstance(early, dict):
        raise BadReport(_where(path, "early_error: expected an object"))


def read_history_report(path: str) -> dict[str, Any]:
    """A JSON report for the history: read as ``distval compare`` reads one (a regular file, bounded, JSON with
    finite numbers, schema_version 1), then checked field by field; BadReport otherwise."""
    report = read_report(path)
    checked_report(path, report)
    return report


# --- the files beside a report -------------------------------------------------------------------------


def beside(path: str) -> tuple[str | None, str | None]:
    """The JUnit and Markdown reports of the same run next to the JSON report ``path``, where they exist: the same
    name with .xml and .md, or (for ``distval run -o DIR``'s report.json) junit.xml and summary.md."""
    stem, _ = os.path.splitext(path)
    directory = os.path.dirname(path)
    junit = [stem + ".xml"]
    markdown = [stem + ".md"]
    if os.path.basename(path) == OUTPUT_DIR_JSON:
        junit.append(os.path.join(directory, OUTPUT_DIR_JUNIT))
        markdown.append(os.path.join(directory, OUTPUT_DIR_MARKDOWN))
    return next((p for p in junit if os.path.isfile(p)), None), next((p for p in markdown if os.path.isfile(p)), None)


# --- the model -----------------------------------------------------------------------------------------


def _scenarios(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A report's scenarios by name; where a name repeats, its first (the matrix has one cell per name and check)."""
    found: dict[str, dict[str, Any]] = {}
    for scenario in report.get("scenarios") or []:
        found.setdefault(str(scenario["name"]), scenario)
    return found


def _run_start(report: Mapping[str, Any]) -> datetime | None:
    starts = [_start(s.get("started_at"), "", "") for s in report.get("scenarios") or []]
    known = [start for start in starts if start is not None]
    return min(known) if known else None


def _once(values: Sequence[str | None]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def _run(index: int, path: str, report: Mapping[str, Any], links: tuple[str | None, str | None]) -> Run:
    scenarios = report.get("scenarios") or []
    early = report.get("early_error")
    early_text = None if early is None else f"{early.get('kind')}: {early.get('message')}"
    exit_code = report.get("exit_code")
    return Run(
        index,
        path,
        str(report.get("run_id")),
        _once([s.get("image") for s in scenarios]),
        _once([s.get("image_id") for s in scenarios]),
        _run_start(report),
        exit_code if isinstance(exit_code, int) else None,
        early_text,
        *links,
    )


def _columns(reports: Sequence[Mapping[str, Any]]) -> tuple[Column, ...]:
    """Every (scenario, check) of any run: scenarios in order of first appearance, each one's checks likewise."""
    checks: dict[str, dict[str, None]] = {}
    for report in reports:
        for name, scenario in _scenarios(report).items():
            known = checks.setdefault(name, {})
            for case in scenario.get("cases") or []:
                known.setdefault(str(case["name"]), None)
    return tuple(Column(scenario, check) for scenario, names in checks.items() for check in names)


def _cell(report: Mapping[str, Any], column: Column) -> Cell:
    scenario = _scenarios(report).get(column.scenario)
    if scenario is None:
        return Cell(ABSENT, "")
    case = next((c for c in scenario.get("cases") or [] if c["name"] == column.check), None)
    if case is None:
        return Cell(ABSENT, "")
    return Cell(str(case["status"]), str(case.get("message") or ""))


def check_regressions(columns: Sequence[Column], cells: list[list[Cell]]) -> tuple[CheckRegression, ...]:
    """Marks, in place, the cells that fail after a pass (``regressed_since``); one CheckRegression per streak:
    from the first failing run after a pass to the last failing run before the next pass (or the end). A skip or
    an absent cell neither ends a streak nor starts one."""
    found: list[CheckRegression] = []
    for at, column in enumerate(columns):
        last_pass: int | None = None
        streak: int | None = None
        for run, row in enumerate(cells):
            cell = row[at]
            if cell.status == PASSED:
                last_pass, streak = run, None
            elif cell.status in FAILING and last_pass is not None:
                if streak is None:
                    streak = run
                    found.append(CheckRegression(column, last_pass, run, run))
                else:
                    found[-1] = CheckRegression(column, last_pass, streak, run)
                row[at] = Cell(cell.status, cell.message, streak)
    return tuple(found)


def _series(points: dict[str, list[Point]]) -> tuple[Series, ...]:
    return tuple(Series(name, tuple(found)) for name, found in points.items())


def _trend(name: str, reports: Sequence[Mapping[str, Any]], tolerances: Tolerances, regressions: list[FigureRegression]) -> Trend:
    busbw: dict[str, list[Point]] = {}
    efficiency: dict[str, list[Point]] = {}
    verdict: list[Point] = []
    previous: tuple[int, dict[str, Any]] | None = None
    for run, report in enumerate(reports):
        scenario = _scenarios(report).get(name)
        if scenario is None:
            continue
        # The figures that dropped against the previous run of this scenario, by compare's rule.
        dropped: dict[str, tuple[float, float]] = {}
        if previous is not None:
            for delta in deltas(previous[1], scenario, tolerances):
                if delta.kind == "busbw" and delta.regressed:
                    dropped[delta.name] = (delta.old, delta.new)
        for figure in scenario.get("bandwidth") or []:
            label = f"{figure['operation']} {figure['label']}"
            was = dropped.get(label)
            busbw.setdefault(label, []).append(Point(run, float(figure["busbw_gbps"]), was is not None))
            if was is not None and previous is not None:
                regressions.append(FigureRegression(name, "busbw", label, previous[0], run, *was, "GB/s"))
            if figure.get("efficiency") is not None:
                efficiency.setdefault(label, []).append(Point(run, float(figure["efficiency"])))
        seconds = float(scenario["duration_s"])
        slower = False
        if previous is not None:
            before = float(previous[1]["duration_s"])
            slower = seconds > before * (1 + tolerances.duration) and seconds - before > tolerances.duration_slack_s
            if slower:
                what = "time to verdict"
                regressions.append(FigureRegression(name, what, what, previous[0], run, before, seconds, "s"))
        verdict.append(Point(run, seconds, slower))
        previous = (run, scenario)
    return Trend(name, _series(busbw), _series(efficiency), Series("time to verdict", tuple(verdict)))


def _order(item: tuple[int, str, Mapping[str, Any]]) -> tuple[bool, datetime, int]:
    start = _run_start(item[2])
    return (start is None, start or datetime.min.replace(tzinfo=timezone.utc), item[0])


def build_history(
    reports: Sequence[tuple[str, Mapping[str, Any]]],
    tolerances: Tolerances | None = None,
    links: Mapping[str, tuple[str | None, str | None]] | None = None,
) -> History:
    """The history of the (path, checked report) pairs: runs ordered by start time (those without one last, in the
    order given); ``links``: by path, the JUnit and Markdown files of each run (default: the files beside it)."""
    tolerances = tolerances or Tolerances()
    ordered = sorted(((i, path, report) for i, (path, report) in enumerate(reports)), key=_order)
    runs = tuple(
        _run(index, path, report, (links or {}).get(path) or beside(path)) for index, (_, path, report) in enumerate(ordered)
    )
    in_order = [report for _, _, report in ordered]
    columns = _columns(in_order)
    cells = [[_cell(report, column) for column in columns] for report in in_order]
    regressed = check_regressions(columns, cells)
    figures: list[FigureRegression] = []
    names = list(dict.fromkeys(column.scenario for column in columns))
    # A scenario with figures but no testcase (none in practice) still gets its trend.
    names += [n for report in in_order for n in _scenarios(report) if n not in names]
    trends = tuple(_trend(name, in_order, tolerances, figures) for name in dict.fromkeys(names))
    return History(runs, columns, tuple(tuple(row) for row in cells), trends, regressed, tuple(figures), tolerances)


def read_history(paths: Sequence[str | Path], tolerances: Tolerances | None = None) -> History:
    """The history of the JSON reports at ``paths``; BadReport (exit code 2) for the first that is not usable."""
    return build_history([(str(path), read_history_report(str(path))) for path in paths], tolerances)
