"""RunSummary -> a Markdown summary: written to a file, and appended to ``$GITHUB_STEP_SUMMARY`` on GitHub Actions.

A heading with the verdict, a table of the scenarios, and per failing testcase its message and the
command that reproduces it. The step summary is appended to (GitHub collects each step's appends), so
it is the one report that does not go through ``files.write_atomically``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from distval import __version__
from distval.escape import markdown_cell, markdown_code, strip_controls
from distval.reports.common import failing_cases, passed_counts, reproduce_command, topology_rows_of
from distval.reports.files import write_atomically
from distval.reports.mermaid import Series, chart_section
from distval.results.bandwidth import count_range
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED
from distval.results.scenario import RunSummary

MARKDOWN_MESSAGE_CHARS = 2000
MARKDOWN_MAX_FAILURES = 50
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
VERDICT_ICONS = {PASSED: "✅", FAILED: "❌", ERROR: "❌", SKIPPED: "⏭️"}
# comparison_markdown.py still imports the former local helper by this name; it is escape.markdown_cell now.
_cell = markdown_cell


def _fenced(text: str) -> str:
    """A fenced code block of ``text``: the fence is longer than any backtick run in it, so no line of the
    text closes it; controls are removed (the file is also read with cat)."""
    text = strip_controls(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def verdict(summary: RunSummary) -> str:
    if summary.early_error is not None:
        return f"stopped early ({summary.early_error[0]})"
    if summary.nothing_validated:
        return "nothing validated (every scenario skipped)"
    return "passed" if summary.exit_code == 0 else "failed"


def render_markdown(summary: RunSummary) -> str:
    passed, total = passed_counts(summary)
    icon = "✅" if summary.exit_code == 0 else "❌"
    lines = [
        f"## {icon} distval: {markdown_cell(verdict(summary))}",
        "",
        f"{passed} of {total} check results passed in {len(summary.scenarios)} scenario(s); exit code {summary.exit_code}. "
        f"Run {markdown_code(summary.run_id)}, distval {__version__}, "
        f"Docker Engine {markdown_cell(summary.engine_version or 'unknown')}, host {markdown_code(summary.host)}.",
        "",
    ]
    if summary.scenarios:
        lines += [
            "| scenario | topology | ranks | image | status | passed | failed | errors | skipped | time |",
            "|---|---|---:|---|---|---:|---:|---:|---:|---:|",
        ]
        for scenario in summary.scenarios:
            s = scenario.plan.scenario
            count = {status: sum(1 for c in scenario.cases if c.status == status) for status in (PASSED, FAILED, ERROR, SKIPPED)}
            lines.append(
                f"| {markdown_cell(s.name)} | {markdown_cell(s.topology)} | {s.world_size} "
                f"| {markdown_cell(scenario.plan.image)} "
                f"| {VERDICT_ICONS.get(scenario.status, '')} {scenario.status} | {count[PASSED]} | {count[FAILED]} "
                f"| {count[ERROR]} | {count[SKIPPED]} | {scenario.duration_s:.1f} s |"
            )
        lines.append("")
    lines += bandwidth_section(summary)
    if summary.early_error is not None:
        kind, message = summary.early_error
        lines += [f"### The run stopped early: {markdown_cell(kind)}", "", _fenced(message[:MARKDOWN_MESSAGE_CHARS]), ""]
    failures = [(s, c) for s in summary.scenarios for c in failing_cases(s)]
    if failures:
        lines += ["### Failures", ""]
        for scenario, case in failures[:MARKDOWN_MAX_FAILURES]:
            message = (
                case.message if len(case.message) <= MARKDOWN_MESSAGE_CHARS else case.message[:MARKDOWN_MESSAGE_CHARS] + "..."
            )
            lines += [
                f"#### {markdown_cell(scenario.plan.scenario.name)} / {markdown_cell(case.name)}: {markdown_cell(case.status)}",
                "",
                _fenced(message),
                "",
                # What the ranks left (root cause, flight recorder, stacks), under the scenario's exit_status.
                *(
                    [_fenced("\n".join(scenario.diagnosis.lines())), ""]
                    if case.name == "exit_status" and scenario.diagnosis.lines()
                    else []
                ),
                "Reproduce:",
                "",
                _fenced(reproduce_command(summary, scenario)),
                "",
            ]
        if len(failures) > MARKDOWN_MAX_FAILURES:
            lines += [
                f"... and {len(failures) - MARKDOWN_MAX_FAILURES} more failing testcases (see the JUnit or JSON report).",
                "",
            ]
    return "\n".join(lines)


def figure_table(series: list[Series]) -> list[str]:
    """busbw (GB/s) per series and operation (rows) and message size (columns)."""
    sizes = sorted({f.size for s in series for f in s.figures})
    labels = {f.size: f.label for s in series for f in s.figures}
    lines = [
        "| scenario | operation | " + " | ".join(markdown_cell(labels[size]) for size in sizes) + " |",
        "|---|---|" + "---:|" * len(sizes),
    ]
    for s in series:
        for operation in dict.fromkeys(f.operation for f in s.figures):
            busbw = {f.size: f.busbw_gbps for f in s.figures if f.operation == operation}
            cells = [f"{busbw[size]:.3f}" if size in busbw else "" for size in sizes]
            lines.append(f"| {markdown_cell(s.name)} | {markdown_cell(operation)} | " + " | ".join(cells) + " |")
    return lines


def bandwidth_section(summary: RunSummary) -> list[str]:
    """busbw per scenario, in-container next to cross-container, and a chart per operation; [] without figures."""
    series = [Series(s.plan.scenario.name, s.figures) for s in summary.scenarios if s.figures]
    if not series:
        return []
    iterations = count_range(f.iterations for s in series for f in s.figures)
    lines = [
        "### Bandwidth",
        "",
        f"busbw in GB/s (nccl-tests' definition), the slowest rank's median of {iterations} timed "
        "iterations per operation and message size.",
        "",
        *figure_table(series),
        "",
    ]
    rows = topology_rows_of(summary)
    if rows:
        lines += [
            "#### In one container and across containers",
            "",
            "| ranks | operation | size | in-container busbw | cross-container busbw | cross / in |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r.world_size} | {markdown_cell(r.operation)} | {markdown_cell(r.label)} | {r.in_container_busbw_gbps:.3f} "
            f"| {r.cross_container_busbw_gbps:.3f} | {r.ratio:.2f} |"
            for r in rows
        ]
        lines.append("")
    operations = list(dict.fromkeys(f.operation for s in series for f in s.figures))
    return lines + chart_section(operations, series)


def write_markdown(summary: RunSummary, path: str | Path) -> None:
    write_atomically(path, render_markdown(summary))


def append_step_summary(summary: RunSummary, environ: Mapping[str, str] = os.environ) -> str | None:
    """Append the Markdown summary to the file $GITHUB_STEP_SUMMARY names, if set; returns that path."""
    path = environ.get(STEP_SUMMARY_ENV)
    if not path:
        return None
    with open(path, "a", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write(render_markdown(summary) + "\n")
    return path
