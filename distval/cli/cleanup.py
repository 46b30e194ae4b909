"""``distval cleanup``: remove what runs that are over left behind (a run killed with SIGKILL), on one Engine or on
each of --hosts; which runs are over, and their removal from an Engine, is the targets' (distval/targets/registry.py
``engine_cleanup``)."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import TYPE_CHECKING, Any

from distval.cli import values as cli_values
from distval.cli.hosts_options import add_hosts_options
from distval.cli.output import no_line, print_json
from distval.config.engine_hosts import host_specs, tls_files
from distval.errors import DistvalError
from distval.targets.kind import EngineOn
from distval.targets.registry import engine_cleanup

if TYPE_CHECKING:
    from distval.targets.kind import Engine


def _cleanup_engines(args: argparse.Namespace, engine_on: EngineOn) -> list[Engine]:
    """The Engines ``distval cleanup`` looks at: the one of DOCKER_HOST, or each of --hosts."""
    if not args.hosts:
        return [engine_on("cleanup", None)]
    specs = host_specs(args.hosts, tls_files(args.tls_ca, args.tls_cert, args.tls_key))
    return [engine_on("cleanup", spec) for spec in specs]


def command_cleanup(args: argparse.Namespace, engine_on: EngineOn) -> int:
    """Remove what runs that are over left behind (a run killed with SIGKILL): never a run whose owner still runs,
    unless named with --run-id or --all. One line per run, removed or kept and why, then the totals; or, with
    --format json, the same decisions as one JSON object on stdout (cleanup_as_data)."""
    as_json = args.format == "json"
    emit = no_line if as_json else print
    try:
        engines = _cleanup_engines(args, engine_on)
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        if as_json:
            print_json(cleanup_as_data(args.dry_run, [], str(exc)))
        return exc.exit_code
    status = 0
    outcomes: list[dict[str, Any]] = []
    clean = engine_cleanup()
    for engine in engines:
        if len(engines) > 1:
            emit(f"on {engine.where}:")
        outcome, code = clean(engine, args.run_id, args.all, args.older_than, args.dry_run, emit)
        outcomes.append(outcome)
        status = max(status, code)
    if as_json:
        print_json(cleanup_as_data(args.dry_run, outcomes))
    return status


# The counts of an Engine's outcome (and of the totals) in the JSON of distval cleanup --format json.
_CLEANUP_COUNTS = ("removed_containers", "removed_networks", "kept_runs")


def cleanup_as_data(dry_run: bool, engines: list[dict[str, Any]], error: str | None = None) -> dict[str, Any]:
    """``distval cleanup --format json``: each Engine's runs (run id, action, reason, counts) and its totals, the
    totals over every Engine, and ``error`` where no Engine could be asked (an Engine that failed midway says its
    own). With --dry-run the actions are would_remove and would_keep, and the counts what would be removed."""
    return {
        "dry_run": dry_run,
        "engines": engines,
        "totals": {key: sum(engine[key] for engine in engines) for key in _CLEANUP_COUNTS},
        "error": error,
    }


def add_cleanup_command(commands: Any, engine_on: EngineOn) -> None:
    cleanup = commands.add_parser(
        "cleanup",
        help="remove containers and networks left by runs that are over (a run killed with SIGKILL)",
        description="Without options: remove the containers and networks of every run whose distval process is gone "
        "(same machine, and no process with that pid and start time). A run that still runs, or ran on another host or "
        "machine (another machine id, even under this host name), is kept.",
    )
    which = cleanup.add_mutually_exclusive_group()
    which.add_argument(
        "--run-id", type=cli_values.run_id, help="remove this run's containers and networks, even if it still runs"
    )
    which.add_argument("--all", action="store_true", help="remove every container and network distval created, running or not")
    which.add_argument(
        "--older-than",
        type=cli_values.duration,
        metavar="DURATION",
        help="also remove runs whose newest container or network is older than this (e.g. 30m, 2h), "
        "whether their owner runs or not, on any host",
    )
    cleanup.add_argument(
        "--dry-run",
        action="store_true",
        help="say which runs would be removed and which kept, and why, without removing anything",
    )
    cleanup.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people (default), or one JSON object: each run's decision (run id, action, reason, counts) "
        "per Engine, and the totals",
    )
    add_hosts_options(cleanup, tls=True)
    cleanup.set_defaults(handler=functools.partial(command_cleanup, engine_on=engine_on))
