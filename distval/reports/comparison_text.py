"""A ``baseline.Comparison`` -> the side-by-side table ``distval compare`` prints: per scenario the image,
torch and verdict of both runs, every testcase's verdict and duration, every busbw figure, and what changed."""

from __future__ import annotations

from collections.abc import Sequence

from distval.escape import terminal_line
from distval.reports.baseline import Comparison, facts, rows


def _safe(cells: tuple[str, ...]) -> tuple[str, ...]:
    """Cells that came from the reports (names, images, statuses: the image under test wrote some) as
    terminal text: no escape sequence of theirs reaches the terminal."""
    return tuple(terminal_line(c) for c in cells)


def _table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> list[str]:
    header, body = _safe(header), [_safe(r) for r in body]
    widths = [max(len(header[i]), *(len(r[i]) for r in body)) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in body)]


def render_comparison_text(comparison: Comparison) -> str:
    t = comparison.tolerances
    lines = [
        terminal_line(f"old: {comparison.old_path} (run {comparison.old.get('run_id')})"),
        terminal_line(f"new: {comparison.new_path} (run {comparison.new.get('run_id')})"),
        f"tolerance: busbw -{t.busbw:.0%} and the call +{t.busbw_slack_us:g} us; "
        f"durations +{t.duration:.0%} and +{t.duration_slack_s:g} s "
        "(process_group and exit_status not compared)",
    ]
    for scenario in comparison.scenarios:
        old, new = facts(scenario.old), facts(scenario.new)
        matched = f"matched by {scenario.matched_by}" if scenario.matched_by else "only in one report"
        lines += ["", terminal_line(f"== {scenario.name} ({matched})")]
        lines += _table(
            ("", "old", "new"),
            [(key, old[key], new[key]) for key in ("image", "torch", "status", "duration")]
            + [("bandwidth iterations", scenario.iterations(scenario.old), scenario.iterations(scenario.new))],
        )
        body = [(r.name, r.old, r.new, r.ratio, r.change) for r in rows(scenario)]
        if body:
            lines.append("")
            lines += _table(("testcase / figure", "old", "new", "new/old", "changed"), body)
    regressions = [(s.name, d) for s in comparison.scenarios for d in s.regressions]
    lines.append("")
    if regressions:
        lines.append(f"{len(regressions)} figure(s) regressed past the tolerance:")
        lines += [terminal_line(f"  {name}: {delta.describe(t)}") for name, delta in regressions]
    else:
        lines.append("no figure regressed past the tolerance")
    problems = comparison.problems
    if problems:
        lines.append(f"{len(problems)} other regression(s) (each fails the comparison):")
        lines += ["  " + terminal_line(problem) for problem in problems]
    lines.append("verdict: " + ("regressed (exit code 1)" if comparison.regressed else "no regression (exit code 0)"))
    return "\n".join(lines) + "\n"
