"""``distval export slurm`` and ``distval collect slurm``: their options and what they print.

export: one job directory per scenario (its batch script, the suite, the spec, the plan file and, for Slurm's OCI
containers, each node's bundle config: distval/targets/slurm/export.py), a line per job, and a line on stderr per
scenario that has no Slurm form; exit 0, or 2 when no scenario could be exported.
collect: job directories -> the reports of a Docker run, judged against each job's plan file
(distval/targets/slurm/collect.py); exit 0 when every scenario passed, 1 when a check failed or errored, 5 when every
scenario was skipped, 2 for a directory that holds no exported job, a plan file missing or changed, or files another
user could have written.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path
from typing import Any

from distval.cli import values as cli_values
from distval.cli.exported import exported_scenarios
from distval.cli.report_options import report_paths
from distval.cli.selection_options import add_selection_options, selection
from distval.config import load_config
from distval.errors import EXIT_BAD_INPUT, BadInput, ConfigError
from distval.reports.summary import render_summary
from distval.session.reports import write_reports
from distval.targets.slurm.bundle_config import chosen_bundle
from distval.targets.slurm.collect import summarize_jobs
from distval.targets.slurm.export import BATCH_FILE, export_config, write_job
from distval.targets.slurm.integrations import INTEGRATIONS, OCI

DEFAULT_OUT = "distval-slurm"


def command_export(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    bundle, image_config = chosen_bundle(args.integration, args.bundle, "export slurm")
    run_id = args.run_id or secrets.token_hex(4)
    chosen = exported_scenarios(config, args.filter, selection(args))
    out = Path(args.out)
    exported = export_config(chosen, run_id, args.image, out, args.integration, bundle, image_config, args.partition)
    written = 0
    for job in exported:
        if job.refused is not None:
            print(f"distval: not exported: {job.plan.scenario.name}: {job.refused}", file=sys.stderr)
            continue
        try:
            directory = write_job(job, out)
        except OSError as exc:
            raise BadInput(f"cannot write {out / job.name}: {exc.strerror or exc}") from exc
        print(f"{directory / BATCH_FILE}: {job.plan.scenario.name} ({len(job.plan.containers)} node(s), {job.integration})")
        written += 1
    if not written:
        raise BadInput(f"no scenario of {config.path} has a Slurm form (see the lines above)")
    print(f"run id {run_id}: sbatch each {BATCH_FILE}; then distval collect slurm {out}")
    return 0


def command_collect(args: argparse.Namespace) -> int:
    summary = summarize_jobs([Path(d) for d in args.directories], fail_on_skip=args.fail_on_skip)
    unwritten = write_reports(summary, report_paths(args))
    sys.stdout.write(render_summary(summary))
    return summary.exit_code or unwritten


def add_slurm_commands(export_targets: Any, collect_targets: Any, add_report_options: Any) -> None:
    export = export_targets.add_parser(
        "slurm", help="a batch job per scenario (sbatch): one job step per node in the image, through srun's containers"
    )
    export.add_argument(
        "config",
        type=cli_values.file_path("a YAML scenario file"),
        help="YAML scenario file whose scenarios are exported, e.g. configs/default.yaml",
    )
    export.add_argument("--image", required=True, type=cli_values.image_reference, help="the image under test")
    export.add_argument(
        "-o",
        "--output-dir",
        "--out",
        dest="out",
        metavar="DIR",
        type=cli_values.file_path("the directory of the jobs"),
        default=DEFAULT_OUT,
        help=f"write one job directory per scenario into DIR (default {DEFAULT_OUT}); every node must see DIR at the "
        "same path (a shared filesystem), as Slurm's own output files need",
    )
    export.add_argument(
        "--integration",
        choices=INTEGRATIONS,
        default=OCI,
        help="how a job step runs the image: oci (Slurm's srun --container, the default, tested here), pyxis "
        "(srun --container-image) or apptainer (apptainer exec)",
    )
    export.add_argument(
        "--bundle",
        metavar="DIR",
        type=cli_values.file_path("an OCI bundle directory"),
        help="with --integration oci: the image unpacked as an OCI bundle on the shared filesystem (skopeo copy, then "
        "umoci unpack: docs/slurm.md)",
    )
    export.add_argument("--partition", help="#SBATCH --partition (default: the cluster's default partition)")
    export.add_argument("--run-id", type=cli_values.run_id, help="in the reports (default: random)")
    add_selection_options(export)
    export.set_defaults(handler=command_export)

    collect = collect_targets.add_parser(
        "slurm", help="exported Slurm jobs' directories -> JUnit, JSON, Markdown (after the jobs ended)"
    )
    collect.add_argument(
        "directories",
        nargs="+",
        metavar="DIR",
        help="a job directory of distval export slurm, or the directory holding them (its --output-dir)",
    )
    collect.add_argument("--fail-on-skip", action="store_true", help="any skipped check fails, with its reason")
    add_report_options(collect)
    collect.set_defaults(handler=command_collect)
