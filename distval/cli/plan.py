"""``distval plan``: the launch plan of a config on its target, printed without touching anything (a dry run)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
from typing import Any

from distval.cli import values as cli_values
from distval.cli.hosts_options import add_hosts_options
from distval.cli.plan_render import plan_as_data, render_plan
from distval.cli.selection_options import add_selection_options, selection
from distval.cli.target_options import add_target_options, target_options
from distval.config import load_config
from distval.config.shipped import DEFAULT_CONFIG
from distval.errors import EXIT_BAD_INPUT, ConfigError
from distval.images.helper_base import DEFAULT, HELPER_BASE_DEST
from distval.images.helper_base import choose as choose_helpers
from distval.session.selection import plan_selected, select
from distval.targets.base import plan_reference, refuse_what_it_lacks
from distval.targets.capabilities import REAPER
from distval.targets.kind import EngineFor
from distval.targets.registry import chosen_kind, dry_run_target


def command_plan(args: argparse.Namespace, engine_for: EngineFor) -> int:
    try:
        config = load_config(args.config or DEFAULT_CONFIG)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    selected = select(config, args.filter, selection(args))
    run_id = args.run_id or "<run-id>"
    options = dataclasses.replace(target_options(args), run_id=run_id)
    target = dry_run_target(options, selected.running, engine_for)
    plan = plan_selected(target, selected, run_id)
    refuse_what_it_lacks(target, plan, ["reference"] if args.reference else [])  # as distval run would
    if args.reference:
        # The reference's runs are part of what runs: shown after the candidate's, each scenario's pairs alternating
        # between the two plans (distval/comparing/reference.py ``schedule``).
        plan = dataclasses.replace(plan, scenarios=plan.scenarios + plan_reference(target, plan, args.reference))
    # distval's helpers beside the ranks (the reaper, the probes) run where the target has a reaper of distval's.
    # There, too, distval's own images (the reaper's, the sample) are built where the Engine lacks them: FROM what
    # --helper-base or $DISTVAL_HELPER_BASE chose (the containers target's option); a target without them reads neither.
    beside = target.declaration.has(REAPER)
    helpers = choose_helpers(options.get(HELPER_BASE_DEST), os.environ) if beside else DEFAULT
    if args.format == "json":
        data = plan_as_data(plan, beside, helpers, chosen_kind(options), args.reference)
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_plan(plan, beside, helpers, chosen_kind(options), args.reference))
    return 0


def add_plan_command(commands: Any, engine_for: EngineFor) -> None:
    plan = commands.add_parser("plan", help="print the launch plan without touching Docker, Slurm or any process (a dry run)")
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
        help="also show the reference image's plans, as distval run --reference runs them in pairs with the candidate's "
        "(and says how many pairs, and that confirmation pairs may follow)",
    )
    plan.add_argument("--run-id", type=cli_values.run_id)
    add_selection_options(plan)
    add_target_options(plan)
    add_hosts_options(plan, from_config=True)
    plan.add_argument(
        "--format", choices=("text", "json"), default="text", help="text for people (default) or the plan object as JSON"
    )
    plan.set_defaults(handler=functools.partial(command_plan, engine_for=engine_for))
