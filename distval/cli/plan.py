"""``distval plan``: the launch plan of a config on its target, printed without touching anything (a dry run)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distval.cli import values as cli_values
from distval.cli.hosts_options import add_hosts_options
from distval.cli.output import no_line
from distval.cli.plan_render import plan_as_data, render_plan
from distval.cli.selection_options import add_selection_options, selection
from distval.config import load_config
from distval.config.shipped import DEFAULT_CONFIG
from distval.errors import EXIT_BAD_INPUT, ConfigError
from distval.session.selection import plan_selected, running, select
from distval.targets.base import plan_reference, refuse_what_it_lacks
from distval.targets.choice import containers_target

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine


def command_plan(args: argparse.Namespace, engine_for: Callable[[str], Engine]) -> int:
    try:
        config = load_config(args.config or DEFAULT_CONFIG)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    selected = select(config, args.filter, selection(args))
    target = containers_target(
        running(selected, args.filter), args.image, tuple(args.hosts or ()), args.hosts_from_config, None, engine_for, no_line
    )
    plan = plan_selected(target, selected, args.run_id or "<run-id>", args.filter)
    refuse_what_it_lacks(target, plan, ["reference"] if args.reference else [])  # as distval run would
    if args.reference:
        # The reference's runs are part of what runs: shown after the candidate's, each scenario's pairs alternating
        # between the two plans (distval/reports/reference.py ``schedule``).
        plan = dataclasses.replace(plan, scenarios=plan.scenarios + plan_reference(target, plan, args.reference))
    if args.format == "json":
        sys.stdout.write(json.dumps(plan_as_data(plan), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_plan(plan))
    return 0


def add_plan_command(commands: Any, engine_for: Callable[[str], Engine]) -> None:
    plan = commands.add_parser("plan", help="print the launch plan without touching Docker (a dry run)")
    plan.add_argument(
        "config",
        nargs="?",
        type=cli_values.file_path("a YAML scenario file"),
        help="YAML scenario file (default: distval's configs/default.yaml)",
    )
    plan.add_argument("--image", type=cli_values.image_reference)
    plan.add_argument(
        "--reference",
        type=cli_values.image_reference,
        metavar="IMAGE",
        help="also show the reference image's plans, as distval run --reference runs them in pairs with the candidate's",
    )
    plan.add_argument("--run-id", type=cli_values.run_id)
    add_selection_options(plan)
    add_hosts_options(plan, from_config=True)
    plan.add_argument(
        "--format", choices=("text", "json"), default="text", help="text for people (default) or the plan object as JSON"
    )
    plan.set_defaults(handler=functools.partial(command_plan, engine_for=engine_for))
