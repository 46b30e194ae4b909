"""``distval compare OLD.json NEW.json``: its options and what it prints (distval/comparing/baseline.py compares,
distval/comparing/comparison.py judges)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distval.cli.baseline import tolerance_arguments, tolerances
from distval.comparing.baseline import compare_reports
from distval.comparing.comparison import VERDICTS, judge, verdict_line
from distval.comparing.comparison_json import render_comparison_json
from distval.comparing.comparison_markdown import write_comparison_markdown
from distval.comparing.comparison_text import render_comparison_text
from distval.comparing.deltas import DEFAULT_DURATION_SLACK_S, DEFAULT_DURATION_TOLERANCE
from distval.comparing.reading import BadReport, read_report
from distval.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, ExitCodes
from distval.session.reports import same_file


def command_compare(args: argparse.Namespace) -> int:
    """The exit code of the judgement (comparison.VERDICTS: 0 only when figures were compared and none regressed);
    2 when a file is not a JSON report or --markdown would overwrite one of them."""

    for report in (args.old, args.new):
        if args.markdown and same_file(args.markdown, report):
            print(f"distval: --markdown {args.markdown} is the report {report}: it would be overwritten", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        comparison = compare_reports(read_report(args.old), read_report(args.new), tolerances(args), args.old, args.new)
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
    tolerance_arguments(compare)
    # compare judges verdicts and busbw; a check's duration only where asked (around one failure many move).
    compare.set_defaults(handler=command_compare, duration_tolerance=None)
    for action in compare._actions:
        if action.dest == "duration_tolerance":
            action.help = (
                "judge durations too: one longer by more than this fraction (and by more than "
                f"{DEFAULT_DURATION_SLACK_S:g} s) regresses (default: not judged; a duration that moved past "
                f"{DEFAULT_DURATION_TOLERANCE * 100:.0f}%% is listed as a note)"
            )
