"""``distval run``: its options, read once into a ``RunRequest`` (distval/session/run.py runs it), and the end of
the run said on the terminal: the summary, the target's closing lines."""

from __future__ import annotations

import argparse
import functools
import secrets
import sys
from typing import Any

from distval.cli import values as cli_values
from distval.cli.baseline import add_baseline_arguments, baseline_options
from distval.cli.history import add_html_argument
from distval.cli.hosts_options import add_hosts_options
from distval.cli.reference import add_reference_arguments, reference_options
from distval.cli.references import add_references_arguments
from distval.cli.report_options import add_report_options, report_paths
from distval.cli.selection_options import add_selection_options, selection
from distval.cli.target_options import add_target_options, target_options
from distval.config.shipped import DEFAULT_CONFIG, DEFAULT_IMAGE, SAMPLE_IMAGE_FLAG
from distval.errors import InternalError
from distval.reports.summary import render_summary
from distval.session.request import RunRequest
from distval.session.run import RunEnd, run
from distval.session.sample import CI_ENV
from distval.session.scenarios import default_jobs
from distval.targets.kind import EngineFor
from distval.targets.registry import chosen_kind


def add_run_command(commands: Any, engine_for: EngineFor) -> None:
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
    add_report_options(run)
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
    add_target_options(run)
    # The old name of --local, one letter from --hosts (several Engines): kept for one release, with a line saying so.
    run.add_argument("--host", dest="deprecated_host", action="store_true", help=argparse.SUPPRESS)
    add_hosts_options(run, tls=True, from_config=True)
    add_baseline_arguments(run)
    add_reference_arguments(run)
    add_references_arguments(run)
    run.set_defaults(handler=functools.partial(command_run, engine_for=engine_for))


def run_request(args: argparse.Namespace) -> RunRequest:
    """The parsed command line as one request; a run id drawn where none was given, the shipped default config
    (inside the package, so an installed distval has it too) where none was named."""
    args.run_id = args.run_id or secrets.token_hex(4)
    return RunRequest(
        run_id=args.run_id,
        config_path=args.config or str(DEFAULT_CONFIG),
        target=target_options(args, args.keep_on_failure),
        reports=report_paths(args),
        baseline=baseline_options(args),
        reference=reference_options(args),
        selection=selection(args),
        patterns=tuple(args.filter) if args.filter else None,
        references=args.references,
        system=args.system,
        jobs=args.jobs,
        quiet=args.quiet,
        verbose=args.verbose,
        require_gpu=args.require_gpu,
        fail_on_skip=args.fail_on_skip,
    )


def present(end: RunEnd, note: str | None) -> int:
    """The terminal summary on stdout, the target's closing lines on stderr, then ``note`` (where scenarios ran);
    returns 4 where the summary itself failed (a bug of distval's: the reports are written already)."""
    code = 0
    try:
        sys.stdout.write(render_summary(end.summary))
    except Exception as exc:  # a bug of distval's in the terminal summary: the reports above are written
        print(f"distval: the terminal summary was not printed: {InternalError(exc)}", file=sys.stderr)
        code = InternalError.exit_code
    for line in end.closing_lines:
        print(f"distval: {line}", file=sys.stderr)
    if note is not None and end.summary.scenarios:
        print(note)
    return code


def command_run(args: argparse.Namespace, engine_for: EngineFor) -> int:
    """``engine_for(run_id)``: the Engine of a Docker run, asked for only then (--local never imports docker-py)."""
    request = run_request(args)
    return run(request, engine_for, functools.partial(present, note=chosen_kind(request.target).summary_note))
