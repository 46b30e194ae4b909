"""The ``distval run`` command once its options are parsed: the plan's scenarios selected and run in Docker or
as local processes (host mode), up to ``--jobs`` at once, stopped on Ctrl-C or SIGTERM with everything removed,
and the reports written (also when the run fails early)."""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import fnmatch
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from distval.cli.baseline import BaselineOptions, check_remeasure, overwrites_baseline, remeasure, with_baseline
from distval.cli.history import html_refusal
from distval.cli.reference import PairedRuns, ReferenceOptions, check_reference, run_pairs, with_reference
from distval.cli.references import ReferencesOptions, references_options, with_references
from distval.cli.selection_options import selection as selection_from
from distval.config import Config, load_config
from distval.config.shipped import DEFAULT_CONFIG, DEFAULT_IMAGE
from distval.config.yaml_nodes import shown
from distval.errors import (
    BadInput,
    ConfigError,
    DistvalError,
    FilterMismatch,
    InternalError,
    Interrupted,
    SampleImageRefused,
    SelectionError,
)
from distval.plan.model import RunPlan, ScenarioPlan, images_of
from distval.plan.selection import NO_CHECK_SELECTED, Selected, Selection, select_checks
from distval.reports.files import refusal
from distval.reports.html import write_run_html
from distval.reports.json_report import write_json
from distval.reports.junit import write_junit
from distval.reports.markdown import STEP_SUMMARY_ENV, append_step_summary, write_markdown
from distval.reports.summary import render_summary
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario, unselected_result
from distval.run.events import RunEvents
from distval.run.interrupts import Interrupt, install, signals_deferred
from distval.run.progress import ProgressDisplay
from distval.targets.base import Target, plan_on, plan_reference, refuse_what_it_lacks
from distval.targets.docker.target import DockerTarget
from distval.targets.engines.hosts import TlsFiles, check_hosts_allowed, run_hosts, tls_files
from distval.targets.local.target import LocalTarget
from distval.targets.slurm.bundle_config import chosen_bundle
from distval.targets.slurm.jobs import LocalCommands
from distval.targets.slurm.target import SlurmTarget

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine

Progress = Callable[[str], None]
Execute = Callable[[ScenarioPlan, RunEvents, threading.Event], ScenarioOutcome]


# Patterns and scenario names listed in one message, at most (a matrix may have thousands).
_LISTED_MAX = 10


def matching_names(config_path: str, names: Sequence[str], patterns: Sequence[str] | None) -> list[str]:
    """The names that match a pattern (fnmatch, case-sensitive); all without patterns. A pattern that matches
    nothing is bad input (a typo must not quietly run less)."""
    if not patterns:
        return list(names)
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unmatched:
        which = ", ".join(shown(p) for p in unmatched[:_LISTED_MAX])
        listed = ", ".join(names[:_LISTED_MAX]) + (f", ... ({len(names)} in all)" if len(names) > _LISTED_MAX else "")
        raise FilterMismatch(
            f"--filter {which} match{'es' if len(unmatched) == 1 else ''} no scenario of {config_path}; "
            f"its scenarios: {listed or '(none)'}"
        )
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def select_scenarios(plan: RunPlan, patterns: Sequence[str] | None) -> RunPlan:
    """The plan with only the scenarios whose names match a pattern (``matching_names``)."""
    if not patterns:
        return plan
    chosen = set(matching_names(plan.config_path, [s.scenario.name for s in plan.scenarios + plan.unselected], patterns))
    return dataclasses.replace(
        plan,
        scenarios=tuple(s for s in plan.scenarios if s.scenario.name in chosen),
        unselected=tuple(s for s in plan.unselected if s.scenario.name in chosen),
    )


def select(config: Config, patterns: Sequence[str] | None, selection: Selection) -> Selected:
    """--filter and the check selection on a config: FilterMismatch or SelectionError before anything is planned."""
    names = matching_names(config.path, [s.name for s in config.scenarios], patterns)
    return select_checks(config, selection, names if patterns else None)


def filtered(config: Config, patterns: Sequence[str] | None) -> Config:
    """The config with --filter's scenarios only."""
    names = set(matching_names(config.path, [s.name for s in config.scenarios], patterns))
    return dataclasses.replace(config, scenarios=tuple(s for s in config.scenarios if s.name in names))


def running(selected: Selected, patterns: Sequence[str] | None) -> Config:
    """The scenarios that run: --filter's, less those the selection left no check."""
    config = filtered(selected.config, patterns)
    return dataclasses.replace(config, scenarios=tuple(s for s in config.scenarios if s.name not in selected.unselected))


