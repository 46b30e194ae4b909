"""A ``baseline.Comparison`` -> Markdown (``distval compare --markdown``): the side-by-side tables and a
busbw chart per operation with one line per run (image)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distval.escape import markdown_cell as _cell
from distval.reports.baseline import Comparison, facts, rows
from distval.reports.files import write_atomically
from distval.reports.mermaid import Series, chart_section
from distval.results.bandwidth import Figure, figures_from_details


def _series(label: str, scenario: Mapping[str, Any] | None) -> Series | None:
    figures: list[Figure] = []
    for case in (scenario or {}).get("cases") or []:
        if not isinstance(case, dict):
            continue
        name = str(case.get("name", ""))
        if name.startswith("bandwidth.") and isinstance(case.get("details"), dict):
            figures += figures_from_details(name.split(".", 1)[1], case["details"])
    return Series(label, tuple(figures)) if figures else None


def render_comparison_markdown(comparison: Comparison) -> str:
    t = comparison.tolerances
    verdict = "❌ regressed" if comparison.regressed else "✅ no regression"
    lines = [
        f"## distval compare: {verdict}",
        "",
        f"Old {_cell(comparison.old_path)} (run {_cell(str(comparison.old.get('run_id')))}), new {_cell(comparison.new_path)} "
        f"(run {_cell(str(comparison.new.get('run_id')))}). "
        f"Tolerance: busbw -{t.busbw:.0%} and the call +{t.busbw_slack_us:g} us; "
        f"durations +{t.duration:.0%} and "
        f"+{t.duration_slack_s:g} s (process_group and exit_status not compared). "
        "busbw is the slowest rank's median of the stated iterations.",
        "",
    ]
    for scenario in comparison.scenarios:
        old, new = facts(scenario.old), facts(scenario.new)
        matched = f"matched by {scenario.matched_by}" if scenario.matched_by else "only in one report"
        lines += [
            f"### {_cell(scenario.name)} ({matched})",
            "",
            "| | old | new |",
            "|---|---|---|",
            *(f"| {key} | {_cell(old[key])} | {_cell(new[key])} |" for key in ("image", "torch", "status", "duration")),
            f"| bandwidth iterations | {_cell(scenario.iterations(scenario.old))} | {_cell(scenario.iterations(scenario.new))} |",
            "",
        ]
        body = rows(scenario)
        if body:
            lines += ["| testcase / figure | old | new | new/old | changed |", "|---|---:|---:|---:|---|"]
            lines += [
                f"| {_cell(r.name)} | {_cell(r.old)} | {_cell(r.new)} | {_cell(r.ratio)} | "
                f"{'**' + _cell(r.change) + '**' if r.change else ''} |"
                for r in body
            ]
            lines.append("")
        series = [
            s
            for s in (
                _series(f"old: {old['image']}", scenario.old),
                _series(f"new: {new['image']}", scenario.new),
            )
            if s is not None
        ]
        operations = list(dict.fromkeys(f.operation for s in series for f in s.figures))
        lines += chart_section(operations, series)
    regressions = [(s.name, d) for s in comparison.scenarios for d in s.regressions]
    if regressions or comparison.problems:
        lines += ["### Regressions", ""]
        lines += [f"- {_cell(name)}: {_cell(delta.describe(t))}" for name, delta in regressions]
        lines += [f"- {_cell(problem)}" for problem in comparison.problems]
        lines.append("")
    return "\n".join(lines)


def write_comparison_markdown(comparison: Comparison, path: str | Path) -> None:
    write_atomically(path, render_comparison_markdown(comparison))
