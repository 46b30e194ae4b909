"""``distval export TARGET`` for every target that declares an export (distval/targets/registry.py): the options
every export takes (the config, --image, the output directory, --run-id, the scenario and check selection) and the
target's own; the scenarios it writes, a line per one written and a line on stderr per one not exported (no form on
that target, or no check left by the selection); exit 0, or 2 when none could be exported."""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distval.cli import values as cli_values
from distval.cli.selection_options import add_selection_options, selection
from distval.cli.target_options import add_option, command_options
from distval.config import Config, load_config
from distval.errors import EXIT_BAD_INPUT, BadInput, ConfigError, SelectionError
from distval.plan.selection import NO_CHECK_SELECTED, Selection
from distval.session.selection import filtered, select
from distval.targets.kind import ExportCommand, TargetKind
from distval.targets.registry import exporting_kinds


def exported_scenarios(config: Config, patterns: Sequence[str] | None, chosen: Selection) -> Config:
    """--filter's scenarios, less those the check selection left no check, each of those said on stderr with the
    selection's notes; SelectionError when none is left (exporting nothing is no success)."""
    selected = select(config, patterns, chosen)
    for name in sorted(selected.unselected & {s.name for s in filtered(config, patterns).scenarios}):
        print(f"distval: not exported: {name}: {NO_CHECK_SELECTED}", file=sys.stderr)
    for note in selected.kept:
        print(f"distval: {note}", file=sys.stderr)
    found = selected.running
    if not found.scenarios:
        raise SelectionError(f"nothing to export: the check selection leaves no scenario of {config.path} a check")
    return found


def command_export(args: argparse.Namespace, export: ExportCommand) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    options = command_options(args, export.options, args.run_id or secrets.token_hex(4))
    out = Path(args.out)
    written = 0
    for scenario in export.write(options, lambda: exported_scenarios(config, args.filter, selection(args)), out):
        if scenario.refused is not None:
            print(f"distval: not exported: {scenario.scenario}: {scenario.refused}", file=sys.stderr)
            continue
        print(scenario.line)
        written += 1
    if not written:
        raise BadInput(f"no scenario of {config.path} has {export.form} (see the lines above)")
    print(export.next_step(options.run_id, out))
    return 0


def _add_export(targets: Any, kind: TargetKind, export: ExportCommand) -> None:
    parser = targets.add_parser(kind.name, help=export.help)
    parser.add_argument(
        "config",
        type=cli_values.file_path("a YAML scenario file"),
        help="YAML scenario file whose scenarios are exported, e.g. configs/default.yaml",
    )
    parser.add_argument("--image", required=True, type=cli_values.image_reference, help=export.image_help)
    # -o/--output-dir as run's; --out, its first name, still works. dest "out", not "output_dir": main's
    # with_output_dir would put report files in an output_dir, and an export writes no reports.
    parser.add_argument(
        "-o",
        "--output-dir",
        "--out",
        dest="out",
        metavar="DIR",
        type=cli_values.file_path(export.out_names),
        default=export.out_default,
        help=export.out_help,
    )
    for option in export.options:
        add_option(parser, option)
    parser.add_argument("--run-id", type=cli_values.run_id, help=export.run_id_help)
    add_selection_options(parser)
    parser.set_defaults(handler=lambda args: command_export(args, export))


def add_export_command(commands: Any) -> None:
    """``distval export`` with one subcommand per target that declares an export, in the registry's order."""
    export = commands.add_parser("export", help="write the manifests that run a config's scenarios on another platform")
    targets = export.add_subparsers(dest="target", required=True)
    for kind, declared in exporting_kinds():
        _add_export(targets, kind, declared)
