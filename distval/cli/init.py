"""``distval init``: a commented starter scenario file."""

from __future__ import annotations

import argparse
from typing import Any

from distval.cli import values as cli_values
from distval.config.shipped import STARTER_NAME, write_starter


def command_init(args: argparse.Namespace) -> int:
    write_starter(args.path)  # an existing file: BadInput, one line from main
    print(f"wrote {args.path}; run it with: distval run {args.path} --image <your image>")
    return 0


def add_init_command(commands: Any) -> None:
    init = commands.add_parser("init", help=f"write a commented starter scenario file (default {STARTER_NAME})")
    init.add_argument(
        "path",
        nargs="?",
        default=STARTER_NAME,
        type=cli_values.file_path("the scenario file to write"),
        help=f"where to write it (default {STARTER_NAME}); an existing file is never overwritten",
    )
    init.set_defaults(handler=command_init)
