"""The command line of ``distval run --references FILE --system NAME`` (the run stage's side: distval/session/references.py)
and ``distval references suggest REPORT...`` (distval/comparing/references_suggest.py)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distval.cli import values as cli_values
from distval.comparing.reading import read_report
from distval.comparing.references_suggest import render, suggest
from distval.config.keys import NAME_EXPECTED, NAME_PATTERN
from distval.config.yaml_nodes import shown
from distval.errors import BadInput
from distval.reports.files import NotARegularFile, UnsafePath, write_atomically


def system_name(value: str) -> str:
    """argparse type: a system label as the references file writes it."""
    if not NAME_PATTERN.fullmatch(value):
        raise argparse.ArgumentTypeError(f"expected {NAME_EXPECTED}; got {shown(value)}")
    return value


def add_references_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--references",
        type=cli_values.file_path("a references file"),
        metavar="FILE",
        help="judge the run against this machine's references (a YAML file: per system, per scenario, operation and "
        "size a busbw floor, and the checks expected to fail there): a 'references' testcase per scenario, where a "
        "figure with no reference fails (docs/reports.md, 'References per machine'). Needs --system",
    )
    parser.add_argument(
        "--system", type=system_name, metavar="NAME", help="with --references: the system (machine or SKU label) it ran on"
    )


def add_references_command(commands: Any) -> None:
    references = commands.add_parser("references", help="write a references file from good runs (for run --references)")
    actions = references.add_subparsers(dest="references_action", metavar="ACTION", required=True)
    suggest_parser = actions.add_parser(
        "suggest",
        help="a references file from the JSON reports of good runs: each figure's median and a tolerance covering "
        "their spread, which the next good run passes",
    )
    suggest_parser.add_argument(
        "reports", nargs="+", type=cli_values.file_path("a JSON report"), metavar="REPORT", help="JSON reports of good runs"
    )
    suggest_parser.add_argument("--system", type=system_name, required=True, metavar="NAME", help="the machine's label")
    suggest_parser.add_argument(
        "--output",
        type=cli_values.file_path("the references file to write"),
        metavar="FILE",
        help="where to write it (default: standard output)",
    )
    suggest_parser.set_defaults(handler=command_references_suggest)


def command_references_suggest(args: argparse.Namespace) -> int:
    reports = [(path, read_report(path)) for path in args.reports]
    text = render(suggest(reports), args.system, args.reports)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        write_atomically(args.output, text)
    except (NotARegularFile, UnsafePath) as exc:
        raise BadInput(f"cannot write the references file {args.output}: {exc}") from None
    except OSError as exc:
        raise BadInput(f"cannot write the references file {args.output}: {exc.strerror or exc}") from None
    return 0
