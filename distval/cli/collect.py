"""``distval collect TARGET`` for every target that declares a collect (distval/targets/registry.py): what ran on
the target by hand -> the reports of a run (the report options, --fail-on-skip) and the summary on stdout; its
exit code is the run's verdict's, or 2 where a report could not be written."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distval.cli.report_options import add_report_options, report_paths
from distval.cli.target_options import add_option, command_options
from distval.reports.summary import render_summary
from distval.session.reports import write_reports
from distval.targets.kind import CollectCommand
from distval.targets.registry import collecting_kinds


def command_collect(args: argparse.Namespace, collect: CollectCommand) -> int:
    summary = collect.summarize(command_options(args, collect.options, "", ("fail_on_skip",)))
    unwritten = write_reports(summary, report_paths(args))
    sys.stdout.write(render_summary(summary))
    return summary.exit_code or unwritten


def add_collect_command(commands: Any) -> None:
    """``distval collect`` with one subcommand per target that declares a collect, in the registry's order."""
    collect = commands.add_parser("collect", help="turn the logs of an exported run into the reports of a Docker run")
    targets = collect.add_subparsers(dest="target", required=True)
    for kind, declared in collecting_kinds():
        parser = targets.add_parser(kind.name, help=declared.help)
        for option in declared.options:
            add_option(parser, option)
        parser.add_argument("--fail-on-skip", action="store_true", help="any skipped check fails, with its reason")
        add_report_options(parser)
        parser.set_defaults(handler=lambda args, declared=declared: command_collect(args, declared))
