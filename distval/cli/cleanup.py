"""``distval cleanup``: remove what runs that are over left behind (a run killed with SIGKILL), on one Engine or on
each of --hosts; which runs are over is decided in distval/targets/docker/cleanup.py."""

from __future__ import annotations

import argparse
import functools
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distval.cli import values as cli_values
from distval.cli.hosts_options import add_hosts_options
from distval.cli.output import no_line, print_json
from distval.config.engine_hosts import HostSpec, host_specs, tls_files
from distval.errors import DistvalError
from distval.labels import LABEL_RUN
from distval.targets.docker.cleanup import RunDecision, by_run, decide

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine

# The Engine of DOCKER_HOST (None) or of one of --hosts.
EngineOn = Callable[[str, "HostSpec | None"], "Engine"]


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
    for engine in engines:
        if len(engines) > 1:
            emit(f"on {engine.where}:")
        outcome, code = _cleanup_one(engine, args, emit)
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


def _cleanup_one(engine: Engine, args: argparse.Namespace, emit: Callable[[str], None]) -> tuple[dict[str, Any], int]:
    """One Engine's cleanup: its lines through ``emit``, its outcome as data (cleanup_as_data), its exit code."""
    runs: list[dict[str, Any]] = []
    removed_containers = removed_networks = 0
    # --dry-run: the same decisions, the same lines, in the conditional ("would remove"); nothing removed.
    verb, keep = ("would remove", "would keep") if args.dry_run else ("removed", "kept")

    def outcome(error: str | None) -> dict[str, Any]:
        return {
            "engine": engine.where,
            "runs": runs,
            "removed_containers": removed_containers,
            "removed_networks": removed_networks,
            "kept_runs": sum(1 for run in runs if run["action"] == keep.replace(" ", "_")),
            "error": error,
        }

    try:
        if args.run_id or args.all:
            reason = f"named with --run-id {args.run_id}" if args.run_id else "--all"
            found = engine.list_managed([f"{LABEL_RUN}={args.run_id}"] if args.run_id else [])
            decisions = [RunDecision(run_id, tuple(rs), True, reason) for run_id, rs in by_run(found).items()]
        else:
            decisions = decide(engine.list_managed(), args.older_than, time.time(), socket.gethostname())
        for decision in decisions:
            action = verb if decision.remove else keep
            if not decision.remove:
                containers, networks = decision.containers, decision.networks
                emit(f"{keep} run {decision.run_id} ({decision.counts()}): {decision.reason}")
            elif args.dry_run:
                containers, networks = decision.containers, decision.networks
            else:
                containers, networks = engine.remove_resources(list(decision.resources))
            if decision.remove:
                removed_containers, removed_networks = removed_containers + containers, removed_networks + networks
                emit(f"{verb} run {decision.run_id} ({containers} container(s), {networks} network(s)): {decision.reason}")
            runs.append(
                {
                    "run_id": decision.run_id,
                    "action": action.replace(" ", "_"),
                    "reason": decision.reason,
                    "containers": containers,
                    "networks": networks,
                    "reaper": decision.has_reaper,
                }
            )
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return outcome(str(exc)), exc.exit_code
    result = outcome(None)
    emit(f"{verb} {removed_containers} container(s) and {removed_networks} network(s); {keep} {result['kept_runs']} run(s)")
    return result, 0


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
