"""A ``comparison.Judgement`` -> what ``distval compare`` prints: the regressions first (every one, each on one line
with old -> new and why), then why nothing was compared (if so), the improvements, and per scenario the image,
torch and verdict of both runs and the testcases and busbw figures that changed; the unchanged ones are one count
line unless ``show_all`` (``--all``) lists them. Everything the reports say is terminal text (distval/escape.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from distval.escape import terminal_line


def _safe(cells: tuple[str, ...]) -> tuple[str, ...]:
    """Cells that came from the reports (names, images, statuses: the image under test wrote some) as
    terminal text: no escape sequence of theirs reaches the terminal."""
    return tuple(terminal_line(c) for c in cells)


def _table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> list[str]:
    header, body = _safe(header), [_safe(r) for r in body]
    widths = [max(len(header[i]), *(len(r[i]) for r in body)) for i in range(len(header))]

    def row(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [row(header), row(tuple("-" * w for w in widths)), *(row(r) for r in body)]


def render_comparison_text(judgement: Judgement, show_all: bool = False) -> str:
    comparison = judgement.comparison
    t = comparison.tolerances
    regressions, improvements = judgement.having(REGRESSION), judgement.having(IMPROVEMENT)
    lines = [
        terminal_line(f"old: {comparison.old_path} (run {comparison.old.get('run_id')})"),
        terminal_line(f"new: {comparison.new_path} (run {comparison.new.get('run_id')})"),
        f"tolerance: busbw -{t.busbw:.0%} and the call +{t.busbw_slack_us:g} us; "
        + (f"durations +{t.duration:.0%} and +{t.duration_slack_s:g} s " if t.durations_judged else "durations not judged ")
        + "(process_group and exit_status not compared)",
        "",
        f"Regressions ({len(regressions)}):" if regressions else "Regressions: none",
        *("  " + terminal_line(line(item)) for item in regressions),
    ]
    if judgement.nothing_compared:
        lines += ["", f"Nothing compared ({len(judgement.nothing_compared)}, each fails the comparison):"]
        lines += ["  " + terminal_line(why) for why in judgement.nothing_compared]
    if improvements:
        lines += ["", f"Improvements ({len(improvements)}):", *("  " + terminal_line(line(item)) for item in improvements)]
    notes = judgement.having(NOTE)
    if notes:
        lines += ["", f"Notes ({len(notes)}, not judged):", *("  " + terminal_line(line(item)) for item in notes)]
    for scenario in judgement.scenarios:
        found = scenario.comparison
        old, new = scenario.items[0].old, scenario.items[0].new  # the SCENARIO item comes first
        matched = f"matched by {found.matched_by}" if found.matched_by else "only in one report"
        lines += ["", terminal_line(f"== {found.name} ({matched})")]
        lines += _table(
            ("", "old", "new"),
            [(key, str((old or {}).get(key, "-")), str((new or {}).get(key, "-"))) for key in ("image", "torch", "status")]
            + [("duration", _seconds(old), _seconds(new))]
            + [("bandwidth iterations", str((old or {}).get("iterations", "-")), str((new or {}).get("iterations", "-")))],
        )
        shown = [i for i in scenario.items if i.kind != SCENARIO and (show_all or i.status != UNCHANGED)]
        if shown:
            lines.append("")
            lines += _table(
                ("testcase / figure", "old", "new", "new/old", "status", "why"),
                [(i.name, cell(i, i.old), cell(i, i.new), ratio_cell(i), i.status, i.why) for i in shown],
            )
        if not show_all and any(i.status == UNCHANGED and i.kind != SCENARIO for i in scenario.items):
            lines.append(f"{unchanged_count(scenario.items)}: --all lists them")
    lines += ["", counts(judgement), f"verdict: {judgement.verdict.name} (exit code {judgement.exit_code})"]
    return "\n".join(lines) + "\n"


def _seconds(side: Mapping[str, Any] | None) -> str:
    value = (side or {}).get("duration_s")
    return "-" if value is None else f"{value:.1f} s"
