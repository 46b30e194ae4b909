"""The kubernetes target as the command line knows it: distval runs no pod itself (``--target kubernetes`` is refused
by its declaration), so it has no run and no dry run; ``distval export kubernetes`` writes one YAML file of
manifests and its plan file per scenario (export.py), ``distval collect kubernetes`` judges the pods' logs (files,
or through the API) against those plan files (collect.py).

export: a line per file, and a line on stderr per scenario that has no Kubernetes form; exit 0, or 2 when no
scenario could be exported. collect: exit 0 when every scenario passed, 1 when a check failed or errored, 5 when
every scenario was skipped, 2 for logs that hold no distval job or a plan file missing or changed, 3 when the API is
asked for without a client or kubeconfig.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from distval.config import Config
from distval.config.yaml_nodes import shown
from distval.errors import EXIT_CHECKS_FAILED, EXIT_ENVIRONMENT, EXIT_NOTHING_VALIDATED, BadInput
from distval.reports.files import write_atomically
from distval.results.scenario import RunSummary
from distval.targets.declarations import KUBERNETES
from distval.targets.kind import (
    CHOICE,
    DURATION,
    TEXT,
    CollectCommand,
    ExportCommand,
    Exported,
    TargetKind,
    TargetOption,
    TargetOptions,
)
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

# Kubernetes' own grammars (k8s.io/apimachinery validation): a label's name part and value, a DNS subdomain.
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
UID_MAX = 2**31 - 1


def dns_subdomain(value: str) -> str:
    """A Kubernetes object name (a Secret's): lowercase RFC 1123 subdomain, at most 253; ValueError says why not."""
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError(f"expected a Kubernetes name: lowercase letters, digits, '-' and '.', at most 253; got {shown(value)}")
    return value


def _label_key(value: str) -> str:
    prefix, slash, name = value.rpartition("/")
    if not _LABEL_NAME.fullmatch(name) or (slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))):
        raise ValueError(
            f"expected a label key ([prefix/]name: name 1-63 letters, digits, '-', '_', '.'; prefix a DNS subdomain); "
            f"got {shown(value)}"
        )
    return value


def _label_value(value: str) -> str:
    if value and not _LABEL_NAME.fullmatch(value):
        raise ValueError(f"expected a label value (at most 63 letters, digits, '-', '_', '.'); got {shown(value)}")
    return value


def node_selector(value: str) -> tuple[str, str]:
    """--node-selector: KEY=VALUE, each in Kubernetes' label grammar."""
    key, equals, label = value.partition("=")
    if not equals:
        raise ValueError(f"expected KEY=VALUE; got {shown(value)}")
    return _label_key(key), _label_value(label)


def toleration(value: str) -> Toleration:
    """--toleration: KEY[=VALUE][:EFFECT]."""
    rest, colon, effect = value.rpartition(":") if ":" in value else (value, "", "")
    if colon and effect not in TAINT_EFFECTS:
        raise ValueError(f"expected the effect {', '.join(TAINT_EFFECTS)} after ':'; got {shown(value)}")
    key, equals, label = rest.partition("=")
    return Toleration(_label_key(key), _label_value(label) if equals else None, effect if colon else None)


def uid(value: str) -> int:
    """--run-as-user: a non-root uid."""
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= UID_MAX:
        raise ValueError(f"expected a uid from 1 to {UID_MAX} (0 is root); got {shown(value)}")
    return int(value)


def _export(options: TargetOptions, scenarios: Callable[[], Config], out: Path) -> Iterator[Exported]:
    """Each scenario's manifests and plan file written under ``out``, said as it is written."""
    chosen = scenarios()
    pod_options = PodOptions(
        security=options.get("pod_security"),
        run_as_user=options.get("run_as_user"),
        node_selector=tuple(options.get("node_selector")),
        tolerations=tuple(options.get("toleration")),
        image_pull_secrets=tuple(dict.fromkeys(options.get("image_pull_secret"))),
        pull_timeout_s=math.ceil(options.get("pull_timeout")),
    )
    for scenario in export_config(chosen, options.run_id, options.image, options.get("layout"), pod_options):
        name = scenario.plan.scenario.name
        if scenario.refused is not None:
            yield Exported(name, refused=scenario.refused)
            continue
        path = out / scenario.file_name
        try:
            # The plan first: manifests without the plan they name cannot be collected.
            write_atomically(out / scenario.plan_file_name, scenario.plan_text, new_mode=0o644)
            write_atomically(path, render(scenario))
        except OSError as exc:
            raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from exc
        kinds = ", ".join(str(r["kind"]) for r in scenario.resources)
        yield Exported(name, line=f"{path}: {name} ({kinds}; {len(scenario.plan.containers)} pod(s))")


