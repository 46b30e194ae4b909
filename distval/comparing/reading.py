"""The JSON reports of earlier runs as a comparison reads them: a report file read and checked (a regular file, a
distval JSON report of schema_version 1, numbers that can be written back), why one cannot be compared with
(``unusable``), several baselines combined into their median, and a run's scenarios matched with a report's."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distval import strict_json
from distval.bounded_read import REPORT_MAX_BYTES, FileRefused, read_regular_file
from distval.errors import BadInput
from distval.reports.json_report import json_report
from distval.results.bandwidth import count_range
from distval.results.records import json_problem
from distval.results.scenario import RunSummary, ScenarioResult


class BadReport(BadInput):
    """A --baseline or compare file that is not a distval JSON report."""

    kind = "baseline"


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
                    scenario_property(scenario, "scenario_hash_any_image")
                    or scenario_property(scenario, "scenario_hash")
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
            values = [number_of(f.get(name)) for f in same]
            figure[name] = statistics.median(v for v in values if v is not None) if None not in values else None
        figures.append(figure)
    durations: dict[str, list[float]] = {}
    for entry in entries:
        for case in entry.get("cases") or []:
            if isinstance(case, dict) and number_of(case.get("duration_s")) is not None:
                durations.setdefault(str(case.get("name")), []).append(float(case["duration_s"]))
    merged["bandwidth"] = figures
    merged["cases"] = [
        {**case, "duration_s": statistics.median(durations[str(case.get("name"))])}
        for case in entries[0].get("cases") or []
        if isinstance(case, dict) and len(durations.get(str(case.get("name")), [])) == len(entries)
    ]
    return merged


def scenario_property(scenario: Mapping[str, Any], name: str) -> str | None:
    properties = scenario.get("properties")
    value = properties.get(name) if isinstance(properties, dict) else None
    return value if isinstance(value, str) and value else None


def match(
    old: Sequence[Mapping[str, Any]], scenario: Mapping[str, Any], by_name: bool
) -> tuple[Mapping[str, Any] | None, str | None]:
    """The old report's scenario that ``scenario`` is compared with, and what matched them."""
    keys = ("scenario_hash", "scenario_hash_any_image")
    for key in keys:
        value = scenario_property(scenario, key)
        for candidate in old:
            if value is not None and scenario_property(candidate, key) == value:
                return candidate, key
    if by_name:
        for candidate in old:
            if candidate.get("name") == scenario.get("name"):
                return candidate, "name"
    return None, None


def number_of(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def scenario_entries(summary: RunSummary, results: Sequence[ScenarioResult]) -> list[dict[str, Any]]:
    """The JSON report entries of ``results`` (scenarios of the run ``summary`` describes)."""
    if not results:
        return []
    return list(json_report(dataclasses.replace(summary, scenarios=tuple(results), early_error=None))["scenarios"])
