"""The report options of the commands that write a run's reports (run, collect kubernetes, collect slurm): declared
once, read into ``ReportPaths`` (distval/session/reports.py writes them), and read alone from a ``distval run``
command line the full parser refused, so that a bad option still gets its JUnit file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from distval.cli import values as cli_values
from distval.errors import UsageError
from distval.session.reports import OUTPUT_NAMES, ReportPaths, overwrites_baseline


def add_report_options(
    parser: argparse.ArgumentParser, prefix_type: Callable[[str], str | None] = cli_values.suite_prefix
) -> None:
    parser.add_argument(
        "--junit",
        metavar="PATH",
        type=cli_values.file_path("the JUnit XML file"),
        help="write JUnit XML here (also when the run fails early)",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        type=cli_values.file_path("the JSON report"),
        help="write the JSON report here (also when the run fails early)",
    )
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        type=cli_values.file_path("the Markdown summary"),
        help="write the Markdown summary here (the summary also goes to $GITHUB_STEP_SUMMARY when that is set, with "
        "or without this option; --no-step-summary turns that off)",
    )
    parser.add_argument(
        "--no-step-summary",
        action="store_true",
        help="do not append the Markdown summary to $GITHUB_STEP_SUMMARY (by default it is, whenever that is set)",
    )
    parser.add_argument(
        "--suite-prefix",
        metavar="TEXT",
        type=prefix_type,
        help="name the JUnit testsuites and classnames with TEXT instead of each scenario's image (1-64 letters, "
        "digits, '-', '_'), to tell apart the reports of one config run against several images",
    )
    names = ", ".join(f"{name} ({option})" for option, name in OUTPUT_NAMES.items())
    parser.add_argument(
        "-o",
        "--output-dir",
        metavar="DIR",
        type=cli_values.file_path("the directory of the reports"),
        help=f"write every report into DIR (created if missing): {names}; --junit, --json or --markdown still name "
        "their own file",
    )


def report_paths(args: argparse.Namespace) -> ReportPaths:
    """The report paths a parsed command line asks for (--output-dir naming those left out)."""
    return ReportPaths(
        junit=args.junit,
        json=args.json,
        markdown=args.markdown,
        html=getattr(args, "html", None),  # --html is run's alone
        output_dir=args.output_dir,
        step_summary=not args.no_step_summary,
        suite_prefix=args.suite_prefix,
    ).in_directory()


def refused_run_reports(argv: Sequence[str]) -> ReportPaths | None:
    """The report paths of a ``distval run`` command line that the full parser refused; None: not a run, or none
    readable. Parsed alone (the rest is ignored), so that a bad --jobs still gets its JUnit file."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command != "run":
        return None
    reports = cli_values.UsageParser(prog="distval run", add_help=False)
    add_report_options(reports, cli_values.suite_prefix_if_valid)
    reports.add_argument("--baseline", action="append")  # a report path that is a baseline is not written
    try:
        known, _ = reports.parse_known_args(argv[list(argv).index("run") + 1 :])
    except UsageError:
        return None
    paths = report_paths(known)
    unwritten = set()
    for option, _, why in overwrites_baseline(known.baseline or (), paths.by_option()):
        print(f"distval: not writing {option}: {why}", file=sys.stderr)
        unwritten.add(option)
    return ReportPaths(
        junit=None if "--junit" in unwritten else paths.junit,
        json=None if "--json" in unwritten else paths.json,
        markdown=None if "--markdown" in unwritten else paths.markdown,
        step_summary=paths.step_summary,
        suite_prefix=paths.suite_prefix,
    )
