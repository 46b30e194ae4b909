"""The ``distval`` command line: the parser of every command, ``main`` (usage errors, exit codes, a bug as one
line) and the small commands (plan, schema, fixtures, cleanup). ``distval run`` is run_command.py, ``distval
compare`` and ``--baseline`` baseline_command.py, the option value types cli_values.py.

Exit codes: distval/errors.py declares them (EXIT_MEANINGS); the top-level help and README's table derive from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import secrets
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from distval import __version__
from distval.cli import values as cli_values
from distval.cli.attest import ATTEST_EXIT_CODES, VERIFY_EXIT_CODES, add_attest_commands
from distval.cli.baseline import add_baseline_arguments, add_compare_command, compare_exit_codes, overwrites_baseline
from distval.cli.completion import SHELLS, render_completion
from distval.cli.doctor import DOCTOR_EXIT_CODES, add_doctor_command
from distval.cli.history import HISTORY_EXIT_CODES, add_history_command, add_html_argument
from distval.cli.kubernetes import add_kubernetes_commands
from distval.cli.plan_render import plan_as_data, render_plan
from distval.cli.reference import add_reference_arguments
from distval.cli.references import add_references_arguments, add_references_command
from distval.cli.run import (
    CI_ENV,
    OUTPUT_NAMES,
    REPORT_OPTIONS,
    SAMPLE_IMAGE_FLAG,
    Progress,
    command_run,
    containers_target,
    default_jobs,
    plan_selected,
    running,
    select,
    with_output_dir,
    write_reports,
)
from distval.cli.selection_options import add_selection_options, selection
from distval.cli.slurm import add_slurm_commands
from distval.config import load_config
from distval.config.checks_reference import FORMATS, REFERENCE_PAGE, render_checks
from distval.config.keys_reference import KEYS_PAGE, render_keys_markdown
from distval.config.schema import SHIPPED, render_schema
from distval.config.shipped import DEFAULT_CONFIG, DEFAULT_IMAGE, STARTER_NAME, write_starter
from distval.engine_protocol import EngineAPI
from distval.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECKS_FAILED,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_VALIDATED,
    EXIT_PASSED,
    BadInput,
    ConfigError,
    DistvalError,
    ExitCodes,
    InternalError,
    UsageError,
    exit_codes_line,
)
from distval.fixtures import BROKEN_PREFIX, FIXTURES, build_fixtures, recipe_hash
from distval.labels import LABEL_RUN
from distval.results.scenario import RunSummary
from distval.targets.base import plan_reference, refuse_what_it_lacks
from distval.targets.docker.cleanup import RunDecision, by_run, decide
from distval.targets.engines.hosts import FROM_CONFIG_FLAG, HostSpec, host_specs, tls_files

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine


def __getattr__(name: str) -> Any:
    """``Engine`` is imported on first use, and docker-py with it: host mode (and ``plan``) never need it."""
    if name == "Engine":
        from distval.targets.docker.engine import Engine  # docker-py with it: imported here, on first use

        globals()["Engine"] = Engine
        return Engine
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


def _progress(quiet: bool) -> Progress:
    started = time.monotonic()

    def emit(line: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - started:6.1f}s] {line}", file=sys.stderr, flush=True)

    return emit


def _no_line(_line: str) -> None:
    """A plan runs nothing, so it has nothing to warn of."""


def command_plan(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config or DEFAULT_CONFIG)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    selected = select(config, args.filter, selection(args))
    target = containers_target(
        running(selected, args.filter), args.image, tuple(args.hosts or ()), args.hosts_from_config, None, _engine, _no_line
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


def command_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(render_schema() if args.format == "json" else render_keys_markdown())
    return 0


def command_checks(args: argparse.Namespace) -> int:
    sys.stdout.write(render_checks(args.format))
    return 0


def command_completion(args: argparse.Namespace) -> int:
    sys.stdout.write(render_completion(build_parser(), args.shell))
    return 0


def command_init(args: argparse.Namespace) -> int:
    write_starter(args.path)  # an existing file: BadInput, one line from main
    print(f"wrote {args.path}; run it with: distval run {args.path} --image <your image>")
    return 0


def command_fixtures(args: argparse.Namespace) -> int:
    if args.action == "list":
        shown_tags = [tag for tag in FIXTURES if args.all or not tag.startswith(BROKEN_PREFIX)]
        hidden = len(FIXTURES) - len(shown_tags)
        if args.format == "json":
            _print_json(fixtures_as_data(shown_tags, hidden))
            return 0
        for tag in shown_tags:
            print(f"{tag}  recipe {recipe_hash(tag)}  {FIXTURES[tag].description}")
        if hidden:
            print(f"(and {hidden} {BROKEN_PREFIX}* images for distval's own tests: distval fixtures list --all)")
        return 0
    if args.format != "text":
        raise BadInput("fixtures build: --format is fixtures list's (build says its progress on stderr)")
    progress = _progress(False)
    try:
        engine = _engine(secrets.token_hex(4))
        tags = args.tags or list(FIXTURES)
        build_fixtures(engine, tags, progress, force=args.force)
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def fixtures_as_data(tags: list[str], hidden: int) -> dict[str, Any]:
    """``distval fixtures list --format json``: each fixture's tag, recipe hash (the label a built image carries),
    description and whether it is one of the broken images made for distval's own tests; ``hidden``: those
    left out (without --all)."""
    return {
        "fixtures": [
            {
                "tag": tag,
                "recipe": recipe_hash(tag),
                "description": FIXTURES[tag].description,
                "broken": tag.startswith(BROKEN_PREFIX),
            }
            for tag in tags
        ],
        "hidden": hidden,
    }


def _add_hosts_options(parser: argparse.ArgumentParser, tls: bool = False, from_config: bool = False) -> None:
    parser.add_argument(
        "--hosts",
        metavar="URL[,URL...]",
        type=cli_values.hosts_list,
        help="Docker Engines to place the nodes on, in order: unix:///PATH, tcp://HOST:PORT, https://HOST:PORT (TLS), "
        "ssh://USER@HOST (over every scenario's hosts)",
    )
    if from_config:
        parser.add_argument(
            FROM_CONFIG_FLAG,
            action="store_true",
            help="honour the config's hosts keys: run the ranks with host networking on the Engines the file names and "
            "copy the image to them (without it, a hosts key is refused)",
        )
    if tls:
        parser.add_argument(
            "--tls-ca", metavar="PATH", help="with https:// hosts: the CA of their Engines (else $DOCKER_CERT_PATH/ca.pem)"
        )
        parser.add_argument("--tls-cert", metavar="PATH", help="with https:// hosts: the client certificate")
        parser.add_argument("--tls-key", metavar="PATH", help="with https:// hosts: the client key")


def _cleanup_engines(args: argparse.Namespace) -> list[Engine]:
    """The Engines ``distval cleanup`` looks at: the one of DOCKER_HOST, or each of --hosts."""
    if not args.hosts:
        return [_engine("cleanup")]
    Engine = sys.modules[__name__].Engine  # noqa: N806 - through __getattr__, or a test's stand-in
    specs = host_specs(args.hosts, tls_files(args.tls_ca, args.tls_cert, args.tls_key))
    return [Engine("cleanup", host=spec) for spec in specs]


def command_nodes(args: argparse.Namespace) -> int:
    # Imported here: it imports docker-py, which host mode and `distval plan` never need.
    from distval.targets.engines.dind import start_nodes, stop_nodes

    try:
        if args.action == "up":
            sys.stdout.write(start_nodes(args.count, args.plain, _progress(False)).describe())
        else:
            containers, networks = stop_nodes(args.set_id)
            print(f"removed {containers} node container(s) and {networks} network(s)")
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def command_cleanup(args: argparse.Namespace) -> int:
    """Remove what runs that are over left behind (a run killed with SIGKILL): never a run whose owner still runs,
    unless named with --run-id or --all. One line per run, removed or kept and why, then the totals; or, with
    --format json, the same decisions as one JSON object on stdout (cleanup_as_data)."""
    as_json = args.format == "json"
    emit = _no_line if as_json else print
    try:
        engines = _cleanup_engines(args)
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        if as_json:
            _print_json(cleanup_as_data(args.dry_run, [], str(exc)))
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
        _print_json(cleanup_as_data(args.dry_run, outcomes))
    return status


def _print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


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


def _add_report_options(
    parser: argparse.ArgumentParser, prefix_type: Callable[[str], str | None] = cli_values.suite_prefix
) -> None:
    parser.add_argument(
        "--junit",
        metavar="PATH",
        type=cli_values.file_path("the JUnit XML file"),
        help="write JUnit XML here (also when the run fails early)",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        type=cli_values.file_path("the JSON report"),
        help="write the JSON report here (also when the run fails early)",
    )
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        type=cli_values.file_path("the Markdown summary"),
        help="write the Markdown summary here (the summary also goes to $GITHUB_STEP_SUMMARY when that is set, with "
        "or without this option; --no-step-summary turns that off)",
    )
    parser.add_argument(
        "--no-step-summary",
        action="store_true",
        help="do not append the Markdown summary to $GITHUB_STEP_SUMMARY (by default it is, whenever that is set)",
    )
    parser.add_argument(
        "--suite-prefix",
        metavar="TEXT",
        type=prefix_type,
        help="name the JUnit testsuites and classnames with TEXT instead of each scenario's image (1-64 letters, "
        "digits, '-', '_'), to tell apart the reports of one config run against several images",
    )
    names = ", ".join(f"{name} ({option})" for option, name in OUTPUT_NAMES.items())
    parser.add_argument(
        "-o",
        "--output-dir",
        metavar="DIR",
        type=cli_values.file_path("the directory of the reports"),
        help=f"write every report into DIR (created if missing): {names}; --junit, --json or --markdown still name "
        "their own file",
    )


def _report_options(argv: Sequence[str]) -> argparse.Namespace | None:
    """The report paths of a ``distval run`` command line that the full parser refused; None: not a run, or none
    readable. Parsed alone (the rest is ignored), so that a bad --jobs still gets its JUnit file."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command != "run":
        return None
    reports = cli_values.UsageParser(prog="distval run", add_help=False)
    _add_report_options(reports, cli_values.suite_prefix_if_valid)
    reports.add_argument("--baseline", action="append")  # a report path that is a baseline is not written
    try:
        known, _ = reports.parse_known_args(argv[list(argv).index("run") + 1 :])
    except UsageError:
        return None
    with_output_dir(known)
    attributes = dict(REPORT_OPTIONS)
    reports_asked = [(option, getattr(known, attribute)) for option, attribute in REPORT_OPTIONS]
    for option, _, why in overwrites_baseline(known.baseline or (), reports_asked):
        print(f"distval: not writing {option}: {why}", file=sys.stderr)
        setattr(known, attributes[option], None)
    return known


