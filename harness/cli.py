"""The ``distval`` command. Exit codes (README.md): 0 all passed, 1 a check failed or errored,
2 bad input, 3 environment unusable (Docker unreachable, image missing), 128+N interrupted by signal N.
"""

from __future__ import annotations

import argparse
import re
import secrets
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

from harness import __version__
from harness.config import load_config
from harness.engine import Engine, EngineError, ImageMissing
from harness.errors import EXIT_BAD_INPUT, ConfigError, DistvalError, Interrupted
from harness.fixtures import FIXTURES, build_fixtures, is_current, recipe_hash
from harness.junit import write_junit
from harness.plan import DEFAULT_IMAGE, images_of, plan_run, render_plan
from harness.results import PASSED, RunSummary, ScenarioResult, summarize_scenario
from harness.runtime import run_scenario, signals_deferred

Progress = Callable[[str], None]


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
    for image in images:
        if image in FIXTURES and not is_current(engine, image):
            progress(f"image {image} is missing or stale: building it now (no registry is used)")
            build_fixtures(engine, [image], progress)
        elif engine.image(image) is None:
            raise ImageMissing(f"image {image} is not in the Docker Engine; distval never pulls: build, load or pull it first")


def _print_summary(summary: RunSummary) -> None:
    for scenario in summary.scenarios:
        print(f"{scenario.status.upper():7} {scenario.plan.suite_name}  ({scenario.duration_s:.1f} s)")
        for case in scenario.cases:
            message = case.message.splitlines()[0] if case.message else ""
            print(f"  {case.status:7} {case.name}: {message[:300]}")
    if summary.early_error is not None:
        kind, message = summary.early_error
        print(f"ERROR   {kind}: {message}")
    passed = sum(1 for s in summary.scenarios for c in s.cases if c.status == PASSED)
    total = sum(len(s.cases) for s in summary.scenarios)
    print(f"distval run {summary.run_id}: {passed} of {total} check results passed; exit code {summary.exit_code}")


RUN_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,15}$")


def _run_id(value: str) -> str:
    """argparse type: the run id goes into container names and hostnames, so keep it short and plain."""
    if not RUN_ID_PATTERN.match(value):
        raise argparse.ArgumentTypeError(
            f"expected 1-16 lowercase letters, digits or '-' (starting with a letter or digit); got {value!r}"
        )
    return value


def command_run(args: argparse.Namespace) -> int:
    run_id = args.run_id or secrets.token_hex(4)
    progress = _progress(args.quiet)
    results: list[ScenarioResult] = []
    engine: Engine | None = None
    summary: RunSummary
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        config = load_config(args.config)
        plan = plan_run(config, run_id, args.image)
        engine = Engine(run_id)
        _ensure_images(engine, images_of(plan), progress)
        for scenario_plan in plan.scenarios:
            progress(f"{scenario_plan.suite_name}: starting on {scenario_plan.image}")
            result = summarize_scenario(run_scenario(engine, scenario_plan, progress))
            progress(f"{scenario_plan.suite_name}: {result.status} in {result.duration_s:.1f} s")
            results.append(result)
        summary = RunSummary(run_id, tuple(results))
    except KeyboardInterrupt:
        interrupt = _Interrupt(signal.SIGINT)
        summary = RunSummary(run_id, tuple(results), (interrupt.kind, str(interrupt)), interrupt.exit_code)
    except DistvalError as exc:
        if isinstance(exc, ConfigError):
            for problem in exc.problems:
                print(problem, file=sys.stderr)
        else:
            print(f"distval: {exc}", file=sys.stderr)
        summary = RunSummary(run_id, tuple(results), (exc.kind, str(exc)), exc.exit_code)
    finally:
        if engine is not None:
            with signals_deferred():
                try:
                    engine.remove_labelled()
                except EngineError as exc:
                    print(f"distval: cleanup failed: {exc}", file=sys.stderr)
        signal.signal(signal.SIGTERM, previous)
    if args.junit:
        write_junit(summary, args.junit)
    _print_summary(summary)
    return summary.exit_code


def command_plan(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(render_plan(plan_run(config, args.run_id or "<run-id>", args.image)))
    return 0


def command_fixtures(args: argparse.Namespace) -> int:
    if args.action == "list":
        for tag, fixture in FIXTURES.items():
            print(f"{tag}  recipe {recipe_hash(tag)}  {fixture.description}")
        return 0
    progress = _progress(False)
    try:
        engine = Engine(secrets.token_hex(4))
        tags = args.tags or list(FIXTURES)
        build_fixtures(engine, tags, progress, force=args.force)
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def command_cleanup(args: argparse.Namespace) -> int:
    """Remove what a run killed with SIGKILL left behind (everything labelled distval.managed=true)."""
    try:
        engine = Engine("cleanup")
        containers, networks = engine.remove_matching([f"distval.run={args.run_id}"] if args.run_id else [])
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"removed {containers} container(s) and {networks} network(s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distval",
        description="Validate that distributed training works in a PyTorch container image.",
        epilog="Exit codes: 0 all passed; 1 a check failed or errored; 2 bad input; 3 environment unusable "
        "(Docker unreachable, image missing); 128+N interrupted by signal N (130 Ctrl-C, 143 SIGTERM).",
    )
    parser.add_argument("--version", action="version", version=f"distval {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the scenarios of a config against an image")
    run.add_argument("config", help="YAML scenario file, e.g. configs/default.yaml")
    run.add_argument(
        "--image", help=f"image under test for every scenario (default: the config's, else {DEFAULT_IMAGE}, built if missing)"
    )
    run.add_argument("--junit", metavar="PATH", help="write JUnit XML here (also when the run fails early)")
    run.add_argument("--run-id", type=_run_id, help="label value for this run's containers and networks (default: random)")
    run.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    run.set_defaults(handler=command_run)

    plan = commands.add_parser("plan", help="print the launch plan without touching Docker (a dry run)")
    plan.add_argument("config")
    plan.add_argument("--image")
    plan.add_argument("--run-id", type=_run_id)
    plan.set_defaults(handler=command_plan)

    fixtures = commands.add_parser("fixtures", help="build or list the fixture images (no registry needed)")
    fixtures.add_argument("action", choices=("build", "list"))
    fixtures.add_argument("tags", nargs="*", help="fixtures to build (default: all)")
    fixtures.add_argument("--force", action="store_true", help="rebuild even when up to date")
    fixtures.set_defaults(handler=command_fixtures)

    cleanup = commands.add_parser("cleanup", help="remove containers and networks left by a killed run")
    cleanup.add_argument("--run-id", type=_run_id)
    cleanup.set_defaults(handler=command_cleanup)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
