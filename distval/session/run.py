"""The run stage of ``distval run``: choose the target, plan, refuse what it lacks, open it, run the scenarios
(up to --jobs at once, or in pairs with --reference, then the re-measures of --baseline), close it, judge and write
the reports (also when the run fails early or is interrupted). distval/cli/run.py only turns the command line into
a ``RunRequest`` and says the end (``present``)."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from distval.comparing.judges import PairedRuns, ReferencesOptions, with_baseline, with_reference, with_references
from distval.comparing.reading import scenario_entries
from distval.config import load_config
from distval.errors import BadInput, ConfigError, DistvalError, InternalError, Interrupted
from distval.results.scenario import RunSummary, ScenarioResult, unselected_result
from distval.run.interrupts import Interrupt, install, signals_deferred
from distval.run.progress import ProgressDisplay
from distval.session.pairs import check_reference, run_pairs
from distval.session.references import references_options
from distval.session.remeasure import check_remeasure, remeasure
from distval.session.reports import refused_reports, write_reports
from distval.session.request import RunRequest
from distval.session.sample import refuse_sample_in_ci, sample_image_note
from distval.session.scenarios import ScenarioRuns, default_jobs
from distval.session.selection import in_config_order, plan_selected, select
from distval.targets.base import Target, plan_reference, refuse_what_it_lacks
from distval.targets.kind import EngineFor
from distval.targets.registry import choose_target, chosen_kind


@dataclass(frozen=True)
class RunEnd:
    """What the run ends with, for the command line to say: the judged summary (its reports written), the exit code
    so far, and the target's closing lines."""

    summary: RunSummary
    exit_code: int
    closing_lines: tuple[str, ...]


# Says the end on the terminal; returns the exit code that saying it calls for (0: said).
Present = Callable[[RunEnd], int]


def run(request: RunRequest, engine_for: EngineFor, present: Present, environ: Mapping[str, str] = os.environ) -> int:
    """The run, start to end; ``engine_for(run_id)``: the Engine of a Docker run, asked for only then (--local never
    imports docker-py). Returns the exit code."""
    run_id = request.run_id
    kind = chosen_kind(request.target)
    display = ProgressDisplay(None if request.quiet else sys.stderr, rank_output=request.verbose)
    results: list[ScenarioResult] = []
    host = socket.gethostname()
    target: Target | None = None
    baseline, reference = request.baseline, request.reference
    machine = ReferencesOptions(None, "")  # --references, read before anything runs
    paired: dict[str, PairedRuns] = {}  # by scenario name: its runs beyond its own, with --reference
    planned: tuple[str, ...] = ()  # the scenarios that run (in pairs, with --reference)

    def warn(line: str) -> None:
        """A line said also with --quiet (a run without a reaper, the sample image for want of one)."""
        if request.quiet:
            print(f"distval: {line}", file=sys.stderr)
        else:
            display.log(line)

    note: str | None = None  # SAMPLE_IMAGE_NOTE, once the plan says the sample image runs
    config_sha256: str | None = None  # once the config was read
    image = request.target.image  # --image: over every scenario's
    images: tuple[str, ...] = (image,) if image else ()  # the plan's, once there is one

    def summarize(early_error: tuple[str, str] | None = None, early_exit_code: int | None = None) -> RunSummary:
        version = target.engine_version() if target is not None else None
        return RunSummary(
            run_id,
            tuple(results),
            early_error,
            early_exit_code,
            version,
            host,
            request.config_path,
            kind.mode,
            image_note=note,
            selection_args=request.selection.arguments,
            images=images,
            config_sha256=config_sha256,
        )

    summary: RunSummary
    remeasures: dict[int, list[dict[str, Any]]] = {}  # by the scenario's index: its re-measuring runs' JSON entries
    refused = refused_reports(request.reports, [path for path, _ in baseline.baselines])
    restore_handlers = install()  # SIGINT too: it may have been inherited ignored (distval/run/interrupts.py)
    try:
        if refused:
            raise BadInput("; ".join(dict.fromkeys(f"{option} {reason}" for option, _, reason in refused)))
        check_remeasure(baseline)
        check_reference(reference, request.jobs)
        machine = references_options(request.references, request.system)
        config = load_config(request.config_path)
        config_sha256 = config.sha256
        selected = select(config, request.patterns, request.selection)
        chosen = choose_target(request.target, selected.running, engine_for, warn)
        target = chosen
        runs = ScenarioRuns(chosen, display, request.require_gpu, request.fail_on_skip)
        plan = plan_selected(chosen, selected, run_id)
        images = tuple(plan.images)
        # Before anything runs: what a selected scenario or an option asks of the target that it lacks.
        options = ["keep_on_failure"] if request.target.keep_on_failure else []
        refuse_what_it_lacks(chosen, plan, options + (["reference"] if reference.image else []))
        references = plan_reference(chosen, plan, reference.image) if reference.image else ()
        if kind.runs_images:
            refuse_sample_in_ci(plan, image, bool(request.target.get("sample_image")), environ)
            note = sample_image_note(plan, image)
            if note is not None:
                warn(note)  # also with --quiet: a pipeline's log must show that the verdict is not on its image
        for line in plan.selection_notes:
            display.log(line)
        # Not run, so never validated: each check they list is reported skipped, with the selection that left it out.
        results.extend(unselected_result(p, request.selection.said) for p in plan.unselected)
        planned = tuple(p.scenario.name for p in plan.scenarios)
        jobs = request.jobs or default_jobs()
        if plan.scenarios:
            # The reference's images are checked (built, distributed) with the candidate's, before anything runs.
            chosen.open(dataclasses.replace(plan, scenarios=plan.scenarios + references), display.log)
            if references:
                own, paired = run_pairs(
                    plan.scenarios, references, reference, lambda plans: runs.first(plans, 1), runs.again, display.log
                )
                results.extend(own)
            else:
                results.extend(runs.first(plan.scenarios, jobs))
        results[:] = in_config_order(selected.config, results)
        summary = summarize()
        remeasures = remeasure(summary, baseline, lambda plans: runs.again(plans, jobs), display.log)
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
        # The scenarios as JSON report entries, built once for the judges of --baseline and --references (where one
        # was asked for: a run without either never builds them): neither reads what a judge's testcase changes.
        # --reference's reads each scenario's status with --baseline's verdict in it, so it builds its own from the
        # summary that --baseline's judge returns (distval/comparing/judges.py).
        judged = baseline.baselines or machine.references is not None
        entries = scenario_entries(summary, summary.scenarios) if judged else []
        summary = with_reference(with_baseline(summary, baseline, remeasures, entries), reference, paired, planned)
        summary = with_references(summary, machine, entries)
        unwritten = write_reports(summary, request.reports, frozenset(path for _, path, _ in refused), environ)
        exit_code = summary.exit_code or unwritten  # a report is missing: never a quiet 0
        closing = tuple(target.closing_lines()) if target is not None else ()
        said = present(RunEnd(summary, exit_code, closing))
        exit_code = exit_code or said
    restore_handlers()
    return exit_code
