"""``distval schema``: the JSON Schema of scenario files, or their key reference in Markdown."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distval.config.keys_reference import KEYS_PAGE, render_keys_markdown
from distval.config.schema import SHIPPED, render_schema


def command_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(render_schema() if args.format == "json" else render_keys_markdown())
    return 0


def add_schema_command(commands: Any) -> None:
    schema = commands.add_parser("schema", help=f"print the JSON Schema of scenario files (shipped as {SHIPPED})")
    schema.add_argument(
        "--format",
        choices=("json", "markdown"),
        default="json",
        help=f"the JSON Schema (default) or the key reference of {KEYS_PAGE}, both from distval/config/keys.py",
    )
    schema.set_defaults(handler=command_schema)