def _collect(options: TargetOptions) -> RunSummary:
    logs, namespace, job, fail_on_skip = (options.get(k) for k in ("logs", "namespace", "job", "fail_on_skip"))
    if logs and (namespace or job):
        raise BadInput("collect kubernetes: expected log files or --job (with --namespace), not both")
    if not logs and not job:
        raise BadInput("collect kubernetes: expected log files, or --job NAME (and --namespace) to read them through the API")
    plans = read_plans(options.get("plan"))
    if logs:
        return summarize_sources(read_files(logs), plans, fail_on_skip=fail_on_skip)
    chosen = [p for p in plans if p.origin.job == job]
    if not chosen:
        raise PlanFileError(f"{options.get('plan')}: no plan file of job {job} ({plan_file_name(job)})")
    sources, failure = read_api(KubernetesPods(), namespace or "default", chosen[0])
    return summarize_sources(sources, chosen, from_api=True, fail_on_skip=fail_on_skip, job_failure=failure)


EXPORT = ExportCommand(
    help="an Indexed Job (or JobSet) per scenario, with its headless Service, ConfigMap and NetworkPolicy",
    write=_export,
    form="a Kubernetes form",
    next_step=lambda run_id, out: (
        f"run id {run_id}: kubectl apply -f {out}/; then distval collect kubernetes --plan {out} with the pods' logs"
    ),
    image_help="the image under test, as the cluster pulls it",
    out_default=DEFAULT_OUT,
    out_names="the directory of the manifests",
    out_help=f"write one YAML file per scenario into DIR (created if missing; default {DEFAULT_OUT}); --out is its first name",
    run_id_help="in the names and labels (default: random)",
    options=(
        TargetOption(
            "--layout",
            "layout",
            "indexed-job (default) or jobset (jobset.x-k8s.io, Kubeflow Trainer's base)",
            kind=CHOICE,
            default=LAYOUTS[0],
            choices=LAYOUTS,
        ),
        TargetOption(
            "--pod-security",
            "pod_security",
            "restricted (default): the pods meet Pod Security 'restricted' (a non-root uid, no privilege escalation, "
            "every capability dropped, RuntimeDefault seccomp); none: the image's own user, for images that must run "
            "as root",
            kind=CHOICE,
            default=SECURITY_LEVELS[0],
            choices=SECURITY_LEVELS,
        ),
        TargetOption(
            "--run-as-user",
            "run_as_user",
            f"the non-root uid of the pods under --pod-security restricted, where a scenario names no user: (default "
            f"{DEFAULT_RUN_AS_USER})",
            default=DEFAULT_RUN_AS_USER,
            metavar="UID",
            parse=uid,
        ),
        TargetOption(
            "--node-selector",
            "node_selector",
            "schedule the pods only on nodes with this label (repeatable)",
            metavar="KEY=VALUE",
            parse=node_selector,
            repeat=True,
        ),
        TargetOption(
            "--toleration",
            "toleration",
            "let the pods onto nodes with this taint (repeatable; EFFECT: NoSchedule, PreferNoSchedule or NoExecute, "
            "default every effect; without =VALUE any value)",
            metavar="KEY[=VALUE][:EFFECT]",
            parse=toleration,
            repeat=True,
        ),
        TargetOption(
            "--image-pull-secret",
            "image_pull_secret",
            "a Secret of the namespace with the registry's credentials (repeatable)",
            metavar="NAME",
            parse=dns_subdomain,
            repeat=True,
        ),
        TargetOption(
            "--pull-timeout",
            "pull_timeout",
            "the time the image pull and scheduling may take on top of the scenario's deadline: Kubernetes' "
            f"activeDeadlineSeconds counts both (default {DEFAULT_PULL_TIMEOUT_S // 60} min)",
            kind=DURATION,
            default=DEFAULT_PULL_TIMEOUT_S,
            metavar="DURATION",
        ),
    ),
)

COLLECT = CollectCommand(
    help="pod logs (files, or through the API) -> JUnit, JSON, Markdown",
    summarize=_collect,
    exit_codes=(EXIT_CHECKS_FAILED, EXIT_ENVIRONMENT, EXIT_NOTHING_VALIDATED),
    options=(
        TargetOption(
            "logs",
            "logs",
            "kubectl logs output: one file per pod, or one file (--prefix names the pods)",
            nargs="*",
            metavar="LOG",
        ),
        TargetOption(
            "--plan",
            "plan",
            "the plan files distval export kubernetes wrote beside the manifests: their directory (every job in it is "
            f"judged) or one JOB.plan.json (default {DEFAULT_OUT}); what ran is taken from them, never from the logs",
            metavar="PATH",
            default=DEFAULT_OUT,
        ),
        TargetOption("--namespace", "namespace", "with --job: the job's namespace (default: default)", kind=TEXT),
        TargetOption(
            "--job",
            "job",
            "read the logs of this exported job's pods through the API (needs a kubeconfig and the kubernetes client)",
            metavar="NAME",
        ),
    ),
)

KUBERNETES_KIND = TargetKind(
    declaration=KUBERNETES,
    chosen=lambda options: options.get("target") == "kubernetes",
    chosen_with="--target kubernetes",
    target_choice="kubernetes",
    target_help="kubernetes: refused, as distval runs no pod itself (distval export kubernetes, then collect)",
    export=EXPORT,
    collect=COLLECT,
)
