"""The options of the target a run or a plan asks for, declared from the targets' registry
(distval/targets/registry.py): --target's choices and each kind's own options (and those of a target's export and
collect: ``add_option``); read back into ``TargetOptions``."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from distval.cli import values as cli_values
from distval.targets.kind import CHOICE, DURATION, FLAG, PATH, TargetOption, TargetOptions
from distval.targets.registry import all_options, default_kind, target_choices

# The options of every run that a kind may refuse beside it (declared by the command, not by a kind).
_COMMON = ("image", "sample_image", "hosts", "hosts_from_config", "tls_ca", "tls_cert", "tls_key", "target")


def add_option(parser: argparse.ArgumentParser, option: TargetOption) -> None:
    """One declared option on ``parser``, as its kind and fields say."""
    positional = not option.flag.startswith("-")
    arguments: dict[str, Any] = {"help": option.help} if positional else {"dest": option.dest, "help": option.help}
    if option.kind == FLAG:
        arguments["action"] = "store_true"
    else:
        arguments["default"] = [] if option.repeat else option.default
        if option.repeat:
            arguments["action"] = "append"
        if option.nargs:
            arguments["nargs"] = option.nargs
        if option.metavar:
            arguments["metavar"] = option.metavar
        if option.kind == PATH:
            arguments["type"] = cli_values.file_path(option.names)
        elif option.kind == CHOICE:
            arguments["choices"] = option.choices
        elif option.kind == DURATION:
            arguments["type"] = cli_values.duration
        elif option.parse is not None:
            arguments["type"] = cli_values.Parsed(option.parse)
        elif option.problem is not None:
            arguments["type"] = cli_values.CheckedText(option.problem)
    parser.add_argument(option.flag, **arguments)


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """--target (the kinds that have a name for it, the default first) and every kind's own options."""
    choices = target_choices()
    parser.add_argument(
        "--target",
        choices=tuple(kind.target_choice for kind in choices),
        default=default_kind().target_choice,
        help=" or ".join(kind.target_help for kind in choices),
    )
    for option in all_options():
        add_option(parser, option)


def target_options(args: argparse.Namespace, keep_on_failure: bool = False) -> TargetOptions:
    """What the parsed command line asked of the target; ``args.run_id`` is the run's."""
    dests = [option.dest for option in all_options()] + list(_COMMON)
    values = {dest: getattr(args, dest, None) for dest in dests}
    patterns = tuple(args.filter) if getattr(args, "filter", None) else None
    return TargetOptions(args.run_id, values, keep_on_failure, patterns)


def command_options(
    args: argparse.Namespace, options: Iterable[TargetOption], run_id: str, common: tuple[str, ...] = ("image",)
) -> TargetOptions:
    """What the parsed command line of a target's export or collect asked: its declared options and ``common``."""
    dests = [option.dest for option in options] + list(common)
    return TargetOptions(run_id, {dest: getattr(args, dest, None) for dest in dests})
