"""The ``distval`` command line: ``main`` (usage errors, exit codes, a bug as one line) and the parser, made of
one module per command (each declares its options and its handler: run.py, plan.py, compare.py, ...). The option
value types are values.py's.

Exit codes: distval/errors.py declares them (EXIT_MEANINGS); the top-level help and README's table derive from it.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from typing import TYPE_CHECKING, Any

from distval import __version__
from distval.cli import values as cli_values
from distval.cli.attest import ATTEST_EXIT_CODES, VERIFY_EXIT_CODES, add_attest_commands
from distval.cli.checks import add_checks_command
from distval.cli.cleanup import add_cleanup_command
from distval.cli.collect import add_collect_command
from distval.cli.compare import add_compare_command, compare_exit_codes
from distval.cli.completion import add_completion_command
from distval.cli.doctor import DOCTOR_EXIT_CODES, add_doctor_command
from distval.cli.export import add_export_command
from distval.cli.fixtures import add_fixtures_command
from distval.cli.history import HISTORY_EXIT_CODES, add_history_command
from distval.cli.hosts_options import add_hosts_options
from distval.cli.init import add_init_command
from distval.cli.nodes import add_nodes_command
from distval.cli.plan import add_plan_command
from distval.cli.references import add_references_command
from distval.cli.report_options import refused_run_reports
from distval.cli.run import add_run_command
from distval.cli.schema import add_schema_command
from distval.config.engine_hosts import HostSpec
from distval.engine_protocol import EngineAPI
from distval.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECKS_FAILED,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_VALIDATED,
    EXIT_PASSED,
    DistvalError,
    ExitCodes,
    InternalError,
    UsageError,
    exit_codes_line,
)
from distval.registry.client import Registry
from distval.results.scenario import RunSummary
from distval.session.reports import write_reports
from distval.targets.registry import collecting_kinds, engine_class, exporting_kinds

if TYPE_CHECKING:
    from distval.targets.kind import Engine


def __getattr__(name: str) -> Any:
    """``Engine`` is imported on first use, and docker-py with it: host mode (and ``plan``) never need it."""
    if name == "Engine":
        found = engine_class()  # docker-py with it: imported on this first use
        globals()["Engine"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _engine(run_id: str) -> Engine:
    """The Engine of every command that uses Docker (``distval run`` gets it as ``engine_for``)."""
    engine: Engine = sys.modules[__name__].Engine(run_id)  # through __getattr__, or a test's stand-in
    return engine


def _doctor_engine(run_id: str, host: HostSpec | None) -> EngineAPI:
    """``distval doctor``'s Engines: the one of DOCKER_HOST, or one of --hosts."""
    if host is None:
        return _engine(run_id)
    engine: EngineAPI = sys.modules[__name__].Engine(run_id, host=host)  # through __getattr__, or a test's stand-in
    return engine


def _engine_on(run_id: str, host: HostSpec | None) -> Engine:
    """The Engine of DOCKER_HOST (``host`` None) or of one of --hosts (``distval cleanup``)."""
    if host is None:
        return _engine(run_id)
    engine: Engine = sys.modules[__name__].Engine(run_id, host=host)  # through __getattr__, or a test's stand-in
    return engine


# The exit codes each command can return: its help's epilog says them (tests/cli/test_exit_codes.py makes each
# command return them and nothing else). Every command can be given a bad command line (2) and can meet a bug of
# distval's (4). Only ``run`` handles SIGINT and SIGTERM (it removes what it created): 128+N.
_COMMON = (EXIT_PASSED, EXIT_BAD_INPUT, EXIT_INTERNAL)
_SUCCESS = {EXIT_PASSED: "success"}  # a command that gives no verdict on an image


def target_command_exit_codes() -> dict[str, ExitCodes]:
    """``distval export NAME`` and ``distval collect NAME`` of every target that has them (the registry's)."""
    exports = {f"export {kind.name}": ExitCodes(_COMMON, _SUCCESS) for kind, _ in exporting_kinds()}
    collects = {f"collect {kind.name}": ExitCodes((*_COMMON, *collect.exit_codes)) for kind, collect in collecting_kinds()}
    return {**exports, **collects}


