"""Last-known-good: the options of ``distval run --baseline`` (the report and the tolerances), the baseline
testcases it adds to a run's summary, and the ``distval compare`` command (harness/baseline.py compares)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness import cli_values
from harness.results import RunSummary


def add_baseline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        type=cli_values.report_file,
        metavar="GOOD.json",
        help="compare every check's duration and bandwidth figure with this previous JSON report (same scenarios, "
        "matched by scenario hash); a figure past the tolerance fails the scenario's 'baseline' testcase",
    )
    _tolerance_arguments(parser)


def _tolerance_arguments(parser: argparse.ArgumentParser) -> None:
    from harness.baseline import DEFAULT_BUSBW_TOLERANCE, DEFAULT_DURATION_SLACK_S, DEFAULT_DURATION_TOLERANCE

    parser.add_argument(
        "--busbw-tolerance",
        type=cli_values.fraction,
        default=DEFAULT_BUSBW_TOLERANCE,
        metavar="F",
        help=f"a busbw lower by more than this fraction (0.2 or 20%%) regresses (default {DEFAULT_BUSBW_TOLERANCE * 100:.0f}%%)",
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

    return Tolerances(busbw=args.busbw_tolerance, duration=args.duration_tolerance)


def with_baseline(summary: RunSummary, args: argparse.Namespace) -> RunSummary:
    """The summary with a 'baseline' testcase per scenario when --baseline was given (and scenarios ran)."""
    if not getattr(args, "baseline", None) or not summary.scenarios:
        return summary
    from harness.baseline import apply_baseline

    path, baseline = args.baseline
    return apply_baseline(summary, baseline, _tolerances(args), path)


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
