"""The summary printed on stdout at the end of a run: first the note that the image was distval's sample one
when no --image was given (before anything a reader could take for a verdict on their image), then a table
scenario x testcase with each status and the first line of its message, the command that reproduces each
failing scenario, and the verdict line."""

from __future__ import annotations

from distval.escape import terminal_line, terminal_text
from distval.reports.common import failing_cases, passed_counts, reproduce_command
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED
from distval.results.scenario import RunSummary

TABLE_MESSAGE_CHARS = 100
TABLE_NAME_CHARS = 40


def first_line(message: str, limit: int) -> str:
    """The first line of ``message`` for a terminal (controls removed: it can be the image's text), cut to ``limit``."""
    text = terminal_line(message.strip().splitlines()[0]) if message.strip() else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _status_word(status: str) -> str:
    return status.upper() if status in (FAILED, ERROR) else status


def render_summary(summary: RunSummary) -> str:
    """A table scenario x testcase -> status and the key message; then how to reproduce each failure."""
    rows: list[tuple[tuple[str, str, str], str]] = [
        (
            (first_line(s.plan.scenario.name, TABLE_NAME_CHARS), first_line(c.name, TABLE_NAME_CHARS), _status_word(c.status)),
            first_line(c.message, TABLE_MESSAGE_CHARS),
        )
        for s in summary.scenarios
        for c in s.cases
    ]
    lines: list[str] = []
    if rows:
        heading = ("scenario", "testcase", "status")
        widths = [max(len(heading[i]), *(len(cells[i]) for cells, _ in rows)) for i in range(3)]

        def row(cells: tuple[str, str, str], message: str) -> str:
            return ("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)) + "  " + message).rstrip()

        lines.append(row(heading, "message"))
        lines.append(row(("-" * widths[0], "-" * widths[1], "-" * widths[2]), "-" * 7))
        lines += [row(cells, message) for cells, message in rows]
    failing = [(s, failing_cases(s)) for s in summary.scenarios if s.status not in (PASSED, SKIPPED)]
    if failing:
        lines.append("")
        lines.append("To reproduce:")
        for scenario, cases in failing:
            names = ", ".join(f"{terminal_line(c.name)} ({c.status})" for c in cases) or "no results"
            lines.append(f"  {terminal_line(scenario.plan.scenario.name)}: {names}")
            lines.append(f"    {terminal_text(reproduce_command(summary, scenario))}")  # its blanks are the command's
    if summary.early_error is not None:
        kind, message = summary.early_error
        if lines:
            lines.append("")
        lines.append(f"ERROR   {terminal_line(kind)}: {first_line(message, 300)}")
    passed, total = passed_counts(summary)
    if lines:
        lines.append("")
    if summary.nothing_validated:
        lines.append("nothing was validated: every scenario was skipped, each check with its reason above")
    lines.append(f"distval run {summary.run_id}: {passed} of {total} check results passed; exit code {summary.exit_code}")
    if summary.image_note is not None:  # first: a reader who stops at the table (or the log's head) must not miss it
        lines = [summary.image_note, "", *lines]
    # Each cell was made safe above (so the columns line up); this catches any line that was not.
    return terminal_text("\n".join(lines)) + "\n"
