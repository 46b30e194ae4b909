"""``distval references suggest REPORT...``: a references file (distval/config/references.py) from good runs of one
system, that the next good run passes.

Per scenario, operation and size, over the passed scenarios of the reports: ``gbps`` is the median of the runs' busbw
(each the slowest rank's median, as a run is judged) and ``tolerance`` covers their spread:

    tolerance = min(MAX, max(MIN, 3 x 1.4826 x MAD / median, 1.25 x (median - slowest) / median))

1.4826 x MAD estimates the standard deviation of the runs robustly (one outlier run moves it little), and three of
them below the median is where a good run falls with probability about 0.1 % under a normal spread; the slowest good
run itself, with a quarter more room, always passes. MIN is --baseline's busbw tolerance: a file made from runs that
happened to agree must not make the next ordinary run of the machine fail (docs/measurements.md, "Noise").
A figure only some good runs have is left out (it would be judged on runs that never measured it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from distval.comparing.deltas import DEFAULT_BUSBW_TOLERANCE, busbw_figures
from distval.comparing.reading import BadReport, unusable
from distval.config.references import REFERENCES_VERSION
from distval.results.outcome import PASSED

MIN_TOLERANCE = DEFAULT_BUSBW_TOLERANCE
MAX_TOLERANCE = 0.9
MAD_TO_SD = 1.4826  # a normal distribution's standard deviation over its median absolute deviation
SPREAD_SDS = 3.0
SLOWEST_ROOM = 1.25


@dataclass(frozen=True)
class Suggested:
    scenario: str
    operation: str
    label: str
    size: int
    gbps: float
    tolerance: float
    runs: int


def tolerance_of(values: Sequence[float]) -> tuple[float, float]:
    """(median, tolerance) of one figure's values over the good runs (each > 0)."""
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    spread = SPREAD_SDS * MAD_TO_SD * mad / median
    slowest = SLOWEST_ROOM * (median - min(values)) / median
    return median, min(MAX_TOLERANCE, max(MIN_TOLERANCE, spread, slowest))


def suggest(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Suggested]:
    """The figures of the passed scenarios every report has; BadReport when a report is unusable or holds no passed
    scenario with a figure (a file made from nothing would judge nothing)."""
    problems = [line for path, report in reports for line in unusable(report, path)]
    if problems:
        raise BadReport("; ".join(problems))
    per_report: list[dict[tuple[str, str, int], tuple[str, float]]] = []
    for path, report in reports:
        found: dict[tuple[str, str, int], tuple[str, float]] = {}
        for scenario in report.get("scenarios") or []:
            if not isinstance(scenario, dict) or scenario.get("status") != PASSED:
                continue
            for (operation, size), figure in busbw_figures(scenario).items():
                if figure.median > 0:
                    found[(str(scenario.get("name")), operation, size)] = (figure.label, figure.median)
        if not found:
            raise BadReport(f"{path}: no passed scenario with a busbw figure: not a good run to take references from")
        per_report.append(found)
    common = [key for key in per_report[0] if all(key in found for found in per_report[1:])]
    suggested = []
    for key in common:
        values = [found[key][1] for found in per_report]
        median, tolerance = tolerance_of(values)
        scenario, operation, size = key
        suggested.append(Suggested(scenario, operation, per_report[0][key][0], size, median, tolerance, len(values)))
    return suggested


def render(suggested: Sequence[Suggested], system: str, sources: Sequence[str]) -> str:
    """The references file's YAML text (with a comment saying where the numbers came from)."""
    systems: dict[str, Any] = {}
    for s in suggested:
        sizes = systems.setdefault(s.scenario, {"busbw": {}})["busbw"].setdefault(s.operation, {})
        sizes[s.label] = {"gbps": float(f"{s.gbps:.6g}"), "tolerance": min(MAX_TOLERANCE, math.ceil(s.tolerance * 1000) / 1000)}
    header = (
        f"# distval references suggest: {len(sources)} good run(s) of {system}; gbps is each figure's median over them,\n"
        '# tolerance covers their spread (docs/reports.md, "References per machine").\n'
    )
    body = yaml.safe_dump({"version": REFERENCES_VERSION, "systems": {system: systems}}, sort_keys=False, default_flow_style=None)
    return header + body
