"""``distval checks``: every check a scenario can name (distval/config/checks_reference.py renders them)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distval.config.checks_reference import FORMATS, REFERENCE_PAGE, render_checks


def command_checks(args: argparse.Namespace) -> int:
    sys.stdout.write(render_checks(args.format))
    return 0


def add_checks_command(commands: Any) -> None:
    checks = commands.add_parser(
        "checks",
        help="list every check a scenario can name, with its arguments, what it needs and its version gates",
    )
    checks.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help=f"text for people (default), JSON, or the Markdown of {REFERENCE_PAGE}",
    )
    checks.set_defaults(handler=command_checks)
