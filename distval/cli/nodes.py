"""``distval nodes up|down``: node Engines (separate Docker Engines in containers here) to run across several hosts;
test infrastructure (docs/several-hosts.md), hidden from the command list."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distval.cli import values as cli_values
from distval.cli.output import stamped_progress
from distval.errors import DistvalError
from distval.targets.registry import node_engines


def command_nodes(args: argparse.Namespace) -> int:
    nodes = node_engines()  # the kind's, through the registry: docker-py is imported when they start or stop
    try:
        if args.action == "up":
            sys.stdout.write(nodes.start(args.count, args.plain, stamped_progress(False)))
        else:
            containers, networks = nodes.stop(args.set_id)
            print(f"removed {containers} node container(s) and {networks} network(s)")
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def add_nodes_command(commands: Any) -> None:
    # Test infrastructure (docs/several-hosts.md): given no help=, argparse lists no line for it, and the command
    # list (metavar, set below) leaves it out; `distval nodes ...` still works.
    nodes = commands.add_parser(
        "nodes",
        description="start or remove node Engines: separate Docker Engines in containers here, to run across several hosts",
    )
    nodes.add_argument("action", choices=("up", "down"))
    nodes.add_argument("count", nargs="?", type=cli_values.jobs_count, default=2, help="up: how many (default 2)")
    nodes.add_argument(
        "--plain",
        type=int,
        action="append",
        default=[],
        metavar="INDEX",
        help="up: this node serves tcp:// without TLS, which any local user can drive (default: every node serves TLS)",
    )
    nodes.add_argument("--set", dest="set_id", metavar="ID", help="down: only this node set (default: every one)")
    nodes.set_defaults(handler=command_nodes)
