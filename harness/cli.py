"""The ``distval`` command. Exit codes (README.md): 0 all passed, 1 a check failed or errored,
2 bad input, 3 environment unusable (Docker unreachable, image missing), 128+N interrupted by signal N.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import fnmatch
import functools
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from harness import __version__, cli_values
from harness.baseline_command import add_baseline_arguments, add_compare_command, with_baseline
from harness.cleanup import RunDecision, by_run, decide
from harness.config import load_config
from harness.config.schema import SHIPPED, render_schema
from harness.config.yaml_nodes import shown
from harness.errors import (
    EXIT_BAD_INPUT,
    BadInput,
    ConfigError,
    DistvalError,
    EngineError,
    FilterMismatch,
    ImageMissing,
    InternalError,
    Interrupted,
    UsageError,
)
from harness.events import RunEvents
from harness.host_runtime import HostSession
from harness.labels import LABEL_RUN
from harness.owner import current_owner
from harness.plan import DEFAULT_IMAGE, RunPlan, ScenarioPlan, images_of, plan_run
from harness.plan_render import plan_as_data, render_plan
from harness.progress import ProgressDisplay
from harness.reports.files import refusal
from harness.reports.json_report import write_json
from harness.reports.junit import write_junit
from harness.reports.markdown import STEP_SUMMARY_ENV, append_step_summary, write_markdown
from harness.reports.summary import render_summary
from harness.results import RunSummary, ScenarioOutcome, ScenarioResult, summarize_scenario
from harness.runtime import run_scenario, signals_deferred

if TYPE_CHECKING:
    from harness.engine import Engine

Progress = Callable[[str], None]
Execute = Callable[[ScenarioPlan, RunEvents, threading.Event], ScenarioOutcome]


def __getattr__(name: str) -> Any:
    """``Engine`` is imported on first use, and docker-py with it: host mode (and ``plan``) never need it."""
    if name == "Engine":
        from harness.engine import Engine

        globals()["Engine"] = Engine
        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _engine(run_id: str) -> Engine:
    engine: Engine = sys.modules[__name__].Engine(run_id)  # through __getattr__, or a test's stand-in
    return engine


class _Interrupt(Interrupted):
    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}; the run's containers and networks were removed")
        self.exit_code = 128 + signum


def _raise_interrupt(signum: int, _frame: FrameType | None) -> None:
    raise _Interrupt(signum)


def _progress(quiet: bool) -> Progress:
    started = time.monotonic()

    def emit(line: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - started:6.1f}s] {line}", file=sys.stderr, flush=True)

    return emit


def _ensure_images(engine: Engine, images: list[str], progress: Progress) -> None:
    from harness.fixtures import FIXTURES, build_fixtures, is_current

    for image in images:
        if image in FIXTURES and not is_current(engine, image):
            progress(f"image {image} is missing or stale: building it now (no registry is used)")
            build_fixtures(engine, [image], progress)
        elif engine.image(image) is None:
            raise ImageMissing(f"image {image} is not in the Docker Engine; distval never pulls: build, load or pull it first")


# Patterns and scenario names listed in one message, at most (a matrix may have thousands).
_LISTED_MAX = 10


def select_scenarios(plan: RunPlan, patterns: Sequence[str] | None) -> RunPlan:
    """The plan with only the scenarios whose names match a pattern (fnmatch, case-sensitive); all without
    patterns. A pattern that matches nothing is bad input (a typo must not quietly run less)."""
    if not patterns:
        return plan
    names = [s.scenario.name for s in plan.scenarios]
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unmatched:
        which = ", ".join(shown(p) for p in unmatched[:_LISTED_MAX])
        listed = ", ".join(names[:_LISTED_MAX]) + (f", ... ({len(names)} in all)" if len(names) > _LISTED_MAX else "")
        raise FilterMismatch(
            f"--filter {which} match{'es' if len(unmatched) == 1 else ''} no scenario of {plan.config_path}; "
            f"its scenarios: {listed or '(none)'}"
        )
    chosen: tuple[ScenarioPlan, ...] = tuple(
        s for s in plan.scenarios if any(fnmatch.fnmatchcase(s.scenario.name, p) for p in patterns)
    )
    return dataclasses.replace(plan, scenarios=chosen)


def _engine_version(engine: Engine) -> str | None:
    try:
        return engine.version()
    except EngineError:
        return None  # only a property of the reports: not a reason to stop the run


REPORT_OPTIONS = (("--junit", "junit"), ("--json", "json"), ("--markdown", "markdown"))


def _refused_reports(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(option, path, why) for each report path that names something other than a regular file (a directory, a
    device, a FIFO): asked before the run starts, so that nothing runs for a report that cannot be written."""
    refused = []
    for option, attribute in REPORT_OPTIONS:
        path = getattr(args, attribute)
        reason = refusal(path) if path else None
        if reason is not None:
            refused.append((option, path, reason))
    return refused