def exported_scenarios(config: Config, patterns: Sequence[str] | None, selection: Selection) -> Config:
    """The scenarios an export writes (``distval export kubernetes`` and ``slurm``): --filter's, less those the check
    selection left no check, each of those said on stderr with the selection's notes; SelectionError when none is
    left (exporting nothing is no success)."""
    selected = select(config, patterns, selection)
    for name in sorted(selected.unselected & {s.name for s in filtered(config, patterns).scenarios}):
        print(f"distval: not exported: {name}: {NO_CHECK_SELECTED}", file=sys.stderr)
    for note in selected.kept:
        print(f"distval: {note}", file=sys.stderr)
    chosen = running(selected, patterns)
    if not chosen.scenarios:
        raise SelectionError(f"nothing to export: the check selection leaves no scenario of {config.path} a check")
    return chosen


def plan_selected(target: Target, selected: Selected, run_id: str, patterns: Sequence[str] | None) -> RunPlan:
    """Every scenario planned with the checks it runs (so that its hash covers the selection), then --filter's;
    those the selection left no check are set apart (``RunPlan.unselected``), planned and reported but not run."""
    plan = select_scenarios(plan_on(target, selected.config, run_id), patterns)
    return dataclasses.replace(
        plan,
        scenarios=tuple(s for s in plan.scenarios if s.scenario.name not in selected.unselected),
        unselected=tuple(s for s in plan.scenarios if s.scenario.name in selected.unselected),
        selection_notes=selected.kept,
    )


def in_config_order(config: Config, results: Sequence[ScenarioResult]) -> list[ScenarioResult]:
    """The results in the order of the config's scenarios (run ones and unselected ones interleave there)."""
    position = {s.name: index for index, s in enumerate(config.scenarios)}
    return sorted(results, key=lambda r: position.get(r.plan.scenario.name, len(position)))


REPORT_OPTIONS = (("--junit", "junit"), ("--json", "json"), ("--markdown", "markdown"))
# -o/--output-dir DIR: the file each report gets in DIR (docs/reports.md names them; the help derives from here).
OUTPUT_NAMES = {"--junit": "junit.xml", "--json": "report.json", "--markdown": "summary.md"}


def with_output_dir(args: argparse.Namespace) -> None:
    """Give each report that --junit, --json or --markdown did not name its file in --output-dir (when given)."""
    directory = getattr(args, "output_dir", None)
    if not directory:
        return
    for option, attribute in REPORT_OPTIONS:
        if getattr(args, attribute, None) is None:
            setattr(args, attribute, os.path.join(directory, OUTPUT_NAMES[option]))


