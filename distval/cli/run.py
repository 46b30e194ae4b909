"""The ``distval run`` command once its options are parsed: the plan's scenarios selected and run in Docker or
as local processes (host mode), up to ``--jobs`` at once, stopped on Ctrl-C or SIGTERM with everything removed,
and the reports written (also when the run fails early)."""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import fnmatch
import functools
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from distval.cli.baseline import check_remeasure, overwrites_baseline, remeasure, with_baseline
from distval.config import load_config
from distval.config.shipped import DEFAULT_CONFIG
from distval.config.yaml_nodes import shown
from distval.errors import (
    BadInput,
    ConfigError,
    DistvalError,
    EngineError,
    FilterMismatch,
    ImageMissing,
    InternalError,
    Interrupted,
)
from distval.fixtures import FIXTURES, build_fixtures, is_current
from distval.fixtures.recipes import REAPER_IMAGE
from distval.owner import current_owner
from distval.plan.model import DEFAULT_IMAGE, RunPlan, ScenarioPlan, images_of, plan_run
from distval.reports.files import refusal
from distval.reports.json_report import write_json
from distval.reports.junit import write_junit
from distval.reports.markdown import STEP_SUMMARY_ENV, append_step_summary, write_markdown
from distval.reports.summary import render_summary
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.run.events import RunEvents
from distval.run.interrupts import Interrupt, install, signals_deferred
from distval.run.progress import ProgressDisplay
from distval.targets.docker.keep import Keeper
from distval.targets.docker.reaper import Reaper, ReaperLaunch
from distval.targets.docker.runtime import run_scenario
from distval.targets.engines.hosts import check_hosts_allowed, run_hosts, tls_files
from distval.targets.local.runtime import HostSession

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine
    from distval.targets.engines.runtime import HostEngine

Progress = Callable[[str], None]
Execute = Callable[[ScenarioPlan, RunEvents, threading.Event], ScenarioOutcome]


def _ensure_images(engine: Engine, images: list[str], progress: Progress) -> None:
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
    return refused + overwrites_baseline(args, REPORT_OPTIONS)


def write_reports(summary: RunSummary, args: argparse.Namespace, skip: frozenset[str] = frozenset()) -> bool:
    """JUnit, JSON, Markdown and $GITHUB_STEP_SUMMARY; a report that cannot be written is one line on stderr.
    ``skip``: the paths refused before the run (already said). Each writer on its own: one that fails for a
    bug of distval's (any exception but OSError) costs neither the others nor the terminal summary; it is
    said as an internal error, and the return value is False then (the caller exits non-zero)."""
    writers: list[tuple[str, str | None, Callable[[], object]]] = [
        ("JUnit XML", args.junit, lambda: write_junit(summary, args.junit)),
        ("JSON report", args.json, lambda: write_json(summary, args.json)),
        ("Markdown summary", args.markdown, lambda: write_markdown(summary, args.markdown)),
        (
            "step summary",
            None if getattr(args, "no_step_summary", False) else os.environ.get(STEP_SUMMARY_ENV),
            lambda: append_step_summary(summary),
        ),
    ]
    written = True
    for what, path, write in writers:
        if not path or path in skip:
            continue
        try:
            write()
        except OSError as exc:
            print(f"distval: cannot write the {what} to {path}: {exc}", file=sys.stderr)
        except Exception as exc:  # a bug of distval's, not the image's: the other reports still get written
            print(f"distval: the {what} was not written to {path}: {InternalError(exc)}", file=sys.stderr)
            written = False
    return written


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
    settle: Callable[[ScenarioResult], None] | None = None,
) -> list[ScenarioResult]:
    """Run the scenarios with ``execute`` (a runtime), up to ``jobs`` at once; their results in plan order.

    The workers share the Engine client (docker-py's connection pool serves concurrent requests). On
    Ctrl-C or SIGTERM (raised in this thread) the workers are told to stop, kill their containers and
    clean up before this re-raises. ``settle``: called with each scenario's result as it finishes
    (--keep-on-failure keeps or removes its resources then).
    """
    stop = threading.Event()
    events: RunEvents = display  # locked inside: safe to call from the worker threads

    def run_one(index: int, scenario_plan: ScenarioPlan) -> ScenarioResult:
        events.scenario_started(scenario_plan, index, len(plans))
        result = summarize_scenario(execute(scenario_plan, events, stop), require_gpu=require_gpu, fail_on_skip=fail_on_skip)
        if settle is not None:
            settle(result)
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
        # A second Ctrl-C must not end the wait: a worker still creating would outlive the run's cleanup.
        with signals_deferred():
            pool.shutdown(wait=True, cancel_futures=True)


