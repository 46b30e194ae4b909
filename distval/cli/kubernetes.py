"""``distval export kubernetes`` and ``distval collect kubernetes``: their options and what they print.

export: one YAML file of manifests per scenario (distval/targets/kubernetes/export.py), a line per file, and a line on stderr
per scenario that has no Kubernetes form; exit 0, or 2 when no scenario could be exported.
collect: pod logs (files or the API) -> the reports of a Docker run (distval/targets/kubernetes/collect.py); exit 0 when
every scenario passed, 1 when a check failed or errored, 5 when every scenario was skipped, 2 for logs that hold no
distval job, 3 when the API is asked for without a client or kubeconfig.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path
from typing import Any

from distval.cli import values as cli_values
from distval.cli.run import exported_scenarios, write_reports
from distval.cli.selection_options import add_selection_options, selection
from distval.config import load_config
from distval.errors import EXIT_BAD_INPUT, BadInput, ConfigError
from distval.reports.files import write_atomically
from distval.reports.summary import render_summary
from distval.targets.kubernetes.collect import KubernetesPods, read_api, read_files, summarize_sources
from distval.targets.kubernetes.export import LAYOUTS, export_config, render

DEFAULT_OUT = "distval-kubernetes"


def command_export(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    run_id = args.run_id or secrets.token_hex(4)
    chosen = exported_scenarios(config, args.filter, selection(args))
    exported = export_config(chosen, run_id, args.image, args.layout)
    out = Path(args.out)
    written = 0
    for scenario in exported:
        if scenario.refused is not None:
            print(f"distval: not exported: {scenario.plan.scenario.name}: {scenario.refused}", file=sys.stderr)
            continue
        path = out / scenario.file_name
        try:
            write_atomically(path, render(scenario))
        except OSError as exc:
            raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from exc
        kinds = ", ".join(str(r["kind"]) for r in scenario.resources)
        print(f"{path}: {scenario.plan.scenario.name} ({kinds}; {len(scenario.plan.containers)} pod(s))")
        written += 1
    if not written:
        raise BadInput(f"no scenario of {config.path} has a Kubernetes form (see the lines above)")
    print(f"run id {run_id}: kubectl apply -f {out}/; then distval collect kubernetes with the pods' logs")
    return 0


def command_collect(args: argparse.Namespace) -> int:
    if args.logs and (args.namespace or args.job):
        raise BadInput("collect kubernetes: expected log files or --job (with --namespace), not both")
    if not args.logs and not args.job:
        raise BadInput("collect kubernetes: expected log files, or --job NAME (and --namespace) to read them through the API")
    if args.logs:
        summary = summarize_sources(read_files(args.logs), fail_on_skip=args.fail_on_skip)
    else:
        namespace = args.namespace or "default"
        sources, failure = read_api(KubernetesPods(), namespace, args.job)
        summary = summarize_sources(sources, from_api=True, fail_on_skip=args.fail_on_skip, job_failure=failure)
    unwritten = write_reports(summary, args)
    sys.stdout.write(render_summary(summary))
    return summary.exit_code or unwritten


def add_kubernetes_commands(commands: Any, add_report_options: Any) -> tuple[Any, Any]:
    """The export and collect commands with their kubernetes subcommand; returns their subcommand sets (the other
    targets add theirs)."""
    export = commands.add_parser("export", help="write the manifests that run a config's scenarios on another platform")
    export_targets = export.add_subparsers(dest="target", required=True)
    kube = export_targets.add_parser(
        "kubernetes",
        help="an Indexed Job (or JobSet) per scenario, with its headless Service, ConfigMap and NetworkPolicy",
    )
    kube.add_argument(
        "config",
        type=cli_values.file_path("a YAML scenario file"),
        help="YAML scenario file whose scenarios are exported, e.g. configs/default.yaml",
    )
    kube.add_argument(
        "--image", required=True, type=cli_values.image_reference, help="the image under test, as the cluster pulls it"
    )
    # -o/--output-dir as run's; --out, its first name, still works. dest "out", not "output_dir": main's
    # with_output_dir would put report files in an output_dir, and export writes manifests only.
    kube.add_argument(
        "-o",
        "--output-dir",
        "--out",
        dest="out",
        metavar="DIR",
        type=cli_values.file_path("the directory of the manifests"),
        default=DEFAULT_OUT,
        help=f"write one YAML file per scenario into DIR (created if missing; default {DEFAULT_OUT}); --out is its first name",
    )
    kube.add_argument(
        "--layout",
        choices=LAYOUTS,
        default=LAYOUTS[0],
        help="indexed-job (default) or jobset (jobset.x-k8s.io, Kubeflow Trainer's base)",
    )
    kube.add_argument("--run-id", type=cli_values.run_id, help="in the names and labels (default: random)")
    add_selection_options(kube)
    kube.set_defaults(handler=command_export)

    collect = commands.add_parser("collect", help="turn the logs of an exported run into the reports of a Docker run")
    collect_targets = collect.add_subparsers(dest="target", required=True)
    logs = collect_targets.add_parser("kubernetes", help="pod logs (files, or through the API) -> JUnit, JSON, Markdown")
    logs.add_argument(
        "logs", nargs="*", metavar="LOG", help="kubectl logs output: one file per pod, or one file (--prefix names the pods)"
    )
    logs.add_argument("--namespace", help="with --job: the job's namespace (default: default)")
    logs.add_argument(
        "--job",
        metavar="NAME",
        help="read the logs of this exported job's pods through the API (needs a kubeconfig and the kubernetes client)",
    )
    logs.add_argument("--fail-on-skip", action="store_true", help="any skipped check fails, with its reason")
    add_report_options(logs)
    logs.set_defaults(handler=command_collect)
    return export_targets, collect_targets
