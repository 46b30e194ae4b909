"""A ``comparison.Judgement`` -> Markdown (``distval compare --markdown``): the regressions first, then why nothing
was compared (if so) and the improvements; per scenario the side-by-side tables of what changed (the unchanged
rows one count line unless ``show_all``) and a busbw chart per operation with one line per run (image). Everything
the reports say is escaped (distval/escape.py markdown_cell)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distval.comparing.comparison import (
    IMPROVEMENT,
    NOTE,
    REGRESSION,
    SCENARIO,
    UNCHANGED,
    Judgement,
    cell,
    counts,
    line,
    ratio_cell,
    unchanged_count,
)
from distval.errors import EXIT_PASSED
from distval.escape import markdown_cell as _cell
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


def render_comparison_markdown(judgement: Judgement, show_all: bool = False) -> str:
    comparison = judgement.comparison
    t = comparison.tolerances
    verdict = judgement.verdict
    mark = "✅" if verdict.exit_code == EXIT_PASSED else "❌"
    regressions, improvements = judgement.having(REGRESSION), judgement.having(IMPROVEMENT)
    lines = [
        f"## distval compare: {mark} {verdict.name} (exit code {judgement.exit_code})",
        "",
        f"Old {_cell(comparison.old_path)} (run {_cell(str(comparison.old.get('run_id')))}), new {_cell(comparison.new_path)} "
        f"(run {_cell(str(comparison.new.get('run_id')))}). "
        f"Tolerance: busbw -{t.busbw:.0%} and the call +{t.busbw_slack_us:g} us; "
        + (f"durations +{t.duration:.0%} and +{t.duration_slack_s:g} s" if t.durations_judged else "durations not judged")
        + " (process_group and exit_status not compared). "
        "busbw is the slowest rank's median of the stated iterations. " + counts(judgement) + ".",
        "",
        f"### Regressions ({len(regressions)})" if regressions else "### Regressions: none",
        "",
    ]
    if regressions:
        lines += [*(f"- {_cell(line(item))}" for item in regressions), ""]
    if judgement.nothing_compared:
        lines += ["### Nothing compared (each fails the comparison)", ""]
        lines += [*(f"- {_cell(why)}" for why in judgement.nothing_compared), ""]
    if improvements:
        lines += [f"### Improvements ({len(improvements)})", "", *(f"- {_cell(line(item))}" for item in improvements), ""]
    notes = judgement.having(NOTE)
    if notes:
        lines += [f"### Notes ({len(notes)}, not judged)", "", *(f"- {_cell(line(item))}" for item in notes), ""]
    for scenario in judgement.scenarios:
        found = scenario.comparison
        old, new = scenario.items[0].old or {}, scenario.items[0].new or {}  # the SCENARIO item comes first
        matched = f"matched by {found.matched_by}" if found.matched_by else "only in one report"
        lines += [
            f"### {_cell(found.name)} ({matched})",
            "",
            "| | old | new |",
            "|---|---|---|",
            *(
                f"| {key} | {_cell(str(old.get(key, '-')))} | {_cell(str(new.get(key, '-')))} |"
                for key in ("image", "torch", "status")
            ),
            f"| duration | {_seconds(old)} | {_seconds(new)} |",
            f"| bandwidth iterations | {_cell(str(old.get('iterations', '-')))} | {_cell(str(new.get('iterations', '-')))} |",
            "",
        ]
        shown = [i for i in scenario.items if i.kind != SCENARIO and (show_all or i.status != UNCHANGED)]
        if shown:
            lines += ["| testcase / figure | old | new | new/old | status | why |", "|---|---:|---:|---:|---|---|"]
            lines += [
                f"| {_cell(i.name)} | {_cell(cell(i, i.old))} | {_cell(cell(i, i.new))} | {_cell(ratio_cell(i))} | "
                + (f"**{i.status}**" if i.status == REGRESSION else i.status)
                + f" | {_cell(i.why)} |"
                for i in shown
            ]
            lines.append("")
        if not show_all and any(i.status == UNCHANGED and i.kind != SCENARIO for i in scenario.items):
            lines += [f"{unchanged_count(scenario.items)}.", ""]
        series = [
            s
            for s in (
                _series(f"old: {old.get('image', '-')}", found.old),
                _series(f"new: {new.get('image', '-')}", found.new),
            )
            if s is not None
        ]
        operations = list(dict.fromkeys(f.operation for s in series for f in s.figures))
        lines += chart_section(operations, series)
    return "\n".join(lines)


def write_comparison_markdown(judgement: Judgement, path: str | Path, show_all: bool = False) -> None:
    write_atomically(path, render_comparison_markdown(judgement, show_all))


def _seconds(side: Mapping[str, Any]) -> str:
    value = side.get("duration_s")
    return "-" if value is None else f"{value:.1f} s"
