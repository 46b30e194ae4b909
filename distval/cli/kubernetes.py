"""``distval export kubernetes`` and ``distval collect kubernetes``: their options and what they print.

export: one YAML file of manifests and its plan file per scenario (distval/targets/kubernetes/export.py), a line per
file, and a line on stderr per scenario that has no Kubernetes form; exit 0, or 2 when no scenario could be exported.
collect: pod logs (files or the API) -> the reports of a Docker run, judged against the plan files the export wrote
(distval/targets/kubernetes/collect.py); exit 0 when every scenario passed, 1 when a check failed or errored, 5 when
every scenario was skipped, 2 for logs that hold no distval job or a plan file missing or changed, 3 when the API is
asked for without a client or kubeconfig.
"""

from __future__ import annotations

import argparse
import math
import re
import secrets
import sys
from pathlib import Path
from typing import Any

from distval.cli import values as cli_values
from distval.cli.exported import exported_scenarios
from distval.cli.report_options import report_paths
from distval.cli.selection_options import add_selection_options, selection
from distval.config import load_config
from distval.config.yaml_nodes import shown
from distval.errors import EXIT_BAD_INPUT, BadInput, ConfigError
from distval.reports.files import write_atomically
from distval.reports.summary import render_summary
from distval.session.reports import write_reports
from distval.targets.kubernetes.collect import KubernetesPods, read_api, read_files, read_plans, summarize_sources
from distval.targets.kubernetes.export import (
    DEFAULT_PULL_TIMEOUT_S,
    DEFAULT_RUN_AS_USER,
    LAYOUTS,
    SECURITY_LEVELS,
    PodOptions,
    Toleration,
    export_config,
    plan_file_name,
    render,
)
from distval.targets.plan_file import PlanFileError

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
    pod_options = PodOptions(
        security=args.pod_security,
        run_as_user=args.run_as_user,
        node_selector=tuple(args.node_selector),
        tolerations=tuple(args.toleration),
        image_pull_secrets=tuple(dict.fromkeys(args.image_pull_secret)),
        pull_timeout_s=math.ceil(args.pull_timeout),
    )
    exported = export_config(chosen, run_id, args.image, args.layout, pod_options)
    out = Path(args.out)
    written = 0
    for scenario in exported:
        if scenario.refused is not None:
            print(f"distval: not exported: {scenario.plan.scenario.name}: {scenario.refused}", file=sys.stderr)
            continue
        path = out / scenario.file_name
        try:
            # The plan first: manifests without the plan they name cannot be collected.
            write_atomically(out / scenario.plan_file_name, scenario.plan_text, new_mode=0o644)
            write_atomically(path, render(scenario))
        except OSError as exc:
            raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from exc
        kinds = ", ".join(str(r["kind"]) for r in scenario.resources)
        print(f"{path}: {scenario.plan.scenario.name} ({kinds}; {len(scenario.plan.containers)} pod(s))")
        written += 1
    if not written:
        raise BadInput(f"no scenario of {config.path} has a Kubernetes form (see the lines above)")
    print(f"run id {run_id}: kubectl apply -f {out}/; then distval collect kubernetes --plan {out} with the pods' logs")
    return 0


def command_collect(args: argparse.Namespace) -> int:
    if args.logs and (args.namespace or args.job):
        raise BadInput("collect kubernetes: expected log files or --job (with --namespace), not both")
    if not args.logs and not args.job:
        raise BadInput("collect kubernetes: expected log files, or --job NAME (and --namespace) to read them through the API")
    plans = read_plans(args.plan)
    if args.logs:
        summary = summarize_sources(read_files(args.logs), plans, fail_on_skip=args.fail_on_skip)
    else:
        namespace = args.namespace or "default"
        chosen = [p for p in plans if p.origin.job == args.job]
        if not chosen:
            raise PlanFileError(f"{args.plan}: no plan file of job {args.job} ({plan_file_name(args.job)})")
        sources, failure = read_api(KubernetesPods(), namespace, chosen[0])
        summary = summarize_sources(sources, chosen, from_api=True, fail_on_skip=args.fail_on_skip, job_failure=failure)
    unwritten = write_reports(summary, report_paths(args))
    sys.stdout.write(render_summary(summary))
    return summary.exit_code or unwritten


# Kubernetes' own grammars (k8s.io/apimachinery validation): a label's name part and value, a DNS subdomain.
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
UID_MAX = 2**31 - 1