def _launch_reaper(
    engine: Engine, display: ProgressDisplay, quiet: bool, plan: RunPlan, url: str | None = None
) -> ReaperLaunch | None:
    """The run's reaper (distval/targets/docker/reaper.py), being started beside the first scenario's setup (the caller
    keeps it, then waits for ``created``). It says where it holds the reaper, or (one stderr line, also with
    --quiet) that it cannot, from its threads."""

    def warn(line: str) -> None:
        if quiet:
            print(f"distval: {line}", file=sys.stderr)
        else:
            display.log(line)

    # The reaper runs in distval's reaper image (REAPER_IMAGE, ensured before), never in an image under test.
    if not plan.scenarios:
        return None
    return ReaperLaunch(
        lambda created: Reaper.start(engine, warn, url, display.log, created),
        warn,
        engine.run_id,
    )


# Said first in the progress and last in the summary when the image under test is distval's sample image because
# no --image was given: a first run must not be read as a verdict on the user's image.
SAMPLE_IMAGE_NOTE = f"no --image: validating distval's sample image {DEFAULT_IMAGE}"


def sample_image_note(plan: RunPlan, image_option: str | None) -> str | None:
    """SAMPLE_IMAGE_NOTE when no --image was given and some scenario runs the default image (one that names no
    image of its own); else None."""
    return SAMPLE_IMAGE_NOTE if image_option is None and DEFAULT_IMAGE in images_of(plan) else None


def announce_run(run_id: str) -> str:
    """The line a run starts with (stderr, not with --quiet): what to clean up by hand if distval is killed."""
    owner = current_owner()
    return (
        f"run {run_id} (pid {owner.pid} on {owner.host}): if distval is killed, "
        f"`distval cleanup --run-id {run_id}` removes its containers and networks"
    )