def _write_reports(summary: RunSummary, args: argparse.Namespace, skip: frozenset[str] = frozenset()) -> None:
    """JUnit, JSON, Markdown and $GITHUB_STEP_SUMMARY; a report that cannot be written is one line on stderr.
    ``skip``: the paths refused before the run (already said)."""
    writers: list[tuple[str, str | None, Callable[[], object]]] = [
        ("JUnit XML", args.junit, lambda: write_junit(summary, args.junit)),
        ("JSON report", args.json, lambda: write_json(summary, args.json)),
        ("Markdown summary", args.markdown, lambda: write_markdown(summary, args.markdown)),
        ("step summary", os.environ.get(STEP_SUMMARY_ENV), lambda: append_step_summary(summary)),
    ]
    for what, path, write in writers:
        if not path or path in skip:
            continue
        try:
            write()
        except OSError as exc:
            print(f"distval: cannot write the {what} to {path}: {exc}", file=sys.stderr)


def default_jobs() -> int:
    """Scenarios at once by default: one per core, at most one per 4 GiB of memory, at most 8."""
    cores = os.cpu_count() or 1
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**30
    return max(1, min(cores, memory_gib // 4, 8))


def _run_scenarios(
    execute: Execute,
    plans: tuple[ScenarioPlan, ...],
    display: ProgressDisplay,
    jobs: int,
    require_gpu: bool = False,
    fail_on_skip: bool = False,
) -> list[ScenarioResult]:
    """Run the scenarios with ``execute`` (a runtime), up to ``jobs`` at once; their results in plan order.

    The workers share the Engine client (docker-py's connection pool serves concurrent requests). On
    Ctrl-C or SIGTERM (raised in this thread) the workers are told to stop, kill their containers and
    clean up before this re-raises.
    """
    stop = threading.Event()
    events: RunEvents = display  # locked inside: safe to call from the worker threads

    def run_one(index: int, scenario_plan: ScenarioPlan) -> ScenarioResult:
        events.scenario_started(scenario_plan, index, len(plans))
        result = summarize_scenario(execute(scenario_plan, events, stop), require_gpu=require_gpu, fail_on_skip=fail_on_skip)
        events.scenario_finished(result)
        return result

    if jobs <= 1 or len(plans) <= 1:
        return [run_one(index, p) for index, p in enumerate(plans, start=1)]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="distval-scenario")
    futures = [pool.submit(run_one, index, p) for index, p in enumerate(plans, start=1)]
    try:
        return [future.result() for future in futures]
    except BaseException:
        stop.set()  # the workers kill their containers and clean up; shutdown below waits for them
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def announce_run(run_id: str) -> str:
    """The line a run starts with (stderr, not with --quiet): what to clean up by hand if distval is killed."""
    owner = current_owner()
    return (
        f"run {run_id} (pid {owner.pid} on {owner.host}): if distval is killed, "
        f"`distval cleanup --run-id {run_id}` removes its containers and networks"
    )


def command_run(args: argparse.Namespace) -> int:
    run_id = args.run_id or secrets.token_hex(4)
    display = ProgressDisplay(None if args.quiet else sys.stderr)
    results: list[ScenarioResult] = []
    engine: Engine | None = None
    engine_version: str | None = None
    host = socket.gethostname()
    session: HostSession | None = None
    mode = "host" if args.host else "docker"

    def summarize(early_error: tuple[str, str] | None = None, early_exit_code: int | None = None) -> RunSummary:
        return RunSummary(run_id, tuple(results), early_error, early_exit_code, engine_version, host, args.config, mode)

    summary: RunSummary
    refused = _refused_reports(args)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if refused:
            raise BadInput("; ".join(f"{option} {reason}" for option, _, reason in refused))
        execute: Execute
        if args.host:
            # Local processes with the local torch (harness/host_runtime.py); Docker is never asked.
            if args.image:
                raise BadInput("--image names a container image, --host runs the local Python's torch: give one, not both")
            config = load_config(args.config)
            session = HostSession(run_id, args.python)
            plan = select_scenarios(session.plan_run(config), args.filter)
            execute = session.run_scenario
        else:
            if args.python:
                raise BadInput("--python names the local Python of host mode: it needs --host")
            config = load_config(args.config)
            plan = select_scenarios(plan_run(config, run_id, args.image), args.filter)
            display.log(announce_run(run_id))
            engine = _engine(run_id)
            engine_version = _engine_version(engine)
            _ensure_images(engine, images_of(plan), display.log)
            execute = functools.partial(run_scenario, engine)
        results.extend(
            _run_scenarios(execute, plan.scenarios, display, args.jobs or default_jobs(), args.require_gpu, args.fail_on_skip)
        )
        summary = summarize()
    except KeyboardInterrupt:
        display.close()
        interrupt = _Interrupt(signal.SIGINT)
        summary = summarize((interrupt.kind, str(interrupt)), interrupt.exit_code)
    except DistvalError as exc:
        display.close()
        if isinstance(exc, ConfigError):
            for problem in exc.problems:
                print(problem, file=sys.stderr)
        else:
            print(f"distval: {exc}", file=sys.stderr)
        summary = summarize((exc.kind, str(exc)), exc.exit_code)
    except Exception as exc:  # a bug: still one line, still the reports the command line asked for
        display.close()
        internal = InternalError(exc)
        print(f"distval: {internal}", file=sys.stderr)
        summary = summarize((internal.kind, str(internal)), internal.exit_code)
    finally:
        display.close()
        if engine is not None:
            with signals_deferred():
                try:
                    engine.remove_labelled()
                except EngineError as exc:
                    print(f"distval: cleanup failed: {exc}", file=sys.stderr)
        if session is not None:
            session.close()
        signal.signal(signal.SIGTERM, previous)
    summary = with_baseline(summary, args)
    _write_reports(summary, args, frozenset(path for _, path, _ in refused))
    sys.stdout.write(render_summary(summary))
    if args.host and summary.scenarios:
        print("(host mode: local processes with the local torch, no Docker; every testsuite is marked [host])")
    return summary.exit_code


def command_plan(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    plan = plan_run(config, args.run_id or "<run-id>", args.image)
    if args.format == "json":
        sys.stdout.write(json.dumps(plan_as_data(plan), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_plan(plan))
    return 0


def command_schema(_args: argparse.Namespace) -> int:
    sys.stdout.write(render_schema())
    return 0


def command_fixtures(args: argparse.Namespace) -> int:
    from harness.fixtures import FIXTURES, build_fixtures, recipe_hash

    if args.action == "list":
        for tag, fixture in FIXTURES.items():
            print(f"{tag}  recipe {recipe_hash(tag)}  {fixture.description}")
        return 0
    progress = _progress(False)
    try:
        engine = _engine(secrets.token_hex(4))
        tags = args.tags or list(FIXTURES)
        build_fixtures(engine, tags, progress, force=args.force)
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def command_cleanup(args: argparse.Namespace) -> int:
    """Remove what runs that are over left behind (a run killed with SIGKILL): never a run whose owner still runs,
    unless named with --run-id or --all. One line per run, removed or kept and why, then the totals."""
    try:
        engine = _engine("cleanup")
        if args.run_id or args.all:
            reason = f"named with --run-id {args.run_id}" if args.run_id else "--all"
            found = engine.list_managed([f"{LABEL_RUN}={args.run_id}"] if args.run_id else [])
            decisions = [RunDecision(run_id, tuple(rs), True, reason) for run_id, rs in by_run(found).items()]
        else:
            decisions = decide(engine.list_managed(), args.older_than, time.time(), socket.gethostname())
        removed_containers = removed_networks = 0
        for decision in decisions:
            if not decision.remove:
                print(f"kept run {decision.run_id} ({decision.counts()}): {decision.reason}")
                continue
            containers, networks = engine.remove_resources(list(decision.resources))
            removed_containers, removed_networks = removed_containers + containers, removed_networks + networks
            print(f"removed run {decision.run_id} ({containers} container(s), {networks} network(s)): {decision.reason}")
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    kept = sum(1 for d in decisions if not d.remove)
    print(f"removed {removed_containers} container(s) and {removed_networks} network(s); kept {kept} run(s)")
    return 0


def _add_report_options(parser: argparse.ArgumentParser) -> None:
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
        help="write the Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set)",
    )


def _report_options(argv: Sequence[str]) -> argparse.Namespace | None:
    """The report paths of a ``distval run`` command line that the full parser refused; None: not a run, or none
    readable. Parsed alone (the rest is ignored), so that a bad --jobs still gets its JUnit file."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command != "run":
        return None
    reports = cli_values.UsageParser(prog="distval run", add_help=False)
    _add_report_options(reports)
    try:
        known, _ = reports.parse_known_args(argv[list(argv).index("run") + 1 :])
    except UsageError:
        return None
    return known


def build_parser() -> argparse.ArgumentParser:
    parser = cli_values.UsageParser(
        prog="distval",
        description="Validate that distributed training works in a PyTorch container image.",
        epilog="Exit codes: 0 all passed; 1 a check failed or errored; 2 bad input; 3 environment unusable "
        "(Docker unreachable, image missing); 128+N interrupted by signal N (130 Ctrl-C, 143 SIGTERM).",
    )
    parser.add_argument("--version", action="version", version=f"distval {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the scenarios of a config against an image")
    run.add_argument(
        "config", type=cli_values.file_path("a YAML scenario file"), help="YAML scenario file, e.g. configs/default.yaml"
    )
    run.add_argument(
        "--image",
        type=cli_values.image_reference,
        help=f"image under test for every scenario (default: the config's, else {DEFAULT_IMAGE}, built if missing)",
    )
    _add_report_options(run)
    run.add_argument(
        "--filter",
        metavar="PATTERN",
        action="append",
        help="run only the scenarios whose name matches this glob (fnmatch; repeatable)",
    )
    run.add_argument(
        "--jobs",
        type=cli_values.jobs_count,
        metavar="K",
        help=f"run up to K scenarios at once, K <= {cli_values.JOBS_MAX} (default: one per core, at most one per 4 GiB "
        f"of memory, at most 8; here {default_jobs()})",
    )
    run.add_argument(
        "--run-id", type=cli_values.run_id, help="label value for this run's containers and networks (default: random)"
    )
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")
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
        "--host",
        action="store_true",
        help="no Docker: run each node as local processes with the local Python's torch (see --python)",
    )
    run.add_argument(
        "--python",
        metavar="PATH",
        help="with --host: the Python whose torch runs the scenarios (default: each scenario's python, found on PATH)",
    )
    add_baseline_arguments(run)
    run.set_defaults(handler=command_run)
    add_compare_command(commands)

    plan = commands.add_parser("plan", help="print the launch plan without touching Docker (a dry run)")
    plan.add_argument("config", type=cli_values.file_path("a YAML scenario file"))
    plan.add_argument("--image", type=cli_values.image_reference)
    plan.add_argument("--run-id", type=cli_values.run_id)
    plan.add_argument(
        "--format", choices=("text", "json"), default="text", help="text for people (default) or the plan object as JSON"
    )
    plan.set_defaults(handler=command_plan)

    schema = commands.add_parser("schema", help=f"print the JSON Schema of scenario files (shipped as {SHIPPED})")
    schema.set_defaults(handler=command_schema)

    fixtures = commands.add_parser("fixtures", help="build or list the fixture images (no registry needed)")
    fixtures.add_argument("action", choices=("build", "list"))
    fixtures.add_argument("tags", nargs="*", help="fixtures to build (default: all)")
    fixtures.add_argument("--force", action="store_true", help="rebuild even when up to date")
    fixtures.set_defaults(handler=command_fixtures)

    cleanup = commands.add_parser(
        "cleanup",
        help="remove containers and networks left by runs that are over (a run killed with SIGKILL)",
        description="Without options: remove the containers and networks of every run whose distval process is gone "
        "(same host, and no process with that pid and start time). A run that still runs, or ran on another host, is kept.",
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
    cleanup.set_defaults(handler=command_cleanup)
    return parser


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(arguments)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        reports = _report_options(arguments)
        if reports is not None:
            summary = RunSummary(secrets.token_hex(4), (), (exc.kind, str(exc)), exc.exit_code, config_path=None)
            _write_reports(summary, reports)
        return exc.exit_code
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