def _dns_subdomain(value: str) -> str:
    """argparse type: a Kubernetes object name (a Secret's): lowercase RFC 1123 subdomain, at most 253."""
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"expected a Kubernetes name: lowercase letters, digits, '-' and '.', at most 253; got {shown(value)}"
        )
    return value


def _label_key(value: str) -> str:
    prefix, slash, name = value.rpartition("/")
    if not _LABEL_NAME.fullmatch(name) or (slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))):
        raise argparse.ArgumentTypeError(
            f"expected a label key ([prefix/]name: name 1-63 letters, digits, '-', '_', '.'; prefix a DNS subdomain); "
            f"got {shown(value)}"
        )
    return value


def _label_value(value: str) -> str:
    if value and not _LABEL_NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"expected a label value (at most 63 letters, digits, '-', '_', '.'); got {shown(value)}"
        )
    return value


def _node_selector(value: str) -> tuple[str, str]:
    """argparse type of --node-selector: KEY=VALUE, each in Kubernetes' label grammar."""
    key, equals, label = value.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE; got {shown(value)}")
    return _label_key(key), _label_value(label)


def _toleration(value: str) -> Toleration:
    """argparse type of --toleration: KEY[=VALUE][:EFFECT]."""
    rest, colon, effect = value.rpartition(":") if ":" in value else (value, "", "")
    if colon and effect not in TAINT_EFFECTS:
        raise argparse.ArgumentTypeError(f"expected the effect {', '.join(TAINT_EFFECTS)} after ':'; got {shown(value)}")
    key, equals, label = rest.partition("=")
    return Toleration(_label_key(key), _label_value(label) if equals else None, effect if colon else None)


def _uid(value: str) -> int:
    """argparse type of --run-as-user: a non-root uid."""
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= UID_MAX:
        raise argparse.ArgumentTypeError(f"expected a uid from 1 to {UID_MAX} (0 is root); got {shown(value)}")
    return int(value)


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
    kube.add_argument(
        "--pod-security",
        choices=SECURITY_LEVELS,
        default=SECURITY_LEVELS[0],
        help="restricted (default): the pods meet Pod Security 'restricted' (a non-root uid, no privilege escalation, "
        "every capability dropped, RuntimeDefault seccomp); none: the image's own user, for images that must run as root",
    )
    kube.add_argument(
        "--run-as-user",
        type=_uid,
        default=DEFAULT_RUN_AS_USER,
        metavar="UID",
        help=f"the non-root uid of the pods under --pod-security restricted, where a scenario names no user: (default "
        f"{DEFAULT_RUN_AS_USER})",
    )
    kube.add_argument(
        "--node-selector",
        type=_node_selector,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="schedule the pods only on nodes with this label (repeatable)",
    )
    kube.add_argument(
        "--toleration",
        type=_toleration,
        action="append",
        default=[],
        metavar="KEY[=VALUE][:EFFECT]",
        help="let the pods onto nodes with this taint (repeatable; EFFECT: NoSchedule, PreferNoSchedule or NoExecute, "
        "default every effect; without =VALUE any value)",
    )
    kube.add_argument(
        "--image-pull-secret",
        type=_dns_subdomain,
        action="append",
        default=[],
        metavar="NAME",
        help="a Secret of the namespace with the registry's credentials (repeatable)",
    )
    kube.add_argument(
        "--pull-timeout",
        type=cli_values.duration,
        default=DEFAULT_PULL_TIMEOUT_S,
        metavar="DURATION",
        help="the time the image pull and scheduling may take on top of the scenario's deadline: Kubernetes' "
        f"activeDeadlineSeconds counts both (default {DEFAULT_PULL_TIMEOUT_S // 60} min)",
    )
    add_selection_options(kube)
    kube.set_defaults(handler=command_export)

    collect = commands.add_parser("collect", help="turn the logs of an exported run into the reports of a Docker run")
    collect_targets = collect.add_subparsers(dest="target", required=True)
    logs = collect_targets.add_parser("kubernetes", help="pod logs (files, or through the API) -> JUnit, JSON, Markdown")
    logs.add_argument(
        "logs", nargs="*", metavar="LOG", help="kubectl logs output: one file per pod, or one file (--prefix names the pods)"
    )
    logs.add_argument(
        "--plan",
        metavar="PATH",
        default=DEFAULT_OUT,
        help="the plan files distval export kubernetes wrote beside the manifests: their directory (every job in it is "
        f"judged) or one JOB.plan.json (default {DEFAULT_OUT}); what ran is taken from them, never from the logs",
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
