"""Last-known-good: the options of ``distval run --baseline`` (the report and the tolerances), the baseline
testcases it adds to a run's summary, and the ``distval compare`` command (distval/reports/baseline.py compares)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distval.cli import values as cli_values
from distval.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, BadInput, ExitCodes
from distval.plan.model import ScenarioPlan
from distval.reports.baseline import (
    DEFAULT_BUSBW_SLACK_US,
    DEFAULT_BUSBW_TOLERANCE,
    DEFAULT_DURATION_SLACK_S,
    DEFAULT_DURATION_TOLERANCE,
    BadReport,
    Tolerances,
    apply_baseline,
    combined_baseline,
    compare_reports,
    deltas,
    failed_remeasures,
    match,
    read_report,
    scenario_entries,
    undecided,
)
from distval.reports.comparison import VERDICTS, judge, verdict_line
from distval.reports.comparison_json import render_comparison_json
from distval.reports.comparison_markdown import write_comparison_markdown
from distval.reports.comparison_text import render_comparison_text
from distval.results.outcome import PASSED
from distval.results.scenario import RunSummary, ScenarioResult

# Re-measured twice: between runs of one image on a shared 2-core VM, the default sweep's baseline failed
# 24 of 120 comparisons with one re-measure and 12 of 360 with two (docs/measurements.md, "Noise"); a slower image pays
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
        help=f"run a scenario again, up to N times (default {DEFAULT_REMEASURE}; 0: never), while a figure of it that "
        "regressed against --baseline is undecided: a figure regresses when it did in more than half of the 1 + N runs "
        "(a slower image is slow most times, a burst of load on a shared machine passes); a re-measure that fails "
        "fails the run",
    )
    _tolerance_arguments(parser)


def _tolerance_arguments(parser: argparse.ArgumentParser) -> None:

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


def _tolerances(args: argparse.Namespace) -> Tolerances:
    """The tolerances asked; a --duration-tolerance left out where its default is None (``distval compare``) means
    durations are said as notes, not judged."""
    judged = args.duration_tolerance is not None
    duration = args.duration_tolerance if judged else DEFAULT_DURATION_TOLERANCE
    return Tolerances(busbw=args.busbw_tolerance, duration=duration, busbw_slack_us=args.busbw_slack_us, durations_judged=judged)


@dataclass(frozen=True)
class BaselineOptions:
    """What ``distval run``'s --baseline options asked (add_baseline_arguments declares each; --fail-on-skip is the
    run's): read once from the parsed command line, so that the contract is these fields, not attribute names."""

    baselines: tuple[tuple[str, Mapping[str, Any]], ...]  # (path, report) of each --baseline; () without one
    remeasure: int | None  # None: the default (DEFAULT_REMEASURE)
    tolerances: Tolerances
    fail_on_skip: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BaselineOptions:
        return cls(tuple(args.baseline or ()), args.remeasure, _tolerances(args), args.fail_on_skip)


def check_remeasure(options: BaselineOptions) -> None:
    """--remeasure re-runs what regressed against --baseline: alone it is bad input (exit code 2)."""
    if options.remeasure is not None and not options.baselines:
        raise BadInput("--remeasure runs again the scenarios that regressed against --baseline: give --baseline too")


def overwrites_baseline(baselines: Sequence[str], reports: Sequence[tuple[str, str | None]]) -> list[tuple[str, str, str]]:
    """(option, path, why) for each report path among ``reports`` ((option, path) pairs; None: not asked) that is
    one of the ``baselines`` files (the same file after symlinks and hard links): a run that stopped early would
    replace the last good report with its own empty one. Asked before the run starts (exit code 2)."""
    refused = []
    for option, path in reports:
        for good in baselines:
            if path and _same_file(path, good):
                refused.append((option, path, f"{path} is the --baseline {good}: the run would overwrite it"))
                break
    return refused


