"""Last-known-good: the options of ``distval run --baseline`` (the report and the tolerances), the baseline
testcases it adds to a run's summary, and the ``distval compare`` command (harness/baseline.py compares)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from harness import cli_values
from harness.errors import BadInput
from harness.plan import ScenarioPlan
from harness.results import RunSummary, ScenarioResult

# Re-measured twice: between runs of one image on a shared 2-core VM, the default sweep's baseline failed
# 24 of 120 comparisons with one re-measure and 12 of 360 with two (README "Noise"); a slower image pays
# two more runs of its regressed scenarios.
DEFAULT_REMEASURE = 2


def add_baseline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        type=cli_values.report_file,
        action="append",
        metavar="GOOD.json",
        help="compare every check's duration and bandwidth figure with this previous JSON report (same scenarios, "
        "matched by scenario hash); a figure past the tolerance fails the scenario's 'baseline' testcase. Given "
        "several times: with the median of each figure over those reports",
    )
    parser.add_argument(
        "--remeasure",
        type=cli_values.count,
        metavar="N",
        help=f"run a scenario again, up to N times (default {DEFAULT_REMEASURE}; 0: never), while a figure of it regressed "
        "against --baseline in every run so far: a figure regresses only when it did in every run (a slower image is "
        "slow every time, a burst of load on a shared machine passes)",
    )
    _tolerance_arguments(parser)


def _tolerance_arguments(parser: argparse.ArgumentParser) -> None:
    from harness.baseline import (
        DEFAULT_BUSBW_SLACK_US,
        DEFAULT_BUSBW_TOLERANCE,
        DEFAULT_DURATION_SLACK_S,
        DEFAULT_DURATION_TOLERANCE,
    )

    parser.add_argument(
        "--busbw-tolerance",
        type=cli_values.fraction,
        default=DEFAULT_BUSBW_TOLERANCE,
        metavar="F",
        help=f"a busbw lower by more than this fraction (0.2 or 20%%) regresses (default {DEFAULT_BUSBW_TOLERANCE * 100:.0f}%%)",
    )
    parser.add_argument(
        "--busbw-slack-us",
        type=cli_values.microseconds,
        default=DEFAULT_BUSBW_SLACK_US,
        metavar="US",
        help=f"... and only when its median (and its best) call is also slower by more than this many microseconds "
        f"(default {DEFAULT_BUSBW_SLACK_US:g}: the noise of small calls on a shared machine; 0 on a dedicated runner "
        "judges by the fraction alone)",
    )
    parser.add_argument(
        "--duration-tolerance",
        type=cli_values.fraction,
        default=DEFAULT_DURATION_TOLERANCE,
        metavar="F",
        help=f"a duration longer by more than this fraction (and by more than {DEFAULT_DURATION_SLACK_S:g} s) regresses "
        f"(default {DEFAULT_DURATION_TOLERANCE * 100:.0f}%%)",
    )


def _tolerances(args: argparse.Namespace) -> Any:
    from harness.baseline import Tolerances

    return Tolerances(busbw=args.busbw_tolerance, duration=args.duration_tolerance, busbw_slack_us=args.busbw_slack_us)


def check_remeasure(args: argparse.Namespace) -> None:
    """--remeasure re-runs what regressed against --baseline: alone it is bad input (exit code 2)."""
    if getattr(args, "remeasure", None) is not None and not getattr(args, "baseline", None):
        raise BadInput("--remeasure runs again the scenarios that regressed against --baseline: give --baseline too")


def remeasure(
    summary: RunSummary,
    args: argparse.Namespace,
    run_again: Callable[[tuple[ScenarioPlan, ...]], list[ScenarioResult]],
    log: Callable[[str], None],
) -> dict[int, list[ScenarioResult]]:
    """Up to --remeasure times, the scenarios whose 'baseline' testcase would fail (a figure regressed in the
    run and in every re-measure so far) run again with ``run_again``; their results, by the scenario's
    index in the summary (harness/baseline.py confirms each regression against them)."""
    if not getattr(args, "baseline", None) or not summary.scenarios:
        return {}
    from harness.baseline import baseline_case, combined_baseline, scenario_entries
    from harness.results import FAILED, PASSED

    path, baseline = combined_baseline(args.baseline)
    tolerances = _tolerances(args)
    entries = scenario_entries(summary, summary.scenarios)
    found: dict[int, list[ScenarioResult]] = {}
    times = DEFAULT_REMEASURE if args.remeasure is None else args.remeasure
    for attempt in range(1, times + 1):
        # Only scenarios whose checks passed: one that failed a check fails the run whatever its figures, and
        # --keep-on-failure may hold its containers (a second run of it would clash with them).
        suspects = [
            index
            for index, entry in enumerate(entries)
            if summary.scenarios[index].status == PASSED
            and baseline_case(entry, baseline, tolerances, path, scenario_entries(summary, found.get(index, ()))).status == FAILED
        ]
        if not suspects:
            break
        names = ", ".join(summary.scenarios[i].plan.scenario.name for i in suspects)
        past = f"with a figure past the tolerance against {path}"
        log(f"re-measuring {len(suspects)} scenario(s) {past} ({attempt} of {times}): {names}")
        for index, result in zip(suspects, run_again(tuple(summary.scenarios[i].plan for i in suspects)), strict=True):
            found.setdefault(index, []).append(result)
    return found


def with_baseline(
    summary: RunSummary, args: argparse.Namespace, remeasures: dict[int, list[ScenarioResult]] | None = None
) -> RunSummary:
    """The summary with a 'baseline' testcase per scenario when --baseline was given (and scenarios ran)."""
    if not getattr(args, "baseline", None) or not summary.scenarios:
        return summary
    from harness.baseline import apply_baseline, combined_baseline

    path, baseline = combined_baseline(args.baseline)
    return apply_baseline(summary, baseline, _tolerances(args), path, remeasures)


def command_compare(args: argparse.Namespace) -> int:
    """Exit 0 when no figure regressed past the tolerance, 1 when one did, 2 when a file is not a JSON report."""
    from harness.baseline import BadReport, compare_reports, read_report
    from harness.reports.comparison_markdown import write_comparison_markdown
    from harness.reports.comparison_text import render_comparison_text

    try:
        comparison = compare_reports(read_report(args.old), read_report(args.new), _tolerances(args), args.old, args.new)
    except BadReport as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    sys.stdout.write(render_comparison_text(comparison))
    if args.markdown:
        try:
            write_comparison_markdown(comparison, args.markdown)
        except OSError as exc:
            print(f"distval: cannot write the Markdown comparison to {args.markdown}: {exc}", file=sys.stderr)
    return 1 if comparison.regressed else 0


def add_compare_command(commands: Any) -> None:
    compare = commands.add_parser(
        "compare", help="compare two JSON reports side by side (verdicts, durations, bandwidth) and say what changed"
    )
    compare.add_argument("old", metavar="OLD.json", help="the earlier (last-known-good) JSON report")
    compare.add_argument("new", metavar="NEW.json", help="the later JSON report")
    compare.add_argument("--markdown", metavar="PATH", help="write the comparison as Markdown here too")
    _tolerance_arguments(compare)
    compare.set_defaults(handler=command_compare)