def _refused_reports(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(option, path, why) for each report path that names something other than a regular file (a directory, a
    device, a FIFO): asked before the run starts, so that nothing runs for a report that cannot be written."""
    refused = []
    directory: str = getattr(args, "output_dir", None) or ""
    not_a_directory = bool(directory) and os.path.exists(directory) and not os.path.isdir(directory)
    for option, attribute in REPORT_OPTIONS:
        path = getattr(args, attribute)
        if not_a_directory and path == os.path.join(directory, OUTPUT_NAMES[option]):
            refused.append(("--output-dir", path, f"{directory} is not a directory"))
            continue
        reason = refusal(path) if path else None
        if reason is not None:
            refused.append((option, path, reason))
    # --html is not one of the -o DIR reports: it needs the optional html extra, which a plain -o must not.
    html = getattr(args, "html", None)
    reason = (refusal(html) or html_refusal()) if html else None
    if reason is not None:
        refused.append(("--html", html, reason))
    baselines = [path for path, _ in args.baseline or ()]
    return refused + overwrites_baseline(baselines, [(option, getattr(args, attribute)) for option, attribute in REPORT_OPTIONS])


def write_reports(summary: RunSummary, args: argparse.Namespace, skip: frozenset[str] = frozenset()) -> int:
    """JUnit, JSON, Markdown and $GITHUB_STEP_SUMMARY; a report that cannot be written is one line on stderr.
    ``skip``: the paths refused before the run (already said). Each writer on its own: one that fails costs
    neither the others nor the terminal summary. Returns the exit code the failed writes call for, which the
    caller uses where the verdict's own is 0 (a pipeline that publishes on 0 must find every report it asked for):
    0 when every report was written, 2 (bad input: a report path) when the system refused a write (OSError),
    4 when a writer failed for a bug of distval's. ``--suite-prefix`` (where the command has it) names the
    testsuites instead of the images."""
    summary = dataclasses.replace(summary, suite_prefix=getattr(args, "suite_prefix", None) or summary.suite_prefix)
    writers: list[tuple[str, str | None, Callable[[], object]]] = [
        ("JUnit XML", args.junit, lambda: write_junit(summary, args.junit)),
        ("JSON report", args.json, lambda: write_json(summary, args.json)),
        ("Markdown summary", args.markdown, lambda: write_markdown(summary, args.markdown)),
        (
            "HTML page",
            getattr(args, "html", None),
            lambda: write_run_html(summary, args.html, args.json, args.junit, args.markdown),
        ),
        (
            "step summary",
            None if getattr(args, "no_step_summary", False) else os.environ.get(STEP_SUMMARY_ENV),
            lambda: append_step_summary(summary),
        ),
    ]
    code = 0
    for what, path, write in writers:
        if not path or path in skip:
            continue
        try:
            write()
        except OSError as exc:
            print(f"distval: cannot write the {what} to {path}: {exc.strerror or exc}", file=sys.stderr)
            code = code or BadInput.exit_code
        except Exception as exc:  # a bug of distval's, not the image's: the other reports still get written
            print(f"distval: the {what} was not written to {path}: {InternalError(exc)}", file=sys.stderr)
            code = InternalError.exit_code
    return code


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
        started_at = time.time()  # the reports' timestamps and the run's wall-clock time (first start to last end)
        result = summarize_scenario(execute(scenario_plan, events, stop), require_gpu=require_gpu, fail_on_skip=fail_on_skip)
        result = dataclasses.replace(result, started_at=started_at)
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


# Said first on stderr (with --quiet too) and first in the summary when the image under test is distval's sample
# image because no --image was given: a first run must not be read as a verdict on the user's image.
SAMPLE_IMAGE_NOTE = f"no --image: validating distval's sample image {DEFAULT_IMAGE}"
SAMPLE_IMAGE_FLAG = "--sample-image"
CI_ENV = "CI"
# What CI=... means "not in CI" (any other non-empty value is a CI: GitHub, GitLab, CircleCI, Travis set "true").
_NOT_CI = ("", "0", "false", "no", "off")


def in_ci(environ: Mapping[str, str]) -> bool:
    """Whether $CI says this runs in a pipeline."""
    return environ.get(CI_ENV, "").strip().lower() not in _NOT_CI


def falls_back_to_sample(plan: RunPlan, image_option: str | None) -> bool:
    """Whether a scenario that runs names no image and no --image was given: it runs distval's sample image."""
    return image_option is None and any(s.scenario.image is None for s in plan.scenarios)


def sample_image_note(plan: RunPlan, image_option: str | None) -> str | None:
    """SAMPLE_IMAGE_NOTE when a scenario runs the sample image for want of an image (``falls_back_to_sample``)."""
    return SAMPLE_IMAGE_NOTE if falls_back_to_sample(plan, image_option) else None


def refuse_sample_in_ci(plan: RunPlan, image_option: str | None, sample_image: bool, environ: Mapping[str, str]) -> None:
    """In a pipeline ($CI), a run that would validate the sample image for want of an image is refused unless
    --sample-image says it is meant: a gate on distval's own image passes whatever image the pipeline built."""
    if sample_image or not in_ci(environ) or not falls_back_to_sample(plan, image_option):
        return
    raise SampleImageRefused(
        f"no image named and ${CI_ENV} is set: this run would validate distval's sample image {DEFAULT_IMAGE}, not "
        f"yours; give --image IMG (or image: in the config), or {SAMPLE_IMAGE_FLAG} to validate the sample on purpose"
    )


def containers_target(
    config: Config,
    image: str | None,
    override: tuple[str, ...],
    from_config: bool,
    patterns: Sequence[str] | None,
    engine_for: Callable[[str], Engine],
    warn: Progress,
    keep_on_failure: bool = False,
    tls: TlsFiles | None = None,
    distribution: str = "transfer",
) -> Target:
    """Several Engines when --hosts (``override``) or an allowed ``hosts`` key of a scenario --filter selects
    (``patterns``) names any, else the one Engine of DOCKER_HOST."""
    check_hosts_allowed(config.path, [(s.name, s.hosts) for s in config.scenarios], override, from_config)
    # The Engines of the selected scenarios: an unselected scenario's hosts are not the run's.
    chosen = [s for s in config.scenarios if not patterns or any(fnmatch.fnmatchcase(s.name, p) for p in patterns)]
    urls = run_hosts([s.hosts for s in chosen], override)
    if urls:
        # Imported here, as the Engine is (cli/main.py): it connects to Engines through docker-py, which --local and
        # ``plan`` never import (tests/targets/local/test_host_runtime.py runs them where docker-py cannot be imported).
        from distval.targets.engines.target import EnginesTarget

        return EnginesTarget(urls, override, image, tls, distribution, warn)
    return DockerTarget(image, engine_for, keep_on_failure, warn)


def choose_target(args: argparse.Namespace, config: Config, engine_for: Callable[[str], Engine], warn: Progress) -> Target:
    """The target ``distval run``'s command line asks for: --local (or the deprecated --host), else containers."""
    if args.local:
        if args.image:
            raise BadInput("--image names a container image, --local runs the local Python's torch: give one, not both")
        if args.hosts:
            raise BadInput("--hosts names Docker Engines, --local runs local processes without Docker: give one, not both")
        if args.sample_image:
            raise BadInput(f"{SAMPLE_IMAGE_FLAG} names a container image, --local runs the local Python's torch: give one")
        return LocalTarget(args.run_id, args.python)
    if args.python:
        raise BadInput("--python names the local Python of --local: it needs --local")
    if args.target == "slurm":
        return slurm_target(args, config)
    if args.bundle:
        raise BadInput("--bundle is the OCI bundle of --target slurm: it needs --target slurm")
    if args.image and args.sample_image:
        raise BadInput(f"--image names the image under test, {SAMPLE_IMAGE_FLAG} asks for distval's sample: give one, not both")
    return containers_target(
        config,
        args.image,
        tuple(args.hosts or ()),
        args.hosts_from_config,
        args.filter,
        engine_for,
        warn,
        args.keep_on_failure,
        tls_files(args.tls_ca, args.tls_cert, args.tls_key),
        args.image_distribution,
    )


def slurm_target(args: argparse.Namespace, config: Config) -> Target:
    """--target slurm: Slurm's client on this host, the jobs under --slurm-dir."""
    if args.hosts or args.hosts_from_config:
        raise BadInput("--hosts names Docker Engines, --target slurm submits to Slurm: give one, not both")
    bundle, image_config = chosen_bundle(args.integration, args.bundle, "--target slurm")
    return SlurmTarget(
        LocalCommands(), args.slurm_dir, args.image, config.path, args.integration, bundle, image_config, args.partition
    )


def command_run(args: argparse.Namespace, engine_for: Callable[[str], Engine]) -> int:
    """``engine_for(run_id)``: the Engine of a Docker run, asked for only then (--local never imports docker-py)."""
    args.run_id = args.run_id or secrets.token_hex(4)
    run_id = args.run_id
    display = ProgressDisplay(None if args.quiet else sys.stderr, rank_output=args.verbose)
    results: list[ScenarioResult] = []
    host = socket.gethostname()
    target: Target | None = None
    # The reports' ``mode`` property, as before --local had its name.
    mode = "host" if args.local else ("slurm" if args.target == "slurm" else "docker")
    # No config given: the shipped default (inside the package, so an installed distval has it too).
    config_path = args.config or str(DEFAULT_CONFIG)
    baseline = BaselineOptions.from_args(args)
    reference = ReferenceOptions.from_args(args)
    paired: dict[str, PairedRuns] = {}  # by scenario name: its runs beyond its own, with --reference
    planned: tuple[str, ...] = ()  # the scenarios that run (in pairs, with --reference)
    machine = ReferencesOptions(None, "")  # --references, read before anything runs

    def warn(line: str) -> None:
        """A line said also with --quiet (a run without a reaper, the sample image for want of one)."""
        if args.quiet:
            print(f"distval: {line}", file=sys.stderr)
        else:
            display.log(line)

    note: str | None = None  # SAMPLE_IMAGE_NOTE, once the plan says the sample image runs
    config_sha256: str | None = None  # once the config was read
    images: tuple[str, ...] = (args.image,) if args.image else ()  # the plan's, once there is one
    selection = selection_from(args)

    def summarize(early_error: tuple[str, str] | None = None, early_exit_code: int | None = None) -> RunSummary:
        version = target.engine_version() if target is not None else None
        return RunSummary(
            run_id,
            tuple(results),
            early_error,
            early_exit_code,
            version,
            host,
            config_path,
            mode,
            image_note=note,
            selection_args=selection.arguments,
            images=images,
            config_sha256=config_sha256,
        )

    summary: RunSummary
    remeasures: dict[int, list[ScenarioResult]] = {}  # by the scenario's index: the runs that re-measured it
    refused = _refused_reports(args)
    restore_handlers = install()  # SIGINT too: it may have been inherited ignored (distval/run/interrupts.py)
    try:
        if refused:
            raise BadInput("; ".join(dict.fromkeys(f"{option} {reason}" for option, _, reason in refused)))
        check_remeasure(baseline)
        check_reference(reference, args)
        machine = references_options(args)
        config = load_config(config_path)
        config_sha256 = config.sha256
        selected = select(config, args.filter, selection)
        chosen = choose_target(args, running(selected, args.filter), engine_for, warn)
        target = chosen
        plan = plan_selected(chosen, selected, run_id, args.filter)
        images = tuple(images_of(plan))
        # Before anything runs: what a selected scenario or an option asks of the target that it lacks.
        options = ["keep_on_failure"] if args.keep_on_failure else []
        refuse_what_it_lacks(chosen, plan, options + (["reference"] if reference.image else []))
        references = plan_reference(chosen, plan, reference.image) if reference.image else ()
        if not args.local:
            refuse_sample_in_ci(plan, args.image, args.sample_image, os.environ)
            note = sample_image_note(plan, args.image)
            if note is not None:
                warn(note)  # also with --quiet: a pipeline's log must show that the verdict is not on its image
        for line in plan.selection_notes:
            display.log(line)
        # Not run, so never validated: each check they list is reported skipped, with the selection that left it out.
        results.extend(unselected_result(p, selection.said) for p in plan.unselected)
        planned = tuple(p.scenario.name for p in plan.scenarios)
        if plan.scenarios:
            # The reference's images are checked (built, distributed) with the candidate's, before anything runs.
            chosen.open(dataclasses.replace(plan, scenarios=plan.scenarios + references), display.log)
            jobs = args.jobs or default_jobs()
            if references:
                own, paired = run_pairs(
                    plan.scenarios,
                    references,
                    reference.pairs,
                    lambda plans: _run_scenarios(
                        chosen.execute, plans, display, 1, args.require_gpu, args.fail_on_skip, chosen.settle
                    ),
                    lambda plans: _run_scenarios(chosen.execute_again, plans, display, 1, args.require_gpu, args.fail_on_skip),
                    display.log,
                )
                results.extend(own)
            else:
                results.extend(
                    _run_scenarios(
                        chosen.execute, plan.scenarios, display, jobs, args.require_gpu, args.fail_on_skip, chosen.settle
                    )
                )
        results[:] = in_config_order(selected.config, results)
        summary = summarize()
        remeasures = remeasure(
            summary,
            baseline,
            lambda plans: _run_scenarios(chosen.execute_again, plans, display, jobs, args.require_gpu, args.fail_on_skip),
            display.log,
        )
    except KeyboardInterrupt:  # a SIGINT before the handlers were installed
        display.close()
        if target is not None:
            target.interrupted()
        interrupt = Interrupt(signal.SIGINT)
        summary = summarize((interrupt.kind, str(interrupt)), interrupt.exit_code)
    except DistvalError as exc:
        display.close()
        if isinstance(exc, Interrupted) and target is not None:
            target.interrupted()
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
            if target is not None:
                target.close()
    if late.signum is not None and summary.early_exit_code is None:  # stopped while the run's end was cleaned up
        interrupt = Interrupt(late.signum)
        summary = summarize((interrupt.kind, str(interrupt)), interrupt.exit_code)
    # Ctrl-C while the reports are written: they are written whole, then distval exits (nothing runs any more).
    with signals_deferred(raise_after=False):
        summary = with_reference(with_baseline(summary, baseline, remeasures), reference, paired, planned)
        summary = with_references(summary, machine)
        exit_code = summary.exit_code
        unwritten = write_reports(summary, args, frozenset(path for _, path, _ in refused))
        exit_code = exit_code or unwritten  # a report is missing: never a quiet 0
        try:
            sys.stdout.write(render_summary(summary))
        except Exception as exc:  # a bug of distval's in the terminal summary: the reports above are written
            print(f"distval: the terminal summary was not printed: {InternalError(exc)}", file=sys.stderr)
            exit_code = exit_code or InternalError.exit_code
        for line in target.closing_lines() if target is not None else []:
            print(f"distval: {line}", file=sys.stderr)
        if args.local and summary.scenarios:
            print("(host mode, --local: local processes with the local torch, no Docker; every testsuite is marked [host])")
    restore_handlers()
    return exit_code