def _same_file(one: str, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist (the report not written yet): not the same file
        return False


def remeasure(
    summary: RunSummary,
    options: BaselineOptions,
    run_again: Callable[[tuple[ScenarioPlan, ...]], list[ScenarioResult]],
    log: Callable[[str], None],
) -> dict[int, list[ScenarioResult]]:
    """Up to --remeasure times, the scenarios with a figure that regressed in the run and that the runs so far
    have not decided (it regresses when it regressed in more than half of the 1 + N runs: distval/reports/baseline.py
    ``majority``) run again with ``run_again``; their results, by the scenario's index in the summary. A
    scenario whose re-measure failed is not run again: that failure fails its 'baseline' testcase anyway."""
    if not options.baselines or not summary.scenarios:
        return {}

    path, baseline = combined_baseline(options.baselines)
    tolerances = options.tolerances
    entries = scenario_entries(summary, summary.scenarios)
    previous = [match([s for s in baseline.get("scenarios", []) if isinstance(s, dict)], e, by_name=False)[0] for e in entries]
    found: dict[int, list[ScenarioResult]] = {}
    times = DEFAULT_REMEASURE if options.remeasure is None else options.remeasure

    def suspect(index: int) -> bool:
        old = previous[index]
        if old is None or summary.scenarios[index].status != PASSED:
            # Only scenarios whose checks passed: one that failed a check fails the run whatever its figures, and
            # --keep-on-failure may hold its containers (a second run of it would clash with them).
            return False
        again = scenario_entries(summary, found.get(index, ()))
        if failed_remeasures(again):
            return False
        return undecided(deltas(old, entries[index], tolerances), [deltas(old, e, tolerances) for e in again], 1 + times)

    for attempt in range(1, times + 1):
        suspects = [index for index in range(len(entries)) if suspect(index)]
        if not suspects:
            break
        names = ", ".join(summary.scenarios[i].plan.scenario.name for i in suspects)
        past = f"with a figure past the tolerance against {path}"
        log(f"re-measuring {len(suspects)} scenario(s) {past} ({attempt} of {times}): {names}")
        for index, result in zip(suspects, run_again(tuple(summary.scenarios[i].plan for i in suspects)), strict=True):
            found.setdefault(index, []).append(result)
    return found


def with_baseline(
    summary: RunSummary, options: BaselineOptions, remeasures: dict[int, list[ScenarioResult]] | None = None
) -> RunSummary:
    """The summary with a 'baseline' testcase per scenario when --baseline was given (and scenarios ran: a run
    with none exits non-zero on its own, RunSummary.exit_code)."""
    if not options.baselines or not summary.scenarios:
        return summary

    path, baseline = combined_baseline(options.baselines)
    return apply_baseline(summary, baseline, options.tolerances, path, remeasures, options.fail_on_skip)


def command_compare(args: argparse.Namespace) -> int:
    """The exit code of the judgement (comparison.VERDICTS: 0 only when figures were compared and none regressed);
    2 when a file is not a JSON report or --markdown would overwrite one of them."""

    for report in (args.old, args.new):
        if args.markdown and _same_file(args.markdown, report):
            print(f"distval: --markdown {args.markdown} is the report {report}: it would be overwritten", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        comparison = compare_reports(read_report(args.old), read_report(args.new), _tolerances(args), args.old, args.new)
    except BadReport as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    judgement = judge(comparison)
    if args.format == "json":
        sys.stdout.write(render_comparison_json(judgement))
    else:
        sys.stdout.write(render_comparison_text(judgement, args.all))
    if args.markdown:
        try:
            write_comparison_markdown(judgement, args.markdown, args.all)
        except OSError as exc:
            print(f"distval: cannot write the Markdown comparison to {args.markdown}: {exc}", file=sys.stderr)
    return judgement.exit_code


def compare_exit_codes() -> ExitCodes:
    """The exit codes of ``distval compare`` for its help: each verdict's (comparison.VERDICTS), bad input and a bug."""
    codes = {v.exit_code for v in VERDICTS}
    return ExitCodes(
        tuple(sorted(codes | {EXIT_BAD_INPUT, EXIT_INTERNAL})),
        {
            **{code: verdict_line(code) for code in codes},
            EXIT_BAD_INPUT: "bad input (a file that is not a distval JSON report, a --markdown path that is one of them)",
        },
    )


def add_compare_command(commands: Any) -> None:
    compare = commands.add_parser(
        "compare",
        help="compare two JSON reports (verdicts, durations, bandwidth): every regression first, then what improved",
        description="Compare two JSON reports of distval run, scenario by scenario: every regression (a figure past "
        "the tolerance, a verdict that got worse, a scenario or figure that vanished) first, then the improvements; "
        "unchanged testcases and figures are one count line (--all lists them).",
    )
    compare.add_argument("old", metavar="OLD.json", help="the earlier (last-known-good) JSON report")
    compare.add_argument("new", metavar="NEW.json", help="the later JSON report")
    compare.add_argument("--markdown", metavar="PATH", help="write the comparison as Markdown here too")
    compare.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people (default) or one JSON object (schema_version, both reports, the verdict, the exit code "
        "and every compared item with its status and numbers) for pipelines",
    )
    compare.add_argument(
        "--all",
        "--verbose",
        dest="all",
        action="store_true",
        help="list the unchanged testcases and figures too (text and Markdown; by default they are one count line)",
    )
    _tolerance_arguments(compare)
    # compare judges verdicts and busbw; a check's duration only where asked (around one failure many move).
    compare.set_defaults(handler=command_compare, duration_tolerance=None)
    for action in compare._actions:
        if action.dest == "duration_tolerance":
            action.help = (
                "judge durations too: one longer by more than this fraction (and by more than "
                f"{DEFAULT_DURATION_SLACK_S:g} s) regresses (default: not judged; a duration that moved past "
                f"{DEFAULT_DURATION_TOLERANCE * 100:.0f}%% is listed as a note)"
            )
