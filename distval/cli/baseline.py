"""Last-known-good: the options of ``distval run --baseline`` (the report, the re-measures and the tolerances, which
``distval compare`` shares), read into ``BaselineOptions`` (distval/session/remeasure.py re-measures,
distval/comparing/judges.py judges)."""

from __future__ import annotations

import argparse

from distval.cli import values as cli_values
from distval.comparing.deltas import (
    DEFAULT_BUSBW_SLACK_US,
    DEFAULT_BUSBW_TOLERANCE,
    DEFAULT_DURATION_SLACK_S,
    DEFAULT_DURATION_TOLERANCE,
    Tolerances,
)
from distval.comparing.judges import BaselineOptions
from distval.session.remeasure import DEFAULT_REMEASURE


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
        help=f"run a scenario again, up to N times (default {DEFAULT_REMEASURE}; 0: never), while a figure of it that "
        "regressed against --baseline is undecided: a figure regresses when it did in more than half of the 1 + N runs "
        "(a slower image is slow most times, a burst of load on a shared machine passes); a re-measure that fails "
        "fails the run",
    )
    tolerance_arguments(parser)


def tolerance_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument(
        "--busbw-tolerance",
        type=cli_values.fraction_of_drop,
        default=DEFAULT_BUSBW_TOLERANCE,
        metavar="F",
        help=f"a busbw lower by more than this fraction (0.2 or 20%%) regresses, against a --baseline or, in --reference's "
        f"pairs, by the whole paired interval (default {DEFAULT_BUSBW_TOLERANCE * 100:.0f}%%)",
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
        type=cli_values.fraction_of_growth,
        default=DEFAULT_DURATION_TOLERANCE,
        metavar="F",
        help=f"a duration longer by more than this fraction (and by more than {DEFAULT_DURATION_SLACK_S:g} s) regresses "
        f"(default {DEFAULT_DURATION_TOLERANCE * 100:.0f}%%)",
    )


def tolerances(args: argparse.Namespace) -> Tolerances:
    """The tolerances asked; a --duration-tolerance left out where its default is None (``distval compare``) means
    durations are said as notes, not judged."""
    judged = args.duration_tolerance is not None
    duration = args.duration_tolerance if judged else DEFAULT_DURATION_TOLERANCE
    return Tolerances(busbw=args.busbw_tolerance, duration=duration, busbw_slack_us=args.busbw_slack_us, durations_judged=judged)


def baseline_options(args: argparse.Namespace) -> BaselineOptions:
    """What ``distval run``'s --baseline options asked (--fail-on-skip is the run's)."""
    return BaselineOptions(tuple(args.baseline or ()), args.remeasure, tolerances(args), args.fail_on_skip)