def command_run(args: argparse.Namespace, engine_for: Callable[[str], Engine]) -> int:
    """``engine_for(run_id)``: the Engine of a Docker run, asked for only then (host mode never imports docker-py)."""
    run_id = args.run_id or secrets.token_hex(4)
    display = ProgressDisplay(None if args.quiet else sys.stderr)
    results: list[ScenarioResult] = []
    engine: Engine | None = None
    engine_version: str | None = None
    host = socket.gethostname()
    session: HostSession | None = None
    launches: dict[int, ReaperLaunch] = {}  # a reaper per Engine (several across hosts): by id() of the Engine
    keeper = Keeper(None, False)
    mode = "host" if args.host else "docker"
    # No config given: the shipped default (inside the package, so an installed distval has it too).
    config_path = args.config or str(DEFAULT_CONFIG)
    others: list[HostEngine] = []  # across several hosts: the Engines besides host 0's (``engine``)

    def covered(on: Engine, **options: Any) -> Execute:
        """run_scenario on ``on``; where reapers are being started, nothing starts before they run (``before_start``)."""

        def reapers_ready() -> None:
            for launch in launches.values():
                launch.ready()

        if launches:
            options["before_start"] = reapers_ready
        return functools.partial(run_scenario, on, **options)

    note: str | None = None  # SAMPLE_IMAGE_NOTE, once the plan says the sample image runs

    def summarize(early_error: tuple[str, str] | None = None, early_exit_code: int | None = None) -> RunSummary:
        return RunSummary(
            run_id, tuple(results), early_error, early_exit_code, engine_version, host, config_path, mode, image_note=note
        )

    summary: RunSummary
    remeasures: dict[int, list[ScenarioResult]] = {}  # by the scenario's index: the runs that re-measured it
    refused = _refused_reports(args)
    restore_handlers = install()  # SIGINT too: it may have been inherited ignored (distval/run/interrupts.py)
    try:
        if refused:
            raise BadInput("; ".join(f"{option} {reason}" for option, _, reason in refused))
        check_remeasure(args)
        execute: Execute
        again: Execute | None = None  # what re-measures a scenario (never kept: --keep-on-failure keeps the run's)
        if args.host:
            # Local processes with the local torch (distval/targets/local/runtime.py); Docker is never asked.
            if args.image:
                raise BadInput("--image names a container image, --host runs the local Python's torch: give one, not both")
            if args.keep_on_failure:
                raise BadInput("--keep-on-failure keeps containers; --host runs local processes: give one, not both")
            if getattr(args, "hosts", None):
                raise BadInput("--hosts names Docker Engines, --host runs local processes without Docker: give one, not both")
            config = load_config(config_path)
            session = HostSession(run_id, args.python)
            plan = select_scenarios(session.plan_run(config), args.filter)
            execute = session.run_scenario
        else:
            if args.python:
                raise BadInput("--python names the local Python of host mode: it needs --host")
            config = load_config(config_path)
            override = getattr(args, "hosts", None) or ()
            check_hosts_allowed(
                config.path, [(s.name, s.hosts) for s in config.scenarios], override, getattr(args, "hosts_from_config", False)
            )
            plan = select_scenarios(plan_run(config, run_id, args.image, override), args.filter)
            note = sample_image_note(plan, args.image)
            if note is not None:
                display.log(note)
            urls = run_hosts([s.hosts for s in plan.scenarios], override)
            if urls:  # several Docker hosts (distval/targets/engines/runtime.py): an Engine per URL, the images the same on all
                display.log(announce_run(run_id))
                if args.keep_on_failure:
                    raise BadInput(
                        "--keep-on-failure keeps the containers of one Docker Engine; it does not work across --hosts yet"
                    )
                display.log(f"on {len(urls)} hosts: `distval cleanup --run-id {run_id} --hosts {','.join(urls)}` cleans them all")
                # Imported here: it imports docker-py, which host mode never needs.
                from distval.targets.engines.runtime import prepare_hosts

                hosts = prepare_hosts(
                    run_id,
                    urls,
                    tls_files(args.tls_ca, args.tls_cert, args.tls_key),
                    args.image_distribution,
                    [*images_of(plan), REAPER_IMAGE],  # each Engine's reaper runs in it
                    lambda local, image: _ensure_images(local, [image], display.log),
                    display.log,
                )
                others = [h for url, h in hosts.items() if url != urls[0]]
                engine = hosts[urls[0]].engine
                engine_version = _engine_version(engine)
                for url, each_host in hosts.items():  # a reaper on every Engine, each holding that Engine's part
                    launch = _launch_reaper(each_host.engine, display, args.quiet, plan, url)
                    if launch is not None:
                        launches[id(each_host.engine)] = launch  # kept first: the end waits for it, even after Ctrl-C
                        launch.created()
                execute = covered(engine, hosts=hosts)
            else:
                engine = engine_for(run_id)
                # Said once the Engine answered: before that nothing can be created, and a cleanup hint for an
                # Engine that is not there only misleads.
                display.log(announce_run(run_id))
                engine_version = _engine_version(engine)
                _ensure_images(engine, images_of(plan), display.log)
                # A stand-in Engine without reapers (the unit tests' FakeEngine) runs without one. The reaper's
                # image is built like a missing fixture; where it cannot be, the run stops (one line): never a
                # reaper in another image.
                if hasattr(engine, "start_reaper"):
                    _ensure_images(engine, [REAPER_IMAGE], display.log)
                launch = _launch_reaper(engine, display, args.quiet, plan) if hasattr(engine, "start_reaper") else None
                if launch is not None:
                    launches[id(engine)] = launch  # kept first: the end waits for it, even after Ctrl-C
                    launch.created()
                keeper = Keeper(engine, args.keep_on_failure)
                execute = again = covered(engine)
                if keeper.enabled:  # the runtime leaves each scenario's resources; keeper.settle decides
                    execute = covered(engine, remove=False)
        results.extend(
            _run_scenarios(
                execute,
                plan.scenarios,
                display,
                args.jobs or default_jobs(),
                args.require_gpu,
                args.fail_on_skip,
                keeper.settle,
            )
        )
        summary = summarize()
        jobs = args.jobs or default_jobs()
        remeasures = remeasure(
            summary,
            args,
            lambda plans: _run_scenarios(again or execute, plans, display, jobs, args.require_gpu, args.fail_on_skip),
            display.log,
        )
    except KeyboardInterrupt:  # a SIGINT before the handlers were installed
        display.close()
        keeper.forget()
        interrupt = Interrupt(signal.SIGINT)
        summary = summarize((interrupt.kind, str(interrupt)), interrupt.exit_code)
    except DistvalError as exc:
        display.close()
        if isinstance(exc, Interrupted):
            keeper.forget()
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
        # One deferral for the whole cleanup: a signal between two hosts must not skip the second one.
        with signals_deferred(raise_after=False) as late:
            display.close()
            for each in ([engine] if engine is not None else []) + others:  # every host is cleaned, whichever fails
                _clean_up(each, engine, launches, keeper)
            if session is not None:
                session.close()
    if late.signum is not None and summary.early_exit_code is None:  # stopped while the run's end was cleaned up
        interrupt = Interrupt(late.signum)
        summary = summarize((interrupt.kind, str(interrupt)), interrupt.exit_code)
    # Ctrl-C while the reports are written: they are written whole, then distval exits (nothing runs any more).
    with signals_deferred(raise_after=False):
        summary = with_baseline(summary, args, remeasures)
        exit_code = summary.exit_code
        if not write_reports(summary, args, frozenset(path for _, path, _ in refused)):
            exit_code = exit_code or InternalError.exit_code  # a report is missing: never a quiet 0
        try:
            sys.stdout.write(render_summary(summary))
        except Exception as exc:  # a bug of distval's in the terminal summary: the reports above are written
            print(f"distval: the terminal summary was not printed: {InternalError(exc)}", file=sys.stderr)
            exit_code = exit_code or InternalError.exit_code
        for line in keeper.instructions():
            print(f"distval: {line}", file=sys.stderr)
        if args.host and summary.scenarios:
            print("(host mode: local processes with the local torch, no Docker; every testsuite is marked [host])")
    restore_handlers()
    return exit_code


def _clean_up(each: Engine | HostEngine, engine: Engine | None, launches: dict[int, ReaperLaunch], keeper: Keeper) -> None:
    """The end of a run on one Engine: all but what is kept, and the reaper last (it covers a distval killed
    meanwhile); a reaper still starting ends first."""
    target: Any = getattr(each, "engine", each)  # a HostEngine's own Engine
    launched = launches.get(id(target))
    held = launched.ready() if launched is not None else None
    try:
        if held is not None or (each is engine and keeper.kept):
            keeper.remove_run(target)
        else:
            each.remove_labelled()
    except EngineError as exc:
        print(f"distval: cleanup failed: {exc}", file=sys.stderr)
    if held is not None:
        held.disarm()  # a normal end: it exits without removing anything, so what is kept stays