# The exit codes each command can return: its help's epilog says them (tests/cli/test_exit_codes.py makes each
# command return them and nothing else). Every command can be given a bad command line (2) and can meet a bug of
# distval's (4). Only ``run`` handles SIGINT and SIGTERM (it removes what it created): 128+N.
_COMMON = (EXIT_PASSED, EXIT_BAD_INPUT, EXIT_INTERNAL)
_SUCCESS = {EXIT_PASSED: "success"}  # a command that gives no verdict on an image
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
    "export kubernetes": ExitCodes(_COMMON, _SUCCESS),
    "collect kubernetes": ExitCodes((*_COMMON, EXIT_CHECKS_FAILED, EXIT_ENVIRONMENT, EXIT_NOTHING_VALIDATED)),
    "export slurm": ExitCodes(_COMMON, _SUCCESS),
    "collect slurm": ExitCodes((*_COMMON, EXIT_CHECKS_FAILED, EXIT_NOTHING_VALIDATED)),
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
    for name, command in subcommands(parser).items():
        declared = COMMAND_EXIT_CODES.get(name)
        if declared is None:
            below = [codes for key, codes in COMMAND_EXIT_CODES.items() if key.startswith(name + " ")]
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

    run = commands.add_parser("run", help="run the scenarios of a config against an image")
    run.add_argument(
        "config",
        nargs="?",
        type=cli_values.file_path("a YAML scenario file"),
        help="YAML scenario file, e.g. configs/default.yaml (default: distval's configs/default.yaml)",
    )
    run.add_argument(
        "--image",
        type=cli_values.image_reference,
        help=f"image under test for every scenario (default: the config's, else {DEFAULT_IMAGE}, built if missing)",
    )
    run.add_argument(
        SAMPLE_IMAGE_FLAG,
        action="store_true",
        help=f"validate distval's sample image {DEFAULT_IMAGE} on purpose where no image is named: with ${CI_ENV} set, "
        "a run that names none is refused without it (a pipeline must not gate on distval's own image)",
    )
    _add_report_options(run)
    add_html_argument(run)
    add_selection_options(run)
    run.add_argument(
        "-j",
        "--jobs",
        type=cli_values.jobs_count,
        metavar="K",
        help=f"run up to K scenarios at once, K <= {cli_values.JOBS_MAX} (default: one per core, at most one per 4 GiB "
        f"of memory, at most 8; here {default_jobs()})",
    )
    run.add_argument(
        "--run-id", type=cli_values.run_id, help="label value for this run's containers and networks (default: random)"
    )
    loudness = run.add_mutually_exclusive_group()
    loudness.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    loudness.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also each rank's output (stdout and stderr, as the reports keep it) on stderr, as soon as its scenario "
        "ends: the runtimes read a rank's output once it stopped, so it is not shown while the rank runs",
    )
    run.add_argument(
        "--require-gpu",
        action="store_true",
        help="a scenario that needs GPUs the Engine cannot give fails instead of being skipped (for GPU pipelines)",
    )
    run.add_argument(
        "--fail-on-skip",
        action="store_true",
        help="any skipped check (or a check skipped on some ranks) fails, with its reason: for pipelines that must not "
        "drift into skipping",
    )
    run.add_argument(
        "--keep-on-failure",
        action="store_true",
        help="keep the containers and networks of failed scenarios and print the commands that inspect and remove them",
    )
    run.add_argument(
        "--local",
        action="store_true",
        help="no Docker: run each node as local processes with the local Python's torch (see --python)",
    )
    run.add_argument(
        "--target",
        choices=("docker", "slurm"),
        default="docker",
        help="docker (the default: one Engine, or several with --hosts) or slurm: each scenario as a batch job, "
        "submitted with sbatch from this host, followed to its deadline and cancelled (scancel) on every stop; "
        "see --slurm-dir, --bundle (docs/slurm.md)",
    )
    run.add_argument(
        "--slurm-dir",
        metavar="DIR",
        default="distval-slurm-jobs",
        type=cli_values.file_path("the directory of the jobs"),
        help="with --target slurm: where each scenario's job directory goes, on a filesystem every node sees at the "
        "same path (default distval-slurm-jobs)",
    )
    run.add_argument(
        "--bundle",
        metavar="DIR",
        type=cli_values.file_path("an OCI bundle directory"),
        help="with --target slurm --integration oci: the image under test unpacked as an OCI bundle (docs/slurm.md)",
    )
    run.add_argument(
        "--integration",
        choices=("oci", "pyxis", "apptainer"),
        default="oci",
        help="with --target slurm: how a job step runs the image (oci: srun --container, the default)",
    )
    run.add_argument("--partition", help="with --target slurm: the partition to submit to (default: the cluster's)")
    # The old name of --local, one letter from --hosts (several Engines): kept for one release, with a line saying so.
    run.add_argument("--host", dest="deprecated_host", action="store_true", help=argparse.SUPPRESS)
    run.add_argument(
        "--python",
        metavar="PATH",
        help="with --local: the Python whose torch runs the scenarios (default: each scenario's python, found on PATH)",
    )
    _add_hosts_options(run, tls=True, from_config=True)
    run.add_argument(
        "--image-distribution",
        choices=("transfer", "pull"),
        default="transfer",
        help="across several hosts: copy the image from host 0 (docker save | docker load, the default) or pull it "
        "by digest where it has one",
    )
    add_baseline_arguments(run)
    add_reference_arguments(run)
    add_references_arguments(run)
    run.set_defaults(handler=functools.partial(command_run, engine_for=_engine))
    add_compare_command(commands)
    add_history_command(commands)
    add_references_command(commands)

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
    _add_hosts_options(plan, from_config=True)
    plan.add_argument(
        "--format", choices=("text", "json"), default="text", help="text for people (default) or the plan object as JSON"
    )
    plan.set_defaults(handler=command_plan)

    schema = commands.add_parser("schema", help=f"print the JSON Schema of scenario files (shipped as {SHIPPED})")
    schema.add_argument(
        "--format",
        choices=("json", "markdown"),
        default="json",
        help=f"the JSON Schema (default) or the key reference of {KEYS_PAGE}, both from distval/config/keys.py",
    )
    schema.set_defaults(handler=command_schema)

    checks = commands.add_parser(
        "checks",
        help="list every check a scenario can name, with its arguments, what it needs and its version gates",
    )
    checks.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help=f"text for people (default), JSON, or the Markdown of {REFERENCE_PAGE}",
    )
    checks.set_defaults(handler=command_checks)

    init = commands.add_parser("init", help=f"write a commented starter scenario file (default {STARTER_NAME})")
    init.add_argument(
        "path",
        nargs="?",
        default=STARTER_NAME,
        type=cli_values.file_path("the scenario file to write"),
        help=f"where to write it (default {STARTER_NAME}); an existing file is never overwritten",
    )
    init.set_defaults(handler=command_init)

    fixtures = commands.add_parser("fixtures", help="build or list the fixture images (no registry needed)")
    fixtures.add_argument("action", choices=("build", "list"))
    fixtures.add_argument("tags", nargs="*", help="fixtures to build (default: all)")
    fixtures.add_argument("--force", action="store_true", help="rebuild even when up to date")
    fixtures.add_argument("--all", action="store_true", help="list: also the broken:* images, made for distval's own tests")
    fixtures.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="list: text for people (default), or one JSON object (each fixture's tag, recipe hash, description)",
    )
    fixtures.set_defaults(handler=command_fixtures)

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
    _add_hosts_options(cleanup, tls=True)
    cleanup.set_defaults(handler=command_cleanup)
    add_doctor_command(commands, _doctor_engine, _add_hosts_options)
    add_attest_commands(commands, _engine)
    export_targets, collect_targets = add_kubernetes_commands(commands, _add_report_options)
    add_slurm_commands(export_targets, collect_targets, _add_report_options)

    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish), generated from this command line's own parser",
        description="Print a completion script for the shell: bash (source <(distval completion bash)), zsh "
        "(source <(distval completion zsh), after compinit) or fish (distval completion fish | source).",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(handler=command_completion)
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
        reports = _report_options(arguments)
        if reports is not None:
            summary = RunSummary(secrets.token_hex(4), (), (exc.kind, str(exc)), exc.exit_code, config_path=None)
            write_reports(summary, reports)
        return exc.exit_code
    with_output_dir(args)
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
