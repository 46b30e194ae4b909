"""RunSummary -> a Markdown summary: written to a file, and appended to ``$GITHUB_STEP_SUMMARY`` on GitHub Actions.

A heading with the verdict, a table of the scenarios (with the torch and CUDA the image reported), the
bandwidth figures with their charts, per scenario that failed its failing testcases' messages and once the
command that reproduces it, and per scenario the reasons its testcases were skipped for. The step summary
is appended to (GitHub collects each step's appends), so it is the one report that does not go through
``files.write_atomically``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from distval import __version__
from distval.config.shipped import DEFAULT_IMAGE
from distval.escape import markdown_cell, markdown_code, strip_controls
from distval.reports.common import failing_cases, passed_counts, reproduce_command, run_images, topology_rows_of
from distval.reports.files import write_atomically
from distval.reports.mermaid import Series, chart_section
from distval.results.bandwidth import TopologyRow, count_range
from distval.results.outcome import ERROR, EXIT_STATUS_CASE, FAILED, PASSED, SKIPPED
from distval.results.scenario import RunSummary

MARKDOWN_MESSAGE_CHARS = 2000
MARKDOWN_MAX_FAILURES = 50
MARKDOWN_MAX_SKIPS = 50  # reasons (lines) in the Skipped section
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
VERDICT_ICONS = {PASSED: "✅", FAILED: "❌", ERROR: "❌", SKIPPED: "⏭️"}


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
    if summary.image_note is not None:  # not a verdict on the user's image: said before anything else
        lines += [f"⚠️ {markdown_cell(summary.image_note)}", ""]
    if summary.scenarios:
        lines += [
            "| scenario | topology | ranks | image | torch | CUDA | status | passed | failed | errors | skipped | time |",
            "|---|---|---:|---|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for scenario in summary.scenarios:
            s = scenario.plan.scenario
            count = {status: sum(1 for c in scenario.cases if c.status == status) for status in (PASSED, FAILED, ERROR, SKIPPED)}
            # What the image's env check reported (the JUnit properties): "unknown" when it reported nothing.
            found = dict(scenario.properties)
            lines.append(
                f"| {markdown_cell(s.name)} | {markdown_cell(s.topology)} | {s.world_size} "
                f"| {markdown_cell(scenario.plan.image)} | {markdown_cell(found.get('torch_version', 'unknown'))} "
                f"| {markdown_cell(found.get('cuda_version', 'unknown'))} "
                f"| {VERDICT_ICONS.get(scenario.status, '')} {scenario.status} | {count[PASSED]} | {count[FAILED]} "
                f"| {count[ERROR]} | {count[SKIPPED]} | {scenario.duration_s:.1f} s |"
            )
        lines.append("")
    lines += bandwidth_section(summary)
    if summary.early_error is not None:
        kind, message = summary.early_error
        lines += [f"### The run stopped early: {markdown_cell(kind)}", "", *image_lines(summary)]
        lines += [_fenced(message[:MARKDOWN_MESSAGE_CHARS]), ""]
    return "\n".join(lines + failures_section(summary) + skipped_section(summary))


def image_lines(summary: RunSummary) -> list[str]:
    """Which image the run was to validate, each marked when it is distval's sample image: a run that stopped
    before any scenario ran has no table to say it. None known (the config unread, no --image): nothing."""
    images = run_images(summary)
    if not images:
        return []
    named = ", ".join(markdown_code(image) + (" (distval's sample image)" if image == DEFAULT_IMAGE else "") for image in images)
    return [f"Image under test: {named}.", ""]


def _cut(message: str) -> str:
    return message if len(message) <= MARKDOWN_MESSAGE_CHARS else message[:MARKDOWN_MESSAGE_CHARS] + "..."


def failures_section(summary: RunSummary) -> list[str]:
    """Per scenario with failed or errored testcases: each one's message (under exit_status what the diagnosis
    found), then once the command that runs the scenario again. At most MARKDOWN_MAX_FAILURES testcases."""
    failing = [(s, failing_cases(s)) for s in summary.scenarios if failing_cases(s)]
    if not failing:
        return []
    lines = ["### Failures", ""]
    shown = 0
    for scenario, cases in failing:
        if shown >= MARKDOWN_MAX_FAILURES:
            break
        lines += [f"#### {markdown_cell(scenario.plan.scenario.name)}: {markdown_cell(scenario.status)}", ""]
        for case in cases[: MARKDOWN_MAX_FAILURES - shown]:
            lines += [f"**{markdown_cell(case.name)}**: {markdown_cell(case.status)}", "", _fenced(_cut(case.message)), ""]
            # What the ranks left (root cause, flight recorder, stacks), under the scenario's exit_status.
            if case.name == EXIT_STATUS_CASE and scenario.diagnosis.lines():
                lines += [_fenced("\n".join(scenario.diagnosis.lines())), ""]
            shown += 1
        lines += ["Reproduce:", "", _fenced(reproduce_command(summary, scenario)), ""]
    total = sum(len(cases) for _, cases in failing)
    if total > shown:
        lines += [f"... and {total - shown} more failing testcases (see the JUnit or JSON report).", ""]
    return lines


def skipped_section(summary: RunSummary) -> list[str]:
    """Per scenario, each reason its testcases were skipped for (wholly, or on some ranks), with the testcases
    that share it: a skip validates nothing, and the reader must see why. At most MARKDOWN_MAX_SKIPS lines."""
    entries: list[str] = []
    for scenario in summary.scenarios:
        reasons: dict[str, list[str]] = {}
        for case in scenario.cases:
            if case.status == SKIPPED:
                reasons.setdefault(case.message, []).append(markdown_cell(case.name))
            elif case.skipped_ranks:
                ranks = ", ".join(map(str, case.skipped_ranks))
                reasons.setdefault(case.message, []).append(f"{markdown_cell(case.name)} (on rank(s) {ranks})")
        name = markdown_cell(scenario.plan.scenario.name)
        entries += [f"- {name}: {', '.join(cases)}: {markdown_cell(_cut(reason))}" for reason, cases in reasons.items()]
    if not entries:
        return []
    lines = ["### Skipped", "", *entries[:MARKDOWN_MAX_SKIPS]]
    if len(entries) > MARKDOWN_MAX_SKIPS:
        lines.append(f"- ... and {len(entries) - MARKDOWN_MAX_SKIPS} more reasons (see the JUnit or JSON report).")
    return [*lines, ""]


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


def efficiency_table(series: list[Series]) -> list[str]:
    """Per series: the raw TCP yardstick (GB/s) and each operation's efficiency (busbw / raw TCP) per message
    size; [] when no figure has one (the yardstick off, or a report from before it)."""
    if not any(f.efficiency is not None for s in series for f in s.figures):
        return []
    sizes = sorted({f.size for s in series for f in s.figures})
    labels = {f.size: f.label for s in series for f in s.figures}
    lines = [
        "#### Efficiency against raw TCP",
        "",
        "Raw TCP: the slowest direction between ring neighbours, measured with plain sockets in the same containers "
        "(GB/s); below it each operation's busbw / raw TCP at the same size.",
        "",
        "| scenario | operation | " + " | ".join(markdown_cell(labels[size]) for size in sizes) + " |",
        "|---|---|" + "---:|" * len(sizes),
    ]
    for s in series:
        tcp = {f.size: f.tcp_gbps for f in s.figures if f.tcp_gbps is not None}
        if not tcp:
            continue
        cells = [f"{tcp[size]:.3f}" if size in tcp else "" for size in sizes]
        lines.append(f"| {markdown_cell(s.name)} | raw TCP (GB/s) | " + " | ".join(cells) + " |")
        for operation in dict.fromkeys(f.operation for f in s.figures):
            ratios = {f.size: f.efficiency for f in s.figures if f.operation == operation and f.efficiency is not None}
            cells = [f"{ratios[size]:.2f}" if size in ratios else "" for size in sizes]
            lines.append(f"| {markdown_cell(s.name)} | {markdown_cell(operation)} | " + " | ".join(cells) + " |")
    return [*lines, ""]


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
        f"{'iteration' if iterations == '1' else 'iterations'} per operation and message size.",
        "",
        *figure_table(series),
        "",
    ]
    links = [(s.plan.scenario.name, dict(s.properties).get("bandwidth.link")) for s in summary.scenarios if s.figures]
    named = [f"{markdown_cell(name)}: {markdown_cell(link)}" for name, link in links if link]
    if named:
        # The interface the backend's sockets used and its nominal speed where the machine reports one (for NCCL the
        # yardstick, beside the transport it picked; a Docker veth reports 10 Gb/s whatever it carries).
        lines += ["Link (the interface the backend's sockets use, its nominal speed): " + "; ".join(named) + ".", ""]
    lines += efficiency_table(series)
    lines += ratio_table(topology_rows_of(summary))
    operations = list(dict.fromkeys(f.operation for s in series for f in s.figures))
    return lines + chart_section(operations, series)


def ratio_table(rows: list[TopologyRow]) -> list[str]:
    """Across containers against one container, at the same world size: only the ratio per operation and size
    (the busbw of either is in the table above), one row per pair of scenarios and operation."""
    if not rows:
        return []
    sizes = sorted({r.size for r in rows})
    labels = {r.size: r.label for r in rows}
    groups: dict[tuple[int, str, str, str], dict[int, float]] = {}
    for r in rows:
        groups.setdefault((r.world_size, r.in_container, r.cross_container, r.operation), {})[r.size] = r.ratio
    lines = [
        "#### Across containers against one container",
        "",
        "cross-container busbw / in-container busbw, at the same world size.",
        "",
        "| ranks | in one container | across containers | operation | "
        + " | ".join(markdown_cell(labels[size]) for size in sizes)
        + " |",
        "|---:|---|---|---|" + "---:|" * len(sizes),
    ]
    for (world_size, inside, across, operation), ratios in groups.items():
        cells = [f"{ratios[size]:.2f}x" if size in ratios else "" for size in sizes]
        lines.append(
            f"| {world_size} | {markdown_cell(inside)} | {markdown_cell(across)} | {markdown_cell(operation)} | "
            + " | ".join(cells)
            + " |"
        )
    return [*lines, ""]


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