COMMAND_EXIT_CODES: dict[str, ExitCodes] = {
    "run": ExitCodes((*_COMMON, EXIT_CHECKS_FAILED, EXIT_ENVIRONMENT, EXIT_NOTHING_VALIDATED, EXIT_INTERRUPTED)),
    "compare": compare_exit_codes(),
    "history": HISTORY_EXIT_CODES,
    "doctor": DOCTOR_EXIT_CODES,
    "attest": ATTEST_EXIT_CODES,
    "verify": VERIFY_EXIT_CODES,
    "plan": ExitCodes(_COMMON, _SUCCESS),
    "schema": ExitCodes(_COMMON, _SUCCESS),
    "checks": ExitCodes(_COMMON, _SUCCESS),
    "init": ExitCodes(_COMMON, _SUCCESS),
    "fixtures": ExitCodes((*_COMMON, EXIT_ENVIRONMENT), _SUCCESS),
    "nodes": ExitCodes((*_COMMON, EXIT_ENVIRONMENT), _SUCCESS),
    "cleanup": ExitCodes((*_COMMON, EXIT_ENVIRONMENT), _SUCCESS),
    **target_command_exit_codes(),
    "completion": ExitCodes(_COMMON, _SUCCESS),
    "references suggest": ExitCodes(_COMMON, _SUCCESS),
}


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser below ``parser`` by its words ("run", "export", "export kubernetes"), in order."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[prefix + name] = child
                found.update(subcommands(child, f"{prefix}{name} "))
    return found


def _declare_exit_codes(parser: argparse.ArgumentParser) -> None:
    """Each command's epilog from COMMAND_EXIT_CODES; a command made of subcommands (export) says theirs together."""
    known = {**COMMAND_EXIT_CODES, **target_command_exit_codes()}  # the registry's now (a test adds a kind)
    for name, command in subcommands(parser).items():
        declared = known.get(name)
        if declared is None:
            below = [codes for key, codes in known.items() if key.startswith(name + " ")]
            if not below:
                raise KeyError(f"distval {name} declares no exit codes (COMMAND_EXIT_CODES)")
            declared = ExitCodes(tuple(code for codes in below for code in codes.codes), below[0].own)
        command.epilog = declared.line()


def build_parser() -> argparse.ArgumentParser:
    parser = cli_values.UsageParser(
        prog="distval",
        description="Validate that distributed training works in a PyTorch container image.",
        epilog="Exit codes: " + exit_codes_line(),
    )
    parser.add_argument("--version", action="version", version=f"distval {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_run_command(commands, _engine)
    add_compare_command(commands)
    add_history_command(commands)
    add_references_command(commands)
    add_plan_command(commands, _engine)
    add_schema_command(commands)
    add_checks_command(commands)
    add_init_command(commands)
    add_fixtures_command(commands, _engine)
    add_nodes_command(commands)
    add_cleanup_command(commands, _engine_on)
    add_doctor_command(commands, _doctor_engine, add_hosts_options)
    add_attest_commands(commands, _engine, Registry)
    add_export_command(commands)
    add_collect_command(commands)
    add_completion_command(commands, build_parser)
    # The command list of the usage line and help: the commands that have a help line (argparse's default lists
    # every choice, the hidden ones too).
    commands.metavar = "{" + ",".join(cli_values.visible_commands(commands)) + "}"
    _declare_exit_codes(parser)
    return parser


# --host was --local's name until it was renamed: one letter from --hosts (several Docker Engines), it was a trap.
DEPRECATED_HOST = (
    "distval: --host is deprecated and will be removed in the next release: use --local "
    "(--hosts, several Docker Engines, is unchanged)"
)


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(arguments)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        reports = refused_run_reports(arguments)
        if reports is not None:
            summary = RunSummary(secrets.token_hex(4), (), (exc.kind, str(exc)), exc.exit_code, config_path=None)
            write_reports(summary, reports)
        return exc.exit_code
    if getattr(args, "deprecated_host", False):
        print(DEPRECATED_HOST, file=sys.stderr)
        args.local = True
    try:
        return int(args.handler(args))
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # a bug outside a run (command_run reports its own): one line, not a traceback
        internal = InternalError(exc)
        print(f"distval: {internal}", file=sys.stderr)
        return internal.exit_code


if __name__ == "__main__":
    sys.exit(main())
